#include "crosssite/round/proposer.hpp"

#include <set>
#include <utility>

#include "core/util/error.hpp"

namespace meridian {

Proposer::Proposer(ProposerOptions options, CommitLog& log, DeltaStore& store, CrossSiteTraffic& counts)
    : options_(std::move(options)), log_(log), store_(store), counts_(counts) {}

void Proposer::held(CommitView& view, const DeltaKey& key) {
  view.held.insert(key);
  timing_.held(view.version + 1, key, view.now);
}

std::optional<Waiting> Proposer::propose(CommitView view, const OuterState& state,
                                         const std::map<std::string, std::int64_t>& merged, ControlPlane& plane,
                                         CrossSiteEvents& events, const HeldCopy* copy) {
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
  std::set<std::string> merging;
  for (const auto& e : *entries) merging.insert(e.site);
  auto means = mean_of(proposal, state);
  Pending pending{std::move(proposal), std::move(means),
                  static_cast<int>(merging.size()) < awaited_sites(view, rounds, fragment)};
  if (state.sharded()) {
    previewing_ = std::move(pending);
    preview_taken_ = false;
    return Waiting{Waiting::What::SiteHash, next, ""};
  }
  if (copy != nullptr)
    if (std::string damage = copy->damage(state); !damage.empty())
      return Waiting{Waiting::What::CopyDiverged, view.version, std::move(damage)};
  auto outcome = state.preview(pending.means.fragments, pending.means.mean);
  pending.proposal.params_hash = outcome.hash;
  claim(std::move(pending), std::move(outcome), plane, events);
  return std::nullopt;
}

std::optional<ProposalPreview> Proposer::take_preview() {
  if (!previewing_ || std::exchange(preview_taken_, true)) return std::nullopt;
  return ProposalPreview{previewing_->proposal.number, previewing_->means.fragments, previewing_->means.mean,
                         previewing_->means.merged};
}

void Proposer::claim_previewed(std::uint64_t hash, ControlPlane& plane, CrossSiteEvents& events) {
  MERIDIAN_CHECK(previewing_ && preview_taken_, "a preview's hash with no proposal previewed");
  Pending pending = std::move(*std::exchange(previewing_, std::nullopt));
  pending.proposal.params_hash = hash;
  claim(std::move(pending), std::nullopt, plane, events);
}

void Proposer::claim(Pending pending, std::optional<OuterState::Outcome> outcome, ControlPlane& plane,
                     CrossSiteEvents& events) {
  CommitRecord& proposal = pending.proposal;
  proposal.screens = std::move(pending.means.screens);
  for (const auto& e : proposal.entries) proposal.merged[e.site] = e.round;
  proposal.previous = log_.digest(proposal.number - 1).value_or(Digest{});
  ++counts_.commits_proposed;
  // Before the proposal can win: should this site die right after, what it committed is on its disk.
  store_.journal(proposal.entries);
  if (log_.claim(plane, proposal.number, encode(proposal), options_.site, events)) {
    ++counts_.commits_won;
    if (pending.short_of_sites) ++counts_.commits_by_deadline;
  }
  proposed_ = VersionCommit{std::move(proposal),
                            std::move(pending.means.mean),
                            {},
                            std::move(pending.means.fragments),
                            std::move(outcome),
                            false,
                            std::move(pending.means.merged)};
}

VersionCommit Proposer::commit_of(const CommitRecord& record, const OuterState& state) {
  // Another proposal of the same entries may count the round's tokens otherwise: its mean differs.
  const bool ours = proposed_ && proposed_->record.number == record.number &&
                    proposed_->record.entries == record.entries &&
                    proposed_->record.round_tokens == record.round_tokens;
  VersionCommit commit{record, {}, {}, {}, {}};
  if (ours) {
    commit.mean_delta = std::move(proposed_->mean_delta);
    commit.merged = std::move(proposed_->merged);
    commit.fragments = std::move(proposed_->fragments);
    commit.outcome = std::move(proposed_->outcome);
    commit.proposed_here = true;
  } else {
    auto means = mean_of(record, state);
    commit.fragments = std::move(means.fragments);
    commit.mean_delta = std::move(means.mean);
    commit.merged = std::move(means.merged);
  }
  proposed_.reset();
  return commit;
}

DeltaStore::Means Proposer::mean_of(const CommitRecord& record, const OuterState& state) {
  return store_.mean_of(record, state, options_.rule);
}

}  // namespace meridian
