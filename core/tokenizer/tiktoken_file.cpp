#include "core/tokenizer/tiktoken_file.hpp"

#include <openssl/evp.h>

#include <algorithm>
#include <charconv>
#include <unordered_map>

#include "core/io/mapped_file.hpp"
#include "core/util/error.hpp"

namespace meridian {
namespace {

// The lines that are not empty.
std::size_t count_rows(std::string_view text) {
  std::size_t rows = 0;
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t end = std::min(text.find('\n', at), text.size());
    rows += end > at ? 1 : 0;
    at = end + 1;
  }
  return rows;
}

// tiktoken's patterns (tiktoken_ext/openai_public.py; Meta's llama3 tokenizer.py).
constexpr std::string_view kGpt2Pattern = R"('(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view kCl100kPattern =
    R"('(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)";
constexpr std::string_view kO200kPattern =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

std::vector<SpecialToken> llama3_specials() {
  std::vector<SpecialToken> s;
  const char* named[] = {"<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
                         "<|reserved_special_token_1|>", "<|finetune_right_pad_id|>", "<|step_id|>",
                         "<|start_header_id|>", "<|end_header_id|>", "<|eom_id|>", "<|eot_id|>", "<|python_tag|>"};
  for (const char* n : named) s.push_back({n, 128000 + static_cast<std::int32_t>(s.size())});
  for (int i = 2; s.size() < 256; ++i)
    s.push_back({"<|reserved_special_token_" + std::to_string(i) + "|>", 128000 + static_cast<std::int32_t>(s.size())});
  return s;
}

const std::vector<TiktokenEncoding>& encodings() {
  static const std::vector<TiktokenEncoding> all = {
      {"gpt2", kGpt2Pattern, {{"<|endoftext|>", 50256}}, 50256},
      {"r50k_base", kGpt2Pattern, {{"<|endoftext|>", 50256}}, 50256},
      {"p50k_base", kGpt2Pattern, {{"<|endoftext|>", 50256}}, 50280},
      {"cl100k_base", kCl100kPattern,
       {{"<|endoftext|>", 100257}, {"<|fim_prefix|>", 100258}, {"<|fim_middle|>", 100259}, {"<|fim_suffix|>", 100260},
        {"<|endofprompt|>", 100276}},
       100256},
      {"o200k_base", kO200kPattern, {{"<|endoftext|>", 199999}, {"<|endofprompt|>", 200018}}, 199998},
      {"llama3", kLlama3Pattern, llama3_specials(), 128000},
  };
  return all;
}

// Standard base64 (with padding), through OpenSSL's decoder; nullopt when it is not base64.
std::optional<std::string> base64_decode(std::string_view text) {
  if (text.empty() || text.size() % 4 != 0) return std::nullopt;
  std::string out(text.size() / 4 * 3, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(text.data()), static_cast<int>(text.size()));
  if (n < 0) return std::nullopt;
  const std::size_t padding = text.ends_with("==") ? 2 : text.ends_with('=') ? 1 : 0;
  out.resize(static_cast<std::size_t>(n) - padding);
  return out;
}

}  // namespace

const TiktokenEncoding* find_tiktoken_encoding(std::string_view name) {
  for (const auto& e : encodings())
    if (e.name == name) return &e;
  return nullptr;
}

std::vector<std::string_view> tiktoken_encoding_names() {
  std::vector<std::string_view> names;
  for (const auto& e : encodings()) names.push_back(e.name);
  return names;
}

std::vector<std::string> read_tiktoken_ranks(const std::filesystem::path& file) {
  const MappedFile mapped = MappedFile::open(file);
  return parse_tiktoken_ranks(
      std::string_view(reinterpret_cast<const char*>(mapped.bytes().data()), mapped.bytes().size()), file);
}

std::vector<std::string> parse_tiktoken_ranks(std::string_view text, const std::filesystem::path& file) {
  // Ranks are 0..n-1 over the file's n tokens, so n lines that each give a rank below n, none
  // twice, give every rank. A rank past that is refused at once: sized by it, one line "AQ==
  // 2147483646" would ask for 2^31 tokens.
  const std::size_t rows = count_rows(text);
  std::vector<std::string> tokens(rows);
  std::vector<bool> given(rows, false);
  std::unordered_map<std::string, std::size_t> line_of;
  std::size_t line = 0, at = 0;
  const auto bad = [&](const auto&... why) { return make_error(ErrorKind::Config, file.string(), ":", line, ": ", why...); };
  while (at < text.size()) {
    const std::size_t end = std::min(text.find('\n', at), text.size());
    const std::string_view row = text.substr(at, end - at);
    at = end + 1;
    ++line;
    if (row.empty()) continue;
    const std::size_t space = row.find(' ');
    if (space == std::string_view::npos) throw bad("expected \"<base64 token> <rank>\", found \"", row, "\"");
    const auto bytes = base64_decode(row.substr(0, space));
    if (!bytes || bytes->empty()) throw bad("\"", row.substr(0, space), "\" is not a base64 token");
    std::int64_t rank = -1;
    const std::string_view number = row.substr(space + 1);
    const auto [end_of_number, ec] = std::from_chars(number.data(), number.data() + number.size(), rank);
    if (ec != std::errc() || end_of_number != number.data() + number.size() || rank < 0 || rank >= INT32_MAX)
      throw bad("rank \"", number, "\" is not a number from 0 to 2^31 - 2");
    if (static_cast<std::size_t>(rank) >= rows)
      throw bad("rank ", rank, " is past the file's ", rows, " tokens (ranks must be 0 to ", rows - 1, ")");
    if (given[static_cast<std::size_t>(rank)]) throw bad("rank ", rank, " is given twice");
    if (const auto [it, fresh] = line_of.emplace(*bytes, line); !fresh)
      throw bad("the token of rank ", rank, " has the same bytes as line ", it->second, "'s");
    tokens[static_cast<std::size_t>(rank)] = *bytes;
    given[static_cast<std::size_t>(rank)] = true;
  }
  if (const std::string why = BpeModel::problem(tokens); !why.empty())
    throw make_error(ErrorKind::Config, file.string(), ": ", why);
  return tokens;
}

Tokenizer load_tiktoken(const std::filesystem::path& file, std::string_view encoding) {
  return tiktoken_from_ranks(read_tiktoken_ranks(file), file, encoding);
}

Tokenizer tiktoken_from_ranks(std::vector<std::string> tokens, const std::filesystem::path& file,
                              std::string_view encoding) {
  const TiktokenEncoding* e = find_tiktoken_encoding(encoding);
  if (!e) {
    std::string names;
    for (auto n : tiktoken_encoding_names()) names += (names.empty() ? "" : ", ") + std::string(n);
    throw make_error(ErrorKind::Config, "encoding \"", encoding, "\" is unknown (known: ", names, ")");
  }
  if (static_cast<int>(tokens.size()) != e->ordinary_tokens)
    throw make_error(ErrorKind::Config, file.string(), ": ", tokens.size(), " ranks, but ", e->name, " has ",
                     e->ordinary_tokens, " (is it another encoding's file?)");
  return Tokenizer(std::string(e->name), BpeModel::from_ranks(std::move(tokens)),
                   Pretokenizer(std::string(e->pattern), std::string(e->name)), e->specials);
}

}  // namespace meridian
