#include "crosssite/round/commit_log.hpp"

#include <algorithm>
#include <span>

#include "core/util/error.hpp"

namespace meridian {

namespace {

// The record at `key`, or Error(Peer) when it is not one the job can apply there.
CommitRecord decode_at(const RoundKeys& keys, int fragments, const std::string& key, const std::string& value) {
  CommitRecord record = decode_commit(value);
  const bool fragments_ok = record.fragment < fragments &&
                            (record.screens.empty() || record.screens.size() == static_cast<std::size_t>(fragments)) &&
                            std::all_of(record.entries.begin(), record.entries.end(),
                                        [&](const CommitEntry& e) { return e.fragment < fragments; });
  if (key != keys.commit(record.number) || record.entries.empty() || !fragments_ok)
    throw make_error(ErrorKind::Peer, "commit record ", key, " is for version ", record.number, " with ",
                     record.entries.size(), " entries",
                     fragments_ok ? "" : ", fragments the job has not (its turn, an entry's, or its screens')");
  return record;
}

}  // namespace

void CommitLog::read(ControlPlane& control, CrossSiteEvents& events) {
  const auto read = control.get_prefix_since(keys_.commits(), revision_ + 1);
  revision_ = read.revision;
  for (const auto& [key, value] : read.kvs) {
    try {
      auto record = decode_at(keys_, fragments_, key, value);
      newest_ = std::max(newest_, record.number);  // committed, even if another record was read (or recalled) there
      if (!first_read(key, value, record, events)) continue;
      unreadable_.erase(record.number);
      bytes_[record.number] = value;
      commits_[record.number] = std::move(record);
    } catch (const Error& e) {
      const auto version = keys_.version_of_commit(key);
      if (version) unreadable_[*version] = value;
      events.push_back({"commit_unreadable", "", version.value_or(0), e.what()});
    }
  }
}

void CommitLog::recall(const std::map<std::int64_t, std::string>& applied) {
  for (const auto& [version, value] : applied) {
    CommitRecord record;
    try {
      record = decode_at(keys_, fragments_, keys_.commit(version), value);
    } catch (const Error&) {
      continue;
    }
    first_read_[version] = sha256(std::as_bytes(std::span(value.data(), value.size())));
    bytes_[version] = value;
    commits_[version] = std::move(record);
  }
}

const std::string* CommitLog::bytes(std::int64_t version) const {
  const auto it = bytes_.find(version);
  return it == bytes_.end() ? nullptr : &it->second;
}

bool CommitLog::first_read(const std::string& key, const std::string& value, const CommitRecord& record,
                           CrossSiteEvents& events) {
  const Digest digest = sha256(std::as_bytes(std::span(value.data(), value.size())));
  const auto [first, fresh] = first_read_.try_emplace(record.number, digest);
  if (fresh) return true;
  if (first->second == digest) {
    unreadable_.erase(record.number);  // junk over it, then the same record put back
    return false;
  }
  events.push_back({"commit_rewritten", "", record.number,
                    "the record at " + key + " changed after this site read it (SHA-256 " + short_hex(first->second) +
                        ", now " + short_hex(digest) + ", naming " + record.proposer +
                        " as proposer); the first one stands"});
  written_over_[record.number] = value;
  return false;
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
  if (!held_from_) held_from_ = version - 1;
  for (auto it = commits_.begin(); it != commits_.end() && it->first < version;) {
    if (it->first >= *held_from_)
      held_.insert(*it);
    else
      bytes_.erase(it->first);
    it = commits_.erase(it);
  }
  if (!keeps_held_) keep_from(version - 1);
  return held;
}

void CommitLog::keep_from(std::int64_t version) {
  held_from_ = std::max(held_from_.value_or(version), version);
  std::erase_if(held_, [&](const auto& kv) { return kv.first < *held_from_; });
  std::erase_if(bytes_, [&](const auto& kv) { return kv.first < *held_from_; });
}

std::optional<Digest> CommitLog::digest(std::int64_t version) const {
  const auto it = first_read_.find(version);
  return it == first_read_.end() ? std::nullopt : std::optional(it->second);
}

std::optional<CommitLog::Contradiction> CommitLog::contradiction(std::int64_t version, std::int64_t vouched,
                                                                 const Digest& digest) const {
  if (vouched < version) return std::nullopt;
  Digest want = digest;
  for (std::int64_t v = vouched;; --v) {
    const auto read = first_read_.find(v);
    if (read == first_read_.end()) return std::nullopt;
    if (read->second != want)
      return Contradiction{v, "the record of version " + std::to_string(v) + " read here (SHA-256 " +
                                  short_hex(read->second) + ") is not the one vouched for (" + short_hex(want) + ")"};
    if (v == version) return std::nullopt;
    const CommitRecord* r = record(v);
    if (r == nullptr || r->previous == Digest{}) return std::nullopt;
    want = r->previous;
  }
}

std::optional<Digest> CommitLog::held_as(std::int64_t version, const Digest& digest) {
  std::optional<Digest> other;
  if (const auto read = first_read_.find(version); read != first_read_.end() && read->second != digest) {
    other = read->second;
    commits_.erase(version);
    held_.erase(version);
    bytes_.erase(version);
  }
  first_read_[version] = digest;
  return other;
}

void CommitLog::forget_read(std::int64_t version) {
  first_read_.erase(version);
  commits_.erase(version);
  bytes_.erase(version);
}

void CommitLog::repair(ControlPlane& control, CrossSiteEvents& events) {
  for (auto it = written_over_.begin(); it != written_over_.end();) {
    const std::int64_t v = it->first;
    // Only a record this site applied (a site that read another first, not applied yet, is no
    // judge of which one stands), and once: not two sites putting back two records in turn.
    const auto first = bytes_.find(v);
    if (!held_.contains(v) || first == bytes_.end()) {
      it = v < held_from_.value_or(0) ? written_over_.erase(it) : std::next(it);
      continue;
    }
    if (!repaired_.contains(v)) {
      const bool back = control.compare_and_swap(keys_.commit(v), it->second, first->second);  // throws: kept
      repaired_.insert(v);
      if (back)
        events.push_back({"commit_restored", "", v, "the record this site applied is back at " + keys_.commit(v)});
    }
    it = written_over_.erase(it);
  }
}

const CommitRecord* CommitLog::record(std::int64_t version) const {
  if (const CommitRecord* r = find(version)) return r;
  const auto it = held_.find(version);
  return it == held_.end() ? nullptr : &it->second;
}

}  // namespace meridian
