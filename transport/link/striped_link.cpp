#include "transport/link/striped_link.hpp"

#include <algorithm>
#include <utility>

#include "core/util/error.hpp"

namespace meridian {

StripedLink::StripedLink(std::unique_ptr<Link> inner, Options options)
    : LinkDecorator(std::move(inner)), options_(std::move(options)) {}

void StripedLink::set_peer_lanes(std::map<std::string, std::vector<std::string>> lanes) {
  peer_lanes_ = std::move(lanes);
  owner_of_lane_.clear();
  for (const auto& [owner, addresses] : peer_lanes_) {
    owner_of_lane_[owner] = owner;  // a peer with fewer lanes sends some stripes from its own link
    for (const auto& a : addresses) owner_of_lane_[a] = owner;
  }
}

void StripedLink::send(const std::string& peer, std::uint64_t transfer_id, std::uint16_t tag,
                       std::shared_ptr<const std::vector<std::byte>> payload, ChunkHashes hashes) {
  // A peer not listed yet may not know this site's lanes either: it could not put stripes together.
  const auto it = peer_lanes_.find(peer);
  if (it == peer_lanes_.end()) return inner_->send(peer, transfer_id, tag, std::move(payload), std::move(hashes));
  const int senders = 1 + lanes_;
  const int receivers = 1 + static_cast<int>(it->second.size());
  // One stripe per flow: stripe i from this site's sender i mod S to the peer's receiver i mod R,
  // max(S, R) distinct pairs (i = j mod S and mod R means i = j mod lcm(S, R) >= max(S, R)).
  const int count = std::min(std::max(senders, receivers), kMaxStripes);
  if (count < 2 || !options_.stripes || !options_.stripes(transfer_id, tag))
    return inner_->send(peer, transfer_id, tag, std::move(payload), std::move(hashes));
  const std::uint64_t identity = total_hash_of(hashes.hashes);
  for (int i = 0; i < count; ++i) {
    const int receiver = i % receivers;
    const std::string& to = receiver == 0 ? peer : it->second[static_cast<std::size_t>(receiver - 1)];
    if (const int sender = i % senders; sender > 0)
      orders_.push_back({sender, to, transfer_id, tag, i, count, identity, payload->size()});
    else
      inner_->send(to, transfer_id, options_.stripe_tag, make_stripe(transfer_id, tag, *payload, i, count));
  }
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
    // From the peer's own link, or from one of its lanes (a peer with more of them than this site).
    const auto owner = owner_of_lane_.find(r->peer);
    take(owner == owner_of_lane_.end() ? r->peer : owner->second, r->bytes);
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
