#include "core/model/param_layout.hpp"

#include "core/util/error.hpp"

namespace meridian {

void ParamLayout::add(std::string name, std::vector<std::int64_t> shape, bool decay) {
  std::size_t numel = 1;
  for (auto d : shape) numel *= static_cast<std::size_t>(d);
  views_.push_back(ParamView{std::move(name), std::move(shape), total_, numel, decay});
  total_ += numel;
}

namespace {
constexpr const char* kLayerTensorNames[ParamLayout::kLayerTensors] = {
    "ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight", "attn.c_proj.bias",
    "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight",    "mlp.c_fc.bias",    "mlp.c_proj.weight",  "mlp.c_proj.bias"};
}  // namespace

ParamLayout ParamLayout::gpt(const GptConfig& c) {
  const std::int64_t C = c.d_model;
  // Shapes and decay flags in the order of kLayerTensorNames.
  const std::vector<std::int64_t> shapes[kLayerTensors] = {{C},     {C}, {C, 3 * C}, {3 * C}, {C, C},     {C},
                                                           {C},     {C}, {C, 4 * C}, {4 * C}, {4 * C, C}, {C}};
  ParamLayout p;
  p.add("wte.weight", {c.vocab, C}, true);
  p.add("wpe.weight", {c.seq_len, C}, true);
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string h = "h." + std::to_string(l) + ".";
    for (int i = 0; i < kLayerTensors; ++i) p.add(h + kLayerTensorNames[i], shapes[i], shapes[i].size() == 2);
  }
  p.add("ln_f.weight", {C}, false);
  p.add("ln_f.bias", {C}, false);
  return p;
}

const ParamView& ParamLayout::at(std::string_view name) const {
  for (const auto& v : views_)
    if (v.name == name) return v;
  MERIDIAN_CHECK(false, "no parameter named ", name);
  __builtin_unreachable();
}

std::array<std::size_t, ParamLayout::kLayerTensors> ParamLayout::layer_offsets(int layer) const {
  std::array<std::size_t, kLayerTensors> offsets;
  const std::string h = "h." + std::to_string(layer) + ".";
  for (int i = 0; i < kLayerTensors; ++i) offsets[i] = at(h + kLayerTensorNames[i]).offset;
  return offsets;
}

GptOffsets gpt_offsets(const ParamLayout& layout, int n_layer) {
  GptOffsets o;
  o.wte = layout.at("wte.weight").offset;
  o.wpe = layout.at("wpe.weight").offset;
  o.lnf_weight = layout.at("ln_f.weight").offset;
  o.lnf_bias = layout.at("ln_f.bias").offset;
  for (int l = 0; l < n_layer; ++l) o.layers.push_back(layout.layer_offsets(l));
  return o;
}

}  // namespace meridian
