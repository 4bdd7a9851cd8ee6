// Delta codecs: round-trip error bounds, wire sizes, malformed input, error feedback.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "core/util/error.hpp"
#include "core/util/rng.hpp"
#include "crosssite/codec/codec.hpp"
#include "crosssite/codec/error_feedback.hpp"
#include "tests/support/encoded_values.hpp"

using namespace meridian;

namespace {

constexpr CodecKind kAll[] = {CodecKind::Fp32, CodecKind::Bf16, CodecKind::Int8, CodecKind::Int4};
const float kDenormMin = std::numeric_limits<float>::denorm_min();

using testing::encoded;

std::vector<float> round_trip(std::span<const float> x, CodecOptions o) {
  std::vector<float> y(x.size(), -1.0f);
  decode(encoded(x, o), y);
  return y;
}

std::vector<float> normal(std::size_t n, std::uint64_t seed, double sigma = 1.0) {
  return testing::normal_values(n, seed, sigma);
}

// The kind of the Error f throws, with its message; fails the test if f returns.
ErrorKind error_kind(const std::function<void()>& f, std::string* message = nullptr) {
  try {
    f();
  } catch (const Error& e) {
    if (message) *message = e.what();
    return e.kind();
  }
  FAIL("no Error thrown");
  return ErrorKind::Usage;
}

// Checks the documented bound of every element, reporting the first violation.
void check_bounds(std::span<const float> x, CodecOptions o) {
  const auto y = round_trip(x, o);
  REQUIRE(y.size() == x.size());
  const float qmax = o.kind == CodecKind::Int8 ? 127.0f : 7.0f;
  for (std::size_t b = 0; b * o.block < x.size() || b == 0; ++b) {
    const std::size_t start = b * o.block, end = std::min(x.size(), start + o.block);
    float amax = 0;
    for (std::size_t i = start; i < end; ++i) amax = std::max(amax, std::fabs(x[i]));
    for (std::size_t i = start; i < end; ++i) {
      const double err = std::fabs(static_cast<double>(x[i]) - y[i]), ax = std::fabs(x[i]);
      double bound = 0;
      switch (o.kind) {
        case CodecKind::Fp32: bound = 0; break;
        // Normal values: half a bf16 ulp, <= 2^-8 relative (also when saturating at the top).
        // Subnormals: half the bf16 subnormal spacing 2^-133.
        case CodecKind::Bf16: bound = ax >= std::numeric_limits<float>::min() ? ax * 0x1p-8 : 0x1p-134; break;
        // scale/2, plus the float rounding of the reciprocal, the product and a subnormal scale.
        case CodecKind::Int8:
        case CodecKind::Int4: bound = (amax / qmax) * (0.5 + 0x1p-15) + ax * 0x1p-22 + 64.0 * kDenormMin; break;
        case CodecKind::Sparse:
          FAIL("the sparse codec keeps a residual instead: its cases check that");
          break;
      }
      if (err > bound) {
        FAIL_CHECK(to_string(o.kind) << " block " << o.block << " index " << i << ": x=" << x[i] << " y=" << y[i]
                                     << " err=" << err << " > bound " << bound);
        return;
      }
    }
    if (end == x.size()) break;
  }
}

std::vector<std::vector<float>> adversarial_inputs() {
  std::vector<std::vector<float>> sets;
  sets.push_back({});                                  // n = 0
  sets.push_back({0.37f});                             // n = 1
  sets.push_back({-1e-3f});
  sets.push_back(std::vector<float>(1000, 0.0f));      // zeros
  sets.push_back(normal(1000, 1));                     // n not a multiple of any block used
  sets.push_back(normal(100003, 2, 1e-4));             // large enough to run in parallel
  auto outlier = normal(3000, 3, 1e-3);                // one huge outlier per 256-block
  for (std::size_t i = 17; i < outlier.size(); i += 256) outlier[i] = 1e4f;
  sets.push_back(outlier);
  std::vector<float> denormals(777);                   // subnormal blocks and a subnormal scale
  for (std::size_t i = 0; i < denormals.size(); ++i)
    denormals[i] = static_cast<float>(static_cast<int>(i % 200) - 100) * kDenormMin * (i < 400 ? 1.0f : 1e6f);
  sets.push_back(denormals);
  const float big = std::numeric_limits<float>::max();
  sets.push_back({big, -big, big * 0.99f, 1.0f, -0.0f, std::numeric_limits<float>::min()});
  return sets;
}

}  // namespace

TEST_CASE("codec names parse and print") {
  for (CodecKind k : kAll) CHECK(parse_codec(to_string(k)) == k);
  CHECK_FALSE(parse_codec("int2"));
  CHECK_FALSE(parse_codec("INT8"));
  CHECK_FALSE(parse_codec(""));
}

TEST_CASE("round trips meet the stated error bounds") {
  const auto sets = adversarial_inputs();
  for (const auto& x : sets) {
    CAPTURE(x.size());
    for (CodecKind k : kAll)
      for (int block : {2, 64, 256, 1000}) check_bounds(x, CodecOptions{k, block});
  }
}

TEST_CASE("fp32 is exact and every codec is deterministic") {
  const auto x = normal(70001, 7);
  const auto y = round_trip(x, {CodecKind::Fp32, 256});
  CHECK(std::memcmp(x.data(), y.data(), 4 * x.size()) == 0);
  for (CodecKind k : kAll) CHECK(encoded(x, {k, 256}) == encoded(x, {k, 256}));
}

TEST_CASE("int8 and int4 are exact on their own grid and symmetric") {
  // Values already on the grid come back bit for bit: the scale is max/qmax and q*scale is exact.
  std::vector<float> x = {-127, -64, -1, 0, 1, 3, 126, 127};
  CHECK(round_trip(x, {CodecKind::Int8, 8}) == x);
  std::vector<float> x4 = {-7, -3, 0, 1, 2, 7};
  CHECK(round_trip(x4, {CodecKind::Int4, 6}) == x4);
  // Ties go to even: 0.5 and 1.5 and 2.5 steps of scale 1.
  std::vector<float> ties = {7, 0.5f, 1.5f, 2.5f};
  CHECK(round_trip(ties, {CodecKind::Int4, 4}) == std::vector<float>{7, 0, 2, 2});
}

TEST_CASE("encoded sizes follow the wire format") {
  for (std::size_t n : {0ul, 1ul, 255ul, 256ul, 257ul, 1000000ul}) {
    const std::size_t blocks = (n + 255) / 256;
    CHECK(encoded_size(n, {CodecKind::Fp32, 256}) == 16 + 4 * n);
    CHECK(encoded_size(n, {CodecKind::Bf16, 256}) == 16 + 2 * n);
    CHECK(encoded_size(n, {CodecKind::Int8, 256}) == 16 + 4 * blocks + n);
    CHECK(encoded_size(n, {CodecKind::Int4, 256}) == 16 + 4 * blocks + (n + 1) / 2);
    CHECK(encoded(normal(n, n), {CodecKind::Int4, 256}).size() == encoded_size(n, {CodecKind::Int4, 256}));
  }
  // Overhead (header + scales) at n = 1M, block 256: 1.6% of an int8 message. For int4 one fp32
  // scale per 128 payload bytes is 3.0% by construction; block 512 brings it under 2%.
  const std::size_t n = 1 << 20;
  const double over8 = static_cast<double>(16 + 4 * 4096) / encoded_size(n, {CodecKind::Int8, 256});
  const double over4 = static_cast<double>(16 + 4 * 4096) / encoded_size(n, {CodecKind::Int4, 256});
  const double over4_512 = static_cast<double>(16 + 4 * 2048) / encoded_size(n, {CodecKind::Int4, 512});
  CHECK(over8 <= 0.02);
  CHECK(over4 <= 0.031);
  CHECK(over4_512 <= 0.02);
}

TEST_CASE("invalid options are a config error") {
  CHECK(error_kind([] { encoded_size(10, {CodecKind::Int8, 0}); }) == ErrorKind::Config);
  CHECK(error_kind([] { encoded_size(10, {CodecKind::Int4, 255}); }) == ErrorKind::Config);
  CHECK(error_kind([] { encoded_size(10, {CodecKind::Int8, (1 << 20) + 1}); }) == ErrorKind::Config);
  CHECK(encoded_size(10, {CodecKind::Bf16, 0}) == 36);  // block is ignored without scales
}

TEST_CASE("non-finite input is refused with its index") {
  for (CodecKind k : kAll) {
    for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                      -std::numeric_limits<float>::infinity()}) {
      auto x = normal(100003, 5);
      x[70001] = bad;
      x[90000] = bad;
      std::string message;
      CHECK(error_kind([&] { encoded(x, {k, 256}); }, &message) == ErrorKind::Data);
      CHECK(message.find("index 70001") != std::string::npos);
    }
  }
}

TEST_CASE("malformed messages are a peer error, never a crash") {
  const auto x = normal(1000, 9);
  auto peer = [](std::vector<std::byte> bytes, std::size_t n, const char* expect) {
    std::vector<float> y(n);
    std::string message;
    CHECK(error_kind([&] { decode(bytes, y); }, &message) == ErrorKind::Peer);
    CHECK_MESSAGE(message.find(expect) != std::string::npos, message);
  };
  auto put_f32 = [](std::vector<std::byte>& b, std::size_t at, float v) { std::memcpy(b.data() + at, &v, 4); };
  for (CodecKind k : kAll) {
    CAPTURE(to_string(k));
    const auto good = encoded(x, {k, 256});
    peer({}, 0, "shorter than");
    peer({good.begin(), good.begin() + 10}, 1000, "shorter than");
    peer({good.begin(), good.end() - 1}, 1000, "bytes, expected");
    auto longer = good;
    longer.push_back(std::byte{0});
    peer(longer, 1000, "bytes, expected");
    peer(good, 999, "carries 1000 values, expected 999");
    auto wrong_n = good;
    wrong_n[8] = std::byte{0xE8 + 1};  // n = 1001 in the header
    peer(wrong_n, 1000, "carries 1001");
    auto big_n = good;
    std::memset(big_n.data() + 8, 0xFF, 8);
    peer(big_n, 1000, "values, expected 1000");
    auto unknown = good;
    unknown[0] = std::byte{5};
    peer(unknown, 1000, "unknown codec id 5");
    unknown[0] = std::byte{255};
    peer(unknown, 1000, "unknown codec id 255");
    auto version = good;
    version[1] = std::byte{2};
    peer(version, 1000, "format version");
    auto block = good;
    const std::uint32_t too_big = (1 << 20) + 2;  // outside [1, 2^20] and not 0
    std::memcpy(block.data() + 4, &too_big, 4);
    peer(block, 1000, "block 1048578");
  }
  for (CodecKind k : {CodecKind::Int8, CodecKind::Int4}) {
    CAPTURE(to_string(k));
    for (float scale : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(), -1.0f,
                        std::numeric_limits<float>::max()}) {
      auto b = encoded(x, {k, 256});
      put_f32(b, 16 + 4 * 2, scale);
      peer(b, 1000, "block 2 has an invalid scale");
    }
  }
  auto odd = encoded(x, {CodecKind::Int4, 256});
  odd[4] = std::byte{255};  // block 255
  peer(odd, 1000, "must be even for int4");
  auto fp32 = encoded(x, {CodecKind::Fp32, 0});
  put_f32(fp32, 16 + 4 * 500, std::numeric_limits<float>::infinity());
  peer(fp32, 1000, "non-finite value at index 500");
  auto bf16 = encoded(x, {CodecKind::Bf16, 0});
  bf16[16 + 2 * 7 + 1] = std::byte{0x7F};
  bf16[16 + 2 * 7] = std::byte{0xC1};  // a NaN pattern
  peer(bf16, 1000, "non-finite value at index 7");
}

TEST_CASE("corrupted bytes decode to finite values or a peer error") {
  const auto x = normal(600, 11);
  Rng rng(12);
  std::vector<CodecOptions> options{{CodecKind::Sparse, 64, 4}};
  for (CodecKind k : kAll) options.push_back({k, 64});
  for (const auto& o : options) {
    CAPTURE(to_string(o.kind));
    const auto good = encoded(x, o);
    for (int trial = 0; trial < 2000; ++trial) {
      auto b = good;
      for (int flips = 0; flips < 3; ++flips) b[rng.below(b.size())] ^= static_cast<std::byte>(1 + rng.below(255));
      std::vector<float> y(x.size());
      try {
        decode(b, y);
      } catch (const Error& e) {
        REQUIRE(e.kind() == ErrorKind::Peer);
        continue;
      }
      for (float v : y) REQUIRE(std::isfinite(v));
    }
  }
}

// The running sum of decoded deltas against the running sum of the true ones, 200 rounds.
TEST_CASE("error feedback keeps the sent sum within one step, without it the gap grows") {
  const std::size_t n = 4096;
  const CodecOptions o{CodecKind::Int4, 256};
  ErrorFeedback ef(n);
  std::vector<double> truth(n, 0), with(n, 0), without(n, 0);
  std::vector<float> y(n);
  double ef_worst = 0, step_max = 0, no_ef_rms_20 = 0, no_ef_rms_200 = 0, ef_rms_200 = 0;
  for (int round = 1; round <= 200; ++round) {
    const auto delta = normal(n, 1000 + round, 1e-3);
    for (std::size_t b = 0; b < n; b += 256) {
      float amax = 0;
      for (std::size_t i = b; i < b + 256; ++i) amax = std::max(amax, std::fabs(delta[i] + ef.residual()[i]));
      step_max = std::max(step_max, amax / 7.0);
    }
    decode(ef.encode(delta, o), y);
    for (std::size_t i = 0; i < n; ++i) with[i] += y[i];
    decode(encoded(delta, o), y);
    for (std::size_t i = 0; i < n; ++i) without[i] += y[i];
    double sq_with = 0, sq_without = 0;
    for (std::size_t i = 0; i < n; ++i) {
      truth[i] += delta[i];
      ef_worst = std::max(ef_worst, std::fabs(truth[i] - with[i]));
      sq_with += (truth[i] - with[i]) * (truth[i] - with[i]);
      sq_without += (truth[i] - without[i]) * (truth[i] - without[i]);
    }
    if (round == 20) no_ef_rms_20 = std::sqrt(sq_without / n);
    if (round == 200) no_ef_rms_200 = std::sqrt(sq_without / n), ef_rms_200 = std::sqrt(sq_with / n);
  }
  MESSAGE("step " << step_max << ", EF max gap " << ef_worst << " rms " << ef_rms_200 << "; no EF rms at 20 "
                  << no_ef_rms_20 << ", at 200 " << no_ef_rms_200);
  // With feedback the gap is the residual, at most half a step (plus float accumulation) at every round.
  CHECK(ef_worst <= step_max);
  // Without it the gap is a random walk: it grows ~sqrt(rounds) and ends far above the EF gap.
  CHECK(no_ef_rms_200 > 2.0 * no_ef_rms_20);
  CHECK(no_ef_rms_200 > 5.0 * ef_rms_200);
}

TEST_CASE("error feedback: residual, reset and a refused round") {
  const std::size_t n = 1000;
  ErrorFeedback ef(n);
  const auto x = normal(n, 21);
  ef.encode(x, {CodecKind::Fp32, 0});
  for (float r : ef.residual()) CHECK(r == 0.0f);
  ef.encode(x, {CodecKind::Int8, 256});
  const std::vector<float> kept(ef.residual().begin(), ef.residual().end());
  double norm = 0;
  for (float r : kept) norm += std::fabs(r);
  CHECK(norm > 0);
  auto bad = x;
  bad[3] = std::numeric_limits<float>::quiet_NaN();
  CHECK(error_kind([&] { ef.encode(bad, {CodecKind::Int8, 256}); }) == ErrorKind::Data);
  CHECK(std::vector<float>(ef.residual().begin(), ef.residual().end()) == kept);
  ef.reset();
  for (float r : ef.residual()) CHECK(r == 0.0f);
}

// The sparse codec: 3% of each block of 512, as a job's default density keeps.
const CodecOptions kSparse{CodecKind::Sparse, 512, 15};

// The wire format's sizes, restated from codec.hpp: the Rice code's longest length P for the
// parameter that minimizes it, in whole bytes, between the level and the signs.
std::size_t rice_bits(std::size_t len, std::size_t kept) {
  std::size_t best = SIZE_MAX;
  for (int r = 0; r <= 16; ++r) best = std::min(best, kept * (r + 1) + ((len - kept) >> r));
  return best;
}
std::size_t sparse_block(std::size_t len, std::size_t keep) {
  const std::size_t kept = std::min(len, keep);
  return 4 + (rice_bits(len, kept) + 7) / 8 + (kept + 7) / 8;
}

// The positions y holds a nonzero at, and the top-k positions of x (ties to the lower position).
std::vector<std::size_t> nonzero(std::span<const float> y) {
  std::vector<std::size_t> at;
  for (std::size_t i = 0; i < y.size(); ++i)
    if (y[i] != 0.0f) at.push_back(i);
  return at;
}
std::vector<std::size_t> top(std::span<const float> x, std::size_t k) {
  std::vector<std::size_t> order(x.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return std::abs(x[a]) > std::abs(x[b]); });
  order.resize(std::min(k, order.size()));
  std::sort(order.begin(), order.end());
  return order;
}

TEST_CASE("sparse: the largest entries of each block with their signs, one level, zero elsewhere, under 0.1 byte a value") {
  CHECK(parse_codec("sparse") == CodecKind::Sparse);
  const std::size_t n = 100003;  // 195 blocks, and a short last one of 163 values that keeps 15 too
  const auto x = normal(n, 21);
  const auto bytes = encoded(x, kSparse);
  CHECK(bytes.size() == encoded_size(n, kSparse));
  CHECK(encoded_size(n, kSparse) == 16 + 195 * sparse_block(512, 15) + sparse_block(163, 15));
  CHECK(static_cast<double>(bytes.size()) / n < 0.05);
  CHECK(encoded(x, kSparse) == bytes);  // deterministic
  std::vector<float> y(n);
  decode(bytes, y);
  for (std::size_t start = 0; start < n; start += 512) {
    const std::size_t end = std::min(n, start + 512);
    const std::span<const float> xb(x.data() + start, end - start), yb(y.data() + start, end - start);
    CHECK(nonzero(yb) == top(xb, 15));
    for (std::size_t i : nonzero(yb)) CHECK(std::signbit(yb[i]) == std::signbit(xb[i]));
  }
  // One level, the mean of the kept magnitudes, with each kept entry's sign.
  const std::vector<float> block{0.0f, 4.0f, -1.0f, 0.5f, -3.0f, 0.0f, 2.0f, 0.1f};
  CHECK(round_trip(block, {CodecKind::Sparse, 8, 4}) ==
        std::vector<float>{0.0f, 2.5f, -2.5f, 0.0f, -2.5f, 0.0f, 2.5f, 0.0f});
  // Ties go to the lower position.
  CHECK(round_trip(std::vector<float>{1, 1, 1, 1}, {CodecKind::Sparse, 4, 2}) == std::vector<float>{1, 1, 0, 0});
}

TEST_CASE("sparse: Rice-coded positions round-trip at every density, the extremes included") {
  Rng rng(41);
  struct Case {
    std::size_t n, block, keep;
  };
  // kept = len (gaps all zero), keep = 1, one value, the largest block, keep above a short tail.
  const Case cases[] = {{512, 512, 512}, {512, 512, 1}, {1, 512, 15}, {1 << 16, 1 << 16, 0xFFFF},
                        {1 << 16, 1 << 16, 1},  {1000, 512, 500}, {4096, 4096, 410}, {3000, 64, 7}};
  for (const auto& c : cases) {
    CAPTURE(c.n);
    CAPTURE(c.block);
    CAPTURE(c.keep);
    const auto x = normal(c.n, 100 + c.keep);
    const CodecOptions o{CodecKind::Sparse, static_cast<int>(c.block), static_cast<int>(c.keep)};
    const auto y = round_trip(x, o);
    for (std::size_t start = 0; start < c.n; start += c.block) {
      const std::size_t end = std::min(c.n, start + c.block);
      const std::span<const float> xb(x.data() + start, end - start), yb(y.data() + start, end - start);
      REQUIRE(nonzero(yb) == top(xb, c.keep));
    }
  }
  // Clustered and spread positions: every gap size from 0 to the whole block.
  for (int trial = 0; trial < 200; ++trial) {
    const std::size_t len = 1 + rng.below(700), keep = 1 + rng.below(len);
    std::vector<float> x(len, 0.0f);
    const std::size_t lo = rng.below(len), hi = lo + rng.below(len - lo);
    for (std::size_t i = 0; i < len; ++i) x[i] = (i >= lo && i <= hi ? 10.0f : 1.0f) * static_cast<float>(1 + rng.below(1000));
    const auto y = round_trip(x, {CodecKind::Sparse, static_cast<int>(len), static_cast<int>(keep)});
    REQUIRE(nonzero(y) == top(x, keep));
  }
}

TEST_CASE("sparse: a kept entry costs about log2(1/density) + 4 bits, and keep is the most that fits a budget") {
  for (std::size_t len : {512u, 4096u, 65536u}) {
    for (double density : {0.01, 0.03, 0.1, 0.3}) {
      const auto keep = static_cast<std::size_t>(std::lround(density * static_cast<double>(len)));
      const std::size_t bytes = encoded_size(len, {CodecKind::Sparse, static_cast<int>(len), static_cast<int>(keep)});
      // Level and header aside: the gap (Rice: at most log2(len/kept) + 3 bits), the sign bit,
      // and at most a byte of padding in each of the two parts.
      const double per_entry = (8.0 * static_cast<double>(bytes - 16 - 4) - 16.0) / static_cast<double>(keep);
      CAPTURE(len);
      CAPTURE(density);
      CHECK(per_entry <= std::log2(1.0 / density) + 4.0);
    }
  }
  // The most that fits a budget: one more entry would not. 16-bit positions and two 2-bit levels
  // (format 1) fitted 15 of 512 at 0.082 byte a value.
  for (int block : {2, 64, 512, 4096}) {
    CAPTURE(block);
    const int keep = sparse_keep_within(block, 0.1);
    const auto cost = [&](int k) { return static_cast<double>(encoded_size(block, {CodecKind::Sparse, block, k}) - 16); };
    if (keep > 0) CHECK(cost(keep) <= 0.1 * block);
    if (keep < block) CHECK(cost(keep + 1) > 0.1 * block);
  }
  CHECK(sparse_keep_within(512, 0.1) >= 60);  // over 11%, 4x format 1's entries for 0.1 byte
  CHECK(sparse_keep_within(512, 0.001) == 0);
  const std::size_t n = 834304;  // the reference model's parameters: the header is noise
  const int keep = sparse_keep_within(512, 0.1);
  CHECK(static_cast<double>(encoded_size(n, {CodecKind::Sparse, 512, keep})) / static_cast<double>(n) <= 0.1);
}

TEST_CASE("sparse: invalid options, non-finite input and malformed positions or levels") {
  CHECK(error_kind([] { encoded_size(10, {CodecKind::Sparse, 512, 0}); }) == ErrorKind::Config);
  CHECK(error_kind([] { encoded_size(10, {CodecKind::Sparse, 512, 513}); }) == ErrorKind::Config);
  CHECK(error_kind([] { encoded_size(10, {CodecKind::Sparse, (1 << 16) + 2, 4}); }) == ErrorKind::Config);
  CHECK(error_kind([] { encoded_size(10, {CodecKind::Sparse, 1 << 16, 1 << 16}); }) == ErrorKind::Config);
  auto x = normal(2000, 3);
  x[1500] = std::numeric_limits<float>::quiet_NaN();
  std::string message;
  CHECK(error_kind([&] { encoded(x, kSparse); }, &message) == ErrorKind::Data);
  CHECK(message.find("index 1500") != std::string::npos);

  // Blocks of 20 bytes after the header: the level, 14 bytes of positions (r = 5), 2 of signs.
  REQUIRE(sparse_block(512, 15) == 20);
  const std::size_t stride = 20, positions = 4, signs = 4 + 14;
  const auto good = encoded(normal(1000, 4), kSparse);
  auto peer = [](std::vector<std::byte> bytes, const char* expect) {
    std::vector<float> y(1000);
    std::string message;
    CHECK(error_kind([&] { decode(bytes, y); }, &message) == ErrorKind::Peer);
    CHECK_MESSAGE(message.find(expect) != std::string::npos, message);
  };
  auto put = [](std::vector<std::byte> b, std::size_t at, auto v) {
    std::memcpy(b.data() + at, &v, sizeof v);
    return b;
  };
  auto fill = [](std::vector<std::byte> b, std::size_t at, std::size_t count, std::uint8_t v) {
    std::memset(b.data() + at, v, count);
    return b;
  };
  peer(put(good, 16 + stride, -1.0f), "block 1: the level is negative or not finite");
  peer(put(good, 16, std::numeric_limits<float>::infinity()), "block 0: the level");
  // No terminating one bit: the first quotient runs off the slot (block 1 holds the last 488 values).
  peer(fill(good, 16 + stride + positions, 13, 0x00), "block 1: the position code runs past its bytes");
  // One bit at 20: a quotient of 20 with r = 5 is a gap of 640, past the 512 values.
  peer(put(fill(good, 16 + positions, 14, 0x00), 16 + positions + 2, std::uint8_t{0x10}),
       "block 0: a position lies past the block");
  // All ones: gaps of 31, fifteen positions below 512, then set bits where the code has ended.
  peer(fill(good, 16 + positions, 14, 0xFF), "block 0: unused position bits are set");
  peer(put(good, 16 + signs + 1, std::uint8_t{0xFF}), "unused sign bits");  // 15 signs: the last bit unused
  peer(put(good, 2, std::uint16_t{0}), "keeps entries outside");
  peer(put(good, 2, std::uint16_t{40}), "bytes, expected");  // another keep: another size
  peer(put(good, 1, std::uint8_t{1}), "format version 1");   // 16-bit positions, two levels
  peer(put(good, 1, std::uint8_t{2}), "format version 2");   // Rice-coded positions, two levels
  // Random corruption: "corrupted bytes decode to finite values or a peer error" covers sparse too.
}

TEST_CASE("error feedback with decay carries that share of the residual, and no more") {
  const std::size_t n = 2048;
  const auto x = normal(n, 51);
  ErrorFeedback full(n), faded(n, 0.5f);
  full.encode(x, kSparse);
  faded.encode(x, kSparse);
  REQUIRE(std::vector<float>(full.residual().begin(), full.residual().end()) ==
          std::vector<float>(faded.residual().begin(), faded.residual().end()));
  const std::vector<float> first(faded.residual().begin(), faded.residual().end());
  const std::vector<float> zero(n, 0.0f);
  std::vector<float> sent_full(n), sent_faded(n);
  decode(full.encode(zero, kSparse), sent_full);
  decode(faded.encode(zero, kSparse), sent_faded);
  // What went out plus what is left is the carried residual: all of it, or half.
  for (std::size_t i = 0; i < n; ++i) {
    CHECK(sent_full[i] + full.residual()[i] == doctest::Approx(first[i]));
    CHECK(sent_faded[i] + faded.residual()[i] == doctest::Approx(0.5f * first[i]));
  }
  CHECK_THROWS_AS(ErrorFeedback(4, 1.5f), InvariantError);
}

TEST_CASE("sparse with error feedback: what a round leaves out is sent later, the sent sum tracks the truth") {
  const std::size_t n = 4096;
  const auto step = normal(n, 31, 1e-3);
  ErrorFeedback feedback(n);
  std::vector<double> sent(n), truth(n);
  std::vector<float> once(n);
  for (int round = 1; round <= 200; ++round) {
    decode(feedback.encode(step, kSparse), once);
    for (std::size_t i = 0; i < n; ++i) {
      sent[i] += once[i];
      truth[i] += step[i];
    }
  }
  // The gap is the residual: bounded, while the truth grew 200-fold.
  double gap = 0, total = 0;
  for (std::size_t i = 0; i < n; ++i) {
    gap += (sent[i] - truth[i]) * (sent[i] - truth[i]);
    total += truth[i] * truth[i];
  }
  CHECK(std::sqrt(gap / total) < 0.2);
}
