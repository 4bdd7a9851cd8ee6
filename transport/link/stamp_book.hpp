#pragma once
// Send times that a Link decorator puts on the wire ahead of a transfer (a tiny transfer of its
// own holding the sender's wall clock), kept by the receiver until the transfer itself arrives.
// Bounded: the stamps of transfers that never come (dropped, or their sender died) are forgotten,
// oldest first, once there are too many.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>

namespace meridian {

class StampBook {
 public:
  explicit StampBook(std::size_t capacity = 4096) : capacity_(capacity) {}

  // The payload of a stamp sent at `wall_s`.
  static std::span<const std::byte> payload(const double& wall_s) { return std::as_bytes(std::span(&wall_s, 1)); }

  // Files the stamp for (peer, transfer id); false when `bytes` is no stamp (wrong size).
  bool file(const std::string& peer, std::uint64_t transfer_id, std::span<const std::byte> bytes) {
    if (bytes.size() != sizeof(double)) return false;
    double sent = 0;
    std::memcpy(&sent, bytes.data(), sizeof sent);
    const auto key = std::pair{peer, transfer_id};
    if (stamps_.insert_or_assign(key, sent).second) order_.push_back(key);
    while (order_.size() > capacity_) {
      stamps_.erase(order_.front());
      order_.pop_front();
    }
    return true;
  }

  // The send time of (peer, transfer id), forgotten once taken.
  std::optional<double> take(const std::string& peer, std::uint64_t transfer_id) {
    const auto it = stamps_.find({peer, transfer_id});
    if (it == stamps_.end()) return std::nullopt;
    const double sent = it->second;
    stamps_.erase(it);  // its order_ entry goes when it reaches the front
    return sent;
  }

 private:
  std::size_t capacity_;
  std::map<std::pair<std::string, std::uint64_t>, double> stamps_;
  std::deque<std::pair<std::string, std::uint64_t>> order_;  // oldest first
};

}  // namespace meridian
