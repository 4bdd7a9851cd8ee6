#pragma once
// A simulated network on virtual time for the protocol simulator: every site's real CrossSite talks
// through a SimLink, one endpoint of a SimNetwork, in one thread. A transfer arrives whole after
// latency + jitter + bytes / bandwidth (jitter reorders them), or never (lost, or sent across a
// partition), possibly twice, possibly with one byte flipped: damage the real links' chunk checks
// would catch, let through so the protocol's own checks (announced checksums) are exercised.
// What one sender has waiting at a receiver is bounded, as a real link's queue for a peer is:
// past the bound (a receiver that is stopped takes nothing) its transfers are dropped.
// Every draw comes from the network's seed, so a run replays exactly.
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>

#include "core/util/clock.hpp"
#include "core/util/rng.hpp"
#include "transport/link/link.hpp"

namespace meridian {

struct SimNetworkOptions {
  double latency_s = 0.02;
  double jitter_s = 0.02;
  double bandwidth_bytes_per_s = 1e8;
  double loss = 0;       // probability that a transfer never arrives
  double duplicate = 0;  // ... that it arrives twice
  double corrupt = 0;    // ... that one byte of it is flipped
  // Transfers from one sender waiting to be taken at one receiver, past which the sender's are
  // dropped. A real link's queue holds about 2,000 chunks (16 transfers of a 100 MiB delta); this
  // tighter one is reached in many of the simulator's seeds (a stopped site: docs/simulator.md).
  std::size_t queue_transfers = 4;
};

class SimNetwork {
 public:
  SimNetwork(ManualClock& clock, std::uint64_t seed, SimNetworkOptions options = {})
      : clock_(clock), rng_(seed), options_(options) {}
  SimNetworkOptions& options() { return options_; }

  // The endpoint at `address`. Opening an address again (a restarted site) starts it empty:
  // what was on its way to the old one is gone, as with a new socket.
  std::unique_ptr<Link> open(const std::string& address);
  // Cuts (or mends) everything between `address` and the rest of the network.
  void isolate(const std::string& address, bool cut);
  bool isolated(const std::string& address) const { return isolated_.contains(address); }

  struct Counters {
    std::uint64_t sent = 0, delivered = 0, lost = 0, duplicated = 0, corrupted = 0, partitioned = 0, overflowed = 0;
  };
  const Counters& counters() const { return counters_; }

 private:
  friend class SimLink;
  struct Endpoint {
    std::uint64_t generation = 0;  // the open() it belongs to
    std::multimap<std::pair<double, std::uint64_t>, Received> inbox;  // by (arrival, order sent)
    std::map<std::string, std::size_t> waiting_from;                  // the inbox's count by sender
  };
  void send(const std::string& from, const std::string& to, std::uint64_t transfer_id, std::uint16_t tag,
            std::span<const std::byte> payload);
  std::optional<Received> take(const std::string& address, std::uint64_t generation);
  void close(const std::string& address, std::uint64_t generation);

  ManualClock& clock_;
  Rng rng_;
  SimNetworkOptions options_;
  std::map<std::string, Endpoint> endpoints_;
  std::set<std::string> isolated_;
  std::uint64_t sequence_ = 0;
  Counters counters_;
};

}  // namespace meridian
