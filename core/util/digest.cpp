#include "core/util/digest.hpp"

#include <openssl/evp.h>

#include <cstdio>

#include "core/util/error.hpp"

namespace meridian {

Digest sha256(std::span<const std::byte> bytes) {
  Digest out{};
  unsigned int length = 0;
  const bool ok = EVP_Digest(bytes.data(), bytes.size(), reinterpret_cast<unsigned char*>(out.data()), &length,
                             EVP_sha256(), nullptr) == 1;
  MERIDIAN_CHECK(ok && length == out.size(), "EVP_Digest(sha256) of ", bytes.size(), " bytes failed, length ", length);
  return out;
}

std::string short_hex(const Digest& digest) {
  std::string hex;
  for (std::size_t i = 0; i < 6; ++i) {
    char two[3];
    std::snprintf(two, sizeof two, "%02x", static_cast<unsigned>(digest[i]));
    hex += two;
  }
  return hex;
}

}  // namespace meridian
