#pragma once
// 64-bit content hashes (XXH3) used by checkpoints, parameter fingerprints and message checksums.
#include <cstddef>
#include <cstdint>
#include <span>

namespace meridian {

std::uint64_t hash64(const void* data, std::size_t size, std::uint64_t seed = 0);

template <class T>
std::uint64_t hash64(std::span<const T> values, std::uint64_t seed = 0) {
  return hash64(values.data(), values.size_bytes(), seed);
}

// Streaming form for data that arrives in pieces; equal to hash64 of the concatenation.
class Hasher64 {
 public:
  explicit Hasher64(std::uint64_t seed = 0);
  ~Hasher64();
  Hasher64(const Hasher64&) = delete;
  Hasher64& operator=(const Hasher64&) = delete;
  void update(const void* data, std::size_t size);
  std::uint64_t digest() const;

 private:
  void* state_;
};

}  // namespace meridian
