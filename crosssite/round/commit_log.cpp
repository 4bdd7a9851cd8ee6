#include "crosssite/round/commit_log.hpp"

#include <algorithm>

#include "core/util/error.hpp"

namespace meridian {

void CommitLog::read(ControlPlane& control, CrossSiteEvents& events) {
  const auto read = control.get_prefix_since(keys_.commits(), revision_ + 1);
  revision_ = read.revision;
  for (const auto& [key, value] : read.kvs) {
    try {
      auto record = decode_commit(value);
      const bool fragments_ok =
          record.fragment < fragments_ &&
          (record.screens.empty() || record.screens.size() == static_cast<std::size_t>(fragments_)) &&
          std::all_of(record.entries.begin(), record.entries.end(),
                      [&](const CommitEntry& e) { return e.fragment < fragments_; });
      if (key != keys_.commit(record.number) || record.entries.empty() || !fragments_ok)
        throw make_error(ErrorKind::Peer, "commit record ", key, " is for version ", record.number, " with ",
                         record.entries.size(), " entries", fragments_ok ? "" : ", fragments the job has not (its turn, an entry's, or its screens')");
      newest_ = std::max(newest_, record.number);
      unreadable_.erase(record.number);
      commits_[record.number] = std::move(record);
    } catch (const Error& e) {
      const auto version = keys_.version_of_commit(key);
      if (version) unreadable_[*version] = value;
      events.push_back({"commit_unreadable", "", version.value_or(0), e.what()});
    }
  }
}

bool CommitLog::claim(ControlPlane& control, std::int64_t version, const std::string& record, const std::string& site,
                      CrossSiteEvents& events) {
  const auto junk = unreadable_.find(version);
  if (junk == unreadable_.end() || newest_ > version) return control.create_if_absent(keys_.commit(version), record);
  if (!control.compare_and_swap(keys_.commit(version), junk->second, record)) return false;
  events.push_back({"commit_record_replaced", site, version,
                    "the unreadable record at " + keys_.commit(version) + " (" + std::to_string(junk->second.size()) +
                        " bytes) gave way to this site's proposal"});
  return true;
}

const CommitRecord* CommitLog::find(std::int64_t version) const {
  const auto it = commits_.find(version);
  return it == commits_.end() ? nullptr : &it->second;
}

std::optional<CommitRecord> CommitLog::forget_before(std::int64_t version) {
  std::optional<CommitRecord> held;
  if (const auto it = commits_.find(version - 1); it != commits_.end()) held = it->second;
  std::erase_if(commits_, [&](const auto& kv) { return kv.first < version; });
  return held;
}

}  // namespace meridian
