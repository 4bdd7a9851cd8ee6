#include "core/data/shard_writer.hpp"

#include <array>
#include <cstring>
#include <iomanip>
#include <sstream>

#include "core/io/atomic_write.hpp"
#include "core/io/env.hpp"
#include "core/util/error.hpp"

namespace meridian {

namespace {

void put_le(std::vector<std::byte>& out, std::uint32_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<std::byte>(v >> (8 * i) & 0xFF));
}

}  // namespace

ShardWriter::ShardWriter(Env& env, std::filesystem::path dir, std::string split, std::int64_t vocab,
                         std::int64_t shard_tokens)
    : env_(env), dir_(std::move(dir)), split_(std::move(split)), wide_(vocab > 65536), shard_tokens_(shard_tokens) {
  MERIDIAN_CHECK(shard_tokens > 0 && shard_tokens < INT32_MAX && vocab > 0, "shard_tokens=", shard_tokens, " vocab=", vocab);
}

void ShardWriter::append(std::span<const std::int32_t> ids) {
  for (std::size_t at = 0; at < ids.size();) {
    const std::size_t room = static_cast<std::size_t>(shard_tokens_) - buffer_.size();
    const std::size_t n = std::min(room, ids.size() - at);
    buffer_.insert(buffer_.end(), ids.begin() + static_cast<std::ptrdiff_t>(at), ids.begin() + static_cast<std::ptrdiff_t>(at + n));
    at += n;
    if (buffer_.size() == static_cast<std::size_t>(shard_tokens_)) flush();
  }
}

void ShardWriter::flush() {
  if (buffer_.empty()) return;
  std::vector<std::byte> bytes;
  bytes.reserve(1024 + buffer_.size() * bytes_per_token());
  put_le(bytes, wide_ ? 20240801u : 20240520u, 4);
  put_le(bytes, wide_ ? 7u : 1u, 4);
  put_le(bytes, static_cast<std::uint32_t>(buffer_.size()), 4);
  bytes.resize(1024, std::byte{0});
  for (const std::int32_t id : buffer_) put_le(bytes, static_cast<std::uint32_t>(id), bytes_per_token());
  std::ostringstream name;
  name << split_ << '_' << std::setw(6) << std::setfill('0') << written_.size() << ".bin";
  const auto path = dir_ / name.str();
  env_.create_dirs(dir_);
  write_atomically(env_, path, std::filesystem::path(path).concat(".tmp"), [&](WritableFile& f) { f.append(bytes); });
  written_.push_back(path);
  tokens_ += static_cast<std::int64_t>(buffer_.size());
  buffer_.clear();
}

std::vector<std::filesystem::path> ShardWriter::finish() {
  flush();
  if (!written_.empty()) env_.sync_dir(dir_);
  return written_;
}

}  // namespace meridian
