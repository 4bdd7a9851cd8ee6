#pragma once
// What a simulated site holds (sim_site.hpp's private parts), shared by the files that implement
// it: sim_site.cpp (its life and faults) and sim_site_checks.cpp (what is checked after each call,
// and what its round tells the checker).
#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/util/hash.hpp"
#include "core/util/rng.hpp"
#include "sim/protocol/sim_site.hpp"

namespace meridian {
namespace sim_site_detail {

// Steps between two exchanges. A site looks at the other sites only between steps, as a real
// one does: short steps keep its answers to peers (delta and state requests) prompt.
constexpr std::int64_t kStepsPerExchange = 4;
// A spike's step against a usual one: far past any site's screen (DeltaScreenOptions::max_norm_ratio).
constexpr double kSpike = 1000;
// Announced tokens per step: 1,000 a round.
constexpr std::int64_t kTokensPerStep = 250;

// What one step of training adds to a site's weights: fixed by (seed, site, step).
inline std::vector<float> synthetic_progress(std::uint64_t seed, const std::string& site, std::int64_t step,
                                             std::size_t n) {
  Rng rng =
      Rng::derive(seed ^ hash64(std::as_bytes(std::span(site.data(), site.size()))), static_cast<std::uint64_t>(step));
  std::vector<float> progress(n);
  for (auto& x : progress) x = static_cast<float>(0.01 * (rng.uniform() - 0.5));
  return progress;
}

// A simulated site's two replicas in one thread: the leader leaves each Update on the wire, and
// the member, called right after it, takes it from there.
class WireChannel final : public ReplicaChannel {
 public:
  WireChannel(Update& wire, bool leader) : wire_(wire), leader_(leader) {}
  bool leader() const override { return leader_; }
  void share(Update& update, std::int64_t) override {
    if (leader_)
      wire_ = update;
    else
      update = wire_;
  }

 private:
  Update& wire_;
  bool leader_;
};

// What a replica's round did goes to its site (the driver tells it only while the replica leads),
// but for the deltas it encodes while it does not lead: its lane holds them.
class Forwarding final : public RoundEvents {
 public:
  Forwarding(RoundEvents& site, std::function<void(std::vector<std::byte>)> hold)
      : site_(site), hold_(std::move(hold)) {}
  void looked() override { site_.looked(); }
  void encoded(std::vector<std::byte> bytes) override { hold_(std::move(bytes)); }
  void submitted(const DeltaAnnouncement& a, std::span<const std::byte> encoded) override {
    site_.submitted(a, encoded);
  }
  void applied(const AppliedVersion& v) override { site_.applied(v); }
  void dropped(std::int64_t round, std::int64_t step, std::int64_t version, int in_a_row) override {
    site_.dropped(round, step, version, in_a_row);
  }
  void fast_forwarded(std::int64_t from_step, std::int64_t step) override { site_.fast_forwarded(from_step, step); }
  void caught_up(std::int64_t from_version, std::int64_t version, double seconds) override {
    site_.caught_up(from_version, version, seconds);
  }

 private:
  RoundEvents& site_;
  std::function<void(std::vector<std::byte>)> hold_;
};

}  // namespace sim_site_detail

struct SimSite::Lease {
  std::int64_t id = 0;
  bool lost = false;
};

// What a checkpoint holds: the outer state, the working weights, the step, and the progress each
// fragment made since it was last sent (what its next delta must carry).
struct SimSite::Disk {
  OuterState state;
  std::vector<float> local, progress;
  std::int64_t step = 0;
};

// The synthetic trainer over an incarnation's weights.
class SimSite::Steps final : public Training {
 public:
  Steps(Disk& now, std::uint64_t seed, std::string site) : now_(now), seed_(seed), site_(std::move(site)) {}
  std::span<float> weights() override { return now_.local; }
  std::int64_t step() const override { return now_.step; }
  void fast_forward(std::int64_t step) override { now_.step = std::max(now_.step, step); }
  std::int64_t tokens_per_step() const override { return sim_site_detail::kTokensPerStep; }
  void train(double scale) {
    auto progress = sim_site_detail::synthetic_progress(seed_, site_, now_.step, now_.local.size());
    for (auto& x : progress) x = static_cast<float>(scale * x);
    for (std::size_t i = 0; i < progress.size(); ++i) {
      now_.local[i] -= progress[i];
      now_.progress[i] += progress[i];
    }
    ++now_.step;
  }

 private:
  Disk& now_;
  std::uint64_t seed_;
  std::string site_;
};

// What a replica builds when it comes to lead, and lets go of when it no longer does (as a real
// replica's SiteExchange: ensure_leader_side, release_leader_side): its control-plane client, its
// link and the site's CrossSite on them.
struct SimSite::LeaderSide {
  std::unique_ptr<MemoryControlPlane> control;
  std::unique_ptr<ControlPlane> overwriting;  // SimMutations::overwrite_commits: what CrossSite talks to
  std::unique_ptr<Link> link;
  StripedLink* striped = nullptr;  // the split exchange: `link` is it
  std::weak_ptr<Lease> lease;
  std::uint64_t assembled_seen = 0, held_seen = 0;  // its link's figures as of the last call
  std::unique_ptr<CrossSite> cross;                 // after what it uses: it goes before its control plane and link
  std::unique_ptr<RoundPeers> peers;                // what the driver talks to: cross, or a mutation's decorator of it
  RoundPeers& round_peers() { return peers ? *peers : *cross; }
};

// One replica's process: its own copy of the state and weights, and the same RoundDriver over
// them; the replicas must hold the same bits after every call. The one that leads has a leader side.
struct SimSite::Process {
  Process(const Disk& disk, const RoundPlan& plan, std::uint64_t seed, const std::string& site, Update& wire,
          bool first, RoundEvents& site_events, std::function<double()> clock)
      : now(disk),
        steps(now, seed, site),
        events(site_events,
               [this](std::vector<std::byte> bytes) {
                 if (hold) hold(std::move(bytes));
               }),
        channel(wire, first),
        driver(plan, now.state, events, std::move(clock)) {}
  Disk now;
  Steps steps;
  std::unique_ptr<Lane> lane;                        // the split exchange's, with the outer state whole
  std::function<void(std::vector<std::byte>)> hold;  // where the deltas it encodes go while it does not lead
  sim_site_detail::Forwarding events;
  // With the outer state whole (two replicas, the first leading): the first leaves each Update on
  // the wire, and the second, called right after it, takes it from there.
  sim_site_detail::WireChannel channel;
  RoundDriver driver;
  std::unique_ptr<LeaderSide> lead;  // last: it goes first, while the state it serves is still there
};

struct SimSite::Incarnation {
  std::unique_ptr<SimShards> shards;  // the outer state sharded (before the links, which keep parts there)
  Update wire;
  std::vector<std::unique_ptr<Process>> replicas;  // by replica; null while dead
  std::uint64_t leader_sides = 0;                  // made so far: each names its link
  double next_at = 0;  // when the next step of training ends
  Phase phase = Phase::Joining;
  bool take_up = false;  // after the catch-up: go on from the job's step (a resumed or disk-less site)
  bool drain_asked = false, resume_asked = false;  // the operator's, taken up once the round lets it
  bool rollback_asked = false;                     // ... and at the next step
  bool round_wait = false;                         // the wait under way follows a round's end
  std::vector<Process*> live() const {
    std::vector<Process*> out;
    for (const auto& p : replicas)
      if (p) out.push_back(p.get());
    return out;
  }
  // The lowest live replica: rank 0 of the group.
  std::size_t leader_index() const {
    return static_cast<std::size_t>(
        std::find_if(replicas.begin(), replicas.end(), [](const auto& p) { return p != nullptr; }) - replicas.begin());
  }
  Process& leader() const { return *replicas[leader_index()]; }
  CrossSite& cross() const { return *leader().lead->cross; }
};

}  // namespace meridian
