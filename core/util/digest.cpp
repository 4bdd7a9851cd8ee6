#include "core/util/digest.hpp"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstdio>
#include <memory>

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

Digest sha256(std::span<const std::span<const std::byte>> pieces) {
  Digest out{};
  unsigned int length = 0;
  // One context per thread, reset by each init: a delta's digest hashes thousands of small units.
  thread_local const std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> kept(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  EVP_MD_CTX* context = kept.get();
  bool ok = context != nullptr && EVP_DigestInit_ex(context, EVP_sha256(), nullptr) == 1;
  for (const auto piece : pieces) ok = ok && EVP_DigestUpdate(context, piece.data(), piece.size()) == 1;
  ok = ok && EVP_DigestFinal_ex(context, reinterpret_cast<unsigned char*>(out.data()), &length) == 1;
  MERIDIAN_CHECK(ok && length == out.size(), "SHA-256 of ", pieces.size(), " pieces failed, length ", length);
  return out;
}

Digest hmac_sha256(std::span<const std::byte> key, std::span<const std::byte> message) {
  Digest out{};
  unsigned int length = 0;
  const bool ok = HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
                       reinterpret_cast<const unsigned char*>(message.data()), message.size(),
                       reinterpret_cast<unsigned char*>(out.data()), &length) != nullptr;
  MERIDIAN_CHECK(ok && length == out.size(), "HMAC-SHA-256 of ", message.size(), " bytes under a ", key.size(),
                 "-byte key failed, length ", length);
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
