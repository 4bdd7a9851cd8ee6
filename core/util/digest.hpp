#pragma once
// A delta's identity in announcements and commits is built from SHA-256 (OpenSSL) of its encoded
// bytes, a unit of values at a time (crosssite/codec/delta_digest.hpp). XXH3
// (hash.hpp) catches damage on the way and is what chunk frames carry; it cannot tell who made
// the bytes, since anyone can build two payloads with the same XXH3. A site that sends different
// bytes to different peers under one announcement cannot match its digest with more than one.
#include <array>
#include <cstddef>
#include <span>
#include <string>

namespace meridian {

using Digest = std::array<std::byte, 32>;

Digest sha256(std::span<const std::byte> bytes);
// The SHA-256 of the pieces put end to end, without putting them together.
Digest sha256(std::span<const std::span<const std::byte>> pieces);
// HMAC-SHA-256 of message under key: a proof that whoever made it holds the key.
Digest hmac_sha256(std::span<const std::byte> key, std::span<const std::byte> message);
// The first 12 hex digits, for logs and messages.
std::string short_hex(const Digest& digest);

}  // namespace meridian
