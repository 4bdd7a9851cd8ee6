#include "core/model/param_layout.hpp"

#include "core/util/error.hpp"

namespace meridian {

void ParamLayout::add(std::string name, std::vector<std::int64_t> shape, bool decay) {
  std::size_t numel = 1;
  for (auto d : shape) numel *= static_cast<std::size_t>(d);
  views_.push_back(ParamView{std::move(name), std::move(shape), total_, numel, decay});
  total_ += numel;
}

ParamLayout ParamLayout::gpt(const GptConfig& c) {
  const std::int64_t C = c.d_model;
  ParamLayout p;
  p.add("wte.weight", {c.vocab, C}, true);
  p.add("wpe.weight", {c.seq_len, C}, true);
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string h = "h." + std::to_string(l) + ".";
    p.add(h + "ln_1.weight", {C}, false);
    p.add(h + "ln_1.bias", {C}, false);
    p.add(h + "attn.c_attn.weight", {C, 3 * C}, true);
    p.add(h + "attn.c_attn.bias", {3 * C}, false);
    p.add(h + "attn.c_proj.weight", {C, C}, true);
    p.add(h + "attn.c_proj.bias", {C}, false);
    p.add(h + "ln_2.weight", {C}, false);
    p.add(h + "ln_2.bias", {C}, false);
    p.add(h + "mlp.c_fc.weight", {C, 4 * C}, true);
    p.add(h + "mlp.c_fc.bias", {4 * C}, false);
    p.add(h + "mlp.c_proj.weight", {4 * C, C}, true);
    p.add(h + "mlp.c_proj.bias", {C}, false);
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

}  // namespace meridian
