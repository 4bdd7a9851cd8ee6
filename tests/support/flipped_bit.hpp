#pragma once
// Silent corruption of an outer state's memory, for the tests of what finds and repairs it: bit 3
// of one weight flipped in place, as a fault in the hardware would.
#include <cstdint>
#include <cstring>

#include "crosssite/outer/outer_state.hpp"

namespace meridian::testing {

inline void flip_bit(const OuterState& state, std::size_t at) {
  auto* value = const_cast<float*>(state.global().data()) + at;
  std::uint32_t bits;
  std::memcpy(&bits, value, sizeof bits);
  bits ^= 1u << 3;
  std::memcpy(value, &bits, sizeof bits);
}

}  // namespace meridian::testing
