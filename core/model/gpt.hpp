#pragma once
// GPT-2 style decoder: token + learned position embeddings, pre-LayerNorm blocks with causal
// multi-head attention and a tanh-GELU MLP, final LayerNorm, output head tied to the token
// embedding. Gpt<float> trains, Gpt<double> is the gradient-check reference.
#include <cstdint>
#include <span>
#include <vector>

#include "core/model/language_model.hpp"
#include "core/util/aligned_vector.hpp"

namespace meridian {

template <class T>
class Gpt final : public LanguageModel<T> {
 public:
  explicit Gpt(const ModelConfig& config);  // InvariantError on an invalid shape: validate configs first

  using LanguageModel<T>::init_weights;
  // GPT-2 initialisation from a seed: N(0, 0.02) matrices and embeddings, residual projections
  // scaled by 1/sqrt(2 n_layer), zero biases, unit LayerNorm gains.
  void init_weights(std::uint64_t seed, std::span<const ShardRange> keep) override;
  T forward(const std::int32_t* inputs, const std::int32_t* targets, int B) override;
  // Ranges in the order ln_f, the layers from last to first, then wte and wpe.
  void backward(T loss_scale = 1, const typename LanguageModel<T>::GradsReady& ready = {}) override;
  std::span<const T> logits() const override {
    return {acts_.logits.data(), static_cast<std::size_t>(B_) * this->config_.seq_len * this->config_.vocab};
  }
  void set_recompute(Recompute mode) override;
  std::size_t activation_bytes() const override;

 private:
  // By kind (recompute.hpp): cheap: ln1, ln2, fch_gelu; block: the other per-layer buffers but
  // res3, which is kept.
  struct Activations {
    AlignedVector<T> encoded, ln1, ln1_mean, ln1_rstd, qkv, atty, att, attproj, res2, ln2, ln2_mean, ln2_rstd, fch,
        fch_gelu, fcproj, res3, lnf, lnf_mean, lnf_rstd, logits, losses;
    // backward scratch, reused across layers
    AlignedVector<T> dres, dln, dqkv, datty, dfch, dfch_gelu, dlogits;
  };
  // Layer l's forward from its input (res3 of l-1, or the embeddings) into its slots; writes its
  // output res3[l] when `output` (a recompute has it already).
  void layer_forward(int l, bool output);
  void recompute_for_backward(int l);  // refills what the plan did not keep of layer l
  struct LayerParams {
    const T *ln1w, *ln1b, *qkvw, *qkvb, *projw, *projb, *ln2w, *ln2b, *fcw, *fcb, *fcprojw, *fcprojb;
  };
  struct LayerGrads {
    T *ln1w, *ln1b, *qkvw, *qkvb, *projw, *projb, *ln2w, *ln2b, *fcw, *fcb, *fcprojw, *fcprojb;
  };
  template <class P, class Ptr>
  P layer_ptrs(Ptr base, int l) const;
  void ensure_batch(int B);
  std::size_t layer_begin(int l) const;  // l == n_layer: where ln_f begins
  std::size_t layer_size(int l) const;

  GptOffsets off_;  // each layer's 12 tensors in the order of LayerParams
  RecomputePlan plan_;
  Activations acts_;
  int capacity_ = 0;  // batch size the activations are allocated for
  int B_ = 0;         // batch size of the last forward
  std::vector<std::int32_t> inputs_, targets_;  // copies of the last forward's batch, for backward
};

extern template class Gpt<float>;
extern template class Gpt<double>;

}  // namespace meridian
