// CrossSite's side of a copy of the outer state that is not its version (held_copy.hpp): found,
// kept out of checkpoints, and rebuilt from the site's own disk (rebuilt_copy.hpp).
#include <algorithm>

#include "core/util/error.hpp"
#include "crosssite/round/cross_site.hpp"
#include "crosssite/round/rebuilt_copy.hpp"

namespace meridian {

void CrossSite::diverged(std::int64_t version, const std::string& why) {
  if (std::none_of(options_.sites.begin(), options_.sites.end(), [&](const auto& s) { return s != options_.site; }))
    throw make_error(ErrorKind::Data, why, "; the job has no other site to take a state from");
  copy_.diverge();
  rebuild_due_ = true;
  events_.push_back({"version_diverged", "", version,
                     why + (options_.saved_state ? "; rebuilding it from this site's checkpoint and journal"
                                                 : "; taking a peer's state instead")});
  gate_.look_now();
}

void CrossSite::durable(std::int64_t version) {
  outbox_.durable(version);
  log_.keep_from(version);
}

bool CrossSite::may_checkpoint(const OuterState& state) {
  if (!copy_.diverged())
    if (std::string damage = copy_.damage(state); !damage.empty()) diverged(state.version(), damage);
  return !copy_.diverged();
}

void CrossSite::rebuild_copy(const OuterState& state) {
  if (!std::exchange(rebuild_due_, false) || !options_.saved_state) return;
  const std::int64_t held = state.version();
  try {
    auto saved = options_.saved_state();
    if (!saved) throw make_error(ErrorKind::Data, "the site has no checkpoint yet");
    const RebuildSources sources{[this](std::int64_t v) { return log_.record(v); },
                                 [this](const DeltaKey& key) -> std::optional<std::vector<std::byte>> {
                                   const auto journal = outbox_.journal();
                                   return journal ? journal->read(key) : std::nullopt;
                                 },
                                 options_.origin_hash};
    auto rebuilt = meridian::rebuild_copy(std::move(*saved), sources, options_.rule);
    if (rebuilt.version < held)
      throw make_error(ErrorKind::Data, "its checkpoint (version ", rebuilt.from, ") and journal reach version ",
                       rebuilt.version, " only");
    // No record names version 0: a snapshot is adopted under its version's record.
    if (rebuilt.version == 0) throw make_error(ErrorKind::Data, "version 0 has no record to take a copy under");
    events_.push_back({"copy_rebuilt", "", rebuilt.version,
                       "from its checkpoint of version " + std::to_string(rebuilt.from) + " and " +
                           std::to_string(rebuilt.version - rebuilt.from) + " versions' deltas from its journal"});
    transfer_.received(rebuilt.version, kRebuiltCopy, std::move(rebuilt.snapshot));
  } catch (const Error& e) {
    events_.push_back({"copy_not_rebuilt", "", held, std::string(e.what()) + "; taking a peer's state instead"});
  }
}

}  // namespace meridian
