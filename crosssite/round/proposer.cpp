#include "crosssite/round/proposer.hpp"

#include <set>
#include <utility>

namespace meridian {

Proposer::Proposer(ProposerOptions options, CommitLog& log, DeltaStore& store, CrossSiteTraffic& counts)
    : options_(std::move(options)), log_(log), store_(store), counts_(counts) {}

void Proposer::held(CommitView& view, const DeltaKey& key) {
  view.held.insert(key);
  timing_.held(view.version + 1, key, view.now);
}

std::optional<Waiting> Proposer::propose(CommitView view, const OuterState& state,
                                             const std::map<std::string, std::int64_t>& merged, ControlPlane& plane,
                                             CrossSiteEvents& events) {
  const std::int64_t next = view.version + 1;
  view.first_held_at = timing_.first_held_at();
  view.deadline_s = timing_.deadline_s(options_.deadline, options_.rule.fragments);
  const auto entries = decide_commit(view, options_.rule);
  if (!entries)
    return Waiting{Waiting::What::DeltasForVersion, next,
                   std::to_string(view.held.size()) + " here, " + std::to_string(view.live_sites.size()) + " live sites"};
  const auto rounds = open_rounds(view, options_.rule);
  const int fragment = commit_fragment(view, rounds);
  const double round_tokens = options_.rule.scale_partial ? full_round_tokens(view, *entries) : 0.0;
  CommitRecord proposal{next, *entries, 0, options_.site, merged, fragment, round_tokens};
  auto means = mean_of(proposal, state);
  auto outcome = state.preview(means.fragments, means.mean);
  proposal.params_hash = outcome.hash;
  proposal.screens = std::move(means.screens);
  std::set<std::string> merging;
  for (const auto& e : *entries) {
    proposal.merged[e.site] = e.round;
    merging.insert(e.site);
  }
  ++counts_.commits_proposed;
  // Before the proposal can win: should this site die right after, what it committed is on its disk.
  store_.journal(*entries);
  if (log_.claim(plane, next, encode(proposal), options_.site, events)) {
    ++counts_.commits_won;
    if (static_cast<int>(merging.size()) < awaited_sites(view, rounds, fragment)) ++counts_.commits_by_deadline;
  }
  proposed_ = VersionCommit{std::move(proposal), std::move(means.mean), {}, std::move(means.fragments), std::move(outcome)};
  return std::nullopt;
}

VersionCommit Proposer::commit_of(const CommitRecord& record, const OuterState& state) {
  // Another proposal of the same entries may count the round's tokens otherwise: its mean differs.
  const bool ours = proposed_ && proposed_->record.number == record.number &&
                    proposed_->record.entries == record.entries &&
                    proposed_->record.round_tokens == record.round_tokens;
  VersionCommit commit{record, {}, {}, {}, {}};
  if (ours) {
    commit.mean_delta = std::move(proposed_->mean_delta);
    commit.fragments = std::move(proposed_->fragments);
    commit.outcome = std::move(proposed_->outcome);
  } else {
    auto means = mean_of(record, state);
    commit.fragments = std::move(means.fragments);
    commit.mean_delta = std::move(means.mean);
  }
  proposed_.reset();
  return commit;
}

DeltaStore::Means Proposer::mean_of(const CommitRecord& record, const OuterState& state) {
  return store_.mean_of(record, state, options_.rule);
}

}  // namespace meridian
