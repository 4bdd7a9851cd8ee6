#include "sync/round/courier.hpp"

namespace meridian {
namespace {

std::uint64_t transfer_id(std::int64_t number, LinkTag tag, std::uint16_t attempt) {
  return (static_cast<std::uint64_t>(number) << 20) | (static_cast<std::uint64_t>(tag) << 16) | attempt;
}

}  // namespace

std::int64_t transfer_number(std::uint64_t transfer_id) { return static_cast<std::int64_t>(transfer_id >> 20); }

Courier::Courier(Link& link, std::function<const std::string*(const std::string&)> site_at)
    : link_(link), site_at_(std::move(site_at)) {}

std::uint64_t Courier::next_transfer_id(const std::string& address, LinkTag tag, std::int64_t number) {
  // Gradients are never sent twice, and a step's entry would only pile up.
  const std::uint16_t attempt = tag == LinkTag::Gradients ? 0 : attempts_[{address, tag, number}]++;
  return transfer_id(number, tag, attempt);
}

void Courier::count_sent(const std::string& address, std::size_t bytes) {
  const std::string* site = site_at_(address);
  traffic_.peers[site == nullptr ? address : *site].sent += bytes;
}

void Courier::send(const std::string& address, LinkTag tag, std::int64_t number, std::span<const std::byte> bytes) {
  count_sent(address, bytes.size());
  link_.send(address, next_transfer_id(address, tag, number), static_cast<std::uint16_t>(tag), bytes);
}

void Courier::send(const std::string& address, LinkTag tag, std::int64_t number,
                   std::shared_ptr<const std::vector<std::byte>> bytes) {
  count_sent(address, bytes->size());
  link_.send(address, next_transfer_id(address, tag, number), static_cast<std::uint16_t>(tag), std::move(bytes));
}

void Courier::send(const std::string& address, std::int64_t round, const Outbox::Delta& delta) {
  count_sent(address, delta.bytes->size());
  link_.send(address, next_transfer_id(address, LinkTag::Delta, round), static_cast<std::uint16_t>(LinkTag::Delta),
             delta.bytes, delta.hashes);
}

void Courier::received(const std::string& site, std::size_t bytes) {
  traffic_.bytes_received += bytes;
  traffic_.peers[site].received += bytes;
}

CrossSiteTraffic Courier::traffic() const {
  CrossSiteTraffic t = traffic_;
  const auto c = link_.counters();
  t.bytes_sent = c.bytes_sent;
  t.frames_refused = c.rejected;
  return t;
}

}  // namespace meridian
