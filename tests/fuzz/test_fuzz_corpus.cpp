// Replays the kept corpus of every fuzz target (fuzz/corpus/<name>/: seed inputs, and every input
// that once crashed a decoder or broke a promise) through the target's function in the normal
// build: each must return 0 without throwing. A target whose corpus is missing or empty fails, so
// a renamed folder cannot pass having replayed nothing. The libFuzzer programs themselves are
// built by the "fuzz" preset (fuzz/CMakeLists.txt).
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz/fuzz_common.hpp"
#include "crosssite/round/records.hpp"

namespace fs = std::filesystem;

namespace {

using Target = int (*)(const std::uint8_t*, std::size_t);

void replay(const char* name, Target target) {
  const fs::path dir = fs::path(MERIDIAN_SOURCE_DIR) / "fuzz" / "corpus" / name;
  REQUIRE_MESSAGE(fs::is_directory(dir), dir.string());
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.is_regular_file()) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  REQUIRE_MESSAGE(!files.empty(), "no inputs in ", dir.string());
  for (const auto& file : files) {
    std::ifstream in(file, std::ios::binary);
    const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CAPTURE(file.filename().string());
    int result = -1;
    CHECK_NOTHROW(result = target(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()));
    CHECK(result == 0);
  }
  MESSAGE(files.size(), " inputs replayed through meridian_fuzz_", std::string(name));
}

}  // namespace

TEST_CASE("records") { replay("records", meridian_fuzz_records); }
TEST_CASE("chunks") { replay("chunks", meridian_fuzz_chunks); }
TEST_CASE("store") { replay("store", meridian_fuzz_store); }
TEST_CASE("ops") { replay("ops", meridian_fuzz_ops); }
TEST_CASE("etcd") { replay("etcd", meridian_fuzz_etcd); }
TEST_CASE("config") { replay("config", meridian_fuzz_config); }
TEST_CASE("checkpoint") { replay("checkpoint", meridian_fuzz_checkpoint); }
TEST_CASE("tokens") { replay("tokens", meridian_fuzz_tokens); }
TEST_CASE("codec") { replay("codec", meridian_fuzz_codec); }
TEST_CASE("stripes") { replay("stripes", meridian_fuzz_stripes); }
TEST_CASE("parts") { replay("parts", meridian_fuzz_parts); }
TEST_CASE("hf") { replay("hf", meridian_fuzz_hf); }
TEST_CASE("tokenizer") { replay("tokenizer", meridian_fuzz_tokenizer); }

// What fuzz_records found, beyond "it returns": a 104-byte commit record whose lists of empty
// structs claimed about a million merged rounds, each a map insertion (10 s under the fuzz build's
// sanitizers, ~20 ms in a release build, for every reader). A commit lists at most 4,096 of each.
TEST_CASE("a commit record listing more than 4,096 merged rounds is refused") {
  meridian::CommitRecord record;
  record.number = 7;
  for (int i = 0; i < 4096; ++i) record.merged["site-" + std::to_string(i)] = i;
  CHECK(meridian::decode_commit(meridian::encode(record)) == record);
  record.merged["one-more"] = 1;
  CHECK_THROWS_WITH_AS(meridian::decode_commit(meridian::encode(record)),
                       doctest::Contains("merged rounds (at most 4096 of each)"), meridian::Error);
}
