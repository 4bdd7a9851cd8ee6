#include "transport/link/striped_link.hpp"

#include <algorithm>
#include <utility>

#include "core/util/error.hpp"

namespace meridian {

StripedLink::StripedLink(std::unique_ptr<Link> inner, Options options)
    : inner_(std::move(inner)), options_(std::move(options)) {}

void StripedLink::set_peer_lanes(std::map<std::string, std::vector<std::string>> lanes) {
  peer_lanes_ = std::move(lanes);
  owner_of_lane_.clear();
  for (const auto& [owner, addresses] : peer_lanes_)
    for (const auto& a : addresses) owner_of_lane_[a] = owner;
}

void StripedLink::send(const std::string& peer, std::uint64_t transfer_id, std::uint16_t tag,
                       std::shared_ptr<const std::vector<std::byte>> payload, ChunkHashes hashes) {
  const auto it = peer_lanes_.find(peer);
  const int peer_lanes = it == peer_lanes_.end() ? 0 : static_cast<int>(it->second.size());
  const int count = std::min({1 + lanes_, 1 + peer_lanes, kMaxStripes});
  if (count < 2 || !options_.stripes || !options_.stripes(transfer_id, tag))
    return inner_->send(peer, transfer_id, tag, std::move(payload), std::move(hashes));
  const std::uint64_t identity = total_hash_of(hashes.hashes);
  for (int i = 1; i < count; ++i)
    orders_.push_back({i, it->second[static_cast<std::size_t>(i - 1)], transfer_id, tag, i, count, identity,
                       payload->size()});
  inner_->send(peer, transfer_id, options_.stripe_tag, make_stripe(transfer_id, tag, *payload, 0, count));
  ++figures_.striped_sends;
}

void StripedLink::take(const std::string& sender, std::span<const std::byte> payload) {
  try {
    const Stripe stripe = read_stripe(payload);
    ++figures_.stripes_in;
    if (auto whole = assembler_.add(sender, stripe)) {
      ++figures_.assembled;
      ready_.push_back(std::move(*whole));
    }
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::Peer) throw;
    ++figures_.refused;
  }
}

void StripedLink::feed(const std::string& from, std::span<const std::byte> payload) {
  const auto owner = owner_of_lane_.find(from);
  if (owner == owner_of_lane_.end()) {
    ++figures_.refused;
    return;
  }
  take(owner->second, payload);
}

std::optional<Received> StripedLink::receive(std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (ready_.empty()) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
    auto r = inner_->receive(std::max(left, std::chrono::milliseconds(0)));
    if (!r) return std::nullopt;
    if (r->tag != options_.stripe_tag) return r;
    take(r->peer, r->bytes);
    inner_->recycle(std::move(r->bytes));
    if (ready_.empty() && left.count() <= 0) return std::nullopt;
  }
  Received out = std::move(ready_.front());
  ready_.pop_front();
  return out;
}

StripedLink::Figures StripedLink::figures() const {
  Figures f = figures_;
  f.let_go = assembler_.dropped();
  return f;
}

}  // namespace meridian
