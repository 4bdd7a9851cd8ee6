// A tokenizer file as `[data] tokenizer`, `meridian tokenize` and `meridian import` read it, from a
// download nobody vouches for. The first byte picks the file: a Hugging Face tokenizer.json (its
// model, merges, pre-tokenizer pattern, added tokens) or a tiktoken rank file; then a piece of
// text to encode, then the file. A rank file's tokens go through GPT-2's pattern (a named
// encoding needs its exact number of ranks, which no small input has).
// Promises checked: what loads encodes any text (any bytes) into ids below its vocabulary that
// decode to the text again, with specials allowed or not, or refuses it with Error(Data) where its
// pattern backtracks past PCRE2's limits; a rank file's ranks are 0..n-1 of distinct tokens; every
// refusal of a file is Error(Config).
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/tokenizer/hf_tokenizer.hpp"
#include "core/tokenizer/tiktoken_file.hpp"
#include "core/tokenizer/tokenizer.hpp"
#include "fuzz/fuzz_common.hpp"

namespace {

using namespace meridian;

void round_trip(const Tokenizer& tokenizer, std::string_view text) {
  for (const bool specials : {false, true}) {
    std::vector<std::int32_t> ids;
    try {
      ids = tokenizer.encode(text, specials);
    } catch (const Error& e) {  // a pattern that backtracks past PCRE2's limits on this text
      MERIDIAN_FUZZ_EXPECT(
          e.kind() == ErrorKind::Data && std::string_view(e.what()).find("pattern gives up") != std::string_view::npos,
          e.what());
      return;
    }
    for (const auto id : ids) MERIDIAN_FUZZ_EXPECT(id >= 0 && id < tokenizer.vocab_size(), "id ", id);
    MERIDIAN_FUZZ_EXPECT(tokenizer.decode(ids) == text, "text does not decode to itself (specials ", specials, ")");
  }
}

Tokenizer from_ranks(std::string_view text) {
  auto tokens = parse_tiktoken_ranks(text, "fuzz.tiktoken");
  const std::set<std::string> distinct(tokens.begin(), tokens.end());
  MERIDIAN_FUZZ_EXPECT(distinct.size() == tokens.size(), "a rank file with two ranks of one token was taken");
  return Tokenizer("fuzz", BpeModel::from_ranks(std::move(tokens)), Pretokenizer(kByteLevelPattern, "gpt2"), {});
}

}  // namespace

int meridian_fuzz_tokenizer(const std::uint8_t* data, std::size_t size) {
  meridian::fuzz::Input in(data, size);
  const auto how = in.take<std::uint8_t>();
  const auto sample = meridian::fuzz::as_text(in.piece());
  const auto file = in.rest_text();
  try {
    const Tokenizer tokenizer = how & 1 ? from_ranks(file) : tokenizer_from_json(file, "tokenizer.json");
    round_trip(tokenizer, sample);
  } catch (const Error& e) {
    MERIDIAN_FUZZ_EXPECT(e.kind() == ErrorKind::Config, "a tokenizer refused as other than Config: ", e.what());
  }
  return 0;
}

MERIDIAN_FUZZ_TARGET(tokenizer)
