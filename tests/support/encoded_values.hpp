#pragma once
// Deltas for the codec tests: normal values from a seed, and their encoding.
#include <cstdint>
#include <span>
#include <vector>

#include "core/util/rng.hpp"
#include "crosssite/codec/codec.hpp"

namespace meridian::testing {

inline std::vector<std::byte> encoded(std::span<const float> x, CodecOptions o) {
  std::vector<std::byte> out(encoded_size(x.size(), o));
  encode(x, o, out);
  return out;
}

inline std::vector<float> normal_values(std::size_t n, std::uint64_t seed, double sigma = 1.0) {
  Rng rng(seed);
  std::vector<float> x(n);
  for (auto& v : x) v = static_cast<float>(sigma * rng.normal());
  return x;
}

}  // namespace meridian::testing
