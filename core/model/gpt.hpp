#pragma once
// GPT-2 style decoder: token + learned position embeddings, pre-LayerNorm blocks with causal
// multi-head attention and a tanh-GELU MLP, final LayerNorm, output head tied to the token
// embedding. Templated on the scalar: Gpt<float> trains, Gpt<double> is the gradient-check reference.
#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "core/model/gpt_config.hpp"
#include "core/model/param_layout.hpp"
#include "core/util/aligned_vector.hpp"

namespace meridian {

template <class T>
class Gpt {
 public:
  explicit Gpt(const GptConfig& config);  // InvariantError on an invalid shape: validate configs first

  const GptConfig& config() const { return config_; }
  const ParamLayout& layout() const { return layout_; }
  std::span<T> params() { return params_; }
  std::span<const T> params() const { return params_; }
  std::span<T> grads() { return grads_; }
  std::span<const T> grads() const { return grads_; }

  // GPT-2 initialisation from a seed: N(0, 0.02) matrices and embeddings, residual projections
  // scaled by 1/sqrt(2 n_layer), zero biases, unit LayerNorm gains.
  void init_weights(std::uint64_t seed);

  // Runs B sequences of config().seq_len tokens. With targets, returns the mean cross-entropy
  // (nats/token) and keeps what backward needs; without, returns 0 and only fills logits().
  T forward(const std::uint16_t* inputs, const std::uint16_t* targets, int B);

  // Called during backward with each range of grads() that is final, in the order backward
  // finishes them: ln_f, the layers from last to first, then the embeddings. Data-parallel layers
  // start all-reducing a range while backward still works on the ones before it.
  using GradsReady = std::function<void(std::size_t offset, std::size_t count)>;

  // Adds loss_scale * d(mean loss)/d(params) of the last forward (which had targets) to grads():
  // with grad accumulation over k micro-batches, pass 1/k.
  void backward(T loss_scale = 1, const GradsReady& ready = {});

  void zero_grads();

  std::span<const T> logits() const { return {acts_.logits.data(), static_cast<std::size_t>(B_) * config_.seq_len * config_.vocab}; }

 private:
  struct Activations {
    AlignedVector<T> encoded, ln1, ln1_mean, ln1_rstd, qkv, atty, att, attproj, res2, ln2, ln2_mean, ln2_rstd, fch,
        fch_gelu, fcproj, res3, lnf, lnf_mean, lnf_rstd, logits, losses;
    // backward scratch, reused across layers
    AlignedVector<T> dres, dln, dqkv, datty, dfch, dfch_gelu, dlogits;
  };
  struct LayerParams {
    const T *ln1w, *ln1b, *qkvw, *qkvb, *projw, *projb, *ln2w, *ln2b, *fcw, *fcb, *fcprojw, *fcprojb;
  };
  struct LayerGrads {
    T *ln1w, *ln1b, *qkvw, *qkvb, *projw, *projb, *ln2w, *ln2b, *fcw, *fcb, *fcprojw, *fcprojb;
  };
  template <class P, class Ptr>
  P layer_ptrs(Ptr base, int l) const;
  void ensure_batch(int B);

  GptConfig config_;
  ParamLayout layout_;
  GptOffsets off_;  // each layer's 12 tensors in the order of LayerParams
  AlignedVector<T> params_, grads_;
  Activations acts_;
  int capacity_ = 0;  // batch size the activations are allocated for
  int B_ = 0;         // batch size of the last forward
  std::vector<std::uint16_t> inputs_, targets_;  // copies of the last forward's batch, for backward
};

extern template class Gpt<float>;
extern template class Gpt<double>;

}  // namespace meridian
