#pragma once
// What the trainer, evaluation and the layers above see of a model, whatever its family: one flat
// parameter buffer and one of gradients in the family's ParamLayout, forward with the mean
// cross-entropy, backward that reports each finished range of gradients. Templated on the
// scalar: float trains, double is the gradient-check reference.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>

#include "core/model/model_config.hpp"
#include "core/model/param_layout.hpp"
#include "core/model/recompute.hpp"
#include "core/model/shard_map.hpp"
#include "core/util/pages.hpp"

namespace meridian {

template <class T>
class LanguageModel {
 public:
  virtual ~LanguageModel() = default;
  LanguageModel(const LanguageModel&) = delete;
  LanguageModel& operator=(const LanguageModel&) = delete;

  const ModelConfig& config() const { return config_; }
  const ParamLayout& layout() const { return layout_; }
  std::span<T> params() { return params_; }
  std::span<const T> params() const { return params_; }
  std::span<T> grads() { return grads_; }
  std::span<const T> grads() const { return grads_; }
  void zero_grads();

  // The family's initialisation, a pure function of the seed.
  void init_weights(std::uint64_t seed) {
    const ShardRange all{0, params_.size()};
    init_weights(seed, std::span<const ShardRange>(&all, 1));
  }
  // The same, writing only the values inside `keep` (a ZeRO stage-3 replica's part and mirror):
  // each is the whole initialisation's, the rest stay as they are.
  virtual void init_weights(std::uint64_t seed, std::span<const ShardRange> keep) = 0;

  // Runs B sequences of config().seq_len tokens. With targets, returns the mean cross-entropy
  // (nats/token) and keeps what backward needs; without, returns 0 and only fills logits().
  virtual T forward(const std::int32_t* inputs, const std::int32_t* targets, int B) = 0;

  // Called during backward with each range of grads() that is final, in the order backward
  // finishes them: the final norm (and an untied head), the layers from last to first, then the
  // embeddings. Data-parallel layers start all-reducing a range while backward works on the rest.
  using GradsReady = std::function<void(std::size_t offset, std::size_t count)>;

  // Adds loss_scale * d(mean loss)/d(params) of the last forward (which had targets) to grads():
  // with grad accumulation over k micro-batches, pass 1/k.
  virtual void backward(T loss_scale = 1, const GradsReady& ready = {}) = 0;

  // (B, seq_len, vocab) of the last forward.
  virtual std::span<const T> logits() const = 0;

  // ZeRO stage 3: the weights are not all held between steps. Forward and backward call `need`
  // for a range of params() just before they read it and `done` once they have, with the same
  // range: the embeddings and the final norm and head (at the start of forward, and of backward,
  // kept to the end of each pass's use of the head), and each layer (around its forward, and its
  // backward with any recompute). Unset, the weights are always whole.
  struct WeightsHook {
    std::function<void(std::size_t offset, std::size_t count)> need, done;
  };
  void set_weights_hook(WeightsHook hook) { weights_hook_ = std::move(hook); }

  // What backward recomputes (recompute.hpp) from the next forward on.
  virtual void set_recompute(Recompute mode) = 0;
  // The activation and backward buffers held for the largest batch so far, in bytes.
  virtual std::size_t activation_bytes() const = 0;

 protected:
  explicit LanguageModel(const ModelConfig& config);  // InvariantError on an invalid shape

  // The layer's range, and the rest (before and after the layers), bracketing what reads them.
  void need_weights(std::size_t offset, std::size_t count) const {
    if (weights_hook_.need) weights_hook_.need(offset, count);
  }
  void done_weights(std::size_t offset, std::size_t count) const {
    if (weights_hook_.done) weights_hook_.done(offset, count);
  }

  // Writes value() into the weights at [offset, offset + count) where `keep` holds them, calling it
  // for every element in order (a generator's draws stay the whole initialisation's).
  template <class Value>
  void init_range(std::size_t offset, std::size_t count, std::span<const ShardRange> keep, Value value) {
    T* p = params_.data();
    for (std::size_t i = offset; i < offset + count; ++i) {
      const T x = value();
      if (std::any_of(keep.begin(), keep.end(), [&](const ShardRange& r) { return i >= r.offset && i < r.end(); }))
        p[i] = x;
    }
  }

  ModelConfig config_;
  ParamLayout layout_;
  WeightsHook weights_hook_;
  // Whole, but holding memory only where written (core/util/pages.hpp): a ZeRO stage-3 replica's
  // weights and gradients outside its part are never touched at start-up.
  ZeroPageVector<T> params_, grads_;
};

// The family's model (Gpt or Llama), weights zero until init_weights or a copy.
template <class T>
std::unique_ptr<LanguageModel<T>> make_model(const ModelConfig& config);

extern template class LanguageModel<float>;
extern template class LanguageModel<double>;

}  // namespace meridian
