#include "transport/link/measured_link.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/util/error.hpp"

namespace meridian {
namespace {

// An echo: the probe's send time, then the echoing side's inbound figure from the prober
// (median, min, samples, at; samples 0 when it has none).
using Echo = std::array<double, 5>;

std::chrono::milliseconds until(double deadline, double now) {
  return std::chrono::milliseconds(static_cast<std::int64_t>(std::ceil(std::max(0.0, deadline - now) * 1000)));
}

}  // namespace

void MeasuredLink::Samples::add(double value, double now, std::size_t window) {
  recent.push_back(value);
  while (recent.size() > window) recent.pop_front();
  ++count;
  at = now;
}

std::optional<MeasuredLink::Figure> MeasuredLink::Samples::figure() const {
  if (recent.empty()) return std::nullopt;
  std::vector<double> sorted(recent.begin(), recent.end());
  std::sort(sorted.begin(), sorted.end());
  const std::size_t n = sorted.size();
  const double median = n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
  return Figure{median, sorted.front(), count, at};
}

MeasuredLink::MeasuredLink(std::unique_ptr<Link> inner, std::function<double()> clock, Options options)
    : LinkDecorator(std::move(inner)), clock_(std::move(clock)), options_(options) {
  // Links deliver each (sender, id) once: a restarted process must not reuse its predecessor's
  // probe ids, so they start from the wall clock in microseconds (~2^51, below kEchoBit).
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::system_clock::now().time_since_epoch());
  next_probe_id_ = static_cast<std::uint64_t>(us.count()) & (kEchoBit - 1);
}

MeasuredLink::PeerState& MeasuredLink::peer(const std::string& address) {
  auto [it, fresh] = peers_.try_emplace(address);
  if (fresh) it->second.next_probe = clock_();
  return it->second;
}

bool MeasuredLink::before_send(const std::string& peer_address, std::uint64_t transfer_id, std::size_t bytes) {
  MERIDIAN_CHECK(transfer_id < kEchoBit, transfer_id);
  peer(peer_address);
  if (bytes >= options_.min_bandwidth_bytes)
    inner_->send(peer_address, transfer_id | kOwnBit, kStartTag, StampBook::payload(clock_()));
  return true;  // measuring never holds a transfer back
}

void MeasuredLink::probe(double now) {
  for (auto& [address, p] : peers_) {
    if (now < p.next_probe) continue;
    p.next_probe = now + options_.probe_every_s;
    inner_->send(address, kOwnBit | kProbeBit | (next_probe_id_++ & (kEchoBit - 1)), kProbeTag, StampBook::payload(now));
  }
}

bool MeasuredLink::consume(Received& r, double now) {
  if ((r.transfer_id & kOwnBit) == 0 || (r.tag != kProbeTag && r.tag != kEchoTag && r.tag != kStartTag)) return false;
  PeerState& p = peer(r.peer);
  if (r.tag == kStartTag) {
    stamps_.file(r.peer, r.transfer_id & ~kOwnBit, r.bytes);
  } else if (r.tag == kProbeTag && r.bytes.size() == sizeof(double)) {
    Echo echo{};
    std::memcpy(echo.data(), r.bytes.data(), sizeof(double));
    if (const auto in = p.in.figure()) echo = {echo[0], in->median, in->min, static_cast<double>(in->samples), in->at};
    const std::uint64_t id = (r.transfer_id & ~kProbeBit) | kEchoBit;
    inner_->send(r.peer, id, kEchoTag, std::as_bytes(std::span(echo)));
  } else if (r.tag == kEchoTag && r.bytes.size() == sizeof(Echo)) {
    Echo echo{};
    std::memcpy(echo.data(), r.bytes.data(), sizeof echo);
    // A clock that stepped back would give a negative round trip: no sample.
    if (now >= echo[0]) p.rtt.add(now - echo[0], now, options_.window);
    if (echo[3] > 0) p.out = Figure{echo[1], echo[2], static_cast<std::uint64_t>(echo[3]), echo[4]};
  }
  // Anything else under these tags is malformed: dropped, never handed to the caller.
  inner_->recycle(std::move(r.bytes));
  return true;
}

void MeasuredLink::note_delivery(const Received& r, double now) {
  PeerState& p = peer(r.peer);
  const auto sent = stamps_.take(r.peer, r.transfer_id);
  if (!sent || r.bytes.size() < options_.min_bandwidth_bytes || now <= *sent) return;
  p.in.add(static_cast<double>(r.bytes.size()) * 8 / 1e6 / (now - *sent), now, options_.window);
}

std::optional<Received> MeasuredLink::receive(std::chrono::milliseconds timeout) {
  const double deadline = clock_() + static_cast<double>(timeout.count()) / 1000;
  // After one of its own transfers the look goes on (a zero timeout included) until the caller's
  // transfer or nothing is there: probes must not cost the caller's pump its turn.
  for (;;) {
    const double now = clock_();
    probe(now);
    auto r = inner_->receive(until(deadline, now));
    if (!r) return std::nullopt;
    const double at = clock_();
    if (consume(*r, at)) continue;
    note_delivery(*r, at);
    return r;
  }
}

std::map<std::string, MeasuredLink::Peer> MeasuredLink::figures() const {
  std::map<std::string, Peer> out;
  for (const auto& [address, p] : peers_) out[address] = {p.rtt.figure(), p.in.figure(), p.out};
  return out;
}

}  // namespace meridian
