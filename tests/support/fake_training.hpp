#pragma once
// A site's training as the round's tests drive it (crosssite/round/training.hpp): weights that each
// step moves by a rule of the test's, and the steps done.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <utility>
#include <vector>

#include "crosssite/round/training.hpp"

namespace meridian::testing {

struct FakeTraining final : Training {
  // `change(i, step)`: what step `step` (from 1) takes off weight i.
  FakeTraining(std::vector<float> initial, std::function<float(std::size_t, std::int64_t)> change)
      : w(std::move(initial)), change(std::move(change)) {}
  std::span<float> weights() override { return w; }
  std::int64_t step() const override { return steps; }
  void fast_forward(std::int64_t step) override { steps = std::max(steps, step); }
  std::int64_t tokens_per_step() const override { return 100; }
  void train() {
    ++steps;
    for (std::size_t i = 0; i < w.size(); ++i) w[i] -= change(i, steps);
  }

  std::vector<float> w;
  std::int64_t steps = 0;
  std::function<float(std::size_t, std::int64_t)> change;
};

}  // namespace meridian::testing
