#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/data/tokens.hpp"
#include "core/util/error.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/token_shards.hpp"

using namespace meridian;
using meridian::testing::TempDir;
using meridian::testing::shard;
using meridian::testing::write_bytes;

namespace {

// Data errors must name the file and the problem.
void check_data_error(const std::filesystem::path& path, DataFormat format, const std::string& needle) {
  try {
    load_tokens(path, format);
    FAIL("no error for ", path, " (expected \"", needle, "\")");
  } catch (const Error& e) {
    const std::string msg = e.what();
    CHECK(e.kind() == ErrorKind::Data);
    CHECK_MESSAGE(msg.find(path.filename().string()) != std::string::npos, msg);
    CHECK_MESSAGE(msg.find(needle) != std::string::npos, msg);
  }
}

}  // namespace

TEST_CASE("parse_data_format accepts exactly the two names") {
  CHECK(parse_data_format("text") == DataFormat::Text);
  CHECK(parse_data_format("llmc-bin") == DataFormat::LlmcBin);
  CHECK_FALSE(parse_data_format("bin").has_value());
  CHECK_FALSE(parse_data_format("Text").has_value());
}

TEST_CASE("text files load as bytes") {
  TempDir dir("data");
  write_bytes(dir / "a.txt", std::string("hi\n\xff", 4));
  CHECK(load_tokens(dir / "a.txt", DataFormat::Text) == std::vector<std::int32_t>{'h', 'i', '\n', 255});
}

TEST_CASE("llmc-bin round trip keeps every 16-bit value") {
  TempDir dir("data");
  const std::vector<std::uint32_t> tokens{0, 1, 255, 256, 50256, 65535, 7};
  write_bytes(dir / "s.bin", shard(tokens));
  const TokenFile file = load_token_file(dir / "s.bin", DataFormat::LlmcBin);
  CHECK(file.ids == std::vector<std::int32_t>(tokens.begin(), tokens.end()));
  CHECK(file.id_space == 65536);
}

TEST_CASE("llm.c's 32-bit shards (magic 20240801, version 7) load beside the 16-bit ones") {
  TempDir dir("data");
  const std::vector<std::uint32_t> tokens{0, 65535, 65536, 128255, 2147483647u, 7};
  write_bytes(dir / "s.bin", shard(tokens, 20240801, 7));
  const TokenFile file = load_token_file(dir / "s.bin", DataFormat::LlmcBin);
  CHECK(file.ids == std::vector<std::int32_t>(tokens.begin(), tokens.end()));
  CHECK(file.id_space == std::int64_t{1} << 31);
  write_bytes(dir / "big.bin", shard({1, 2147483648u, 3}, 20240801, 7));
  check_data_error(dir / "big.bin", DataFormat::LlmcBin, "token 2147483648 at index 1 is 2^31 or more");
  write_bytes(dir / "short.bin", shard({1, 2, 3}, 20240801, 7).substr(0, 1024 + 10));
  check_data_error(dir / "short.bin", DataFormat::LlmcBin, "truncated: the header says 3 tokens (1036 bytes)");
  write_bytes(dir / "mixed.bin", shard({1, 2, 3}, 20240801, 1));
  check_data_error(dir / "mixed.bin", DataFormat::LlmcBin, "version is 1, expected 7 with magic 20240801");
}

TEST_CASE("a model's vocabulary that 16-bit shards cannot address is refused, naming both") {
  TempDir dir("data");
  write_bytes(dir / "gpt2.bin", shard({1, 2, 3}));
  const TokenFile file = load_token_file(dir / "gpt2.bin", DataFormat::LlmcBin);
  CHECK_NOTHROW(check_vocab(file, 65536, dir / "gpt2.bin"));
  try {
    check_vocab(file, 128256, dir / "gpt2.bin");
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Data);
    CHECK(std::string(e.what()).find("16-bit token ids") != std::string::npos);
    CHECK(std::string(e.what()).find("128256") != std::string::npos);
  }
}

TEST_CASE("llmc-bin header and size errors say what is wrong") {
  TempDir dir("data");
  const std::vector<std::uint32_t> tokens{1, 2, 3, 4};
  const auto check = [&](const std::string& name, const std::string& bytes, const std::string& needle) {
    write_bytes(dir / name, bytes);
    check_data_error(dir / name, DataFormat::LlmcBin, needle);
  };
  check("short.bin", std::string(100, '\0'), "shorter than the 1024-byte header");
  check("magic.bin", shard(tokens, 12345), "magic is 12345, expected 20240520 (16-bit tokens) or 20240801");
  check("version.bin", shard(tokens, 20240520, 2), "version is 2, expected 1 with magic 20240520");
  check("zero.bin", shard(tokens, 20240520, 1, 0), "token count is 0, expected > 0");
  check("negative.bin", shard(tokens, 20240520, 1, -5), "token count is -5");
  check("truncated.bin", shard(tokens, 20240520, 1, 5), "truncated: the header says 5 tokens");
  check("trailing.bin", shard(tokens) + "abc", "3 trailing bytes");
}

TEST_CASE("missing, empty and non-regular files are data errors") {
  TempDir dir("data");
  write_bytes(dir / "empty.txt", "");
  check_data_error(dir / "empty.txt", DataFormat::Text, "is empty");
  check_data_error(dir / "empty.txt", DataFormat::LlmcBin, "is empty");
  check_data_error(dir / "nope.bin", DataFormat::LlmcBin, "does not exist");
  std::filesystem::create_directory(dir / "sub.txt");
  check_data_error(dir / "sub.txt", DataFormat::Text, "not a regular file");
}

TEST_CASE("check_vocab names the first token outside the vocabulary") {
  const std::vector<std::int32_t> tokens{5, 9, 300, 1, 400};
  CHECK_NOTHROW(check_vocab(tokens, 401, "x.bin"));
  try {
    check_vocab(tokens, 256, "shard_7.bin");
    FAIL("no error");
  } catch (const Error& e) {
    const std::string msg = e.what();
    CHECK(e.kind() == ErrorKind::Data);
    CHECK_MESSAGE(msg.find("shard_7.bin") != std::string::npos, msg);
    CHECK_MESSAGE(msg.find("token 300 at index 2") != std::string::npos, msg);
  }
}
