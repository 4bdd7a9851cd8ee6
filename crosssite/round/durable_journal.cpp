#include "crosssite/round/durable_journal.hpp"

#include <algorithm>

namespace meridian {

void DurableJournal::merged(std::int64_t version, const std::map<std::string, std::int64_t>& merged) {
  // Without checkpoints nothing is ever durable: noted versions would only pile up. A record's
  // `merged` is cumulative, so a version noted again (held at start, then applied) says the same.
  if (checkpoints_) pending_[version] = merged;
}

void DurableJournal::durable(std::int64_t version) {
  const auto end = pending_.upper_bound(version);
  for (auto it = pending_.begin(); it != end; ++it)
    for (const auto& [site, round] : it->second) floor_[site] = std::max(floor(site), round);
  pending_.erase(pending_.begin(), end);
  inner_->erase_records_before(version);  // a restart holds `version` at least
}

void DurableJournal::write_record(std::int64_t version, const std::string& bytes) {
  inner_->write_record(version, bytes);
  // Without checkpoints a restart holds nothing, and reads every record again: a window will do.
  if (!checkpoints_) inner_->erase_records_before(version - kRecordsWithoutCheckpoints + 1);
}

std::int64_t DurableJournal::floor(const std::string& site) const {
  const auto it = floor_.find(site);
  return it == floor_.end() ? -1 : it->second;
}

void DurableJournal::erase_through(const std::string& site, std::int64_t round) {
  const std::int64_t through = checkpoints_ ? std::min(round, floor(site)) : round;
  if (through >= 0) inner_->erase_through(site, through);
}

}  // namespace meridian
