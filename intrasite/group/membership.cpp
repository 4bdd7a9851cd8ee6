#include "intrasite/group/membership.hpp"

#include <algorithm>

namespace meridian {
namespace {

bool contains(const std::vector<int>& v, int id) { return std::find(v.begin(), v.end(), id) != v.end(); }

std::string list(const std::vector<int>& ids) {
  std::string out = "[";
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) out.push_back(',');
    out.append(std::to_string(ids[i]));
  }
  out.push_back(']');
  return out;
}

}  // namespace

double allowed_silence(bool beating, const MembershipOptions& options) {
  return beating ? options.heartbeat_timeout_s : std::max(options.heartbeat_timeout_s, options.first_beat_timeout_s);
}

MembershipDecision decide_membership(double now, const Generation& current, const std::vector<ReplicaView>& replicas,
                                     const MembershipOptions& options) {
  MembershipDecision d;
  std::vector<int> keep, joiners, gone, reporters;
  std::optional<double> first_failure;
  for (const auto& r : replicas) {
    const bool member = contains(current.members, r.id);
    const bool hung = r.running && now - r.last_heartbeat > allowed_silence(r.beating, options);
    if (r.failed_at && member) {
      reporters.push_back(r.id);
      first_failure = std::min(first_failure.value_or(*r.failed_at), *r.failed_at);
    }
    if (hung) {
      d.evict.push_back(r.id);
      if (member) gone.push_back(r.id);
      continue;
    }
    if (member && !r.running) gone.push_back(r.id);
    if (member && r.running) keep.push_back(r.id);
    if (!member && r.running && r.ready) joiners.push_back(r.id);
  }

  if (!reporters.empty()) {
    // The group's collective failed. Members that did not report are stuck or dead: wait for them
    // a little (a report races with the failure itself), then go on without them.
    std::vector<int> silent;
    for (int id : keep)
      if (!contains(reporters, id)) silent.push_back(id);
    if (!silent.empty() && now - *first_failure < options.failure_grace_s) {
      d.next.reset();
      return d;  // evictions of hung replicas still apply
    }
    for (int id : silent) {
      d.evict.push_back(id);
      gone.push_back(id);
    }
    keep = reporters;
    keep.erase(std::remove_if(keep.begin(), keep.end(), [&](int id) { return contains(gone, id); }), keep.end());
  }

  const bool first = current.number < 0;
  if (!first && gone.empty() && reporters.empty() && joiners.empty()) return d;
  if (first && joiners.empty()) return d;

  std::vector<int> members = keep;
  members.insert(members.end(), joiners.begin(), joiners.end());
  std::sort(members.begin(), members.end());
  if (static_cast<int>(members.size()) < options.min_members) {
    d.reason = "waiting: " + std::to_string(members.size()) + " replica(s) available, " +
               std::to_string(options.min_members) + " needed";
    return d;
  }
  d.next = Generation{current.number + 1, members};
  d.reason = first ? "first group " + list(members)
                   : "members " + list(members) + (gone.empty() ? "" : ", lost " + list(gone)) +
                         (joiners.empty() ? "" : ", joining " + list(joiners)) +
                         (reporters.empty() ? "" : ", after a failed collective");
  std::sort(d.evict.begin(), d.evict.end());
  d.evict.erase(std::unique(d.evict.begin(), d.evict.end()), d.evict.end());
  return d;
}

}  // namespace meridian
