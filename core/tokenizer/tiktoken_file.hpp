#pragma once
// tiktoken's rank files (`.tiktoken`: one token a line, its bytes in base64 and its rank) and the
// named encodings that give them their pre-tokenizer pattern and special tokens: gpt2, r50k_base,
// p50k_base, cl100k_base, o200k_base (OpenAI's, as tiktoken defines them) and llama3 (Meta's
// Llama 3.1 tokenizer, tiktoken-based).
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "core/tokenizer/tokenizer.hpp"

namespace meridian {

struct TiktokenEncoding {
  std::string_view name;
  std::string_view pattern;
  std::vector<SpecialToken> specials;
  int ordinary_tokens;  // the rank file's size
};

// nullopt... the encoding of that name, or null.
const TiktokenEncoding* find_tiktoken_encoding(std::string_view name);
std::vector<std::string_view> tiktoken_encoding_names();

// The tokens of a rank file, by rank. Error(Config) naming the file and line: not "base64 rank",
// bad base64, a rank given twice or past the file's n tokens (ranks must be 0..n-1), two ranks of the same bytes.
std::vector<std::string> read_tiktoken_ranks(const std::filesystem::path& file);
// The same from the file's text, which `file` names in errors.
std::vector<std::string> parse_tiktoken_ranks(std::string_view text, const std::filesystem::path& file);

// The tokenizer of `encoding` over `file`'s ranks. Error(Config) for an unknown encoding or a
// rank file of another size than the encoding's.
Tokenizer load_tiktoken(const std::filesystem::path& file, std::string_view encoding);
// The same over ranks already read from `file`.
Tokenizer tiktoken_from_ranks(std::vector<std::string> tokens, const std::filesystem::path& file,
                              std::string_view encoding);

}  // namespace meridian
