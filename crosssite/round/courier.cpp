#include "crosssite/round/courier.hpp"

namespace meridian {
namespace {

std::uint64_t transfer_id(std::int64_t number, LinkTag tag, std::uint16_t attempt) {
  return (static_cast<std::uint64_t>(number) << 20) | (static_cast<std::uint64_t>(tag) << 16) | attempt;
}

}  // namespace

std::int64_t transfer_number(std::uint64_t transfer_id) { return static_cast<std::int64_t>(transfer_id >> 20); }

bool first_attempt(std::uint64_t transfer_id) { return (transfer_id & 0xFFFF) == 0; }

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

bool Courier::vouch(const std::string& address, double now, const std::function<void()>& refresh) {
  constexpr std::size_t kMaxVouched = 4096;
  if (site_at_(address) != nullptr) return true;
  if (vouched_.size() >= kMaxVouched) vouched_.clear();
  if (!vouched_.insert(address).second) return false;  // asked about already: the periodic reads will list it
  if (now - stranger_second_ >= 1) stranger_second_ = now, stranger_reads_ = 0;
  if (stranger_reads_ >= kStrangerReads) return false;
  ++stranger_reads_;
  refresh();
  return site_at_(address) != nullptr;
}

void Courier::report_refusals(double now, CrossSiteEvents& events) {
  if (now - refusals_reported_at_ < kRefusalReportS) return;
  const auto refused = link_.take_refusals();
  if (refused.empty()) return;
  refusals_reported_at_ = now;
  for (const auto& [sender, frames] : refused)
    events.push_back({"link_refused", sender, static_cast<std::int64_t>(frames),
                      "frames from a sender that is not a member of the job, refused"});
}

CrossSiteTraffic Courier::traffic() const {
  CrossSiteTraffic t = traffic_;
  const auto c = link_.counters();
  t.bytes_sent = c.bytes_sent;
  t.frames_refused = c.rejected + c.strangers;
  return t;
}

}  // namespace meridian
