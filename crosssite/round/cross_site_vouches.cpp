// CrossSite's side of the vouches (vouches.hpp): its own written before a version is handed out,
// the others' judging each record before it is applied; and what a restarted site knows of the
// records it applied before: its journal's copies, else its own earlier vouch.
#include <string>

#include "core/util/digest.hpp"
#include "crosssite/round/cross_site.hpp"

namespace meridian {

void CrossSite::put_vouch(ControlPlane& plane) {
  if (!vouch_due_) return;
  plane.put(log_.keys().vouch(options_.site), encode(*vouch_due_), 0);  // no lease: it outlives the site
  vouch_due_.reset();
}

std::optional<std::string> CrossSite::contradicted(const CommitRecord& record) {
  auto found = vouches_.against(record, log_, events_);
  if (!found) return std::nullopt;
  // The record there now is read afresh once another site puts back the one it applied; until
  // then a state under a newer record is the way on.
  log_.forget_read(found->version);
  return std::move(found->why);
}

void CrossSite::journal_record(std::int64_t version) {
  const auto journal = outbox_.journal();
  if (const std::string* bytes = log_.bytes(version); journal && bytes) journal->write_record(version, *bytes);
}

void CrossSite::judge_held(const CommitRecord& read) {
  const auto mine = vouches_.own(read.number);
  if (!mine) return;
  if (const auto other = log_.held_as(read.number, *mine))
    events_.push_back({"commit_contradicted", options_.site, read.number,
                       "version " + std::to_string(read.number) +
                           " held here from the site's disk: the record read there (SHA-256 " + short_hex(*other) +
                           ") is not the one this site applied (" + short_hex(*mine) +
                           ", its vouch); that one stands, and the one read serves only for what it merged"});
}

}  // namespace meridian
