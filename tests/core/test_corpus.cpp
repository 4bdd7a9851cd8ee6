// A job's corpus: what a data path names (a file, a directory, a glob; in name order), the errors
// of an empty glob or directory, validation shards beside training ones, a weight that is not
// positive or a token outside the vocabulary; the held-out split across shards; memory that does
// not hold the corpus.
#include <doctest/doctest.h>

#include <filesystem>
#include <functional>
#include <string>

#include "core/data/corpus.hpp"
#include "core/data/data_paths.hpp"
#include "core/util/error.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/token_shards.hpp"

using namespace meridian;
using meridian::testing::TempDir;
using meridian::testing::write_bytes;
using meridian::testing::write_iota_shard;
namespace fs = std::filesystem;

namespace {

// The error's kind and message, which must name `name`.
std::string error_naming(const std::function<void()>& f, ErrorKind kind, const std::string& name) {
  try {
    f();
  } catch (const Error& e) {
    CHECK(e.kind() == kind);
    CHECK_MESSAGE(std::string(e.what()).find(name) != std::string::npos, e.what());
    return e.what();
  }
  FAIL("no error naming ", name);
  return "";
}

std::vector<std::string> names(const std::vector<fs::path>& files) {
  std::vector<std::string> out;
  for (const auto& f : files) out.push_back(f.filename().string());
  return out;
}

}  // namespace

TEST_CASE("a data path is a file, a directory's files or a glob's, in name order") {
  TempDir dir("corpus");
  fs::create_directories(dir / "shards");
  for (const char* name : {"b_002.bin", "b_000.bin", "b_010.bin", "b_001.bin", ".hidden"})
    write_iota_shard(dir / "shards" / name, 0, 10);
  CHECK(names(expand_data_path(dir / "shards" / "b_001.bin")) == std::vector<std::string>{"b_001.bin"});
  CHECK(names(expand_data_path(dir / "shards")) ==
        std::vector<std::string>{"b_000.bin", "b_001.bin", "b_002.bin", "b_010.bin"});
  CHECK(names(expand_data_path(dir / "shards" / "b_00?.bin")) ==
        std::vector<std::string>{"b_000.bin", "b_001.bin", "b_002.bin"});
}

TEST_CASE("an empty glob or directory, and validation shards in a training directory, are data errors") {
  TempDir dir("corpus");
  fs::create_directories(dir / "empty");
  fs::create_directories(dir / "tokenized");
  error_naming([&] { expand_data_path(dir / "nothing_*.bin"); }, ErrorKind::Data, "matches no file");
  error_naming([&] { expand_data_path(dir / "empty"); }, ErrorKind::Data, "without files");
  write_iota_shard(dir / "tokenized" / "train_000000.bin", 0, 10);
  write_iota_shard(dir / "tokenized" / "val_000000.bin", 0, 10);
  error_naming([&] { expand_data_path(dir / "tokenized"); }, ErrorKind::Data, "val_000000.bin");
  CHECK(expand_data_path(dir / "tokenized" / "train_*.bin").size() == 1);
}

TEST_CASE("opening a corpus checks every shard: its header, its tokens against the vocabulary, the weights") {
  TempDir dir("corpus");
  write_iota_shard(dir / "a.bin", 0, 100);
  write_iota_shard(dir / "b.bin", 1000, 100);
  const Corpus ok = Corpus::open({{dir / "a.bin", 1}, {dir / "b.bin", 2}}, DataFormat::LlmcBin, 1100);
  CHECK(ok.tokens() == 200);
  CHECK(ok.sources()[1].weight == 2);
  const std::string msg = error_naming([&] { Corpus::open({{dir / "*.bin", 1}}, DataFormat::LlmcBin, 1050); },
                                       ErrorKind::Data, "b.bin");
  CHECK_MESSAGE(msg.find("token 1050 at index 50") != std::string::npos, msg);
  for (double bad : {0.0, -1.0})
    error_naming([&] { Corpus::open({{dir / "a.bin", bad}}, DataFormat::LlmcBin, 1100); }, ErrorKind::Config,
                 "a.bin");
  write_bytes(dir / "bad.bin", meridian::testing::shard({1, 2, 3}, 20240520, 1, 9));
  error_naming([&] { Corpus::open({{dir / "*.bin", 1}}, DataFormat::LlmcBin, 1100); }, ErrorKind::Data,
               "bad.bin");
}

TEST_CASE("the held-out split takes the first source's last tokens, across shards, and reads back in order") {
  TempDir dir("corpus");
  write_iota_shard(dir / "s_0.bin", 0, 100);
  write_iota_shard(dir / "s_1.bin", 1000, 30);
  Corpus corpus = Corpus::open({{dir / "s_*.bin", 1}}, DataFormat::LlmcBin, 2000);
  const Corpus val = corpus.hold_out(0.5);  // 65 tokens: all of s_1 and the last 35 of s_0
  CHECK(corpus.tokens() == 65);
  CHECK(val.tokens() == 65);
  const auto front = val.read_front(40);
  REQUIRE(front.size() == 40);
  CHECK(front[0] == 65);
  CHECK(front[34] == 99);
  CHECK(front[35] == 1000);
  CHECK(val.read_front(0).size() == 65);
  CHECK_THROWS_AS(corpus.hold_out(1.0), Error);
}
