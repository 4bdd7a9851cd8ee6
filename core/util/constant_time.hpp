#pragma once
// Comparing a secret someone offers with the real one: the time taken depends on the lengths
// only, never on where they first differ, so a caller cannot learn the secret a byte at a time.
#include <cstddef>
#include <string_view>

namespace meridian {

inline bool equal_in_constant_time(std::string_view expected, std::string_view given) {
  unsigned char differ = expected.size() == given.size() ? 0 : 1;
  for (std::size_t i = 0; i < expected.size(); ++i)
    differ |= static_cast<unsigned char>(expected[i] ^ (i < given.size() ? given[i] : 0));
  return differ == 0;
}

}  // namespace meridian
