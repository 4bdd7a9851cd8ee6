#include "crosssite/round/delta_journal.hpp"

#include <charconv>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <string_view>

#include "core/util/error.hpp"
#include "crosssite/codec/codec_parts.hpp"

namespace meridian {
namespace {

constexpr std::string_view kPrefix = "round-";
constexpr std::string_view kSuffix = ".delta";

constexpr std::string_view kRecordPrefix = "commit-";
constexpr std::string_view kRecordSuffix = ".record";

// `prefix`, `n` in twelve digits, `suffix`: a journal file's name.
std::string numbered(std::string_view prefix, std::int64_t n, std::string_view suffix) {
  char digits[24];
  std::snprintf(digits, sizeof digits, "%012lld", static_cast<long long>(n));
  return std::string(prefix) + digits + std::string(suffix);
}

// What `name` holds between `prefix` and `suffix`, if it has both.
std::optional<std::string_view> between(const std::string& name, std::string_view prefix, std::string_view suffix) {
  if (name.size() < prefix.size() + suffix.size() || !name.starts_with(prefix) || !name.ends_with(suffix))
    return std::nullopt;
  return std::string_view(name).substr(prefix.size(), name.size() - prefix.size() - suffix.size());
}

std::string file_name(std::int64_t round) { return numbered(kPrefix, round, kSuffix); }

std::string part_name(std::int64_t round, int index, int count) {
  char name[64];
  std::snprintf(name, sizeof name, "round-%012lld-part-%d-of-%d.delta", static_cast<long long>(round), index, count);
  return name;
}

// What a journal file's name says: its round (-1 for a name the journal did not write) and, for a
// part, its index and count (-1 for a whole delta).
struct FileName {
  std::int64_t round = -1;
  int index = -1, count = -1;
};

// The number at the front of `text`, the rest after it.
template <typename T>
std::optional<T> number(std::string_view& text) {
  T value{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end == text.data()) return std::nullopt;
  text.remove_prefix(static_cast<std::size_t>(end - text.data()));
  return value;
}

FileName parse(const std::string& name) {
  const auto inner = between(name, kPrefix, kSuffix);
  if (!inner) return {};
  std::string_view rest = *inner;
  const auto round = number<std::int64_t>(rest);
  if (!round || *round < 0) return {};
  if (rest.empty()) return {*round};
  constexpr std::string_view kPart = "-part-", kOf = "-of-";
  if (!rest.starts_with(kPart)) return {};
  rest.remove_prefix(kPart.size());
  const auto index = number<int>(rest);
  if (!index || !rest.starts_with(kOf)) return {};
  rest.remove_prefix(kOf.size());
  const auto count = number<int>(rest);
  if (!count || !rest.empty() || *index < 0 || *index >= *count) return {};
  return {*round, *index, *count};
}

std::string record_name(std::int64_t version) { return numbered(kRecordPrefix, version, kRecordSuffix); }

// The version a record file's name says, or -1 for a name the journal did not write.
std::int64_t record_version(const std::string& name) {
  auto rest = between(name, kRecordPrefix, kRecordSuffix);
  if (!rest) return -1;
  const auto version = number<std::int64_t>(*rest);
  return version && rest->empty() && *version >= 0 ? *version : -1;
}

std::vector<std::byte> read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw make_error(ErrorKind::Io, "cannot read the delta journal file ", path.string());
  std::vector<std::byte> out(bytes.size());
  if (!bytes.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

}  // namespace

std::optional<std::vector<std::byte>> joined_parts(const JournalParts& parts) {
  for (auto it = parts.begin(); it != parts.end();) {
    const int count = it->first.first;
    std::vector<std::vector<std::byte>> cut;
    for (; it != parts.end() && it->first.first == count; ++it)
      if (it->first.second == static_cast<int>(cut.size())) cut.push_back(it->second);
    if (static_cast<int>(cut.size()) != count) continue;
    try {
      return join_encoded(cut);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::Peer) throw;  // parts that do not join: none of this cut
    }
  }
  return std::nullopt;
}

void MemoryDeltaJournal::write_part(const Key& key, int index, int count, std::span<const std::byte> bytes) {
  parts_[key][{count, index}].assign(bytes.begin(), bytes.end());
}

void MemoryDeltaJournal::erase_through(const std::string& site, std::int64_t round) {
  const auto done = [&](const auto& kv) { return kv.first.first == site && kv.first.second <= round; };
  std::erase_if(deltas_, done);
  std::erase_if(parts_, done);
}

void MemoryDeltaJournal::erase(const Key& key) {
  deltas_.erase(key);
  parts_.erase(key);
}

std::map<DeltaJournal::Key, std::vector<std::byte>> MemoryDeltaJournal::load() const {
  auto out = deltas_;
  for (const auto& [key, parts] : parts_)
    if (!out.contains(key))
      if (auto whole = joined_parts(parts)) out[key] = std::move(*whole);
  return out;
}

std::optional<std::vector<std::byte>> MemoryDeltaJournal::read(const Key& key) const {
  if (const auto it = deltas_.find(key); it != deltas_.end()) return it->second;
  const auto it = parts_.find(key);
  return it == parts_.end() ? std::nullopt : joined_parts(it->second);
}

FileDeltaJournal::FileDeltaJournal(std::filesystem::path dir) : dir_(std::move(dir)) {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) throw make_error(ErrorKind::Io, "cannot create the delta journal ", dir_.string(), ": ", ec.message());
}

void FileDeltaJournal::put(const std::filesystem::path& path, std::span<const std::byte> bytes) const {
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  auto tmp = path;
  tmp += ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (!out.flush()) throw make_error(ErrorKind::Io, "cannot write the delta journal file ", tmp.string());
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw make_error(ErrorKind::Io, "cannot move ", tmp.string(), " into place: ", ec.message());
}

void FileDeltaJournal::write(const Key& key, std::span<const std::byte> bytes) {
  put(dir_ / key.first / file_name(key.second), bytes);
}

void FileDeltaJournal::write_part(const Key& key, int index, int count, std::span<const std::byte> bytes) {
  MERIDIAN_CHECK(index >= 0 && index < count, "part ", index, " of ", count);
  put(dir_ / key.first / part_name(key.second, index, count), bytes);
}

void FileDeltaJournal::erase_through(const std::string& site, std::int64_t round) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir_ / site, ec)) {
    const auto r = parse(entry.path().filename().string()).round;
    if (r >= 0 && r <= round) std::filesystem::remove(entry.path(), ec);  // one left behind is read back and dropped again
  }
}

void FileDeltaJournal::erase(const Key& key) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir_ / key.first, ec))
    if (parse(entry.path().filename().string()).round == key.second) std::filesystem::remove(entry.path(), ec);
}

std::map<DeltaJournal::Key, std::vector<std::byte>> FileDeltaJournal::load() const {
  std::map<Key, std::vector<std::byte>> out;
  std::map<Key, JournalParts> parts;
  std::error_code ec;
  for (const auto& site : std::filesystem::directory_iterator(dir_, ec)) {
    if (!site.is_directory()) continue;
    for (const auto& entry : std::filesystem::directory_iterator(site.path(), ec)) {
      const auto name = parse(entry.path().filename().string());
      if (name.round < 0) continue;
      const Key key{site.path().filename().string(), name.round};
      if (name.count < 0)
        out[key] = read_file(entry.path());
      else
        parts[key][{name.count, name.index}] = read_file(entry.path());
    }
  }
  for (const auto& [key, cut] : parts)
    if (!out.contains(key))
      if (auto whole = joined_parts(cut)) out[key] = std::move(*whole);
  return out;
}

std::optional<std::vector<std::byte>> FileDeltaJournal::read(const Key& key) const {
  const auto path = dir_ / key.first / file_name(key.second);
  std::error_code ec;
  if (std::filesystem::is_regular_file(path, ec)) return read_file(path);
  JournalParts parts;
  for (const auto& entry : std::filesystem::directory_iterator(dir_ / key.first, ec)) {
    const auto name = parse(entry.path().filename().string());
    if (name.round == key.second && name.count > 0) parts[{name.count, name.index}] = read_file(entry.path());
  }
  return joined_parts(parts);
}

void MemoryDeltaJournal::erase_records_before(std::int64_t version) {
  std::erase_if(records_, [&](const auto& r) { return r.first < version; });
}

void FileDeltaJournal::write_record(std::int64_t version, const std::string& bytes) {
  put(dir_ / record_name(version), std::as_bytes(std::span(bytes.data(), bytes.size())));
}

void FileDeltaJournal::erase_records_before(std::int64_t version) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
    const auto v = record_version(entry.path().filename().string());
    if (v >= 0 && v < version) std::filesystem::remove(entry.path(), ec);  // one left behind goes next time
  }
}

std::map<std::int64_t, std::string> FileDeltaJournal::records() const {
  std::map<std::int64_t, std::string> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
    const auto v = record_version(entry.path().filename().string());
    if (v < 0 || !entry.is_regular_file()) continue;
    const auto bytes = read_file(entry.path());
    out[v].assign(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  }
  return out;
}

}  // namespace meridian
