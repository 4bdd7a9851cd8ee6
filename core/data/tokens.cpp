#include "core/data/tokens.hpp"

#include <array>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <climits>
#include <string>

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

// An open file of known size; every failure up to this point is the outside world's, so Data.
struct OpenFile {
  std::ifstream in;
  std::uintmax_t size = 0;
};

OpenFile open_data_file(const std::filesystem::path& path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (!std::filesystem::exists(status))
    throw make_error(ErrorKind::Data, "data file ", path, " does not exist");
  if (!std::filesystem::is_regular_file(status))
    throw make_error(ErrorKind::Data, "data file ", path, " is not a regular file");
  OpenFile file;
  file.size = std::filesystem::file_size(path, ec);
  if (ec) throw make_error(ErrorKind::Data, "cannot read the size of data file ", path, ": ", ec.message());
  file.in.open(path, std::ios::binary);
  if (!file.in) throw make_error(ErrorKind::Data, "cannot open data file ", path, ": ", std::strerror(errno));
  if (file.size == 0) throw make_error(ErrorKind::Data, "data file ", path, " is empty");
  return file;
}

void read_exact(OpenFile& file, void* dst, std::size_t bytes, const std::filesystem::path& path) {
  file.in.read(static_cast<char*>(dst), static_cast<std::streamsize>(bytes));
  if (static_cast<std::size_t>(file.in.gcount()) != bytes)
    throw make_error(ErrorKind::Data, "error reading data file ", path, ": got ", file.in.gcount(), " of ",
                     bytes, " bytes");
}

TokenFile load_text(OpenFile& file, const std::filesystem::path& path) {
  std::vector<unsigned char> bytes(file.size);
  read_exact(file, bytes.data(), bytes.size(), path);
  return {std::vector<std::int32_t>(bytes.begin(), bytes.end()), 256};
}

std::int32_t le_int32(const unsigned char* p) {
  return static_cast<std::int32_t>(std::uint32_t{p[0]} | std::uint32_t{p[1]} << 8 | std::uint32_t{p[2]} << 16 |
                                   std::uint32_t{p[3]} << 24);
}

std::uint32_t le_uint(const unsigned char* p, std::size_t bytes) {
  std::uint32_t v = 0;
  for (std::size_t i = 0; i < bytes; ++i) v |= std::uint32_t{p[i]} << (8 * i);
  return v;
}

TokenFile load_llmc(OpenFile& file, const std::filesystem::path& path) {
  if (file.size < kLlmcHeaderBytes)
    throw make_error(ErrorKind::Data, "llm.c shard ", path, " is truncated: ", file.size,
                     " bytes, shorter than the ", kLlmcHeaderBytes, "-byte header");
  std::array<unsigned char, kLlmcHeaderBytes> header;
  read_exact(file, header.data(), header.size(), path);
  const std::int32_t magic = le_int32(&header[0]);
  const std::int32_t version = le_int32(&header[4]);
  const std::int32_t count = le_int32(&header[8]);
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
  if (file.size < expected)
    throw make_error(ErrorKind::Data, "llm.c shard ", path, " is truncated: the header says ", count,
                     " tokens (", expected, " bytes) but the file has ", file.size, " bytes");
  if (file.size > expected)
    throw make_error(ErrorKind::Data, "llm.c shard ", path, " has ", file.size - expected,
                     " trailing bytes after its ", count, " tokens (", expected, " bytes expected)");
  std::vector<unsigned char> raw(static_cast<std::size_t>(count) * kind.token_bytes);
  read_exact(file, raw.data(), raw.size(), path);
  TokenFile out{std::vector<std::int32_t>(static_cast<std::size_t>(count)),
                kind.token_bytes == 2 ? std::int64_t{65536} : std::int64_t{1} << 31};
  for (std::size_t i = 0; i < out.ids.size(); ++i) {
    const std::uint32_t id = le_uint(&raw[i * kind.token_bytes], kind.token_bytes);
    if (id > static_cast<std::uint32_t>(INT32_MAX))
      throw make_error(ErrorKind::Data, "llm.c shard ", path, ": token ", id, " at index ", i,
                       " is 2^31 or more (token ids are 31-bit)");
    out.ids[i] = static_cast<std::int32_t>(id);
  }
  return out;
}

}  // namespace

std::optional<DataFormat> parse_data_format(std::string_view name) {
  if (name == "text") return DataFormat::Text;
  if (name == "llmc-bin") return DataFormat::LlmcBin;
  return std::nullopt;
}

TokenFile load_token_file(const std::filesystem::path& path, DataFormat format) {
  OpenFile file = open_data_file(path);
  switch (format) {
    case DataFormat::Text: return load_text(file, path);
    case DataFormat::LlmcBin: return load_llmc(file, path);
  }
  MERIDIAN_CHECK(false, "unknown DataFormat ", static_cast<int>(format));
  return {};
}

void check_vocab(std::span<const std::int32_t> tokens, int vocab, const std::filesystem::path& source) {
  MERIDIAN_CHECK(vocab > 0, "vocab=", vocab);
  for (std::size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] >= vocab || tokens[i] < 0)
      throw make_error(ErrorKind::Data, "data file ", source, ": token ", tokens[i], " at index ", i,
                       " is outside the model's vocabulary of ", vocab);
}

void check_vocab(const TokenFile& file, int vocab, const std::filesystem::path& source) {
  if (file.id_space == 65536 && vocab > file.id_space)
    throw make_error(ErrorKind::Data, "data file ", source, " holds 16-bit token ids (llm.c version 1), which address ",
                     file.id_space, " tokens, but the model's vocabulary has ", vocab,
                     ": the data was tokenized for another vocabulary (32-bit shards are llm.c's version 7)");
  check_vocab(file.ids, vocab, source);
}

TrainVal split_train_val(std::vector<std::int32_t> tokens, double val_fraction) {
  if (!(val_fraction >= 0.0 && val_fraction < 1.0))
    throw make_error(ErrorKind::Config, "val_fraction is ", val_fraction, ", expected a value in [0, 1)");
  // Rounding (not truncation) keeps e.g. 0.1 of 1000 tokens at exactly 100 despite binary fractions.
  const auto n_val = static_cast<std::size_t>(std::llround(static_cast<double>(tokens.size()) * val_fraction));
  const std::size_t n_train = tokens.size() - n_val;
  TrainVal out;
  out.val.assign(tokens.begin() + static_cast<std::ptrdiff_t>(n_train), tokens.end());
  tokens.resize(n_train);
  out.train = std::move(tokens);
  return out;
}

}  // namespace meridian
