#pragma once
// A site's copy of its outer state rebuilt from its own disk, for a copy found not to be its
// version (held_copy.hpp) when no peer can serve that version: it was this site's alone, or every
// peer is behind it. The state its newest checkpoint holds (never written from a damaged copy:
// CrossSite::may_checkpoint) is checked against its version's hash, then each next version is
// replayed from the deltas its journal kept (durable_journal.hpp keeps every delta of the
// versions applied since that checkpoint), each delta checked against its record's digest and
// each outcome against its record's hash, as far as the records and the journal go.
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "crosssite/outer/outer_state.hpp"
#include "crosssite/round/commit_rule.hpp"
#include "crosssite/round/cross_site_types.hpp"
#include "crosssite/round/records.hpp"

namespace meridian {

struct RebuildSources {
  // A version's record as this site read it; null when it does not hold it.
  std::function<const CommitRecord*(std::int64_t version)> record;
  // A delta's bytes from the journal; nullopt when it does not hold them.
  std::function<std::optional<std::vector<std::byte>>(const DeltaKey& key)> delta;
  // Version 0's hash (no record names it): the weights the process built.
  std::optional<std::uint64_t> origin_hash;
};

struct RebuiltCopy {
  std::int64_t from = 0;            // the checkpoint's version
  std::int64_t version = 0;         // the newest version replayed
  std::vector<std::byte> snapshot;  // OuterState::snapshot() of it
};

// `saved` (a whole state) brought as far as `sources` go. Error(Data) naming the version when the
// checkpoint's state is not its version, or no record says what it is, or a journaled delta
// does not match its record's digest, or a version replayed does not hash to its record's.
RebuiltCopy rebuild_copy(OuterState saved, const RebuildSources& sources, const CommitRuleOptions& rule);

}  // namespace meridian
