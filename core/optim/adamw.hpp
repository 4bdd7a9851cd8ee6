#pragma once
// AdamW with decoupled weight decay over the flat parameter buffer. The two moments are flat
// buffers with the parameters' layout, so they checkpoint, hash and transfer like the weights.
#include <cstdint>
#include <span>
#include <vector>

#include "core/model/param_layout.hpp"
#include "core/model/shard_map.hpp"
#include "core/util/aligned_vector.hpp"

namespace meridian {

struct AdamWOptions {
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;  // applied only to views with decay = true
};

// Runs of adjacent views with the same decay flag, merged: one kernel launch each.
struct DecayRange {
  std::size_t offset, count;
  bool decay;
};
std::vector<DecayRange> decay_ranges(const ParamLayout& layout);

class AdamW {
 public:
  AdamW(const ParamLayout& layout, AdamWOptions options);
  // Over `ranges` of the layout only (the rest of its buffers untouched: Muon's, muon.hpp).
  AdamW(const ParamLayout& layout, AdamWOptions options, std::vector<DecayRange> ranges);
  // Sharded (ZeRO stage 1): updates the elements of `shard` only, and holds moments for those
  // alone: m() and v() are shard.count long, element i of them is element shard.offset + i of the
  // model's. Each element's update is the unsharded one's, bit for bit.
  AdamW(const ParamLayout& layout, AdamWOptions options, ShardRange shard);

  // params and grads: the whole model's buffers, sharded or not.
  void step(std::span<float> params, std::span<const float> grads, float lr);

  ShardRange shard() const { return {base_, m_.size()}; }
  std::size_t total() const { return total_; }  // the model's elements
  std::span<float> m() { return m_; }
  std::span<float> v() { return v_; }
  std::span<const float> m() const { return m_; }
  std::span<const float> v() const { return v_; }
  std::int64_t steps_taken() const { return t_; }
  void set_steps_taken(std::int64_t t) { t_ = t; }

 private:
  AdamWOptions options_;
  std::vector<DecayRange> ranges_;
  std::size_t total_;     // the model's elements
  std::size_t base_ = 0;  // the element of the model that m_[0] and v_[0] belong to
  AlignedVector<float> m_, v_;
  std::int64_t t_ = 0;
};

}  // namespace meridian
