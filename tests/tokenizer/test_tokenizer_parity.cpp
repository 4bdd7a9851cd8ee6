// meridian's tokenizers against the references tests/tokenizer/make_reference.sh writes into the
// build tree first (ctest's fixture "tokenizer_reference"): its tiktoken encodings (gpt2,
// cl100k_base, o200k_base) against tiktoken's Rust core (its npm package, in WebAssembly) on tiny
// shakespeare, the hard cases and every Gutenberg book, and against its JavaScript port,
// js-tiktoken, on the first two; its tokenizer.json reader against Hugging Face's own tokenizer
// (its JavaScript implementation) on GPT-2's tokenizer.json and on one `meridian tokenizer train`
// made; the same token count and SHA-256 of the ids each time, and decode(encode(text)) == text.
// Two of the rank files are read as a checkpoint keeps them (a TokenizerFile), one from its path.
#include <doctest/doctest.h>

#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "core/tokenizer/hf_tokenizer.hpp"
#include "core/tokenizer/tiktoken_file.hpp"
#include "core/tokenizer/tokenizer_file.hpp"
#include "core/util/digest.hpp"
#include "tests/support/child_process.hpp"

using namespace meridian;
namespace fs = std::filesystem;

namespace {

const fs::path kReference = fs::path(MERIDIAN_BINARY_DIR) / "tokenizer-reference";

std::ifstream expected_lines(const std::string& name) {
  std::ifstream in(kReference / name);
  REQUIRE_MESSAGE(in.good(), "no ", (kReference / name).string(), ": ctest runs make_reference.sh first");
  return in;
}

std::string hex(const Digest& d) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (std::byte b : d) {
    out += digits[std::to_integer<int>(b) >> 4];
    out += digits[std::to_integer<int>(b) & 15];
  }
  return out;
}

}  // namespace

TEST_CASE(
    "gpt2, cl100k_base and o200k_base give tiktoken's ids on every reference file (and js-tiktoken's on two), and "
    "decode back") {
  auto in = expected_lines("expected.jsonl");
  std::map<std::string, std::unique_ptr<Tokenizer>> tokenizers;
  std::map<std::string, int> files;  // by port
  for (std::string line; std::getline(in, line);) {
    const auto expected = nlohmann::json::parse(line);
    const std::string encoding = expected.at("encoding"), port = expected.at("port"), file = expected.at("file");
    CAPTURE(encoding);
    CAPTURE(port);
    CAPTURE(file);
    auto& tokenizer = tokenizers[encoding];
    if (!tokenizer) {
      // As a file, and as a checkpoint keeps it (its name saying the encoding, or the encoding given).
      const fs::path ranks = kReference / (encoding + ".tiktoken");
      const std::string named = encoding == "o200k_base" ? encoding : "";
      tokenizer = std::make_unique<Tokenizer>(
          encoding == "cl100k_base" ? load_tiktoken(ranks, encoding)
                                    : load_tokenizer(read_job_tokenizer(ranks, named, 1 << 20), kReference));
    }
    const std::string text = testing::file_text(file);
    const auto ids = tokenizer->encode(text);
    CHECK(ids.size() == expected.at("tokens").get<std::size_t>());
    CHECK(hex(sha256(std::as_bytes(std::span(ids)))) == expected.at("sha256").get<std::string>());
    CHECK(tokenizer->decode(ids) == text);
    ++files[port];
  }
  CHECK(files["tiktoken"] >= 9);  // a book or more besides the two small files, for each encoding
  CHECK(files["js-tiktoken"] == 6);
  MESSAGE(files["tiktoken"], " files x encodings compared with tiktoken, ", files["js-tiktoken"], " with js-tiktoken");
}

TEST_CASE("tokenizer.json: GPT-2's and a trained one give Hugging Face's ids, and decode back") {
  auto in = expected_lines("hf_expected.jsonl");
  std::map<std::string, std::unique_ptr<Tokenizer>> tokenizers;
  int files = 0;
  for (std::string line; std::getline(in, line);) {
    const auto expected = nlohmann::json::parse(line);
    const std::string json = expected.at("tokenizer"), file = expected.at("file");
    CAPTURE(json);
    CAPTURE(file);
    auto& tokenizer = tokenizers[json];
    if (!tokenizer) tokenizer = std::make_unique<Tokenizer>(load_tokenizer_json(kReference / json));
    const std::string text = testing::file_text(file);
    const auto ids = tokenizer->encode(text, true);  // Hugging Face takes its added tokens where the text spells them
    CHECK(ids.size() == expected.at("tokens").get<std::size_t>());
    CHECK(hex(sha256(std::as_bytes(std::span(ids)))) == expected.at("sha256").get<std::string>());
    CHECK(tokenizer->decode(ids) == text);
    ++files;
  }
  CHECK(files >= 10);
  MESSAGE(files, " files x tokenizer.json compared");
}
