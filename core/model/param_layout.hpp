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

#include "core/model/gpt_config.hpp"

namespace meridian {

struct ParamView {
  std::string name;                 // Hugging Face GPT-2 name without the "transformer." prefix
  std::vector<std::int64_t> shape;  // row-major; matrices in GPT-2's Conv1D (in, out) layout
  std::size_t offset = 0;           // in elements, into the flat buffer
  std::size_t numel = 0;
  bool decay = false;  // AdamW weight decay applies to matrices and embeddings, not biases or LayerNorm
};

class ParamLayout {
 public:
  // Per layer, in GPT-2 order, so one layer's tensors are contiguous (backward finishes layer by layer).
  static ParamLayout gpt(const GptConfig& c);

  const std::vector<ParamView>& views() const { return views_; }
  std::size_t total() const { return total_; }
  const ParamView& at(std::string_view name) const;  // InvariantError when absent: names are ours

  // Offsets of transformer layer `layer`'s tensors, in GPT-2 order: ln_1.weight, ln_1.bias,
  // attn.c_attn.weight, attn.c_attn.bias, attn.c_proj.weight, attn.c_proj.bias, ln_2.weight,
  // ln_2.bias, mlp.c_fc.weight, mlp.c_fc.bias, mlp.c_proj.weight, mlp.c_proj.bias.
  static constexpr int kLayerTensors = 12;
  std::array<std::size_t, kLayerTensors> layer_offsets(int layer) const;

  template <class T>
  std::span<T> slice(std::span<T> flat, const ParamView& v) const {
    return flat.subspan(v.offset, v.numel);
  }

 private:
  void add(std::string name, std::vector<std::int64_t> shape, bool decay);
  std::vector<ParamView> views_;
  std::size_t total_ = 0;
};

// Where a GPT's tensors start in its flat buffer (ParamLayout::gpt), looked up once by name.
struct GptOffsets {
  std::size_t wte = 0, wpe = 0, lnf_weight = 0, lnf_bias = 0;
  std::vector<std::array<std::size_t, ParamLayout::kLayerTensors>> layers;  // layer_offsets(l)
};
GptOffsets gpt_offsets(const ParamLayout& layout, int n_layer);

}  // namespace meridian
