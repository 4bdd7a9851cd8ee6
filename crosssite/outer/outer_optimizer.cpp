#include "crosssite/outer/outer_optimizer.hpp"

#include <cmath>
#include <string>
#include <utility>

#include "core/checkpoint/checkpoint.hpp"
#include "core/util/error.hpp"

namespace meridian {

namespace {

std::string record_name(std::string_view m_name, std::string_view suffix) {
  return std::string(m_name).append(suffix);
}

}  // namespace

OuterOptimizer::OuterOptimizer(std::size_t n, OuterOptions options) : options_(options), m_(n, 0.0f) {
  if (!std::isfinite(options.lr) || !(options.lr > 0))
    throw make_error(ErrorKind::Config, "outer optimizer: lr ", options.lr, " must be finite and > 0");
  if (!(options.momentum >= 0 && options.momentum < 1))
    throw make_error(ErrorKind::Config, "outer optimizer: momentum ", options.momentum, " must be in [0, 1)");
  if (options.delay < 0)
    throw make_error(ErrorKind::Config, "outer optimizer: delay ", options.delay, " must be >= 0");
  if (options.momentum_warmup < 0)
    throw make_error(ErrorKind::Config, "outer optimizer: momentum_warmup ", options.momentum_warmup, " must be >= 0");
  if (options.delay > 1 && !options.nesterov)
    throw make_error(ErrorKind::Config, "outer optimizer: delay ", options.delay,
                     " (delayed Nesterov) needs nesterov = true");
  if (delayed()) buffer_.assign(n, 0.0f);
}

void OuterOptimizer::step(std::span<float> params, std::span<const float> mean_delta) {
  MERIDIAN_CHECK(params.size() == m_.size() && mean_delta.size() == m_.size(), "params=", params.size(),
                 " mean_delta=", mean_delta.size(), " state=", m_.size());
  if (delayed()) return delayed_step(params, mean_delta);
  const float lr = options_.lr;
  const float mu = momentum_now();
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

void OuterOptimizer::delayed_step(std::span<float> params, std::span<const float> mean_delta) {
  const float lr = options_.lr;
  const float mu = momentum_now();
  const auto n = static_cast<float>(options_.delay);
  float* m = m_.data();
  float* b = buffer_.data();
  // A restore under a smaller delay can leave more contributions pending than the new delay:
  // the next step then updates the momentum at once.
  if (pending_ + 1 >= options_.delay) {
    for (std::size_t j = 0; j < params.size(); ++j) {
      const float d = mean_delta[j];
      m[j] = mu * m[j] + (b[j] + d) / n;
      params[j] -= lr * (d / n + mu * m[j]);
      b[j] = 0.0f;
    }
    pending_ = 0;
  } else {
    for (std::size_t j = 0; j < params.size(); ++j) {
      const float d = mean_delta[j];
      b[j] += d;
      params[j] -= lr * (d / n);
    }
    ++pending_;
  }
  ++steps_;
}

float OuterOptimizer::momentum_now() const {
  if (steps_ >= options_.momentum_warmup) return options_.momentum;
  return options_.momentum * static_cast<float>(steps_) / static_cast<float>(options_.momentum_warmup);
}

void OuterOptimizer::save(Checkpoint& checkpoint, std::string_view m_name, std::string_view steps_name) const {
  checkpoint.put_pod(std::string(m_name), std::span<const float>(m_));
  checkpoint.put_value(std::string(steps_name), steps_);
  // Only with a delay, so checkpoints of plain Nesterov stay exactly as they were.
  if (delayed()) {
    checkpoint.put_pod(record_name(m_name, ".buffer"), std::span<const float>(buffer_));
    checkpoint.put_value(record_name(m_name, ".pending"), pending_);
  }
}

void OuterOptimizer::restore(const Checkpoint& checkpoint, std::string_view m_name, std::string_view steps_name) {
  // Everything is checked before anything is written, and the values are copied into the buffers
  // held (no second buffer of a model's size while a large state is restored).
  const auto m = checkpoint.view_pod<float>(m_name);
  if (m.size() != m_.size())
    throw make_error(ErrorKind::Checkpoint, "outer optimizer: record \"", m_name, "\" holds ", m.size(),
                     " values, the model has ", m_.size());
  const auto steps = checkpoint.get_value<std::int64_t>(steps_name);
  if (steps < 0)
    throw make_error(ErrorKind::Checkpoint, "outer optimizer: record \"", steps_name, "\" holds a negative step count ",
                     steps);
  std::span<const float> buffer;
  std::int64_t pending = 0;
  const std::string buffer_name = record_name(m_name, ".buffer");
  const std::string pending_name = record_name(m_name, ".pending");
  if (delayed() && checkpoint.has(buffer_name)) {
    buffer = checkpoint.view_pod<float>(buffer_name);
    if (buffer.size() != m_.size())
      throw make_error(ErrorKind::Checkpoint, "outer optimizer: record \"", buffer_name, "\" holds ", buffer.size(),
                       " values, the model has ", m_.size());
    pending = checkpoint.get_value<std::int64_t>(pending_name);
    if (pending < 0)
      throw make_error(ErrorKind::Checkpoint, "outer optimizer: record \"", pending_name,
                       "\" holds a negative count ", pending);
  }
  std::copy(m.begin(), m.end(), m_.begin());
  steps_ = steps;
  buffer_.assign(delayed() ? m_.size() : 0, 0.0f);
  std::copy(buffer.begin(), buffer.end(), buffer_.begin());
  pending_ = pending;
}

}  // namespace meridian
