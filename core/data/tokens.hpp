#pragma once
// Token data on disk and in memory: loading a file into 32-bit token ids, checking them against
// the model's vocabulary, and cutting the train/val split.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace meridian {

enum class DataFormat {
  Text,     // the file's bytes are the tokens (byte-level tokenizer, vocab 256)
  LlmcBin,  // llm.c shard: 256 little-endian int32 header (magic, version, count), then the tokens:
            // uint16 (magic 20240520, version 1: GPT-2's) or uint32 (magic 20240801, version 7: Llama 3's)
};

// "text" | "llmc-bin"; nullopt for anything else.
std::optional<DataFormat> parse_data_format(std::string_view name);

struct TokenFile {
  std::vector<std::int32_t> ids;
  // The ids the file's encoding can hold: 256 (text), 65,536 (16-bit llm.c shards), 2^31 (32-bit).
  std::int64_t id_space = 0;
};

// Loads one file. Throws ErrorKind::Data naming the path and the problem: missing, unreadable,
// empty, a bad llm.c header field (expected vs found), truncated or with trailing bytes, a 32-bit
// id of 2^31 or more.
TokenFile load_token_file(const std::filesystem::path& path, DataFormat format);
inline std::vector<std::int32_t> load_tokens(const std::filesystem::path& path, DataFormat format) {
  return load_token_file(path, format).ids;
}

// Throws ErrorKind::Data naming `source` and the first token >= vocab (its index and value).
void check_vocab(std::span<const std::int32_t> tokens, int vocab, const std::filesystem::path& source);
// The same, and a vocabulary the file's encoding cannot address (a model of 128,256 tokens on
// 16-bit shards was not tokenized for this data): Error(Data) naming both.
void check_vocab(const TokenFile& file, int vocab, const std::filesystem::path& source);

struct TrainVal {
  std::vector<std::int32_t> train, val;
};

// train = the first (1 - val_fraction) of the tokens, val = the rest; contiguous, so that val text
// never overlaps a training window. val_fraction must lie in [0, 1) (ErrorKind::Config otherwise).
TrainVal split_train_val(std::vector<std::int32_t> tokens, double val_fraction);

}  // namespace meridian
