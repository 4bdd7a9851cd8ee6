#pragma once
// The journal as the round code writes it: a site's entries are erased only once they are safe to
// lose. A site restarts from its checkpoint, and must then be able to apply again every version
// it had applied since, with its own deltas and the peers' that those versions merged. So an
// entry goes (at the callers' erase_through, which keeps a window of rounds) only once a version
// that merged its round is in the site's checkpoint (durable()). Keeping the window alone lost the
// only copy of a site's own delta when it applied a burst of versions after a partition and
// crashed before its next checkpoint (protocol simulator, seeds 38784 and 91534, once the simulated
// network dropped what a stopped peer's queue had no room for).
// A site that writes no checkpoints restarts from nothing: its journal keeps the window alone.
// The commit records the site applied follow the same rule: those of versions a checkpoint holds
// go, but the checkpoint's own.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "crosssite/round/delta_journal.hpp"

namespace meridian {

class DurableJournal final : public DeltaJournal {
 public:
  DurableJournal(std::shared_ptr<DeltaJournal> inner, bool checkpoints) : inner_(std::move(inner)), checkpoints_(checkpoints) {}

  // Version `version` holds each site's rounds through merged[site] (a record's `merged`).
  void merged(std::int64_t version, const std::map<std::string, std::int64_t>& merged);
  // The site's checkpoint now holds `version`: the rounds it merged need the journal no more.
  void durable(std::int64_t version);
  // The newest round of `site` the journal may lose; -1 before any.
  std::int64_t floor(const std::string& site) const;

  void write(const Key& key, std::span<const std::byte> bytes) override { inner_->write(key, bytes); }
  void write_part(const Key& key, int index, int count, std::span<const std::byte> bytes) override {
    inner_->write_part(key, index, count, bytes);
  }
  // Erases no round above floor(site).
  void erase_through(const std::string& site, std::int64_t round) override;
  void erase(const Key& key) override { inner_->erase(key); }
  std::map<Key, std::vector<std::byte>> load() const override { return inner_->load(); }
  std::optional<std::vector<std::byte>> read(const Key& key) const override { return inner_->read(key); }
  // Records go once a checkpoint holds a newer version (durable()), or, without checkpoints, past
  // the newest kRecordsWithoutCheckpoints.
  void write_record(std::int64_t version, const std::string& bytes) override;
  void erase_records_before(std::int64_t version) override { inner_->erase_records_before(version); }
  std::map<std::int64_t, std::string> records() const override { return inner_->records(); }
  static constexpr std::int64_t kRecordsWithoutCheckpoints = 64;

 private:
  std::shared_ptr<DeltaJournal> inner_;
  bool checkpoints_;
  std::map<std::int64_t, std::map<std::string, std::int64_t>> pending_;  // by version, not in a checkpoint yet
  std::map<std::string, std::int64_t> floor_;
};

}  // namespace meridian
