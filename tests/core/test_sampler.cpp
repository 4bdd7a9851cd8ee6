// The window sampler over corpora of 32-bit shards whose token i is i (so a window's first input
// says where it was cut): real slices within one shard, each window once an epoch, the order and
// cut from the seed, exact seek, lockstep groups of any size, weighted sources' shares; and the
// permutation it draws epochs from.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <set>
#include <vector>

#include "core/data/permutation.hpp"
#include "core/data/sampler.hpp"
#include "core/util/error.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/token_shards.hpp"

using namespace meridian;
using meridian::testing::TempDir;
using meridian::testing::write_iota_shard;

namespace {

struct Batch {
  std::vector<std::int32_t> inputs, targets;
  bool operator==(const Batch&) const = default;
};

Batch take(WindowSampler& s, int B, int seq_len, int member = 0, int members = 1) {
  Batch b{std::vector<std::int32_t>(B * seq_len), std::vector<std::int32_t>(B * seq_len)};
  s.next_group_batch(B, member, members, b.inputs.data(), b.targets.data());
  return b;
}

// Two shards: tokens [0, 203) and [10000, 10150).
Corpus two_shards(TempDir& dir) {
  write_iota_shard(dir / "a_000.bin", 0, 203);
  write_iota_shard(dir / "a_001.bin", 10000, 150);
  return Corpus::open({{dir / "a_*.bin", 1}}, DataFormat::LlmcBin, 1 << 20);
}

}  // namespace

TEST_CASE("windows are slices of one shard with targets shifted by one, each once an epoch, one cut per shard") {
  TempDir dir("sampler");
  const Corpus corpus = two_shards(dir);
  const int T = 8;
  WindowSampler s(corpus, T, 42);
  const std::uint64_t W = s.windows_per_epoch(0);
  CHECK(W == (203 / T - 1) + (150 / T - 1));
  for (int epoch = 0; epoch < 4; ++epoch) {
    const Batch b = take(s, static_cast<int>(W), T);
    std::set<int> seen, cuts_a, cuts_b;
    for (std::uint64_t w = 0; w < W; ++w) {
      const int start = b.inputs[w * T];
      const bool in_a = start < 10000;
      CHECK(start + T + 1 <= (in_a ? 203 : 10150));
      (in_a ? cuts_a : cuts_b).insert(start % T);
      seen.insert(start);
      for (int j = 0; j < T; ++j) {
        CHECK(b.inputs[w * T + j] == start + j);
        CHECK(b.targets[w * T + j] == start + j + 1);
      }
    }
    CHECK(seen.size() == W);
    CHECK(cuts_a.size() == 1);
    CHECK(cuts_b.size() == 1);
  }
  CHECK(s.position() == SamplerPosition{4 * W, {4 * W}});
}

TEST_CASE("order and cut follow the seed, and epochs differ") {
  TempDir dir("sampler");
  write_iota_shard(dir / "s.bin", 0, 4000);
  const Corpus corpus = Corpus::open({{dir / "s.bin", 1}}, DataFormat::LlmcBin, 1 << 20);
  const int T = 16;
  WindowSampler a(corpus, T, 7), b(corpus, T, 7), c(corpus, T, 8);
  const int W = static_cast<int>(a.windows_per_epoch(0));
  const Batch ea = take(a, 8 * W, T);
  CHECK(ea == take(b, 8 * W, T));
  CHECK(!(ea == take(c, 8 * W, T)));
  std::set<int> offsets;
  for (int e = 0; e < 8; ++e) offsets.insert(ea.inputs[static_cast<std::size_t>(e * W * T)] % T);
  CHECK(offsets.size() > 1);
  CHECK(!std::equal(ea.inputs.begin(), ea.inputs.begin() + W * T, ea.inputs.begin() + W * T));
}

TEST_CASE("seek reproduces the same future batches, across epochs and backwards, and refuses another corpus's position") {
  TempDir dir("sampler");
  const Corpus corpus = two_shards(dir);
  const int T = 4, B = 3;
  WindowSampler a(corpus, T, 99);
  for (int i = 0; i < 11; ++i) take(a, B, T);
  const SamplerPosition mark = a.position();
  std::vector<Batch> future;
  for (int i = 0; i < 60; ++i) future.push_back(take(a, B, T));
  CHECK(a.position().windows > 2 * a.windows_per_epoch(0));

  WindowSampler fresh(corpus, T, 99);
  fresh.seek(mark);
  for (const auto& f : future) CHECK(take(fresh, B, T) == f);
  a.seek(mark);
  for (const auto& f : future) CHECK(take(a, B, T) == f);

  CHECK_THROWS_AS(a.seek({5, {4}}), Error);
  CHECK_THROWS_AS(a.seek({5, {3, 2}}), Error);
}

TEST_CASE("group batches: members split the group's windows, the position is the group's, and a resized group continues") {
  TempDir dir("sampler");
  const Corpus corpus = two_shards(dir);
  const int T = 8, B = 3;
  WindowSampler whole(corpus, T, 5), m0(corpus, T, 5), m1(corpus, T, 5), m2(corpus, T, 5);
  for (int step = 0; step < 40; ++step) {  // crosses epochs (41 windows each)
    const int members = step < 20 ? 2 : 3;  // a replica joins at step 20
    const Batch all = take(whole, members * B, T);
    WindowSampler* member[] = {&m0, &m1, &m2};
    for (int m = 0; m < members; ++m) {
      const Batch mine = take(*member[m], B, T, m, members);
      for (int j = 0; j < B; ++j)
        CHECK(std::equal(mine.inputs.begin() + j * T, mine.inputs.begin() + (j + 1) * T,
                         all.inputs.begin() + (j * members + m) * T));
      REQUIRE(member[m]->position() == whole.position());
    }
    if (members == 2) m2.seek(whole.position());  // the joiner heals the group's position
  }
}

TEST_CASE("weighted sources: each position's source follows the weights within a few windows, its windows its own") {
  TempDir dir("sampler");
  for (int i = 0; i < 3; ++i) write_iota_shard(dir / ("web_" + std::to_string(i) + ".bin"), 100000 * i, 5000);
  write_iota_shard(dir / "code.bin", 900000, 3000);
  const Corpus corpus =
      Corpus::open({{dir / "web_*.bin", 3}, {dir / "code.bin", 1}}, DataFormat::LlmcBin, 1 << 20);
  const int T = 16;
  WindowSampler s(corpus, T, 3);
  const int n = 4000;
  const Batch b = take(s, n, T);
  int code = 0;
  for (int w = 0; w < n; ++w) {
    const int start = b.inputs[static_cast<std::size_t>(w * T)];
    const bool is_code = start >= 900000;
    CHECK(is_code == (s.source_of(static_cast<std::uint64_t>(w)) == 1));
    code += is_code;
  }
  CHECK(s.position().taken == std::vector<std::uint64_t>{static_cast<std::uint64_t>(n - code),
                                                          static_cast<std::uint64_t>(code)});
  MESSAGE("realised mix over ", n, " windows: ", n - code, " : ", code, " (weights 3 : 1)");
  CHECK(std::abs(code - n / 4) <= 3);
  // The code source (186 windows an epoch) went round many times meanwhile, the web one not.
  CHECK(s.position().taken[1] > 5 * s.windows_per_epoch(1));
}

TEST_CASE("a source without one window is a data error naming it") {
  TempDir dir("sampler");
  write_iota_shard(dir / "big.bin", 0, 1000);
  write_iota_shard(dir / "tiny.bin", 0, 15);
  const Corpus corpus = Corpus::open({{dir / "big.bin", 1}, {dir / "tiny.bin", 1}}, DataFormat::LlmcBin, 1 << 20);
  try {
    WindowSampler(corpus, 8, 1);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Data);
    CHECK(std::string(e.what()).find("tiny.bin") != std::string::npos);
    CHECK(std::string(e.what()).find("15 tokens") != std::string::npos);
  }
}

TEST_CASE("the permutation is a bijection of 0..n-1 that the key reorders") {
  for (std::uint64_t n : {1, 2, 3, 5, 17, 1000, 4097}) {
    const RandomPermutation p(n, 11), q(n, 12);
    std::vector<std::uint64_t> image, other;
    for (std::uint64_t i = 0; i < n; ++i) image.push_back(p(i)), other.push_back(q(i));
    if (n > 3) CHECK(image != other);
    std::sort(image.begin(), image.end());
    for (std::uint64_t i = 0; i < n; ++i) REQUIRE(image[i] == i);
  }
}

TEST_CASE("eval windows do not overlap and drop the short tail") {
  CHECK(eval_window_count(10, 4) == 2);
  CHECK(eval_window_count(9, 4) == 1);
  CHECK(eval_window_count(4, 4) == 0);
}
