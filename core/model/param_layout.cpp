#include "core/model/param_layout.hpp"

#include "core/util/error.hpp"

namespace meridian {

void ParamLayout::add(std::string name, std::vector<std::int64_t> shape, bool decay, int layer) {
  std::size_t numel = 1;
  for (auto d : shape) numel *= static_cast<std::size_t>(d);
  views_.push_back(ParamView{std::move(name), std::move(shape), total_, numel, decay, layer});
  total_ += numel;
}

ParamLayout ParamLayout::of(const ModelConfig& c) { return c.family == ModelFamily::Llama ? llama(c) : gpt(c); }

ParamLayout ParamLayout::gpt(const ModelConfig& c) {
  const std::int64_t C = c.d_model;
  // Shapes in the order of kGptLayerTensors; the matrices decay.
  const std::vector<std::int64_t> shapes[GptOffsets::kLayerTensors] = {
      {C}, {C}, {C, 3 * C}, {3 * C}, {C, C}, {C}, {C}, {C}, {C, 4 * C}, {4 * C}, {4 * C, C}, {C}};
  ParamLayout p;
  p.add("wte.weight", {c.vocab, C}, true);
  p.add("wpe.weight", {c.positions(), C}, true);
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string h = "h." + std::to_string(l) + ".";
    for (int i = 0; i < GptOffsets::kLayerTensors; ++i)
      p.add(h + kGptLayerTensors[i], shapes[i], shapes[i].size() == 2, l);
  }
  p.add("ln_f.weight", {C}, false);
  p.add("ln_f.bias", {C}, false);
  return p;
}

ParamLayout ParamLayout::llama(const ModelConfig& c) {
  const std::int64_t C = c.d_model, hs = c.head_size(), Q = c.n_head * hs, KV = c.kv_heads() * hs, F = c.ffn_hidden;
  ParamLayout p;
  p.add("embed_tokens.weight", {c.vocab, C}, true);
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string h = "layers." + std::to_string(l) + ".";
    p.add(h + "input_layernorm.weight", {C}, false, l);
    p.add(h + "self_attn.q_proj.weight", {Q, C}, true, l);
    p.add(h + "self_attn.k_proj.weight", {KV, C}, true, l);
    p.add(h + "self_attn.v_proj.weight", {KV, C}, true, l);
    if (c.qkv_bias) {
      p.add(h + "self_attn.q_proj.bias", {Q}, false, l);
      p.add(h + "self_attn.k_proj.bias", {KV}, false, l);
      p.add(h + "self_attn.v_proj.bias", {KV}, false, l);
    }
    p.add(h + "self_attn.o_proj.weight", {C, Q}, true, l);
    p.add(h + "post_attention_layernorm.weight", {C}, false, l);
    p.add(h + "mlp.gate_proj.weight", {F, C}, true, l);
    p.add(h + "mlp.up_proj.weight", {F, C}, true, l);
    p.add(h + "mlp.down_proj.weight", {C, F}, true, l);
  }
  p.add("norm.weight", {C}, false);
  if (!c.tied) p.add("lm_head.weight", {c.vocab, C}, true);
  return p;
}

const ParamView* ParamLayout::find(std::string_view name) const {
  for (const auto& v : views_)
    if (v.name == name) return &v;
  return nullptr;
}

const ParamView& ParamLayout::at(std::string_view name) const {
  const ParamView* v = find(name);
  MERIDIAN_CHECK(v != nullptr, "no parameter named ", name);
  return *v;
}

GptOffsets gpt_offsets(const ParamLayout& layout, int n_layer) {
  GptOffsets o;
  o.wte = layout.at("wte.weight").offset;
  o.wpe = layout.at("wpe.weight").offset;
  o.lnf_weight = layout.at("ln_f.weight").offset;
  o.lnf_bias = layout.at("ln_f.bias").offset;
  for (int l = 0; l < n_layer; ++l) o.layers.push_back(layout.offsets("h.", l, kGptLayerTensors));
  return o;
}

LlamaOffsets llama_offsets(const ParamLayout& layout, const ModelConfig& c) {
  LlamaOffsets o;
  o.embed = layout.at("embed_tokens.weight").offset;
  o.norm = layout.at("norm.weight").offset;
  o.head = c.tied ? o.embed : layout.at("lm_head.weight").offset;
  o.has_qkv_bias = c.qkv_bias;
  static constexpr std::array<const char*, 6> kNames = {
      "input_layernorm.weight",          "self_attn.q_proj.weight", "self_attn.o_proj.weight",
      "post_attention_layernorm.weight", "mlp.gate_proj.weight",    "mlp.down_proj.weight"};
  for (int l = 0; l < c.n_layer; ++l) {
    const auto at = layout.offsets("layers.", l, kNames);
    LlamaOffsets::Layer layer{at[0], at[1], 0, at[2], at[3], at[4], at[5]};
    if (c.qkv_bias) layer.qkv_bias = layout.at("layers." + std::to_string(l) + ".self_attn.q_proj.bias").offset;
    o.layers.push_back(layer);
  }
  return o;
}

}  // namespace meridian
