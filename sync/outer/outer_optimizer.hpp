#pragma once
// The DiLoCo outer optimizer (DESIGN.md, step 5): SGD with Nesterov momentum, applied to the
// global weights of version v with the weighted mean of the sites' pseudo-gradients
// (delta = base - local). Every site runs it on the same inputs and must get bit-identical
// weights, so it is a fixed-order elementwise loop compiled without FMA contraction.
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
};

class OuterOptimizer {
 public:
  // Error(Config) when lr is not finite and > 0 or momentum is not in [0, 1).
  OuterOptimizer(std::size_t n, OuterOptions options = {});

  // m = momentum * m + d; update = nesterov ? d + momentum * m : m; params -= lr * update.
  // `params` are version v's weights, updated in place to version v+1.
  void step(std::span<float> params, std::span<const float> mean_delta);

  // Writes the momentum buffer and the step count under the given record names.
  void save(Checkpoint& checkpoint, std::string_view m_name, std::string_view steps_name) const;
  // Error(Checkpoint) when a record is missing, has the wrong size, or the step count is negative;
  // the state is unchanged then.
  void restore(const Checkpoint& checkpoint, std::string_view m_name, std::string_view steps_name);

  std::span<const float> momentum_buffer() const { return m_; }
  std::int64_t steps_taken() const { return steps_; }
  const OuterOptions& options() const { return options_; }

 private:
  OuterOptions options_;
  std::vector<float> m_;
  std::int64_t steps_ = 0;
};

}  // namespace meridian
