#pragma once
// A small, fully specified random generator. std::mt19937 is portable but std::normal_distribution
// is not (its algorithm is implementation-defined); meridian needs the same weights and the same
// data order on every machine and after every resume, so both the engine and the transforms are ours.
#include <cmath>
#include <cstdint>

namespace meridian {

// SplitMix64 (Steele, Lea, Flood 2014): a 64-bit state, one add and a mix per draw. The whole
// generator state is one integer, which checkpoints store as is.
class Rng {
 public:
  explicit Rng(std::uint64_t seed = 0) : state_(seed) {}

  // An independent stream derived from (seed, stream): used for per-replica / per-site data streams.
  static Rng derive(std::uint64_t seed, std::uint64_t stream) {
    Rng mixer(seed ^ (0x9E3779B97F4A7C15ULL * (stream + 1)));
    return Rng(mixer.next_u64());
  }

  std::uint64_t next_u64() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }

  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

  // Uniform integer in [0, n) by rejection, so there is no modulo bias.
  std::uint64_t below(std::uint64_t n) {
    const std::uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    std::uint64_t x;
    do x = next_u64(); while (x >= limit);
    return x % n;
  }

  // Standard normal by Box-Muller; one value per call (the pair's twin is discarded so that the
  // state stays a single integer).
  double normal() {
    double u1 = uniform();
    while (u1 <= 0.0) u1 = uniform();
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

  std::uint64_t state() const { return state_; }
  void set_state(std::uint64_t s) { state_ = s; }

 private:
  std::uint64_t state_;
};

}  // namespace meridian
