#pragma once
// Writes token ids as llm.c shards (dev/data/data_common.py's write_datafile): a header of 256
// little-endian int32 (magic, version, token count, zeros), then the ids: 16-bit (magic 20240520,
// version 1) when every id of the vocabulary fits, 32-bit (magic 20240801, version 7) otherwise.
// A split's shards are <dir>/<split>_<6 digits>.bin, numbered from 0 so that names sort in order,
// each of `shard_tokens` ids but the last; each appears whole or not at all (temp file + rename).
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace meridian {

class Env;

class ShardWriter {
 public:
  // vocab: the tokenizer's vocabulary (ids < vocab), which decides the width.
  ShardWriter(Env& env, std::filesystem::path dir, std::string split, std::int64_t vocab, std::int64_t shard_tokens);

  void append(std::span<const std::int32_t> ids);
  // Writes what is buffered as the last shard (none when empty). The shards written, in order.
  std::vector<std::filesystem::path> finish();

  int bytes_per_token() const { return wide_ ? 4 : 2; }
  std::int64_t tokens() const { return tokens_; }

 private:
  void flush();

  Env& env_;
  std::filesystem::path dir_;
  std::string split_;
  bool wide_;
  std::int64_t shard_tokens_;
  std::vector<std::int32_t> buffer_;
  std::vector<std::filesystem::path> written_;
  std::int64_t tokens_ = 0;
};

}  // namespace meridian
