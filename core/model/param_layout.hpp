#pragma once
// The table of named views into the ONE flat parameter buffer. Gradients and each optimizer moment
// use the same layout in buffers of their own, so later layers can all-reduce, hash, diff and send
// a whole model as one contiguous vector and still find any tensor by name.
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/model/model_config.hpp"

namespace meridian {

struct ParamView {
  std::string name;                 // the Hugging Face name without "transformer." (GPT-2) or "model." (Llama)
  std::vector<std::int64_t> shape;  // row-major, as Hugging Face stores it: GPT-2's Conv1D matrices
                                    // (in, out), Llama's Linear matrices (out, in)
  std::size_t offset = 0;           // in elements, into the flat buffer
  std::size_t numel = 0;
  bool decay = false;  // AdamW weight decay applies to matrices and embeddings, not biases or norms
  int layer = -1;      // the transformer block it belongs to; -1 for embeddings, final norm and head
};

class ParamLayout {
 public:
  // The family's layout (gpt or llama below).
  static ParamLayout of(const ModelConfig& c);
  // Per layer, in GPT-2 order, so one layer's tensors are contiguous (backward finishes layer by layer).
  static ParamLayout gpt(const ModelConfig& c);
  // embed_tokens, the layers, norm, then lm_head when untied. Within a layer the q, k and v
  // projections are adjacent (one (NH + 2 KV) hs x C matrix: a single product computes all three),
  // and so are the gate and up projections (one 2F x C matrix).
  static ParamLayout llama(const ModelConfig& c);

  const std::vector<ParamView>& views() const { return views_; }
  std::size_t total() const { return total_; }
  const ParamView& at(std::string_view name) const;  // InvariantError when absent: names are ours
  const ParamView* find(std::string_view name) const;

  // The offsets of the tensors of layer `layer` whose names (after "<prefix><layer>.") are given.
  template <std::size_t N>
  std::array<std::size_t, N> offsets(std::string_view prefix, int layer, const std::array<const char*, N>& names) const {
    std::array<std::size_t, N> out{};
    const std::string h = std::string(prefix) + std::to_string(layer) + ".";
    for (std::size_t i = 0; i < N; ++i) out[i] = at(h + names[i]).offset;
    return out;
  }

  template <class T>
  std::span<T> slice(std::span<T> flat, const ParamView& v) const {
    return flat.subspan(v.offset, v.numel);
  }

 private:
  void add(std::string name, std::vector<std::int64_t> shape, bool decay, int layer = -1);
  std::vector<ParamView> views_;
  std::size_t total_ = 0;
};

// A GPT-2 layer's tensors in layout order: ln_1.weight, ln_1.bias, attn.c_attn.weight,
// attn.c_attn.bias, attn.c_proj.weight, attn.c_proj.bias, ln_2.weight, ln_2.bias, mlp.c_fc.weight,
// mlp.c_fc.bias, mlp.c_proj.weight, mlp.c_proj.bias.
inline constexpr std::array<const char*, 12> kGptLayerTensors = {
    "ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight", "attn.c_proj.bias",
    "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight",    "mlp.c_fc.bias",    "mlp.c_proj.weight",  "mlp.c_proj.bias"};

// Where a GPT's tensors start in its flat buffer (ParamLayout::gpt), looked up once by name.
struct GptOffsets {
  static constexpr int kLayerTensors = 12;
  std::size_t wte = 0, wpe = 0, lnf_weight = 0, lnf_bias = 0;
  std::vector<std::array<std::size_t, kLayerTensors>> layers;  // in the order of kGptLayerTensors
};
GptOffsets gpt_offsets(const ParamLayout& layout, int n_layer);

// Where a Llama's tensors start (ParamLayout::llama).
struct LlamaOffsets {
  struct Layer {
    std::size_t attn_norm = 0, qkv = 0, qkv_bias = 0, o = 0, mlp_norm = 0, gate_up = 0, down = 0;
  };
  std::size_t embed = 0, norm = 0, head = 0;  // head == embed when tied
  std::vector<Layer> layers;
  bool has_qkv_bias = false;
};
LlamaOffsets llama_offsets(const ParamLayout& layout, const ModelConfig& c);

}  // namespace meridian
