#include "core/util/hash.hpp"

#include <xxhash.h>

#include "core/util/error.hpp"

namespace meridian {

std::uint64_t hash64(const void* data, std::size_t size, std::uint64_t seed) {
  return XXH3_64bits_withSeed(data, size, seed);
}

Hasher64::Hasher64(std::uint64_t seed) : state_(XXH3_createState()) {
  MERIDIAN_CHECK(state_ != nullptr, "XXH3_createState failed");
  XXH3_64bits_reset_withSeed(static_cast<XXH3_state_t*>(state_), seed);
}

Hasher64::~Hasher64() { XXH3_freeState(static_cast<XXH3_state_t*>(state_)); }

void Hasher64::update(const void* data, std::size_t size) {
  XXH3_64bits_update(static_cast<XXH3_state_t*>(state_), data, size);
}

std::uint64_t Hasher64::digest() const { return XXH3_64bits_digest(static_cast<XXH3_state_t*>(state_)); }

}  // namespace meridian
