// The BPE trainer on corpora small enough to follow by hand: the most frequent pair first, ties to
// the pair whose bytes come first, min_frequency and the vocabulary bounding the merges, counts
// merged from threads in any order giving the same tokenizer, and what it writes read back by the
// tokenizer.json loader, encoding its corpus and decoding it back.
#include <doctest/doctest.h>

#include <fstream>
#include <string>
#include <vector>

#include "core/tokenizer/bpe_trainer.hpp"
#include "core/tokenizer/hf_tokenizer.hpp"
#include "core/tokenizer/tiktoken_file.hpp"
#include "core/util/error.hpp"
#include "tests/support/temp_dir.hpp"

using namespace meridian;
using meridian::testing::TempDir;

namespace {

const Pretokenizer& llama3_pretokenizer() {
  static const Pretokenizer p(std::string(find_tiktoken_encoding("llama3")->pattern), "llama3");
  return p;
}

BpeTrainOptions options(int vocab, std::int64_t min_frequency = 2) {
  BpeTrainOptions o;
  o.vocab = vocab;
  o.min_frequency = min_frequency;
  o.pattern = std::string(find_tiktoken_encoding("llama3")->pattern);
  return o;
}

PieceCounts count(std::string_view text) {
  PieceCounts c;
  c.add(llama3_pretokenizer(), text);
  return c;
}

}  // namespace

TEST_CASE("the most frequent pair first, ties to the pair whose bytes come first, none below min_frequency") {
  // Pieces "abab", " abab", " ab": (a,b) 5 times, then (ab,ab) and (' ',ab) twice each, " " < "ab".
  const ByteLevelBpe bpe = train_bpe(count("abab abab ab"), options(300));
  REQUIRE(bpe.merges.size() == 2);
  CHECK(bpe.tokens.size() == 258);
  CHECK(bpe.tokens[256] == "ab");
  CHECK(bpe.merges[0] == std::pair<std::int32_t, std::int32_t>('a', 'b'));
  CHECK(bpe.tokens[257] == " ab");
  CHECK(bpe.merges[1] == std::pair<std::int32_t, std::int32_t>(' ', 256));
  // Left are (ab,ab) and (" ab",ab), once each: below min_frequency 2.
  REQUIRE(bpe.specials.size() == 1);
  CHECK(bpe.specials[0].text == "<|endoftext|>");
  CHECK(bpe.specials[0].id == 258);

  const ByteLevelBpe all = train_bpe(count("abab abab ab"), options(300, 1));
  CHECK(all.merges.size() == 4);
}

TEST_CASE("the vocabulary bounds the merges, and one below the bytes and specials is refused") {
  const ByteLevelBpe one = train_bpe(count("abab abab ab"), options(258));
  CHECK(one.merges.size() == 1);
  CHECK(one.specials[0].id == 257);
  try {
    train_bpe(count("ab"), options(256));
    FAIL("a vocabulary of 256 with a special token was accepted");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Usage);
    CHECK(std::string(e.what()).find("256") != std::string::npos);
  }
}

TEST_CASE("counts merged from threads in any order train the same tokenizer") {
  const std::vector<std::string> documents = {"the quick brown fox jumps over the lazy dog; ",
                                               "the dog sleeps, the fox runs. ", "a fox, a dog: 12345"};
  PieceCounts whole, first, second;
  for (int i = 0; i < 30; ++i) {
    whole.add(llama3_pretokenizer(), documents[i % 3]);
    (i % 2 ? first : second).add(llama3_pretokenizer(), documents[i % 3]);
  }
  PieceCounts forwards = first, backwards = second;
  forwards.merge(second);
  backwards.merge(first);
  const std::string expected = tokenizer_json(train_bpe(whole, options(400)));
  CHECK(tokenizer_json(train_bpe(forwards, options(400))) == expected);
  CHECK(tokenizer_json(train_bpe(backwards, options(400))) == expected);
}

TEST_CASE("what it writes loads as a tokenizer.json that encodes its corpus shorter and decodes it back") {
  std::string corpus;
  for (int i = 0; i < 50; ++i) corpus += "Über die Brücke, " + std::to_string(i * 37) + " Schritte — naïve café. ";
  const ByteLevelBpe bpe = train_bpe(count(corpus), options(300));
  CHECK(bpe.tokens.size() + bpe.specials.size() == 300);
  TempDir dir("bpe_trainer");
  const auto file = dir.path() / "tokenizer.json";
  std::ofstream(file) << tokenizer_json(bpe);
  const Tokenizer tok = load_tokenizer_json(file);
  const auto ids = tok.encode(corpus + "<|endoftext|>", true);
  CHECK(ids.size() < corpus.size() / 3);
  CHECK(ids.back() == 299);
  CHECK(tok.decode(ids) == corpus + "<|endoftext|>");
}
