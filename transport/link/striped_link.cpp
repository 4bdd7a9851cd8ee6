#include "transport/link/striped_link.hpp"

#include <algorithm>
#include <utility>

#include "core/util/error.hpp"

namespace meridian {

StripedLink::StripedLink(std::unique_ptr<Link> inner, Options options)
    : LinkDecorator(std::move(inner)), options_(std::move(options)) {}

namespace {

// Transfers whose parts are reported in part, at most: the oldest goes first (its sender's
// protocol asks for it again, whole).
constexpr std::size_t kMaxOpenReports = 16;

}  // namespace

void StripedLink::set_peer_lanes(std::map<std::string, PeerLanes> lanes) {
  peer_lanes_ = std::move(lanes);
  owner_of_lane_.clear();
  for (const auto& [owner, peer] : peer_lanes_) {
    owner_of_lane_[owner] = owner;  // a peer with fewer lanes sends some stripes from its own link
    for (const auto& a : peer.lanes) owner_of_lane_[a] = owner;
  }
}

void StripedLink::send(const std::string& peer, std::uint64_t transfer_id, std::uint16_t tag,
                       std::shared_ptr<const std::vector<std::byte>> payload, ChunkHashes hashes) {
  // A peer not listed yet may not know this site's lanes either: it could not put stripes together.
  const auto it = peer_lanes_.find(peer);
  if (it == peer_lanes_.end()) return inner_->send(peer, transfer_id, tag, std::move(payload), std::move(hashes));
  if (!options_.stripes || !options_.stripes(transfer_id, tag))
    return inner_->send(peer, transfer_id, tag, std::move(payload), std::move(hashes));
  const std::uint64_t identity = total_hash_of(hashes.hashes);
  const PeerLanes& lanes = it->second;
  if (lanes.parts_unit > 0 && options_.cuts && options_.cuts(lanes.parts_unit) &&
      1 + lanes.lanes.size() <= static_cast<std::size_t>(kMaxStripes))
    return send_parts(peer, lanes, transfer_id, tag, payload, identity);
  const int senders = 1 + lanes_;
  const int receivers = 1 + static_cast<int>(lanes.lanes.size());
  // One stripe per flow: stripe i from this site's sender i mod S to the peer's receiver i mod R,
  // max(S, R) distinct pairs (i = j mod S and mod R means i = j mod lcm(S, R) >= max(S, R)).
  const int count = std::min(std::max(senders, receivers), kMaxStripes);
  if (count < 2) return inner_->send(peer, transfer_id, tag, std::move(payload), std::move(hashes));
  for (int i = 0; i < count; ++i) {
    const int receiver = i % receivers;
    const std::string& to = receiver == 0 ? peer : lanes.lanes[static_cast<std::size_t>(receiver - 1)];
    if (const int sender = i % senders; sender > 0)
      orders_.push_back({sender, to, transfer_id, tag, i, count, identity, payload->size()});
    else
      inner_->send(to, transfer_id, options_.stripe_tag, make_stripe(transfer_id, tag, *payload, i, count));
  }
  ++figures_.striped_sends;
}

void StripedLink::send_parts(const std::string& peer, const PeerLanes& lanes, std::uint64_t transfer_id,
                             std::uint16_t tag, const std::shared_ptr<const std::vector<std::byte>>& payload,
                             std::uint64_t identity) {
  const int senders = 1 + lanes_;
  const int count = 1 + static_cast<int>(lanes.lanes.size());
  for (int i = 0; i < count; ++i) {
    const std::string& to = i == 0 ? peer : lanes.lanes[static_cast<std::size_t>(i - 1)];
    if (const int sender = i % senders; sender > 0) {
      orders_.push_back({sender, to, transfer_id, tag, i, count, identity, payload->size(), lanes.parts_unit});
    } else {
      const auto part = options_.cut_part(*payload, i, count, lanes.parts_unit);
      inner_->send(to, transfer_id, options_.stripe_tag, make_part_stripe(transfer_id, tag, part, i, count));
    }
  }
  ++figures_.parts_sent;
}

void StripedLink::take(const std::string& sender, std::span<const std::byte> payload) {
  try {
    const Stripe stripe = read_stripe(payload);
    if (stripe.part) {
      auto kept = options_.keep_part ? options_.keep_part(sender, stripe) : std::nullopt;
      if (!kept) {
        ++figures_.parts_refused;
        return;
      }
      return report(sender, stripe.transfer_id, stripe.tag, stripe.index, stripe.count, std::move(*kept));
    }
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

void StripedLink::feed_report(const std::string& from, std::uint64_t transfer_id, std::uint16_t tag, int index,
                              int count, std::vector<std::byte> bytes) {
  const auto owner = owner_of_lane_.find(from);
  if (owner == owner_of_lane_.end()) {
    ++figures_.parts_refused;
    return;
  }
  report(owner->second, transfer_id, tag, index, count, std::move(bytes));
}

void StripedLink::report(const std::string& owner, std::uint64_t transfer_id, std::uint16_t tag, int index, int count,
                         std::vector<std::byte> bytes) {
  if (count < 1 || count > kMaxStripes || index < 0 || index >= count || bytes.empty()) {
    ++figures_.parts_refused;
    return;
  }
  auto [it, fresh] = reports_.try_emplace({owner, transfer_id});
  Reports& r = it->second;
  if (fresh) r = {tag, std::vector<std::vector<std::byte>>(static_cast<std::size_t>(count)), count, ++opened_};
  const auto at = static_cast<std::size_t>(index);
  if (r.tag != tag || static_cast<int>(r.parts.size()) != count || !r.parts[at].empty()) {
    ++figures_.parts_refused;  // not the transfer the others' parts are of, or a part twice
    return;
  }
  ++figures_.parts_in;
  r.parts[at] = std::move(bytes);
  if (--r.missing == 0) {
    held_.push_back({owner, transfer_id, tag, std::move(r.parts)});
    ++figures_.held_in_parts;
    reports_.erase(it);
    return;
  }
  if (reports_.size() <= kMaxOpenReports) return;
  const auto oldest = std::min_element(reports_.begin(), reports_.end(),
                                       [](const auto& a, const auto& b) { return a.second.opened < b.second.opened; });
  reports_.erase(oldest);
  ++figures_.let_go;
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
  f.let_go += assembler_.dropped();
  return f;
}

}  // namespace meridian
