#pragma once
// A tokenizer from its file: a Hugging Face tokenizer.json, or a tiktoken rank file with the
// name of its encoding (which a file named <encoding>.tiktoken gives by itself).
#include <filesystem>
#include <string>
#include <string_view>

#include "core/tokenizer/tokenizer.hpp"

namespace meridian {

// Error(Config) naming the file: an unreadable or malformed one, or a rank file whose encoding
// neither `encoding` nor its name says.
Tokenizer load_tokenizer(const std::filesystem::path& file, std::string_view encoding = {});

// A job's tokenizer as it travels with checkpoints and exports: the file's name and bytes, and the
// encoding that a rank file needs.
struct TokenizerFile {
  std::string name;  // "tokenizer.json", "cl100k_base.tiktoken", ...
  std::string bytes;
  std::string encoding;
  bool operator==(const TokenizerFile&) const = default;
};

// The tokenizer a TokenizerFile holds, its errors (load_tokenizer's) naming it as `where`/<its name>.
Tokenizer load_tokenizer(const TokenizerFile& file, const std::filesystem::path& where);

// The file read and parsed (load_tokenizer's errors), and Error(Config) naming it when its
// vocabulary is larger than the model's.
TokenizerFile read_job_tokenizer(const std::filesystem::path& file, std::string_view encoding, int model_vocab);

}  // namespace meridian
