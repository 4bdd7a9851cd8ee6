#include "crosssite/round/rebuilt_copy.hpp"

#include <algorithm>

#include "core/util/error.hpp"
#include "crosssite/codec/delta_digest.hpp"
#include "crosssite/outer/merged_deltas.hpp"

namespace meridian {

namespace {

// The journal's bytes of every entry of `record`, each matching its digest; nullopt when the
// journal lacks one (the replay ends before this version).
std::optional<std::vector<std::vector<std::byte>>> journaled(const CommitRecord& record,
                                                             const RebuildSources& sources) {
  std::vector<std::vector<std::byte>> out;
  for (const auto& e : record.entries) {
    auto bytes = sources.delta({e.site, e.round});
    if (!bytes) return std::nullopt;
    bool matches = false;
    try {
      matches = delta_digest(std::span<const std::byte>(*bytes)) == e.digest;
    } catch (const Error&) {
      // Not an encoded delta at all: no match.
    }
    if (!matches)
      throw make_error(ErrorKind::Data, "the journal's delta of ", e.site, " round ", e.round, " (merged by version ",
                       record.number, ") does not match its record's digest");
    out.push_back(std::move(*bytes));
  }
  return out;
}

// The outcome `record` makes of `state`, as DeltaStore::mean_of and the outer step make it.
OuterState::Outcome replayed(const OuterState& state, const CommitRecord& record,
                             const std::vector<std::vector<std::byte>>& deltas, const CommitRuleOptions& rule) {
  std::vector<int> fragments;
  for (const auto& e : record.entries) fragments.push_back(e.fragment);
  std::sort(fragments.begin(), fragments.end());
  fragments.erase(std::unique(fragments.begin(), fragments.end()), fragments.end());
  std::vector<float> means;
  for (const int fragment : fragments) {
    std::vector<std::span<const std::byte>> encoded;
    std::vector<double> weights;
    std::vector<CommitEntry> entries;
    for (std::size_t i = 0; i < record.entries.size(); ++i) {
      if (record.entries[i].fragment != fragment) continue;
      encoded.emplace_back(deltas[i]);
      weights.push_back(record.entries[i].weight);
      entries.push_back(record.entries[i]);
    }
    const std::size_t n = state.fragment(fragment).size;
    const std::size_t at = means.size();
    means.resize(at + n);
    merged_mean(encoded, weights, commit_share(record.number, entries, record.round_tokens, rule), n, 0,
                std::span(means).subspan(at));
  }
  return state.preview(fragments, means);
}

}  // namespace

RebuiltCopy rebuild_copy(OuterState saved, const RebuildSources& sources, const CommitRuleOptions& rule) {
  MERIDIAN_CHECK(!saved.sharded(), "a sharded state's part is rebuilt by no one site");
  RebuiltCopy out;
  out.from = saved.version();
  std::optional<std::uint64_t> want = sources.origin_hash;
  if (out.from > 0) {
    const CommitRecord* own = sources.record(out.from);
    want = own != nullptr ? std::optional(own->params_hash) : std::nullopt;
  }
  if (!want)
    throw make_error(ErrorKind::Data, "the checkpoint holds version ", out.from,
                     ", whose record this site no longer holds");
  if (const auto hash = OuterState::weights_hash(saved.global()); hash != *want)
    throw make_error(ErrorKind::Data, "the checkpoint's copy of version ", out.from, " hashes to ", hash,
                     ", its record says ", *want);
  while (const CommitRecord* record = sources.record(saved.version() + 1)) {
    const auto deltas = journaled(*record, sources);
    if (!deltas) break;
    auto outcome = replayed(saved, *record, *deltas, rule);
    if (outcome.hash != record->params_hash)
      throw make_error(ErrorKind::Data, "version ", record->number, " replayed from the journal hashes to ",
                       outcome.hash, ", its record says ", record->params_hash);
    saved.commit(record->number, std::move(outcome));
  }
  out.version = saved.version();
  out.snapshot = saved.snapshot();
  return out;
}

}  // namespace meridian
