// `meridian tokenize` end to end: shards in llm.c's layout (16-bit ids for a vocabulary that fits,
// 32-bit beyond), every document preceded by the end-of-text token, the same shards whatever the
// thread count, JSON Lines by field, the validation split, and bad input named.
#include <doctest/doctest.h>

#include <fstream>
#include <string>
#include <vector>

#include "core/data/tokens.hpp"
#include "core/tokenizer/hf_tokenizer.hpp"
#include "core/tokenizer/tokenizer.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/run_meridian.hpp"
#include "tests/support/temp_dir.hpp"

using namespace meridian;
using meridian::testing::run_meridian;
using meridian::testing::TempDir;
namespace fs = std::filesystem;

namespace {

// A byte-level BPE of `extra` tokens over the bytes, "th" and "he" merged, and <|endoftext|>.
fs::path write_tokenizer(const fs::path& dir, int extra_ids,
                         const std::string& pattern = R"( ?\p{L}+|\s+|[^\s\p{L}]+)") {
  ByteLevelBpe bpe;
  for (int b = 0; b < 256; ++b) bpe.tokens.emplace_back(1, static_cast<char>(b));
  bpe.tokens.push_back("th");
  bpe.tokens.push_back("the");
  for (int i = 0; i < extra_ids; ++i) bpe.tokens.push_back("<filler " + std::to_string(i) + ">");
  bpe.merges = {{'t', 'h'}, {256, 'e'}};
  bpe.pattern = pattern;
  bpe.specials = {{"<|endoftext|>", static_cast<std::int32_t>(bpe.tokens.size())}};
  const auto file = dir / "tokenizer.json";
  std::ofstream(file) << tokenizer_json(bpe);
  return file;
}

std::uint32_t le32(const std::string& s, std::size_t at) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= std::uint32_t{static_cast<unsigned char>(s[at + i])} << (8 * i);
  return v;
}

}  // namespace

TEST_CASE("tokenize: llm.c shards, end-of-text before every document, the same on one thread or two") {
  TempDir dir("tokenize");
  const auto tokenizer = write_tokenizer(dir.path(), 0);
  std::ofstream(dir / "a.txt") << "the thin theme";
  std::ofstream(dir / "b.jsonl") << R"({"text": "then", "id": 1})" << "\n\n" << R"({"text": "hethe"})" << "\n";
  const std::vector<std::string> args{"tokenize", "--tokenizer", tokenizer.string(), "--shard-tokens", "7",
                                      "--val-tokens", "3", (dir / "a.txt").string(), (dir / "b.jsonl").string()};
  auto with_out = [&](const std::string& out) {
    auto a = args;
    a.insert(a.begin() + 3, {"--out", (dir / out).string()});
    return a;
  };
  const auto two = run_meridian(with_out("two"), {}, 2);
  REQUIRE_MESSAGE(two.exit_code == 0, two.describe());
  CHECK(two.err.find("3 documents") != std::string::npos);
  CHECK(two.err.find("on 2 threads") != std::string::npos);
  const auto one = run_meridian(with_out("one"));
  REQUIRE_MESSAGE(one.exit_code == 0, one.describe());

  // What the tokenizer gives each document, after the end-of-text token (258), read back from the shards.
  const Tokenizer t = load_tokenizer_json(tokenizer);
  std::vector<std::int32_t> all;
  for (const char* doc : {"the thin theme", "then", "hethe"}) {
    all.push_back(258);
    t.encode(doc, all);
  }
  std::vector<std::string> shards = {"val_000000.bin"};
  const std::size_t train_shards = (all.size() - 3 + 6) / 7;
  for (std::size_t i = 0; i < train_shards; ++i) shards.push_back("train_00000" + std::to_string(i) + ".bin");
  CHECK_FALSE(fs::exists(dir / "two" / ("train_00000" + std::to_string(train_shards) + ".bin")));
  std::vector<std::int32_t> read;
  for (const auto& shard : shards) {
    CAPTURE(shard);
    REQUIRE(fs::exists(dir / "two" / shard));
    CHECK(testing::file_text(dir / "two" / shard) == testing::file_text(dir / "one" / shard));
    const std::string bytes = testing::file_text(dir / "two" / shard);
    CHECK(le32(bytes, 0) == 20240520u);  // the vocabulary fits 16 bits: llm.c's GPT-2 layout
    CHECK(le32(bytes, 4) == 1u);
    CHECK(bytes.size() == 1024 + 2 * le32(bytes, 8));
    for (std::size_t i = 12; i < 1024; ++i) REQUIRE(bytes[i] == '\0');
    const auto ids = load_tokens(dir / "two" / shard, DataFormat::LlmcBin);
    read.insert(read.end(), ids.begin(), ids.end());
  }
  CHECK(read == all);
  CHECK(load_tokens(dir / "two" / "val_000000.bin", DataFormat::LlmcBin).size() == 3);
  CHECK(t.decode(read) == "<|endoftext|>the thin theme<|endoftext|>then<|endoftext|>hethe");
}

TEST_CASE("tokenize: a vocabulary beyond 16 bits writes llm.c's 32-bit shards") {
  TempDir dir("tokenize");
  const auto tokenizer = write_tokenizer(dir.path(), 65536);
  std::ofstream(dir / "a.txt") << "the end";
  const auto r = run_meridian({"tokenize", "--tokenizer", tokenizer.string(), "--out", (dir / "out").string(),
                               (dir / "a.txt").string()});
  REQUIRE_MESSAGE(r.exit_code == 0, r.describe());
  const std::string bytes = testing::file_text(dir / "out/train_000000.bin");
  CHECK(le32(bytes, 0) == 20240801u);
  CHECK(le32(bytes, 4) == 7u);
  CHECK(bytes.size() == 1024 + 4 * le32(bytes, 8));
  CHECK(load_tokens(dir / "out/train_000000.bin", DataFormat::LlmcBin).front() == 256 + 2 + 65536);
}

TEST_CASE("tokenize: bad input is an error naming the file and where, and writes no shard") {
  TempDir dir("tokenize");
  const auto tokenizer = write_tokenizer(dir.path(), 0);
  std::ofstream(dir / "bad.jsonl") << R"({"text": "ok"})" << "\n" << R"({"body": "no text"})" << "\n";
  auto r = run_meridian({"tokenize", "--tokenizer", tokenizer.string(), "--out", (dir / "out").string(),
                         (dir / "bad.jsonl").string()});
  CHECK(r.exit_code == 65);
  CHECK(r.err.find("bad.jsonl:2: no string field \"text\"") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "out/train_000000.bin"));
  r = run_meridian({"tokenize", "--tokenizer", tokenizer.string(), "--out", (dir / "out").string(), (dir / "absent.txt").string()});
  CHECK(r.exit_code == 65);
  CHECK(r.err.find("absent.txt does not exist") != std::string::npos);
  std::ofstream(dir / "x.tiktoken") << "YQ== 0\n";
  std::ofstream(dir / "a.txt") << "a";
  r = run_meridian({"tokenize", "--tokenizer", (dir / "x.tiktoken").string(), "--out", (dir / "out").string(), (dir / "a.txt").string()});
  CHECK(r.exit_code == 78);
  CHECK(r.err.find("name the encoding") != std::string::npos);
  // A pattern of nested repeats backtracks past PCRE2's limits on the second document: that document
  // is named, on two threads as on one (it once aborted the program from inside the parallel loop).
  fs::create_directories(dir / "nested");
  const auto nested = write_tokenizer(dir / "nested", 0, R"((\w+\s?)+$)");
  std::ofstream(dir / "docs.jsonl") << R"({"text": "fine"})"
                                    << "\n{\"text\": \"" <<
      [] {
        std::string words;
        for (int i = 0; i < 40; ++i) words += "aaaa ";
        return words + "!";
      }() << "\"}\n";
  r = run_meridian(
      {"tokenize", "--tokenizer", nested.string(), "--out", (dir / "out").string(), (dir / "docs.jsonl").string()}, {},
      2);
  CHECK_MESSAGE(r.exit_code == 65, r.describe());
  CHECK_MESSAGE(r.err.find("document 2 of the inputs: " + nested.string() +
                           ": the pre-tokenizer pattern gives up on the text at byte 0 of 201") != std::string::npos,
                r.describe());
  CHECK_FALSE(fs::exists(dir / "out/train_000000.bin"));
}

// configs/examples/gutenberg.toml's three commands on three of the books, its data paths pointed at
// what they made: the tokenizer meridian trained, the shards tokenized with it, and the job trains,
// keeps the tokenizer in its checkpoint, and exports it beside the weights.
TEST_CASE("from text to a job: tokenizer train, tokenize, train the Gutenberg example, export its tokenizer") {
  const fs::path books = meridian::testing::source_dir() / "../shared/data/gutenberg_en";
  REQUIRE_MESSAGE(fs::is_directory(books), books.string(), " is missing (the shared corpora)");
  TempDir dir("tokenize");
  const std::vector<std::string> texts{(books / "alice_in_wonderland.txt").string(),
                                       (books / "anne_of_green_gables.txt").string(),
                                       (books / "SOURCE.txt").string()};
  const fs::path data = dir / "data";
  std::vector<std::string> train{"tokenizer", "train", "--vocab", "512", "--out", (data / "tokenizer.json").string()};
  train.insert(train.end(), texts.begin(), texts.end());
  const auto trained = run_meridian(train, {}, 2);
  REQUIRE_MESSAGE(trained.exit_code == 0, trained.describe());
  std::vector<std::string> tokenize{"tokenize", "--tokenizer", (data / "tokenizer.json").string(), "--out",
                                    data.string(), "--shard-tokens", "60000", "--val-tokens", "5000"};
  tokenize.insert(tokenize.end(), texts.begin(), texts.end());
  const auto tokenized = run_meridian(tokenize, {}, 2);
  REQUIRE_MESSAGE(tokenized.exit_code == 0, tokenized.describe());
  CHECK(fs::exists(data / "train_000002.bin"));  // three shards and more

  const std::string example = (meridian::testing::source_dir() / "configs/examples/gutenberg.toml").string();
  const std::vector<std::string> sets{"--set", "data.path=\"" + (data / "train_*.bin").string() + "\"",
                                      "--set", "data.val_path=\"" + (data / "val_*.bin").string() + "\"",
                                      "--set", "data.tokenizer=\"" + (data / "tokenizer.json").string() + "\"",
                                      "--set", "model.vocab=512", "--set", "inner.steps=3", "--set",
                                      "inner.warmup_steps=1", "--set", "log.eval_every=0", "--set",
                                      "job.run_dir=\"" + (dir / "run").string() + "\""};
  std::vector<std::string> validate{"validate", example};
  validate.insert(validate.end(), sets.begin(), sets.end());
  const auto valid = run_meridian(validate);
  REQUIRE_MESSAGE(valid.exit_code == 0, valid.describe());
  std::vector<std::string> run{"train", "--config", example};
  run.insert(run.end(), sets.begin(), sets.end());
  const auto ran = run_meridian(run);
  REQUIRE_MESSAGE(ran.exit_code == 0, ran.describe());

  const auto exported = run_meridian({"export", "--checkpoint", (dir / "run").string(), "--out", (dir / "hf").string()});
  REQUIRE_MESSAGE(exported.exit_code == 0, exported.describe());
  std::ifstream a(data / "tokenizer.json"), b(dir / "hf" / "tokenizer.json");
  const std::string original((std::istreambuf_iterator<char>(a)), {}), copy((std::istreambuf_iterator<char>(b)), {});
  CHECK(!original.empty());
  CHECK(copy == original);
  std::ifstream config(dir / "hf" / "tokenizer_config.json");
  const std::string tokenizer_config((std::istreambuf_iterator<char>(config)), {});
  CHECK(tokenizer_config.find("\"eos_token\": \"<|endoftext|>\"") != std::string::npos);

  // A model's vocabulary below the tokenizer's is refused before anything trains.
  std::vector<std::string> small{"validate", example};
  small.insert(small.end(), sets.begin(), sets.end());
  small.insert(small.end(), {"--set", "model.vocab=300"});
  const auto refused = run_meridian(small);
  CHECK(refused.exit_code != 0);
  CHECK_MESSAGE(refused.err.find("tokenizer.json has 512 tokens") != std::string::npos, refused.describe());
}
