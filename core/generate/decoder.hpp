#pragma once
// A model's forward pass one step at a time, for generation: each call feeds the next tokens and
// returns the logits of the token after them, keeping every layer's keys and values (a KV cache) so
// that a new token costs one row of each product instead of the whole window again. The same
// weights and kernels as the training model (core/model), read in place from the flat buffer.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/model/model_config.hpp"
#include "core/model/param_layout.hpp"
#include "core/util/aligned_vector.hpp"

namespace meridian {

class Decoder {
 public:
  virtual ~Decoder() = default;
  Decoder(const Decoder&) = delete;
  Decoder& operator=(const Decoder&) = delete;

  const ModelConfig& config() const { return config_; }
  // Tokens held: the next token fed takes this position.
  int position() const { return position_; }
  // The most tokens the decoder holds at once (at most the model's positions()).
  int window() const { return window_; }
  // Forgets every token: the next feed starts at position 0.
  void reset() { position_ = 0; }

  // Feeds `tokens` (at least one, each an id below the vocabulary) at the next positions, at most
  // window() in all, and returns the logits (vocab) that follow the last of them: valid until the
  // next call. InvariantError when the window would overflow or an id is out of range: callers
  // check their input first.
  std::span<const float> feed(std::span<const std::int32_t> tokens);

 protected:
  // `params` in ParamLayout::of(config), read (not copied) until the decoder is destroyed.
  Decoder(const ModelConfig& config, std::span<const float> params, int window);

  // The family's layers over n new tokens at positions [p, p + n): appends each layer's keys and
  // values to the cache and leaves the last token's logits in logits_.
  virtual void forward(const std::int32_t* tokens, int n, int p) = 0;

  // One layer's causal attention of n new query rows (row i at position p + i, each NH heads of hs
  // values, rows ld apart) over the cached keys and values of positions [0, p + n); writes (n, NH * hs).
  void attend(float* out, const float* q, int ld, int layer, int n, int p) const;
  // Copies n rows of keys and values (KV heads of hs, rows ld apart) into the layer's cache at p.
  void cache(int layer, const float* k, const float* v, int ld, int n, int p);
  // Scratch of n rows of `width`, grown on demand: slot s is distinct from every other slot.
  float* scratch(int slot, std::size_t n, std::size_t width);

  ModelConfig config_;
  ParamLayout layout_;
  std::span<const float> params_;
  AlignedVector<float> logits_;

 private:
  int window_;
  int position_ = 0;
  std::size_t kv_width_;                             // KV heads x head size
  std::vector<AlignedVector<float>> keys_, values_;  // per layer: (window, kv_width_)
  std::vector<AlignedVector<float>> scratch_;
};

// The family's decoder over `params` (ParamLayout::of(config), not copied: they must outlive it),
// holding at most `window` tokens (1 to config.positions()).
std::unique_ptr<Decoder> make_decoder(const ModelConfig& config, std::span<const float> params, int window);

}  // namespace meridian
