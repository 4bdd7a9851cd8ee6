#pragma once
// The deltas a site may need after a restart, on its disk: its own latest ones (written before any
// peer can see them) and the peers' ones of the versions it applied (written before it applies
// them). A site restarts from a checkpoint that may be versions old; with its journal it can still
// apply every version it had applied, and hand out every delta of its own that a commit lists.
// Without it, a site that was the only holder of a version (or of its own delta in a commit) left
// a committed version nobody could ever apply, and the whole job waited for it for good (found by
// the protocol simulator, docs/simulator.md). Each site's entries are kept for its latest
// CrossSiteOptions::keep_own_rounds rounds.
// A sharded site that holds a peer's delta in parts (crosssite/round/held_parts.hpp) has no bytes
// of it at its leader: each replica journals its own part, and the journal gives the delta back
// whole once every part of one cut is there.
// FileDeltaJournal is the real one (a file per delta under the site's run directory, written whole
// then renamed into place); MemoryDeltaJournal is the simulator's disk.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace meridian {

class DeltaJournal {
 public:
  using Key = std::pair<std::string, std::int64_t>;  // (site, round)
  virtual ~DeltaJournal() = default;
  virtual void write(const Key& key, std::span<const std::byte> bytes) = 0;
  // Part `index` of `count` of a delta (a replica's own under its group's cut). load() and read()
  // give the delta whole, its parts joined (codec_parts' join_encoded), once every part of one
  // count is here, unless the delta itself is; a part that does not join is passed over (every
  // entry is checked against its digest before use anyway). erase() and erase_through() take the
  // parts too.
  virtual void write_part(const Key& key, int index, int count, std::span<const std::byte> bytes) = 0;
  // Forgets `site`'s rounds up to and including `round`.
  virtual void erase_through(const std::string& site, std::int64_t round) = 0;
  virtual void erase(const Key& key) = 0;
  virtual std::map<Key, std::vector<std::byte>> load() const = 0;
  // One entry; nullopt when the journal does not hold it.
  virtual std::optional<std::vector<std::byte>> read(const Key& key) const = 0;

  // The commit record of a version the site applies, its bytes as read from the control plane:
  // after a restart the site knows which record it applied, and puts it back should a member have
  // written another over it meanwhile (CommitLog::recall).
  virtual void write_record(std::int64_t version, const std::string& bytes) = 0;
  virtual void erase_records_before(std::int64_t version) = 0;
  virtual std::map<std::int64_t, std::string> records() const = 0;
};

// A delta's parts in a journal, by (count, index); the whole of the first count all of whose parts
// are here, joined, or nothing.
using JournalParts = std::map<std::pair<int, int>, std::vector<std::byte>>;
std::optional<std::vector<std::byte>> joined_parts(const JournalParts& parts);

class MemoryDeltaJournal final : public DeltaJournal {
 public:
  void write(const Key& key, std::span<const std::byte> bytes) override { deltas_[key].assign(bytes.begin(), bytes.end()); }
  void write_part(const Key& key, int index, int count, std::span<const std::byte> bytes) override;
  void erase_through(const std::string& site, std::int64_t round) override;
  void erase(const Key& key) override;
  std::map<Key, std::vector<std::byte>> load() const override;
  std::optional<std::vector<std::byte>> read(const Key& key) const override;
  void write_record(std::int64_t version, const std::string& bytes) override { records_[version] = bytes; }
  void erase_records_before(std::int64_t version) override;
  std::map<std::int64_t, std::string> records() const override { return records_; }

 private:
  std::map<Key, std::vector<std::byte>> deltas_;
  std::map<Key, JournalParts> parts_;
  std::map<std::int64_t, std::string> records_;
};

// Error(Io) naming the file when one cannot be written or read; a file the journal did not write
// (another name, a partial write's temporary) is left alone.
class FileDeltaJournal final : public DeltaJournal {
 public:
  explicit FileDeltaJournal(std::filesystem::path dir);
  void write(const Key& key, std::span<const std::byte> bytes) override;
  void write_part(const Key& key, int index, int count, std::span<const std::byte> bytes) override;
  void erase_through(const std::string& site, std::int64_t round) override;
  void erase(const Key& key) override;
  std::map<Key, std::vector<std::byte>> load() const override;
  std::optional<std::vector<std::byte>> read(const Key& key) const override;
  // Files beside the sites' folders: commit-<version>.record.
  void write_record(std::int64_t version, const std::string& bytes) override;
  void erase_records_before(std::int64_t version) override;
  std::map<std::int64_t, std::string> records() const override;

 private:
  // A file written whole, then renamed into place.
  void put(const std::filesystem::path& path, std::span<const std::byte> bytes) const;

  std::filesystem::path dir_;
};

}  // namespace meridian
