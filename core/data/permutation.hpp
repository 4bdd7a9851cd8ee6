#pragma once
// A pseudo-random permutation of [0, n) computed one element at a time, in O(1) memory: a
// four-round Feistel network on the smallest power of four >= n, walking the cycle until the
// value falls within [0, n) (Black and Rogaway's cycle walking). The data order of an epoch over
// a corpus of any size costs no memory, and any position of it is found directly.
#include <cstdint>

#include "core/util/error.hpp"

namespace meridian {

class RandomPermutation {
 public:
  RandomPermutation(std::uint64_t n, std::uint64_t key) : n_(n), key_(key) {
    MERIDIAN_CHECK(n > 0, "n=", n);
    while (half_bits_ < 32 && (std::uint64_t{1} << (2 * half_bits_)) < n) ++half_bits_;
    mask_ = (std::uint64_t{1} << half_bits_) - 1;
  }

  // The image of i in [0, n).
  std::uint64_t operator()(std::uint64_t i) const {
    MERIDIAN_CHECK(i < n_, "i=", i, " n=", n_);
    std::uint64_t x = i;
    do x = encrypt(x); while (x >= n_);
    return x;
  }

 private:
  static std::uint64_t mix(std::uint64_t z) {  // SplitMix64's finaliser
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  std::uint64_t encrypt(std::uint64_t x) const {
    std::uint64_t left = x >> half_bits_, right = x & mask_;
    for (std::uint64_t round = 0; round < 4; ++round) {
      const std::uint64_t f = mix(key_ + 0x9E3779B97F4A7C15ULL * (round + 1) + right) & mask_;
      const std::uint64_t next = left ^ f;
      left = right;
      right = next;
    }
    return left << half_bits_ | right;
  }

  std::uint64_t n_, key_;
  int half_bits_ = 0;
  std::uint64_t mask_ = 0;
};

}  // namespace meridian
