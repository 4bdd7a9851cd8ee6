// What a simulated site's replicas are checked against after each call of the round, and what
// the round tells the checker (RoundEvents).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "sim/protocol/sim_site.hpp"
#include "sim/protocol/sim_site_state.hpp"

namespace meridian {

using namespace sim_site_detail;

void SimSite::check_weights() {
  if (!incarnation_) return;
  const Disk& d = incarnation_->leader().now;
  // The working weights are the round's start plus the progress in flight since its fragments
  // were last sent: a rebase, a drop or an adopted state loses none of it and adds none. With the
  // outer state sharded each replica holds the start of its part (the leader counts the progress).
  for (const OuterState* state : held_states()) {
    const std::size_t from = state->part().offset;
    for (std::size_t j = 0; j < state->part().count; ++j) {
      const std::size_t i = from + j;
      if (std::abs(d.local[i] - (state->start()[j] - d.progress[i])) > 1e-4f) {
        world_.checker.fail(name_ + "'s working weight " + std::to_string(i) + " is " + std::to_string(d.local[i]) +
                            ", its round's start less its progress " +
                            std::to_string(state->start()[j] - d.progress[i]));
        return;
      }
    }
  }
}

std::vector<const OuterState*> SimSite::held_states() const {
  if (!incarnation_->shards) return {&incarnation_->leader().now.state};
  std::vector<const OuterState*> states;
  for (const Process* p : incarnation_->live()) states.push_back(&p->now.state);
  return states;
}

bool SimSite::mirrors_hold() const {
  // Rank r mirrors rank r + 1's part (the last rank the first's), and the parts cover the model in
  // order; a group of one holds the state whole, and mirrors nothing.
  const auto states = held_states();
  if (states.size() == 1) return !states.front()->sharded() && !states.front()->mirror();
  std::size_t next_offset = 0;
  for (std::size_t r = 0; r < states.size(); ++r) {
    const OuterState& mine = *states[r];
    const OuterState& next = *states[(r + 1) % states.size()];
    const OuterState* mirror = mine.mirror();
    if (mine.part().offset != next_offset || !mirror || mine.mirror_part() != next.part() ||
        !std::ranges::equal(mirror->global(), next.global()) || !std::ranges::equal(mirror->start(), next.start()))
      return false;
    next_offset += mine.part().count;
  }
  return next_offset == states.front()->size();
}

std::vector<float> SimSite::whole_global() const {
  const OuterState& lead = incarnation_->leader().now.state;
  std::vector<float> whole(lead.size());
  for (const OuterState* state : held_states())
    std::ranges::copy(state->global(), whole.begin() + static_cast<std::ptrdiff_t>(state->part().offset));
  return whole;
}

void SimSite::submitted(const DeltaAnnouncement& a, std::span<const std::byte> encoded) {
  const Disk& d = incarnation_->leader().now;
  std::vector<float> progress;
  for (const auto& range : d.state.fragment(a.fragment).ranges) {
    const auto from = d.progress.begin() + static_cast<std::ptrdiff_t>(range.offset);
    progress.insert(progress.end(), from, from + static_cast<std::ptrdiff_t>(range.count));
  }
  // Every replica counts the progress it trained: what the delta carries is in flight no more.
  for (Process* p : incarnation_->live())
    for (const auto& range : d.state.fragment(a.fragment).ranges) {
      const auto from = p->now.progress.begin() + static_cast<std::ptrdiff_t>(range.offset);
      std::fill(from, from + static_cast<std::ptrdiff_t>(range.count), 0.0f);
    }
  world_.checker.submitted(name_, a.round, encoded, progress);
  say("sent round " + std::to_string(a.round) + " of fragment " + std::to_string(a.fragment) +
      (a.final ? " (final)" : "") + " on version " + std::to_string(a.base_version));
}

void SimSite::applied(const AppliedVersion& v) {
  const OuterState& state = incarnation_->leader().now.state;
  if (v.record == nullptr)
    return world_.checker.fail(name_ + " applied version " + std::to_string(v.version) + " with no record");
  // Sharded, the members applied it too before the leader's turn came back (their last collective).
  for (const OuterState* held : held_states())
    if (held->version() != v.version)
      world_.checker.fail(name_ + "'s leader applied version " + std::to_string(v.version) + " while a member holds " +
                          std::to_string(held->version()));
  world_.checker.applied(name_, *v.record, OuterState::weights_hash(whole_global()), v.adopted);
  if (v.adopted) {
    // A copy rebuilt from its own disk is received as a peer's state is, and a newer peer's state
    // replaces it.
    const bool rebuilt = std::exchange(rebuilt_pending_, std::nullopt) == v.version;
    ++(rebuilt ? rebuilt_ : states_adopted_);
    return say((rebuilt ? "took its copy rebuilt from its disk, version " : "adopted a peer's state of version ") +
               std::to_string(v.version));
  }
  // A commit rebases the round onto it: the fragments it changed start from the version.
  if (state.sharded()) {
    if (!std::ranges::equal(state.start(), state.global()))
      world_.checker.fail(name_ + "'s round was not rebased onto version " + std::to_string(v.version) +
                          " in its part");
  } else
    for (const int f : v.fragments)
      for (const auto& range : state.fragment(f).ranges)
        if (!std::equal(state.start().begin() + static_cast<std::ptrdiff_t>(range.offset),
                        state.start().begin() + static_cast<std::ptrdiff_t>(range.offset + range.count),
                        state.global().begin() + static_cast<std::ptrdiff_t>(range.offset)))
          world_.checker.fail(name_ + "'s round was not rebased onto version " + std::to_string(v.version) +
                              " in fragment " + std::to_string(f) + ", which it changed");
  std::string merged;
  for (const auto& e : v.record->entries)
    merged += " " + e.site + std::to_string(e.round) + "f" + std::to_string(e.fragment) + "@" +
              std::to_string(e.base_version);
  say("applied version " + std::to_string(v.version) + " from " + v.record->proposer + ":" + merged);
}

void SimSite::dropped(std::int64_t round, std::int64_t, std::int64_t version, int in_a_row) {
  for (Process* p : incarnation_->live())  // the site went back to the version it holds
    std::fill(p->now.progress.begin(), p->now.progress.end(), 0.0f);
  world_.checker.dropped_round();
  say("dropped round " + std::to_string(round) + " on version " + std::to_string(version) + ", " +
      std::to_string(in_a_row) + " in a row");
}

void SimSite::fast_forwarded(std::int64_t from_step, std::int64_t step) {
  say("fast-forwarded from step " + std::to_string(from_step) + " to " + std::to_string(step));
}

void SimSite::caught_up(std::int64_t from_version, std::int64_t version, double) {
  say("caught up from version " + std::to_string(from_version) + " to " + std::to_string(version));
}

void SimSite::log_events() {
  for (const auto& e : incarnation_->cross().take_events()) {
    diverged_ += e.kind == "version_diverged";
    if (e.kind == "copy_rebuilt") rebuilt_pending_ = e.number;
    contradicted_ += e.kind == "commit_contradicted";
    say("event " + e.kind + (e.site.empty() ? "" : " " + e.site) + " " + std::to_string(e.number) + " " + e.detail);
  }
}

}  // namespace meridian
