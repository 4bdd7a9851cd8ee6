#include "crosssite/round/delta_journal.hpp"

#include <charconv>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

#include "core/util/error.hpp"

namespace meridian {
namespace {

constexpr std::string_view kPrefix = "round-";
constexpr std::string_view kSuffix = ".delta";

std::string file_name(std::int64_t round) {
  char name[40];
  std::snprintf(name, sizeof name, "round-%012lld.delta", static_cast<long long>(round));
  return name;
}

// The round a journal file's name says, or -1 for a name the journal did not write.
std::int64_t round_of(const std::string& name) {
  if (!name.starts_with(kPrefix) || !name.ends_with(kSuffix)) return -1;
  const auto digits = std::string_view(name).substr(kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size());
  std::int64_t round = -1;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), round);
  return ec == std::errc() && end == digits.data() + digits.size() ? round : -1;
}

std::vector<std::byte> read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw make_error(ErrorKind::Io, "cannot read the delta journal file ", path.string());
  std::vector<std::byte> out(bytes.size());
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

}  // namespace

FileDeltaJournal::FileDeltaJournal(std::filesystem::path dir) : dir_(std::move(dir)) {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) throw make_error(ErrorKind::Io, "cannot create the delta journal ", dir_.string(), ": ", ec.message());
}

void FileDeltaJournal::write(const Key& key, std::span<const std::byte> bytes) {
  std::error_code ec;
  std::filesystem::create_directories(dir_ / key.first, ec);
  const auto path = dir_ / key.first / file_name(key.second);
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

void FileDeltaJournal::erase_through(const std::string& site, std::int64_t round) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir_ / site, ec)) {
    const auto r = round_of(entry.path().filename().string());
    if (r >= 0 && r <= round) std::filesystem::remove(entry.path(), ec);  // one left behind is read back and dropped again
  }
}

void FileDeltaJournal::erase(const Key& key) {
  std::error_code ec;
  std::filesystem::remove(dir_ / key.first / file_name(key.second), ec);
}

std::map<DeltaJournal::Key, std::vector<std::byte>> FileDeltaJournal::load() const {
  std::map<Key, std::vector<std::byte>> out;
  std::error_code ec;
  for (const auto& site : std::filesystem::directory_iterator(dir_, ec)) {
    if (!site.is_directory()) continue;
    for (const auto& entry : std::filesystem::directory_iterator(site.path(), ec)) {
      const auto r = round_of(entry.path().filename().string());
      if (r >= 0) out[{site.path().filename().string(), r}] = read_file(entry.path());
    }
  }
  return out;
}

std::optional<std::vector<std::byte>> FileDeltaJournal::read(const Key& key) const {
  const auto path = dir_ / key.first / file_name(key.second);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return std::nullopt;
  return read_file(path);
}

}  // namespace meridian
