#include "crosssite/round/state_transfer.hpp"

#include "core/checkpoint/checkpoint.hpp"
#include "core/util/clock.hpp"
#include "core/util/error.hpp"

namespace meridian {

StateTransfer::StateTransfer(std::function<double()> clock, std::chrono::milliseconds rerequest_after,
                             std::chrono::milliseconds catch_up_after)
    : clock_(std::move(clock)), rerequest_s_(seconds_of(rerequest_after)), catch_up_s_(seconds_of(catch_up_after)) {}

std::optional<std::pair<std::int64_t, std::shared_ptr<const std::vector<std::byte>>>> StateTransfer::answer(
    const std::string& address, std::int64_t min_version) {
  if (serving_ == nullptr || serving_->version() < min_version || serving_->version() == 0) return std::nullopt;
  // A snapshot is the whole model: one per peer per re-request period, however often it asks.
  const double now = clock_();
  const auto it = served_at_.find(address);
  if (it != served_at_.end() && now - it->second < rerequest_s_) return std::nullopt;
  auto snapshot = snapshot_of(address, min_version);
  if (snapshot) served_at_[address] = now;
  return snapshot;
}

std::optional<std::pair<std::int64_t, std::shared_ptr<const std::vector<std::byte>>>> StateTransfer::snapshot_of(
    const std::string& address, std::int64_t min_version) {
  if (!serving_->sharded())
    return std::pair(serving_->version(), std::make_shared<const std::vector<std::byte>>(serving_->snapshot()));
  // The site's replicas put it together at their next attempt (assembled()); the peer gets it then.
  awaiting_assembly_[address] = min_version;
  return std::nullopt;
}

std::vector<std::pair<std::string, std::shared_ptr<const std::vector<std::byte>>>> StateTransfer::assembled(
    std::int64_t version, std::vector<std::byte> snapshot) {
  const auto bytes = std::make_shared<const std::vector<std::byte>>(std::move(snapshot));
  std::vector<std::pair<std::string, std::shared_ptr<const std::vector<std::byte>>>> out;
  for (auto it = awaiting_assembly_.begin(); it != awaiting_assembly_.end();) {
    if (it->second > version) {
      ++it;
      continue;
    }
    served_at_[it->first] = clock_();
    out.emplace_back(it->first, bytes);
    it = awaiting_assembly_.erase(it);
  }
  return out;
}

void StateTransfer::received(std::int64_t version, const std::string& from, std::vector<std::byte> bytes) {
  if (!snapshot_ || version > snapshot_->version) snapshot_ = Snapshot{version, from, std::move(bytes)};
}

std::optional<std::vector<std::byte>> StateTransfer::take(const OuterState& state, const CommitRecord& record,
                                                         CrossSiteEvents& events) {
  Snapshot snap = std::move(*snapshot_);
  snapshot_.reset();
  // Checked here against the commit's hash, so the replicas adopt only what will pass.
  try {
    const Checkpoint c = decode_checkpoint(snap.bytes, "the state snapshot from " + snap.from);
    const auto global = c.get_pod<float>("outer.global");
    if (c.get_value<std::int64_t>("outer.version") != snap.version || global.size() != state.size() ||
        OuterState::weights_hash(global) != record.params_hash)
      throw make_error(ErrorKind::Peer, "its weights are not version ", snap.version, " of this model");
  } catch (const Error& e) {
    events.push_back({"state_refused", snap.from, snap.version, e.what()});
    return std::nullopt;
  }
  return std::move(snap.bytes);
}

const MemberRecord* StateTransfer::next_source(const std::map<std::string, MemberRecord>& members,
                                               const std::string& self) {
  const double now = clock_();
  if (now - requested_at_ < rerequest_s_) return nullptr;
  std::vector<const MemberRecord*> peers;
  for (const auto& [site, member] : members)
    if (site != self) peers.push_back(&member);
  if (peers.empty()) return nullptr;
  requested_at_ = now;
  return peers[source_++ % peers.size()];
}

bool StateTransfer::far_behind_long(bool far_behind) {
  if (!far_behind) {
    far_behind_since_.reset();
    return false;
  }
  if (!far_behind_since_) far_behind_since_ = clock_();
  return clock_() - *far_behind_since_ >= catch_up_s_;
}

}  // namespace meridian
