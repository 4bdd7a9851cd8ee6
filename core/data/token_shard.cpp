#include "core/data/token_shard.hpp"

#include <climits>
#include <algorithm>
#include <cstring>
#include <fstream>
#include <vector>

#include "core/util/error.hpp"

namespace meridian {

namespace {

// llm.c's two token widths (dev/data/data_common.py, HEADERS_INFO).
struct LlmcKind {
  std::int32_t magic, version;
  std::size_t token_bytes;
};
constexpr LlmcKind kLlmc16{20240520, 1, 2};
constexpr LlmcKind kLlmc32{20240801, 7, 4};
constexpr std::size_t kLlmcHeaderBytes = 256 * sizeof(std::int32_t);

std::int32_t le_int32(const unsigned char* p) {
  return static_cast<std::int32_t>(std::uint32_t{p[0]} | std::uint32_t{p[1]} << 8 | std::uint32_t{p[2]} << 16 |
                                   std::uint32_t{p[3]} << 24);
}

// Every failure here is the outside world's (the file as the user gave it), so Data.
void check_regular_file(const std::filesystem::path& path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (!std::filesystem::exists(status)) throw make_error(ErrorKind::Data, "data file ", path, " does not exist");
  if (!std::filesystem::is_regular_file(status))
    throw make_error(ErrorKind::Data, "data file ", path, " is not a regular file");
}

MappedFile map_data_file(const std::filesystem::path& path) {
  check_regular_file(path);
  try {
    MappedFile file = MappedFile::open(path);
    if (file.bytes().empty()) throw make_error(ErrorKind::Data, "data file ", path, " is empty");
    return file;
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::Data) throw;
    throw make_error(ErrorKind::Data, "cannot read data file ", path, ": ", e.what());
  }
}

// The llm.c header's kind and token count; Error(Data) for anything llm.c would not write.
std::pair<LlmcKind, std::uint64_t> read_llmc_header(const MappedFile& file) {
  const auto& path = file.path();
  const auto bytes = file.bytes();
  if (bytes.size() < kLlmcHeaderBytes)
    throw make_error(ErrorKind::Data, "llm.c shard ", path, " is truncated: ", bytes.size(),
                     " bytes, shorter than the ", kLlmcHeaderBytes, "-byte header");
  const auto* header = reinterpret_cast<const unsigned char*>(bytes.data());
  const std::int32_t magic = le_int32(header), version = le_int32(header + 4), count = le_int32(header + 8);
  if (magic != kLlmc16.magic && magic != kLlmc32.magic)
    throw make_error(ErrorKind::Data, "llm.c shard ", path, " has a bad header: magic is ", magic, ", expected ",
                     kLlmc16.magic, " (16-bit tokens) or ", kLlmc32.magic, " (32-bit tokens)");
  const LlmcKind& kind = magic == kLlmc16.magic ? kLlmc16 : kLlmc32;
  if (version != kind.version)
    throw make_error(ErrorKind::Data, "llm.c shard ", path, " has a bad header: version is ", version,
                     ", expected ", kind.version, " with magic ", magic);
  if (count <= 0)
    throw make_error(ErrorKind::Data, "llm.c shard ", path, " has a bad header: token count is ", count,
                     ", expected > 0");
  const std::uintmax_t expected = kLlmcHeaderBytes + kind.token_bytes * std::uintmax_t(count);
  if (bytes.size() < expected)
    throw make_error(ErrorKind::Data, "llm.c shard ", path, " is truncated: the header says ", count,
                     " tokens (", expected, " bytes) but the file has ", bytes.size(), " bytes");
  if (bytes.size() > expected)
    throw make_error(ErrorKind::Data, "llm.c shard ", path, " has ", bytes.size() - expected,
                     " trailing bytes after its ", count, " tokens (", expected, " bytes expected)");
  return {kind, static_cast<std::uint64_t>(count)};
}

}  // namespace

std::optional<DataFormat> parse_data_format(std::string_view name) {
  if (name == "text") return DataFormat::Text;
  if (name == "llmc-bin") return DataFormat::LlmcBin;
  return std::nullopt;
}

void check_id_space(std::int64_t id_space, int vocab, const std::filesystem::path& path) {
  if (id_space == 65536 && vocab > id_space)
    throw make_error(ErrorKind::Data, "data file ", path, " holds 16-bit token ids (llm.c version 1), which address ",
                     id_space, " tokens, but the model's vocabulary has ", vocab,
                     ": the data was tokenized for another vocabulary (32-bit shards are llm.c's version 7)");
}

TokenShard TokenShard::open(const std::filesystem::path& path, DataFormat format) {
  MappedFile file = map_data_file(path);
  if (format == DataFormat::Text) {
    const std::uint64_t n = file.bytes().size();
    return TokenShard(std::move(file), 0, 1, n);
  }
  const auto [kind, count] = read_llmc_header(file);
  return TokenShard(std::move(file), kLlmcHeaderBytes, kind.token_bytes, count);
}

TokenShard::TokenShard(MappedFile file, std::size_t header_bytes, std::size_t token_bytes, std::uint64_t count)
    : file_(std::move(file)),
      header_bytes_(header_bytes),
      token_bytes_(token_bytes),
      count_(count),
      id_space_(token_bytes == 1 ? 256 : token_bytes == 2 ? 65536 : std::int64_t{1} << 31) {
  file_.advise_random();
}

namespace {

// Little-endian ids of `width` bytes, as llm.c writes them.
void decode_ids(const unsigned char* p, std::uint64_t n, std::size_t width, std::int32_t* out) {
  for (std::uint64_t i = 0; i < n; ++i, p += width) {
    std::uint32_t v = 0;
    for (std::size_t b = 0; b < width; ++b) v |= std::uint32_t{p[b]} << (8 * b);
    out[i] = static_cast<std::int32_t>(v);  // 2^31 and more wrap negative: check_vocab refuses them
  }
}

}  // namespace

void TokenShard::copy(std::uint64_t begin, std::uint64_t n, std::int32_t* out) const {
  MERIDIAN_CHECK(begin <= count_ && n <= count_ - begin, "tokens [", begin, ", ", begin + n, ") of ", count_, " in ",
                 path().string());
  const std::size_t offset = header_bytes_ + begin * token_bytes_;
  decode_ids(reinterpret_cast<const unsigned char*>(file_.bytes().data()) + offset, n, token_bytes_, out);
  file_.release_pages(offset, n * token_bytes_);
}

// Read through a buffer, not the mapping: the pass over every token leaves no page of the file in
// this process's resident memory.
void TokenShard::check_vocab(int vocab) const {
  MERIDIAN_CHECK(vocab > 0, "vocab=", vocab);
  check_id_space(id_space_, vocab, path());
  std::ifstream in(path(), std::ios::binary);
  in.seekg(static_cast<std::streamoff>(header_bytes_));
  constexpr std::uint64_t kChunk = 1 << 18;
  std::vector<unsigned char> raw(kChunk * token_bytes_);
  std::vector<std::int32_t> ids(kChunk);
  for (std::uint64_t at = 0; at < count_; at += kChunk) {
    const std::uint64_t n = std::min(kChunk, count_ - at);
    if (!in.read(reinterpret_cast<char*>(raw.data()), static_cast<std::streamsize>(n * token_bytes_)))
      throw make_error(ErrorKind::Data, "data file ", path(), " could not be read at token ", at);
    decode_ids(raw.data(), n, token_bytes_, ids.data());
    for (std::uint64_t i = 0; i < n; ++i)
      if (ids[i] >= vocab || ids[i] < 0)
        throw make_error(ErrorKind::Data, "data file ", path(), ": token ", static_cast<std::uint32_t>(ids[i]),
                         " at index ", at + i, " is outside the model's vocabulary of ", vocab);
  }
}

}  // namespace meridian
