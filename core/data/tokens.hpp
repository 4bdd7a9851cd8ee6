#pragma once
// A file of tokens read whole into 32-bit ids (`meridian eval`'s data), and checking ids against
// the model's vocabulary.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "core/data/token_shard.hpp"

namespace meridian {

struct TokenFile {
  std::vector<std::int32_t> ids;
  // The ids the file's encoding can hold: 256 (text), 65,536 (16-bit llm.c shards), 2^31 (32-bit).
  std::int64_t id_space = 0;
};

// Loads one file whole (TokenShard::open's errors); a job's training data stays mapped instead
// (core/data/corpus.hpp).
TokenFile load_token_file(const std::filesystem::path& path, DataFormat format);
inline std::vector<std::int32_t> load_tokens(const std::filesystem::path& path, DataFormat format) {
  return load_token_file(path, format).ids;
}

// Throws ErrorKind::Data naming `source` and the first token >= vocab (its index and value).
void check_vocab(std::span<const std::int32_t> tokens, int vocab, const std::filesystem::path& source);
// The same, and a vocabulary the file's encoding cannot address (a model of 128,256 tokens on
// 16-bit shards was not tokenized for this data): Error(Data) naming both.
void check_vocab(const TokenFile& file, int vocab, const std::filesystem::path& source);

}  // namespace meridian
