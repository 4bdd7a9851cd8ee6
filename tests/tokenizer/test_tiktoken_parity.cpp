// meridian's tiktoken encodings against tiktoken's npm port, js-tiktoken (tests/tokenizer/
// make_reference.sh writes its rank files and, for every file and encoding, its token count and
// the SHA-256 of its ids, into the build tree first: ctest's fixture "tiktoken"): gpt2,
// cl100k_base and o200k_base on tiny shakespeare, the hard cases and every Gutenberg book, the
// same ids; and decode(encode(text)) == text on each.
#include <doctest/doctest.h>

#include <fstream>
#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "core/tokenizer/tiktoken_file.hpp"
#include "core/util/digest.hpp"
#include "tests/support/child_process.hpp"

using namespace meridian;
namespace fs = std::filesystem;

namespace {

const fs::path kReference = fs::path(MERIDIAN_BINARY_DIR) / "tiktoken-reference";

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

TEST_CASE("gpt2, cl100k_base and o200k_base give js-tiktoken's ids on every reference file, and decode back") {
  std::ifstream in(kReference / "expected.jsonl");
  REQUIRE_MESSAGE(in.good(), "no ", (kReference / "expected.jsonl").string(), ": ctest runs make_reference.sh first");
  std::map<std::string, std::unique_ptr<Tokenizer>> tokenizers;
  int files = 0;
  for (std::string line; std::getline(in, line);) {
    const auto expected = nlohmann::json::parse(line);
    const std::string encoding = expected.at("encoding"), file = expected.at("file");
    CAPTURE(encoding);
    CAPTURE(file);
    auto& tokenizer = tokenizers[encoding];
    if (!tokenizer)
      tokenizer = std::make_unique<Tokenizer>(load_tiktoken(kReference / (encoding + ".tiktoken"), encoding));
    const std::string text = testing::file_text(file);
    const auto ids = tokenizer->encode(text);
    CHECK(ids.size() == expected.at("tokens").get<std::size_t>());
    CHECK(hex(sha256(std::as_bytes(std::span(ids)))) == expected.at("sha256").get<std::string>());
    CHECK(tokenizer->decode(ids) == text);
    ++files;
  }
  CHECK(files >= 6);  // two files or more for each encoding
  MESSAGE(files, " files x encodings compared");
}
