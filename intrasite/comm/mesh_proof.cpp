#include "intrasite/comm/mesh_proof.hpp"

#include <sys/random.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/util/constant_time.hpp"
#include "core/util/error.hpp"

namespace meridian {
namespace {

constexpr std::string_view kDomain = "meridian gloo pair proof";

void append_rank(std::vector<std::byte>& out, int rank) {
  const auto value = static_cast<std::uint32_t>(rank);
  for (int shift = 0; shift < 32; shift += 8) out.push_back(static_cast<std::byte>(value >> shift));
}

std::string_view as_chars(std::span<const std::byte> bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

}  // namespace

MeshKey new_mesh_key() {
  MeshKey key{};
  if (getrandom(key.data(), key.size(), 0) != static_cast<ssize_t>(key.size()))
    throw make_error(ErrorKind::Io, "no random bytes from the kernel for a mesh key: ", std::strerror(errno));
  return key;
}

std::string mesh_key_name(int rank) { return "mesh_key_" + std::to_string(rank); }

Digest pair_proof(const MeshKey& key, std::string_view prefix, int from, int to) {
  // The domain and the prefix's length come first, so no two (prefix, from, to) share a message.
  std::vector<std::byte> message;
  for (const char c : kDomain) message.push_back(static_cast<std::byte>(c));
  append_rank(message, static_cast<int>(prefix.size()));
  for (const char c : prefix) message.push_back(static_cast<std::byte>(c));
  append_rank(message, from);
  append_rank(message, to);
  return hmac_sha256(key, message);
}

bool proof_holds(const MeshKey& key, std::string_view prefix, int from, int to, std::span<const std::byte> proof) {
  const Digest expected = pair_proof(key, prefix, from, to);
  return equal_in_constant_time(as_chars(expected), as_chars(proof));
}

}  // namespace meridian
