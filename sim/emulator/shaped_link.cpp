#include "sim/emulator/shaped_link.hpp"

#include <algorithm>
#include <cmath>

#include "core/util/error.hpp"
#include "core/util/hash.hpp"

namespace meridian {

namespace {

// Transfers one look takes off the inner link at most: bounds a look's time under a flood.
constexpr int kMaxDrain = 64;

}  // namespace

ShapedLink::ShapedLink(std::unique_ptr<Link> inner, std::string site, std::shared_ptr<const WanSchedule> schedule,
                       std::function<const std::string*(const std::string&)> site_of, std::function<double()> clock,
                       std::uint64_t seed, LinkModelOptions model)
    : LinkDecorator(std::move(inner)),
      site_(std::move(site)),
      schedule_(std::move(schedule)),
      site_of_(std::move(site_of)),
      clock_(std::move(clock)),
      seed_(seed),
      model_(model) {}

const std::string* ShapedLink::peer_site(const std::string& address) {
  if (const auto it = known_.find(address); it != known_.end()) return &it->second;
  const std::string* site = site_of_ ? site_of_(address) : nullptr;
  if (site == nullptr) return nullptr;
  return &known_.emplace(address, *site).first->second;
}

bool ShapedLink::apart(const std::string& address, double now) {
  if (schedule_->cut_off(site_, now)) return true;
  const std::string* peer = peer_site(address);
  return peer != nullptr && schedule_->partitioned(site_, *peer, now);
}

void ShapedLink::stamp(const std::string& peer, std::uint64_t transfer_id) {
  MERIDIAN_CHECK(transfer_id < kStampBit, transfer_id);
  const double now = clock_();
  inner_->send(peer, transfer_id | kStampBit, kStampTag, StampBook::payload(now));
}

bool ShapedLink::before_send(const std::string& peer, std::uint64_t transfer_id, std::size_t) {
  if (apart(peer, clock_())) {
    ++shaping_.dropped_sent;
    return false;
  }
  stamp(peer, transfer_id);
  return true;
}

void ShapedLink::admit(Received r) {
  if (r.tag == kStampTag && (r.transfer_id & kStampBit) != 0 &&
      stamps_.file(r.peer, r.transfer_id & ~kStampBit, r.bytes)) {
    inner_->recycle(std::move(r.bytes));
    return;
  }
  const double now = clock_();
  // A clock that stepped back since the stamp must not delay it twice.
  const double sent = std::min(now, stamps_.take(r.peer, r.transfer_id).value_or(now));
  if (apart(r.peer, now)) {
    ++shaping_.dropped_received;
    inner_->recycle(std::move(r.bytes));
    return;
  }
  const std::string* peer = peer_site(r.peer);
  const WanLink link = schedule_->link(peer ? *peer : r.peer, site_, sent);
  auto it = directions_.find(r.peer);
  if (it == directions_.end())
    it = directions_.emplace(r.peer, LinkDirection(hash64(r.peer.data(), r.peer.size(), seed_), model_)).first;
  const double due = std::max(now, it->second.arrival(sent, r.bytes.size(), link));
  held_.emplace(due, Held{std::move(r), sent});
}

std::optional<Received> ShapedLink::take_due(double now) {
  while (!held_.empty() && held_.begin()->first <= now) {
    auto node = held_.extract(held_.begin());
    Held& h = node.mapped();
    if (apart(h.transfer.peer, now)) {  // the partition began while it was on its way
      ++shaping_.dropped_received;
      inner_->recycle(std::move(h.transfer.bytes));
      continue;
    }
    ++shaping_.delivered;
    shaping_.transit_s += node.key() - h.sent;
    return std::move(h.transfer);
  }
  return std::nullopt;
}

std::optional<Received> ShapedLink::receive(std::chrono::milliseconds timeout) {
  const double deadline = clock_() + static_cast<double>(timeout.count()) / 1000;
  // At least one look at the inner link, even with a zero timeout. A look takes everything that
  // has physically arrived (held until due, as a real network's socket buffers hold it), so a
  // stamp, or a transfer not due yet, does not cost the caller's pump its turn.
  for (bool first = true;; first = false) {
    const double now = clock_();
    if (auto r = take_due(now)) return r;
    if (!first && now >= deadline) return std::nullopt;
    const double until = held_.empty() ? deadline : std::min(deadline, held_.begin()->first);
    const auto wait = std::chrono::milliseconds(static_cast<std::int64_t>(std::ceil(std::max(0.0, until - now) * 1000)));
    auto r = inner_->receive(wait);
    for (int more = 0; r && more < kMaxDrain; ++more) {
      admit(std::move(*r));
      r = inner_->receive(std::chrono::milliseconds(0));
    }
    if (r) admit(std::move(*r));
  }
}

}  // namespace meridian
