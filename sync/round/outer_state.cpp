#include "sync/round/outer_state.hpp"

#include <algorithm>
#include <utility>

#include "core/checkpoint/checkpoint.hpp"
#include "core/util/error.hpp"
#include "core/util/hash.hpp"

namespace meridian {

OuterState::OuterState(std::span<const float> initial, OuterOptions outer, CodecOptions codec, bool error_feedback)
    : global_(initial.begin(), initial.end()),
      start_(initial.begin(), initial.end()),
      optimizer_(initial.size(), outer),
      codec_(codec),
      delta_(initial.size()) {
  encoded_size(initial.size(), codec);  // Error(Config) now rather than at the first round
  if (error_feedback) feedback_.emplace(initial.size());
}

std::vector<std::byte> OuterState::encode_delta(std::span<const float> local) {
  MERIDIAN_CHECK(local.size() == global_.size(), "local=", local.size(), " global=", global_.size());
  for (std::size_t j = 0; j < local.size(); ++j) delta_[j] = start_[j] - local[j];
  std::copy(local.begin(), local.end(), start_.begin());
  if (feedback_) return feedback_->encode(delta_, codec_);
  std::vector<std::byte> out(encoded_size(delta_.size(), codec_));
  meridian::encode(delta_, codec_, out);
  return out;
}

void OuterState::rebase(std::span<float> local) {
  MERIDIAN_CHECK(local.size() == global_.size(), "local=", local.size(), " global=", global_.size());
  for (std::size_t j = 0; j < local.size(); ++j) local[j] = global_[j] + (local[j] - start_[j]);
  start_ = global_;
}

std::vector<std::byte> OuterState::snapshot() const {
  Checkpoint c;
  c.put_pod("outer.global", std::span<const float>(global_));
  c.put_value("outer.version", version_);
  optimizer_.save(c, "outer.momentum", "outer.steps");
  return encode_checkpoint(c);
}

void OuterState::adopt(std::span<const std::byte> snapshot, std::uint64_t expected_hash, std::span<float> local) {
  const Checkpoint c = decode_checkpoint(snapshot, "a peer's state snapshot");
  std::vector<float> global;
  std::int64_t version = 0;
  OuterOptimizer optimizer = optimizer_;
  try {
    global = c.get_pod<float>("outer.global");
    version = c.get_value<std::int64_t>("outer.version");
    optimizer.restore(c, "outer.momentum", "outer.steps");
  } catch (const Error& e) {
    throw make_error(ErrorKind::Peer, "a peer's state snapshot: ", e.what());
  }
  if (global.size() != global_.size())
    throw make_error(ErrorKind::Peer, "a peer's state snapshot holds ", global.size(), " weights, the model has ",
                     global_.size());
  if (version <= version_)
    throw make_error(ErrorKind::Peer, "a peer's state snapshot is version ", version, ", this site already holds ",
                     version_);
  if (const auto h = weights_hash(global); h != expected_hash)
    throw make_error(ErrorKind::Peer, "a peer's state snapshot of version ", version, " hashes to ", h,
                     ", its commit says ", expected_hash);
  global_ = std::move(global);
  optimizer_ = std::move(optimizer);
  version_ = version;
  if (feedback_) feedback_->restore({});
  rebase(local);
}

OuterState::Outcome OuterState::preview(std::span<const float> mean_delta) const {
  Outcome out{global_, optimizer_, 0};
  out.optimizer.step(out.global, mean_delta);
  out.hash = weights_hash(out.global);
  return out;
}

void OuterState::commit(std::int64_t version, Outcome outcome) {
  MERIDIAN_CHECK(version == version_ + 1 && outcome.global.size() == global_.size(), "version=", version,
                 " current=", version_, " size=", outcome.global.size(), " expected=", global_.size());
  global_ = std::move(outcome.global);
  optimizer_ = std::move(outcome.optimizer);
  version_ = version;
}

void OuterState::save(Checkpoint& checkpoint) const {
  checkpoint.put_pod("outer.global", std::span<const float>(global_));
  checkpoint.put_value("outer.version", version_);
  checkpoint.put_pod("outer.start", std::span<const float>(start_));
  optimizer_.save(checkpoint, "outer.momentum", "outer.steps");
  if (feedback_) checkpoint.put_pod("outer.residual", feedback_->residual());
}

void OuterState::restore(const Checkpoint& checkpoint) {
  auto global = checkpoint.get_pod<float>("outer.global");
  const auto version = checkpoint.get_value<std::int64_t>("outer.version");
  if (global.size() != global_.size())
    throw make_error(ErrorKind::Checkpoint, "record \"outer.global\" holds ", global.size(), " values, the model has ",
                     global_.size());
  if (version < 0) throw make_error(ErrorKind::Checkpoint, "record \"outer.version\" is negative: ", version);
  std::optional<std::vector<float>> residual;
  if (feedback_ && checkpoint.has("outer.residual")) {
    residual = checkpoint.get_pod<float>("outer.residual");
    if (residual->size() != global_.size())
      throw make_error(ErrorKind::Checkpoint, "record \"outer.residual\" holds ", residual->size(),
                       " values, the model has ", global_.size());
  }
  // Checkpoints from before rounds overlapped have no start: their rounds began at the global weights.
  auto start = checkpoint.has("outer.start") ? checkpoint.get_pod<float>("outer.start") : global;
  if (start.size() != global_.size())
    throw make_error(ErrorKind::Checkpoint, "record \"outer.start\" holds ", start.size(), " values, the model has ",
                     global_.size());
  OuterOptimizer optimizer = optimizer_;
  optimizer.restore(checkpoint, "outer.momentum", "outer.steps");
  global_ = std::move(global);
  start_ = std::move(start);
  optimizer_ = std::move(optimizer);
  version_ = version;
  if (feedback_) feedback_->restore(residual ? std::span<const float>(*residual) : std::span<const float>());
}

std::uint64_t OuterState::weights_hash(std::span<const float> weights) { return hash64(weights); }

}  // namespace meridian
