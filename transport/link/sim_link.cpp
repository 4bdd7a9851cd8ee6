#include "transport/link/sim_link.hpp"

#include <vector>

#include "core/util/error.hpp"
#include "transport/link/peer_gate.hpp"

namespace meridian {

class SimLink final : public Link {
 public:
  SimLink(SimNetwork& network, std::string address, std::uint64_t generation)
      : network_(network), address_(std::move(address)), generation_(generation) {}
  ~SimLink() override { network_.close(address_, generation_); }

  std::string address() const override { return address_; }
  void send(const std::string& peer, std::uint64_t transfer_id, std::uint16_t tag,
            std::span<const std::byte> payload) override {
    ++counters_.frames_sent;
    counters_.bytes_sent += payload.size();
    network_.send(address_, peer, transfer_id, tag, payload);
  }
  void send(const std::string& peer, std::uint64_t transfer_id, std::uint16_t tag,
            std::shared_ptr<const std::vector<std::byte>> payload) override {
    send(peer, transfer_id, tag, std::span<const std::byte>(*payload));
  }
  void send(const std::string& peer, std::uint64_t transfer_id, std::uint16_t tag,
            std::shared_ptr<const std::vector<std::byte>> payload, ChunkHashes hashes) override {
    MERIDIAN_CHECK(hashes.chunk_bytes == chunk_bytes(), "chunk hashes of ", hashes.chunk_bytes, " bytes");
    send(peer, transfer_id, tag, std::span<const std::byte>(*payload));
  }
  std::size_t chunk_bytes() const override { return 1 << 20; }
  // Never waits: in a simulated world time moves only when the simulator moves it.
  std::optional<Received> receive(std::chrono::milliseconds) override {
    while (auto r = network_.take(address_, generation_)) {
      ++counters_.frames_received;
      if (gate_.let_in(r->peer)) return r;
      ++counters_.strangers;
    }
    return std::nullopt;
  }
  void recycle(std::vector<std::byte>) override {}
  Counters counters() const override { return counters_; }
  void set_peers(std::set<std::string> peers, std::function<bool(const std::string&)> vouch) override {
    gate_.set(std::move(peers), std::move(vouch));
  }
  std::map<std::string, std::uint64_t> take_refusals() override { return gate_.take_refusals(); }

 private:
  SimNetwork& network_;
  std::string address_;
  std::uint64_t generation_;
  Counters counters_;
  PeerGate gate_;
};

std::unique_ptr<Link> SimNetwork::open(const std::string& address) {
  Endpoint& e = endpoints_[address];
  e.inbox.clear();
  e.waiting_from.clear();
  return std::make_unique<SimLink>(*this, address, ++e.generation);
}

void SimNetwork::close(const std::string& address, std::uint64_t generation) {
  const auto it = endpoints_.find(address);
  if (it != endpoints_.end() && it->second.generation == generation) endpoints_.erase(it);
}

void SimNetwork::isolate(const std::string& address, bool cut) {
  if (cut) isolated_.insert(address);
  else isolated_.erase(address);
}

void SimNetwork::send(const std::string& from, const std::string& to, std::uint64_t transfer_id, std::uint16_t tag,
                      std::span<const std::byte> payload) {
  ++counters_.sent;
  const auto it = endpoints_.find(to);
  if (it == endpoints_.end() || isolated_.contains(from) || isolated_.contains(to)) {
    ++counters_.partitioned;  // nobody listens there, or the path is cut: a real sender learns nothing either
    return;
  }
  if (rng_.uniform() < options_.loss) {
    ++counters_.lost;
    return;
  }
  const int copies = rng_.uniform() < options_.duplicate ? 2 : 1;
  counters_.duplicated += copies - 1;
  std::size_t& waiting = it->second.waiting_from[from];
  for (int c = 0; c < copies; ++c) {
    if (waiting >= options_.queue_transfers) {
      ++counters_.overflowed;
      continue;
    }
    ++waiting;
    Received r{from, transfer_id, tag, std::vector<std::byte>(payload.begin(), payload.end())};
    if (!r.bytes.empty() && rng_.uniform() < options_.corrupt) {
      r.bytes[rng_.below(r.bytes.size())] ^= std::byte{0x20};
      ++counters_.corrupted;
    }
    const double at = clock_.now() + options_.latency_s + options_.jitter_s * rng_.uniform() +
                      static_cast<double>(payload.size()) / options_.bandwidth_bytes_per_s;
    it->second.inbox.emplace(std::make_pair(at, sequence_++), std::move(r));
  }
}

std::optional<Received> SimNetwork::take(const std::string& address, std::uint64_t generation) {
  const auto it = endpoints_.find(address);
  if (it == endpoints_.end() || it->second.generation != generation || isolated_.contains(address)) return std::nullopt;
  auto& inbox = it->second.inbox;
  if (inbox.empty() || inbox.begin()->first.first > clock_.now()) return std::nullopt;
  Received r = std::move(inbox.begin()->second);
  inbox.erase(inbox.begin());
  --it->second.waiting_from[r.peer];
  ++counters_.delivered;
  return r;
}

}  // namespace meridian
