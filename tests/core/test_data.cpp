#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/data/sampler.hpp"
#include "core/data/tokens.hpp"
#include "core/util/error.hpp"
#include "tests/support/temp_dir.hpp"

using namespace meridian;
using meridian::testing::TempDir;

namespace {

void write_bytes(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

void put_le(std::string& out, std::uint32_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>(v >> (8 * i) & 0xFF));
}

// An llm.c shard with the given header fields, written byte by byte so the test does not share
// the loader's assumptions about layout or endianness.
// Magic 20240520 is llm.c's 16-bit layout (version 1), 20240801 its 32-bit one (version 7).
std::string shard(const std::vector<std::uint32_t>& tokens, std::int32_t magic = 20240520, std::int32_t version = 1,
                  std::optional<std::int32_t> count = std::nullopt) {
  std::string out;
  put_le(out, static_cast<std::uint32_t>(magic), 4);
  put_le(out, static_cast<std::uint32_t>(version), 4);
  put_le(out, static_cast<std::uint32_t>(count.value_or(static_cast<std::int32_t>(tokens.size()))), 4);
  out.resize(1024, '\0');
  for (auto t : tokens) put_le(out, t, magic == 20240801 ? 4 : 2);
  return out;
}

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

// tokens[i] = i, so a window's first input names where it was cut.
std::vector<std::int32_t> iota_tokens(std::size_t n) {
  std::vector<std::int32_t> t(n);
  std::iota(t.begin(), t.end(), std::int32_t{0});
  return t;
}

struct Batch {
  std::vector<std::int32_t> inputs, targets;
  bool operator==(const Batch&) const = default;
};

Batch take(WindowSampler& s, int B, int seq_len) {
  Batch b{std::vector<std::int32_t>(B * seq_len), std::vector<std::int32_t>(B * seq_len)};
  s.next_batch(B, b.inputs.data(), b.targets.data());
  return b;
}

// Window starts of the next n windows, one at a time.
std::vector<int> starts(WindowSampler& s, std::uint64_t n, int seq_len) {
  std::vector<int> out;
  for (std::uint64_t i = 0; i < n; ++i) out.push_back(take(s, 1, seq_len).inputs[0]);
  return out;
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

TEST_CASE("split_train_val keeps order and the asked proportion") {
  const auto tokens = iota_tokens(1000);
  const auto tv = split_train_val(tokens, 0.1);
  REQUIRE(tv.train.size() == 900);
  REQUIRE(tv.val.size() == 100);
  CHECK(std::equal(tv.train.begin(), tv.train.end(), tokens.begin()));
  CHECK(std::equal(tv.val.begin(), tv.val.end(), tokens.begin() + 900));
  CHECK(split_train_val(tokens, 0.0).val.empty());
  CHECK(split_train_val(iota_tokens(7), 0.5).val.size() == 4);  // 3.5 rounds away from zero
  for (double bad : {-0.1, 1.0, 2.0})
    CHECK_THROWS_AS(split_train_val(tokens, bad), Error);
}

TEST_CASE("windows are real slices with targets shifted by one") {
  const int T = 8;
  const auto tokens = iota_tokens(203);
  WindowSampler s(tokens, T, 42);
  const std::uint64_t W = s.windows_per_epoch();
  CHECK(W == 203 / T - 1);
  for (int epoch = 0; epoch < 4; ++epoch) {
    const Batch b = take(s, static_cast<int>(W), T);
    std::set<int> seen;
    for (std::uint64_t w = 0; w < W; ++w) {
      const int start = b.inputs[w * T];
      CHECK(start % T == b.inputs[0] % T);  // one cut per epoch
      CHECK(start + T + 1 <= 203);
      seen.insert(start);
      for (int j = 0; j < T; ++j) {
        CHECK(b.inputs[w * T + j] == start + j);
        CHECK(b.targets[w * T + j] == start + j + 1);
      }
    }
    CHECK(seen.size() == W);  // each window once
    CHECK(s.position() == SamplerPosition{static_cast<std::uint64_t>(epoch) + 1, 0});
  }
}

TEST_CASE("order and cut follow the seed, and epochs differ") {
  const int T = 16;
  const auto tokens = iota_tokens(4000);
  WindowSampler a(tokens, T, 7), b(tokens, T, 7), c(tokens, T, 8);
  const std::uint64_t W = a.windows_per_epoch();
  const auto ea = starts(a, 3 * W, T);
  CHECK(ea == starts(b, 3 * W, T));
  CHECK(ea != starts(c, 3 * W, T));
  // Epochs are shuffled anew and (over a few epochs) cut at different offsets.
  CHECK(!std::equal(ea.begin(), ea.begin() + W, ea.begin() + W));
  std::set<int> offsets;
  for (std::uint64_t e = 0; e < 3; ++e) offsets.insert(ea[e * W] % T);
  WindowSampler d(tokens, T, 7);
  for (std::uint64_t e = 3; e < 10; ++e) {
    d.seek({e, 0});
    offsets.insert(take(d, 1, T).inputs[0] % T);
  }
  CHECK(offsets.size() > 1);
}

TEST_CASE("seek reproduces the same future batches, across epochs and backwards") {
  const int T = 4, B = 3;
  const auto tokens = iota_tokens(150);  // 36 windows: batches straddle epoch ends
  WindowSampler a(tokens, T, 99);
  for (int i = 0; i < 11; ++i) take(a, B, T);
  const SamplerPosition mark = a.position();
  CHECK(mark.epoch == 0);
  std::vector<Batch> future;
  for (int i = 0; i < 30; ++i) future.push_back(take(a, B, T));
  CHECK(a.position().epoch >= 2);

  WindowSampler fresh(tokens, T, 99);
  fresh.seek(mark);
  CHECK(fresh.position() == mark);
  for (const auto& f : future) CHECK(take(fresh, B, T) == f);

  a.seek(mark);  // back from a later epoch: the epoch order must be rebuilt
  for (const auto& f : future) CHECK(take(a, B, T) == f);

  CHECK_THROWS_AS(a.seek({0, a.windows_per_epoch()}), Error);
}

TEST_CASE("streams of one epoch are disjoint and cover it") {
  const int T = 8, n = 3;
  const auto tokens = iota_tokens(T * 11 + 5);  // 10 windows: shares of 4, 3, 3
  WindowSampler whole(tokens, T, 5);
  const auto all = starts(whole, whole.windows_per_epoch(), T);
  REQUIRE(all.size() == 10);
  std::vector<int> joined;
  std::uint64_t total = 0;
  for (int s = 0; s < n; ++s) {
    WindowSampler part(tokens, T, 5, s, n);
    total += part.windows_per_epoch();
    const auto mine = starts(part, part.windows_per_epoch(), T);
    for (std::size_t i = 0; i < mine.size(); ++i) CHECK(mine[i] == all[s + i * n]);
    joined.insert(joined.end(), mine.begin(), mine.end());
    CHECK(part.position() == SamplerPosition{1, 0});
  }
  CHECK(total == 10);
  std::sort(joined.begin(), joined.end());
  CHECK(std::adjacent_find(joined.begin(), joined.end()) == joined.end());
  auto sorted_all = all;
  std::sort(sorted_all.begin(), sorted_all.end());
  CHECK(joined == sorted_all);
}

TEST_CASE("too little data for the streams is a data error with the counts") {
  const int T = 10, n = 4;
  CHECK_NOTHROW(WindowSampler(iota_tokens((n + 1) * T), T, 1, 0, n));
  try {
    WindowSampler(iota_tokens((n + 1) * T - 1), T, 1, 0, n);
    FAIL("no error");
  } catch (const Error& e) {
    const std::string msg = e.what();
    CHECK(e.kind() == ErrorKind::Data);
    CHECK_MESSAGE(msg.find("has 49 tokens") != std::string::npos, msg);
    CHECK_MESSAGE(msg.find("need at least 50") != std::string::npos, msg);
  }
}

TEST_CASE("eval windows do not overlap and drop the short tail") {
  CHECK(eval_window_count(10, 4) == 2);
  CHECK(eval_window_count(9, 4) == 1);
  CHECK(eval_window_count(4, 4) == 0);
}

TEST_CASE("group batches: members split the group's windows and the position is the group's") {
  std::vector<std::int32_t> tokens(5000);
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<std::int32_t>(i % 251);
  const int T = 8, B = 3;
  WindowSampler whole(tokens, T, 5), m0(tokens, T, 5), m1(tokens, T, 5);
  // Enough steps to cross an epoch boundary (5000/8 - 1 = 624 windows an epoch).
  for (int step = 0; step < 120; ++step) {
    std::vector<std::int32_t> in(2 * B * T), tg(2 * B * T), in0(B * T), tg0(B * T), in1(B * T), tg1(B * T);
    whole.next_batch(2 * B, in.data(), tg.data());
    m0.next_group_batch(B, 0, 2, in0.data(), tg0.data());
    m1.next_group_batch(B, 1, 2, in1.data(), tg1.data());
    for (int j = 0; j < B; ++j) {  // member m took windows m, m+2, m+4 of the group's 2B
      CHECK(std::equal(in0.begin() + j * T, in0.begin() + (j + 1) * T, in.begin() + (2 * j) * T));
      CHECK(std::equal(in1.begin() + j * T, in1.begin() + (j + 1) * T, in.begin() + (2 * j + 1) * T));
    }
    REQUIRE(m0.position() == whole.position());
    REQUIRE(m1.position() == whole.position());
  }
  CHECK(whole.position().epoch >= 1);
}
