#pragma once
// llm.c shards written byte by byte, so that tests do not share the reader's assumptions about
// layout or endianness; and corpora of them whose token i is i, so a window names where it was cut.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

namespace meridian::testing {

inline void write_bytes(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline void put_le(std::string& out, std::uint32_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>(v >> (8 * i) & 0xFF));
}

// An llm.c shard with the given header fields. Magic 20240520 is llm.c's 16-bit layout (version
// 1), 20240801 its 32-bit one (version 7).
inline std::string shard(const std::vector<std::uint32_t>& tokens, std::int32_t magic = 20240520,
                         std::int32_t version = 1, std::optional<std::int32_t> count = std::nullopt) {
  std::string out;
  put_le(out, static_cast<std::uint32_t>(magic), 4);
  put_le(out, static_cast<std::uint32_t>(version), 4);
  put_le(out, static_cast<std::uint32_t>(count.value_or(static_cast<std::int32_t>(tokens.size()))), 4);
  out.resize(1024, '\0');
  for (auto t : tokens) put_le(out, t, magic == 20240801 ? 4 : 2);
  return out;
}

// A 32-bit shard of the tokens first, first+1, ..., first+n-1.
inline void write_iota_shard(const std::filesystem::path& path, std::uint32_t first, std::uint32_t n) {
  std::vector<std::uint32_t> tokens(n);
  for (std::uint32_t i = 0; i < n; ++i) tokens[i] = first + i;
  write_bytes(path, shard(tokens, 20240801, 7));
}

}  // namespace meridian::testing
