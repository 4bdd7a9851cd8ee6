#pragma once
// Hugging Face tokenizer.json files of byte-level BPE models (GPT-2's, Llama 3's and the like),
// read and written. Read: model "BPE" over the GPT-2 byte-to-character map (no byte fallback, no
// subword prefix or suffix), merges as "a b" strings or [a, b] pairs, ignore_merges; the
// pre-tokenizer ByteLevel with its own regular expression, or a Split by a regular expression
// (behavior Isolated) followed by ByteLevel without one; no normalizer; added_tokens as the
// specials. Anything else is refused with the file and the field named, never ignored.
#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "core/tokenizer/tokenizer.hpp"

namespace meridian {

// GPT-2's pattern, which ByteLevel's use_regex = true means.
extern const char* const kByteLevelPattern;

// Error(Config) naming the file and what is wrong or unsupported; Error(Io) when it cannot be read.
Tokenizer load_tokenizer_json(const std::filesystem::path& file);
// The same from the file's text; `file` names it in errors and gives the tokenizer its name.
Tokenizer tokenizer_from_json(std::string_view text, const std::filesystem::path& file);

// A byte-level BPE as Hugging Face writes it: tokens by id, merges by rank (pairs of ids), the
// pre-tokenizer pattern (a Split then ByteLevel, as Llama 3's), the specials as added tokens.
struct ByteLevelBpe {
  std::vector<std::string> tokens;
  std::vector<std::pair<std::int32_t, std::int32_t>> merges;
  std::string pattern;
  std::vector<SpecialToken> specials;
};
std::string tokenizer_json(const ByteLevelBpe& bpe);

// GPT-2's byte-to-character map: a token's bytes as the text tokenizer.json holds, and back
// (nullopt when a character is outside the map).
std::string bytes_to_chars(std::string_view bytes);
std::optional<std::string> chars_to_bytes(std::string_view text);

}  // namespace meridian
