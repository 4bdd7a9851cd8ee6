#pragma once
// Llama-style decoder, in Hugging Face's conventions (LlamaForCausalLM; Mistral and Qwen 2 share
// it): token embedding, pre-RMSNorm blocks with causal grouped-query attention whose queries and
// keys are turned by rotary embeddings (rotate-half layout), a SwiGLU MLP, final RMSNorm, and an
// output head that is the token embedding (tied) or a matrix of its own. No biases, but Qwen 2's
// on q, k and v. Llama<float> trains, Llama<double> is the gradient-check reference.
#include <cstdint>
#include <span>
#include <vector>

#include "core/model/language_model.hpp"
#include "core/util/aligned_vector.hpp"

namespace meridian {

// The rotary frequencies inv_freq[i] = theta^(-2i/hs), i < hs/2, with Llama 3.1's scaling applied
// when the shape has one (ModelConfig::rope_scaling), as Hugging Face computes them.
std::vector<double> rope_inv_freq(const ModelConfig& c);

template <class T>
class Llama final : public LanguageModel<T> {
 public:
  explicit Llama(const ModelConfig& config);  // InvariantError on an invalid shape: validate configs first

  using LanguageModel<T>::init_weights;
  // N(0, 0.02) matrices and embeddings (o_proj and down_proj, which write into the residual
  // stream, scaled by 1/sqrt(2 n_layer) as GPT-2's), zero biases, unit RMSNorm gains.
  void init_weights(std::uint64_t seed, std::span<const ShardRange> keep) override;
  T forward(const std::int32_t* inputs, const std::int32_t* targets, int B) override;
  // Ranges in the order norm (with lm_head when untied), the layers from last to first, then embed_tokens.
  void backward(T loss_scale = 1, const typename LanguageModel<T>::GradsReady& ready = {}) override;
  std::span<const T> logits() const override {
    return {acts_.logits.data(), static_cast<std::size_t>(B_) * this->config_.seq_len * this->config_.vocab};
  }
  void set_recompute(Recompute mode) override;
  std::size_t activation_bytes() const override;

 private:
  // Layer l's activations of a kind (recompute.hpp) are in its slot: cheap: attn_norm, mlp_norm,
  // act; block: the other per-layer buffers but res_out, which is kept.
  struct Activations {
    AlignedVector<T> encoded, attn_norm, attn_rstd, qkv, att, atty, res_mid, mlp_norm, mlp_rstd, gate_up, act,
        res_out, norm_out, norm_rstd, logits, losses;
    AlignedVector<T> proj, dres, dln, dqkv, datty, dgate_up, dact;  // scratch, reused across layers
  };
  void ensure_batch(int B);
  std::size_t layer_begin(int l) const;  // l == n_layer: where the final norm begins
  std::size_t layer_size(int l) const;
  // Layer l's forward from its input into its slots; writes res_out[l] when `output`.
  void layer_forward(int l, bool output);
  void recompute_for_backward(int l);  // refills what the plan did not keep of layer l
  int qkv_width() const { return (this->config_.n_head + 2 * this->config_.kv_heads()) * this->config_.head_size(); }

  LlamaOffsets off_;
  RecomputePlan plan_;
  AlignedVector<T> rope_cos_, rope_sin_;  // (seq_len, head_size / 2)
  Activations acts_;
  int capacity_ = 0;
  int B_ = 0;
  std::vector<std::int32_t> inputs_, targets_;
};

extern template class Llama<float>;
extern template class Llama<double>;

}  // namespace meridian
