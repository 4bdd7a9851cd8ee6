#include "sim/protocol/fault_plan.hpp"

#include <algorithm>
#include <array>
#include <sstream>

namespace meridian {
namespace {

constexpr std::array<const char*, 17> kNames = {"crash",
                                                "stop",
                                                "partition",
                                                "control outage",
                                                "lost replies",
                                                "late writes",
                                                "slow replies",
                                                "message faults",
                                                "member key deleted",
                                                "junk commit record",
                                                "drain",
                                                "pause-outer",
                                                "rollback",
                                                "spike",
                                                "replica death",
                                                "outer weights bit flip",
                                                "commit record written over"};
// The kinds plan_faults draws: a site's (replica deaths come from a plan of their own).
constexpr std::size_t kSiteKinds = static_cast<std::size_t>(Fault::Kind::ReplicaDeath);

double drawn_duration(Rng& rng, double longest) { return 0.2 + rng.uniform() * longest; }

}  // namespace

std::string describe(const Fault& f, const std::vector<std::string>& sites) {
  std::ostringstream out;
  out.precision(3);
  out << std::fixed << f.at << " fault: " << kNames[static_cast<std::size_t>(f.kind)];
  if (f.kind == Fault::Kind::ReplicaDeath && f.replica == Fault::kLeader) out << " (the leader)";
  if (f.kind == Fault::Kind::ReplicaDeath && f.replica != Fault::kLeader) out << " " << f.replica;
  if (f.kind != Fault::Kind::Outage && f.kind != Fault::Kind::MessageFaults && f.kind != Fault::Kind::Spike &&
      f.kind != Fault::Kind::RewriteCommit)
    out << " of " << sites[f.site];
  if (f.duration > 0) out << " for " << f.duration << " s";
  if (f.amount > 0) out << " (" << f.amount << ")";
  return out.str();
}

std::vector<Fault> plan_faults(Rng& rng, int sites, int count, double window_s) {
  std::vector<Fault> faults;
  int spikes = 0;
  for (int i = 0; i < count; ++i) {
    Fault f;
    f.kind = static_cast<Fault::Kind>(rng.below(kSiteKinds));
    // At most two spikes: three rounds in a row that no version can merge stop a job by design.
    if (f.kind == Fault::Kind::Spike && ++spikes > 2) f.kind = Fault::Kind::Rollback;
    f.site = static_cast<int>(rng.below(static_cast<std::uint64_t>(sites)));
    const double longest = f.kind == Fault::Kind::Outage || f.kind == Fault::Kind::MessageFaults ? 2.0 : 5.0;
    f.duration = f.kind == Fault::Kind::DeleteMember || f.kind == Fault::Kind::JunkCommit ||
                         f.kind == Fault::Kind::Rollback || f.kind == Fault::Kind::Spike
                     ? 0
                     : drawn_duration(rng, longest);
    f.at = rng.uniform() * std::max(0.0, window_s - f.duration);
    if (f.kind == Fault::Kind::LostReplies || f.kind == Fault::Kind::LateWrites || f.kind == Fault::Kind::MessageFaults)
      f.amount = 0.1 + 0.3 * rng.uniform();
    if (f.kind == Fault::Kind::SlowReplies) f.amount = 0.02 + 0.2 * rng.uniform();
    if (f.kind == Fault::Kind::Crash) f.amount = rng.uniform() < 0.4 ? 1 : 0;  // 1: the disk is lost too
    faults.push_back(f);
  }
  std::sort(faults.begin(), faults.end(), [](const Fault& a, const Fault& b) { return a.at < b.at; });
  return faults;
}

std::vector<Fault> plan_outer_flips(Rng& rng, int sites, int count, double window_s) {
  std::vector<Fault> faults;
  for (int i = 0; i < count; ++i) {
    Fault f;
    f.kind = Fault::Kind::OuterFlip;
    f.site = static_cast<int>(rng.below(static_cast<std::uint64_t>(sites)));
    f.at = rng.uniform() * window_s;
    f.amount = rng.uniform();  // where in the weights
    faults.push_back(f);
  }
  return faults;
}

std::vector<Fault> plan_rewrites(Rng& rng, int count, double window_s) {
  std::vector<Fault> faults(static_cast<std::size_t>(count));
  for (Fault& f : faults) {
    f.kind = Fault::Kind::RewriteCommit;
    f.at = rng.uniform() * window_s;
  }
  return faults;
}

std::vector<Fault> plan_replica_deaths(Rng& rng, const std::vector<int>& replicas, int count, double window_s,
                                       bool leaders) {
  std::vector<int> sites;
  for (std::size_t s = 0; s < replicas.size(); ++s)
    if (replicas[s] > 1) sites.push_back(static_cast<int>(s));
  std::vector<Fault> faults;
  for (int i = 0; i < count && !sites.empty(); ++i) {
    Fault f;
    f.kind = Fault::Kind::ReplicaDeath;
    f.site = sites[rng.below(sites.size())];
    f.replica = leaders ? Fault::kLeader
                        : 1 + static_cast<int>(rng.below(
                                  static_cast<std::uint64_t>(replicas[static_cast<std::size_t>(f.site)] - 1)));
    f.duration = drawn_duration(rng, 5.0);
    f.at = rng.uniform() * std::max(0.0, window_s - f.duration);
    f.amount = rng.uniform() < 0.4 ? 1 : 0;
    faults.push_back(f);
  }
  return faults;
}

}  // namespace meridian
