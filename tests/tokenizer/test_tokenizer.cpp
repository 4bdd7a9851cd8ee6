// The byte-level BPE tokenizer on toy vocabularies: merges by rank, the leftmost of equals, whole
// pieces, specials (text unless allowed), any bytes (invalid UTF-8 too) encoded and decoded back;
// and every malformed rank file an error naming the file and line.
#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "core/tokenizer/hf_tokenizer.hpp"
#include "core/tokenizer/tiktoken_file.hpp"
#include "core/tokenizer/tokenizer.hpp"
#include "core/util/error.hpp"
#include "tests/support/temp_dir.hpp"

using namespace meridian;
using meridian::testing::TempDir;
namespace fs = std::filesystem;

namespace {

// The 256 bytes, then `extra` tokens, ranked in that order.
std::vector<std::string> byte_tokens(const std::vector<std::string>& extra) {
  std::vector<std::string> t;
  for (int b = 0; b < 256; ++b) t.emplace_back(1, static_cast<char>(b));
  t.insert(t.end(), extra.begin(), extra.end());
  return t;
}

Tokenizer toy(const std::vector<std::string>& extra, std::vector<SpecialToken> specials = {}) {
  return Tokenizer("toy", BpeModel::from_ranks(byte_tokens(extra)), Pretokenizer(R"( ?\p{L}+|\s+|[^\s\p{L}]+)", "toy"),
                   std::move(specials));
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

bool contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return true;
  MESSAGE("\"", part, "\" is not in: ", text);
  return false;
}

}  // namespace

TEST_CASE("BPE merges the adjacent pair of lowest rank first, the leftmost of equals") {
  // ranks: ab 256, bc 257, abc 258: "abc" is one token (a whole piece), "abcx" merges ab first.
  const auto t = toy({"ab", "bc", "abc", "aa"});
  CHECK(t.encode("abc") == std::vector<std::int32_t>{258});
  CHECK(t.encode("abcx") == std::vector<std::int32_t>{258, 'x'});  // ab (256) then ab+c (258)
  CHECK(t.encode("bcx") == std::vector<std::int32_t>{257, 'x'});
  CHECK(t.encode("aaa") == std::vector<std::int32_t>{259, 'a'});  // the leftmost pair of equals
  CHECK(t.encode(" ab") == std::vector<std::int32_t>{' ', 256});
}

TEST_CASE("Hugging Face merges: the rank is the merge's, and ignore_merges takes a whole piece") {
  auto tokens = byte_tokens({"bc", "ab", "abc"});
  const std::vector<std::pair<std::int32_t, std::int32_t>> merges = {{'a', 'b'}, {257, 'c'}, {'b', 'c'}};
  const BpeModel by_merges = BpeModel::from_merges(tokens, merges, false);
  std::vector<std::int32_t> out;
  by_merges.encode_piece("abc", out);
  CHECK(out == std::vector<std::int32_t>{258});  // ab (merge 0), then ab+c (merge 1)
  out.clear();
  BpeModel::from_merges(tokens, {{'b', 'c'}}, false).encode_piece("abc", out);
  CHECK(out == std::vector<std::int32_t>{'a', 256});
  out.clear();
  BpeModel::from_merges(tokens, {{'b', 'c'}}, true).encode_piece("abc", out);
  CHECK(out == std::vector<std::int32_t>{258});  // the piece is a token: taken whole
}

TEST_CASE("specials are text unless allowed, and when allowed the earliest and longest wins") {
  const auto t = toy({"<|", "|>"}, {{"<|end|>", 300}, {"<|end|><|end|>", 301}});
  CHECK(t.vocab_size() == 302);
  const auto as_text = t.encode("a<|end|>b");
  CHECK(std::find(as_text.begin(), as_text.end(), 300) == as_text.end());
  CHECK(t.encode("a<|end|>b", true) == std::vector<std::int32_t>{'a', 300, 'b'});
  CHECK(t.encode("<|end|><|end|>x", true) == std::vector<std::int32_t>{301, 'x'});
  CHECK(t.decode(std::vector<std::int32_t>{'a', 300, 'b'}) == "a<|end|>b");
  CHECK(contains(error_of([&] { t.decode(std::vector<std::int32_t>{'a', 299}); }), "id 299 at position 1 is no token"));
  CHECK(contains(error_of([] { toy({}, {{"<x>", 65}}); }), "has id 65, which is the ordinary token \"A\""));
}

TEST_CASE("any bytes round-trip: invalid UTF-8 becomes pieces of its own, encoded byte by byte") {
  const auto t = toy({"ab"});
  const std::string bytes = std::string("ab\xff\xfe" "ab \xc3(") + '\0' + "\x80z";
  const auto ids = t.encode(bytes);
  CHECK(t.decode(ids) == bytes);
  CHECK(ids.front() == 256);                     // "ab" before the invalid bytes still merges
  CHECK(ids[1] == 0xff);                         // the invalid bytes are their own tokens
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  CHECK(t.decode(t.encode(all + all)) == all + all);
}

TEST_CASE("rank files: every malformed one is an error naming the file and line") {
  TempDir dir("tiktoken");
  const auto file = dir / "x.tiktoken";
  const auto write = [&](const std::string& extra_lines, int skip = -1) {
    std::ofstream out(file);
    for (int b = 0; b < 256; ++b) {
      if (b == skip) continue;
      const unsigned char c = static_cast<unsigned char>(b);
      static const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
      out << alphabet[c >> 2] << alphabet[(c & 3) << 4] << "== " << b << "\n";
    }
    out << extra_lines;
  };
  write("YWI= 256\n");
  CHECK(read_tiktoken_ranks(file).size() == 257);
  write("YWI= 255\n");
  CHECK(contains(error_of([&] { read_tiktoken_ranks(file); }), "x.tiktoken:257: rank 255 is given twice"));
  write("YWI= 258\n");  // 257 tokens: rank 256 would be missing
  CHECK(contains(error_of([&] { read_tiktoken_ranks(file); }),
                 "x.tiktoken:257: rank 258 is past the file's 257 tokens (ranks must be 0 to 256)"));
  write("YWI= 2147483646\n");  // sized by its rank, this line alone would ask for 2^31 tokens
  CHECK(contains(error_of([&] { read_tiktoken_ranks(file); }), "rank 2147483646 is past the file's 257 tokens"));
  write("QQ== 256\n");
  CHECK(contains(error_of([&] { read_tiktoken_ranks(file); }), "x.tiktoken:257: the token of rank 256 has the same bytes as line 66's"));
  write("Y!I= 256\n");
  CHECK(contains(error_of([&] { read_tiktoken_ranks(file); }), "x.tiktoken:257: \"Y!I=\" is not a base64 token"));
  write("YWI=256\n");
  CHECK(contains(error_of([&] { read_tiktoken_ranks(file); }), "x.tiktoken:257: expected \"<base64 token> <rank>\""));
  write("YWI= -3\n");
  CHECK(contains(error_of([&] { read_tiktoken_ranks(file); }), "rank \"-3\" is not a number"));
  write("YWI= 255\n", 255);
  CHECK(contains(error_of([&] { read_tiktoken_ranks(file); }), "byte 255 has no token of its own"));
  write("");
  CHECK(contains(error_of([&] { load_tiktoken(file, "cl100k_base"); }), "256 ranks, but cl100k_base has 100256"));
  CHECK(contains(error_of([&] { load_tiktoken(file, "cl99k"); }), "encoding \"cl99k\" is unknown (known: gpt2,"));
  CHECK(contains(error_of([&] { read_tiktoken_ranks(dir / "absent"); }), "absent"));
}

TEST_CASE("a pattern that does not compile is an error naming where") {
  CHECK(contains(error_of([] { Pretokenizer("(?<bad", "job.toml"); }), "job.toml: the pre-tokenizer pattern does not compile at offset"));
}

TEST_CASE("a pattern that backtracks past PCRE2's limits on some text is an error naming where, not a failed check") {
  std::string words;
  for (int i = 0; i < 40; ++i) words += "aaaa ";
  const Pretokenizer nested(R"((\w+\s?)+$)", "t.json");
  const auto split = [&](const Pretokenizer& p, const std::string& text) {
    std::string joined;
    p.split(text, [&](std::string_view piece) { joined += piece; });
    return joined;
  };
  CHECK(split(nested, words) == words);  // it matches: no backtracking
  std::string message;
  try {
    split(nested, words + "!");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Data);
    message = e.what();
  }
  CHECK(contains(message,
                 "t.json: the pre-tokenizer pattern gives up on the text at byte 0 of 201 (match limit exceeded)"));
  // A group repeated per byte outgrows JIT's default 32 KiB stack within a few thousand bytes: 20,000
  // take a larger one, 400,000 outgrow that too (8 MiB) and take the interpreter, which keeps its
  // backtracking on the heap.
  const Pretokenizer groups("(a|aa)+$", "t.json");
  for (const std::size_t n : {std::size_t{20000}, std::size_t{400000}}) {
    const std::string many(n, 'a');
    CHECK(split(groups, many) == many);
  }
}

TEST_CASE("GPT-2's byte-to-character map: every byte to one character and back") {
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  CHECK(chars_to_bytes(bytes_to_chars(all)) == all);
  CHECK(bytes_to_chars(" ") == "\u0120");  // the space is Ġ
  CHECK(bytes_to_chars("a") == "a");
  CHECK_FALSE(chars_to_bytes("\u4e2d").has_value());
}

TEST_CASE("tokenizer.json: what tokenizer_json writes loads back and encodes as the merges say") {
  TempDir dir("tokenizer-json");
  ByteLevelBpe bpe{byte_tokens({" t", "he", " the", "ab"}), {}, R"( ?\p{L}+|\s+|[^\s\p{L}]+)", {{"<|endoftext|>", 260}}};
  bpe.merges = {{' ', 't'}, {'h', 'e'}, {256, 257}, {'a', 'b'}};
  const auto file = dir / "tokenizer.json";
  std::ofstream(file) << tokenizer_json(bpe);
  const Tokenizer t = load_tokenizer_json(file);
  CHECK(t.vocab_size() == 261);
  CHECK(t.encode(" the ab") == std::vector<std::int32_t>{258, ' ', 259});
  CHECK(t.encode(" the<|endoftext|>", true) == std::vector<std::int32_t>{258, 260});
  CHECK(t.decode(t.encode(" the thing\xff")) == " the thing\xff");
}

TEST_CASE("tokenizer.json: what meridian does not read is an error naming the file and field") {
  TempDir dir("tokenizer-json");
  ByteLevelBpe bpe{byte_tokens({"ab"}), {{'a', 'b'}}, "\\s+|\\S+", {}};
  const std::string good = tokenizer_json(bpe);
  const auto load = [&](const std::string& text) {
    std::ofstream(dir / "t.json") << text;
    return error_of([&] { load_tokenizer_json(dir / "t.json"); });
  };
  const auto replace = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    const auto at = s.find(from);
    REQUIRE(at != std::string::npos);
    return s.replace(at, from.size(), to);
  };
  CHECK(contains(load("{ not json"), "t.json: not valid JSON"));
  CHECK(contains(load(replace("\"type\": \"BPE\"", "\"type\": \"WordPiece\"")), "model.type is WordPiece"));
  // Fields of another type than text are errors too, not a JSON library's exception (fuzz_tokenizer).
  CHECK(contains(load(replace("\"type\": \"BPE\"", "\"type\": true")), "model.type is true, meridian reads BPE"));
  CHECK(contains(load(replace("\"type\": \"Split\"", "\"type\": 3")), "pre_tokenizer"));
  CHECK(contains(load(replace("\"behavior\": \"Isolated\"", "\"behavior\": [1]")), "pre_tokenizer"));
  CHECK(contains(load(replace("\"byte_fallback\": false", "\"byte_fallback\": true")), "byte_fallback is true"));
  CHECK(contains(load(replace("\"normalizer\": null", "\"normalizer\": {\"type\": \"NFC\"}")), "normalizer"));
  CHECK(contains(load(replace("\"behavior\": \"Isolated\"", "\"behavior\": \"Removed\"")), "pre_tokenizer"));
  CHECK(contains(load(replace("\"b\"\n", "\"c\"\n")), "model.merges[0] makes \"ac\", which is no token"));
  CHECK(contains(load(replace("\"b\"\n", "\"\u4e2d\"\n")), "model.merges[0] merges \"a\" and"));
  CHECK(contains(load(replace("\"ab\": 256", "\"ab\": 999")), "model.vocab[\"ab\"] is 999"));
  CHECK(contains(load(replace("\"Regex\": \"", "\"Regex\": \"(?<bad")), "the pre-tokenizer pattern does not compile"));
}
