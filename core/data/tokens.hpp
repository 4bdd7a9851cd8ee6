#pragma once
// Token data on disk and in memory: loading a file into uint16 tokens, checking them against the
// model's vocabulary, and cutting the train/val split.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace meridian {

enum class DataFormat {
  Text,     // the file's bytes are the tokens (byte-level tokenizer, vocab 256)
  LlmcBin,  // llm.c shard: 256 little-endian int32 header (magic, version, count), then uint16 tokens
};

// "text" | "llmc-bin"; nullopt for anything else.
std::optional<DataFormat> parse_data_format(std::string_view name);

// Loads one file. Throws ErrorKind::Data naming the path and the problem: missing, unreadable,
// empty, a bad llm.c header field (expected vs found), truncated or with trailing bytes.
std::vector<std::uint16_t> load_tokens(const std::filesystem::path& path, DataFormat format);

// Throws ErrorKind::Data naming `source` and the first token >= vocab (its index and value).
void check_vocab(std::span<const std::uint16_t> tokens, int vocab, const std::filesystem::path& source);

struct TrainVal {
  std::vector<std::uint16_t> train, val;
};

// train = the first (1 - val_fraction) of the tokens, val = the rest; contiguous, so that val text
// never overlaps a training window. val_fraction must lie in [0, 1) (ErrorKind::Config otherwise).
TrainVal split_train_val(std::vector<std::uint16_t> tokens, double val_fraction);

}  // namespace meridian
