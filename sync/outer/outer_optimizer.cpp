#include "sync/outer/outer_optimizer.hpp"

#include <cmath>
#include <string>
#include <utility>

#include "core/checkpoint/checkpoint.hpp"
#include "core/util/error.hpp"

namespace meridian {

OuterOptimizer::OuterOptimizer(std::size_t n, OuterOptions options) : options_(options), m_(n, 0.0f) {
  if (!std::isfinite(options.lr) || !(options.lr > 0))
    throw make_error(ErrorKind::Config, "outer optimizer: lr ", options.lr, " must be finite and > 0");
  if (!(options.momentum >= 0 && options.momentum < 1))
    throw make_error(ErrorKind::Config, "outer optimizer: momentum ", options.momentum, " must be in [0, 1)");
}

void OuterOptimizer::step(std::span<float> params, std::span<const float> mean_delta) {
  MERIDIAN_CHECK(params.size() == m_.size() && mean_delta.size() == m_.size(), "params=", params.size(),
                 " mean_delta=", mean_delta.size(), " state=", m_.size());
  const float lr = options_.lr;
  const float mu = options_.momentum;
  float* m = m_.data();
  if (options_.nesterov) {
    for (std::size_t j = 0; j < params.size(); ++j) {
      const float d = mean_delta[j];
      m[j] = mu * m[j] + d;
      params[j] -= lr * (d + mu * m[j]);
    }
  } else {
    for (std::size_t j = 0; j < params.size(); ++j) {
      m[j] = mu * m[j] + mean_delta[j];
      params[j] -= lr * m[j];
    }
  }
  ++steps_;
}

void OuterOptimizer::save(Checkpoint& checkpoint, std::string_view m_name, std::string_view steps_name) const {
  checkpoint.put_pod(std::string(m_name), std::span<const float>(m_));
  checkpoint.put_value(std::string(steps_name), steps_);
}

void OuterOptimizer::restore(const Checkpoint& checkpoint, std::string_view m_name, std::string_view steps_name) {
  std::vector<float> m = checkpoint.get_pod<float>(m_name);
  if (m.size() != m_.size())
    throw make_error(ErrorKind::Checkpoint, "outer optimizer: record \"", m_name, "\" holds ", m.size(),
                     " values, the model has ", m_.size());
  const auto steps = checkpoint.get_value<std::int64_t>(steps_name);
  if (steps < 0)
    throw make_error(ErrorKind::Checkpoint, "outer optimizer: record \"", steps_name, "\" holds a negative step count ",
                     steps);
  m_ = std::move(m);
  steps_ = steps;
}

}  // namespace meridian
