// The chunked parameter fingerprint (kernels/cpu/chunk_hash.hpp) and the XXH64 the device runs
// (kernels/cuda/xxh64.hpp, compiled here for the host), both against the xxHash library.
#include <doctest/doctest.h>
#include <xxhash.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/util/rng.hpp"
#include "kernels/cpu/chunk_hash.hpp"
#include "kernels/cuda/xxh64.hpp"

using namespace meridian;

namespace {

std::vector<unsigned char> random_bytes(std::size_t n, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<unsigned char> v(n);
  for (auto& b : v) b = static_cast<unsigned char>(rng.next_u64());
  return v;
}

}  // namespace

TEST_CASE("the device's XXH64, run on the host, equals the library's for every tail length and seed") {
  const auto bytes = random_bytes(300, 1);
  for (std::uint64_t seed : {0ull, 1ull, 0x9E3779B97F4A7C15ull})
    for (std::size_t len = 0; len <= bytes.size(); ++len) {
      INFO("len=", len, " seed=", seed);
      REQUIRE(kernels::cuda::xxh64(bytes.data(), len, seed) == XXH64(bytes.data(), len, seed));
    }
}

TEST_CASE("chunked_hash64 is XXH3 over the per-chunk XXH64s, and sees every byte") {
  const std::size_t chunk = kernels::kHashChunkBytes;
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, chunk - 1, chunk, chunk + 1, 5 * chunk + 17}) {
    INFO("n=", n);
    auto bytes = random_bytes(n, n + 2);
    std::vector<std::uint64_t> hashes;
    for (std::size_t start = 0; start < n; start += chunk)
      hashes.push_back(XXH64(bytes.data() + start, std::min(chunk, n - start), 0));
    const std::uint64_t expected = XXH3_64bits(hashes.data(), hashes.size() * sizeof(std::uint64_t));
    const std::uint64_t h = kernels::chunked_hash64(bytes.data(), n);
    CHECK(h == expected);
    if (n > 0) {
      bytes[n / 2] ^= 0x01;  // one flipped bit, as silent data corruption would flip it
      CHECK(kernels::chunked_hash64(bytes.data(), n) != h);
    }
  }
}
