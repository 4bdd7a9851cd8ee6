#pragma once
// The DiLoCo outer optimizer (DESIGN.md, step 5): SGD with Nesterov momentum, applied to the
// global weights of version v with the weighted mean of the sites' pseudo-gradients
// (delta = base - local). Every site runs it on the same inputs and must get bit-identical
// weights, so it is a fixed-order elementwise loop compiled without FMA contraction.
//
// Delayed Nesterov (Liu et al. 2024, "Asynchronous Local-SGD Training for Language Modeling",
// arXiv 2401.09135, Algorithm 3 "DN", momentum activation c = 0): with asynchronous commits
// each merges only some sites' (possibly stale) deltas, and Nesterov momentum applied at every one
// of them compounds stale directions. DN buffers the contributions and updates the momentum only
// every N-th step, from their average; in between each contribution is applied as plain SGD
// scaled by 1/N. With steps t = 1, 2, ... and buffer b (starts at 0):
//   b += d_t
//   t mod N != 0:  params -= lr * (d_t / N)                       (m unchanged)
//   t mod N == 0:  m = mu * m + b / N;  params -= lr * (d_t / N + mu * m);  b = 0
// N = 1 is exactly the Nesterov step above. Over N steps the gradient part adds up to lr times
// the average of the N deltas, so compared with plain Nesterov on every step the effective
// outer lr is lr / N: raise lr with N (the paper tunes them together).
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace meridian {

class Checkpoint;

struct OuterOptions {
  float lr = 0.7f;
  float momentum = 0.9f;  // 0: plain SGD; with lr 1 and H = 1 that is plain averaging of the sites' weights
  bool nesterov = true;
  // 0 or 1: Nesterov (or heavy ball) at every step. N > 1: delayed Nesterov, momentum updated
  // every N-th step (needs nesterov = true).
  int delay = 0;
  // Step t (0-based) of the first `momentum_warmup` uses momentum * t / momentum_warmup. The first
  // deltas carry the model away from its random start and shrink several-fold from one to the
  // next; a full momentum keeps pushing along them long after (docs/quality.md, "Where the gap
  // comes from, and a momentum that ramps up").
  int momentum_warmup = 0;
};

class OuterOptimizer {
 public:
  // Error(Config) when lr is not finite and > 0, momentum is not in [0, 1), delay or
  // momentum_warmup < 0, or delay > 1 without nesterov.
  OuterOptimizer(std::size_t n, OuterOptions options = {});

  // delay <= 1: m = mu * m + d; update = nesterov ? d + mu * m : m; params -= lr * update, mu the
  // momentum of this step (momentum_warmup).
  // delay N > 1: the delayed Nesterov step in the header comment.
  // `params` are version v's weights, updated in place to version v+1.
  void step(std::span<float> params, std::span<const float> mean_delta);

  // Writes the momentum buffer and the step count under the given record names; with delay > 1
  // also the delay buffer and the number of contributions in it, under "<m_name>.buffer" and
  // "<m_name>.pending" (so callers that name only the two records keep working).
  void save(Checkpoint& checkpoint, std::string_view m_name, std::string_view steps_name) const;
  // Error(Checkpoint) when a record is missing, has the wrong size, or the step count (or the
  // pending count) is negative; the state is unchanged then. A checkpoint without the delay
  // records (older ones, or saved with delay <= 1) restores an empty buffer; with delay <= 1 the
  // delay records are not read.
  void restore(const Checkpoint& checkpoint, std::string_view m_name, std::string_view steps_name);

  std::span<const float> momentum_buffer() const { return m_; }
  // The contributions since the last momentum update, summed (empty with delay <= 1).
  std::span<const float> delay_buffer() const { return buffer_; }
  // How many contributions delay_buffer() holds: 0 .. delay-1 between steps.
  std::int64_t pending() const { return pending_; }
  std::int64_t steps_taken() const { return steps_; }
  const OuterOptions& options() const { return options_; }

 private:
  bool delayed() const { return options_.delay > 1; }
  float momentum_now() const;
  void delayed_step(std::span<float> params, std::span<const float> mean_delta);

  OuterOptions options_;
  std::vector<float> m_;
  std::vector<float> buffer_;  // delayed Nesterov only
  std::int64_t pending_ = 0;   // contributions in buffer_
  std::int64_t steps_ = 0;
};

}  // namespace meridian
