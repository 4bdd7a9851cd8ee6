#pragma once
// A byte-level BPE tokenizer: the pre-tokenizer's pieces, each encoded by the BPE model, and the
// special tokens (<|endoftext|> and the like) outside both. Text that spells a special token is
// encoded as text unless the caller allows specials. Decoding concatenates the tokens' bytes.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/tokenizer/bpe_model.hpp"
#include "core/tokenizer/pretokenizer.hpp"

namespace meridian {

struct SpecialToken {
  std::string text;
  std::int32_t id;
};

class Tokenizer {
 public:
  // Error(Config) naming `name` when a special token's id is one of the model's, or two share one.
  Tokenizer(std::string name, BpeModel model, Pretokenizer pretokenizer, std::vector<SpecialToken> specials);

  const std::string& name() const { return name_; }
  // One more than the largest id, specials included: the vocabulary a model needs.
  std::int32_t vocab_size() const { return vocab_size_; }
  std::optional<std::int32_t> special(std::string_view text) const;
  const std::vector<SpecialToken>& specials() const { return specials_; }
  // The token that separates documents: <|endoftext|> (GPT-2, tiktoken's encodings) or
  // <|end_of_text|> (Llama 3); nullopt when the tokenizer has neither.
  std::optional<std::int32_t> end_of_text() const;

  // Appends the ids of `text` (any bytes: see Pretokenizer). With allow_specials, text that spells
  // a special token is that token. Error(Data) when the pre-tokenizer's pattern gives up on the
  // text (Pretokenizer::split).
  void encode(std::string_view text, std::vector<std::int32_t>& out, bool allow_specials = false) const;
  std::vector<std::int32_t> encode(std::string_view text, bool allow_specials = false) const;
  // Error(Data) naming the first id that is no token.
  std::string decode(std::span<const std::int32_t> ids) const;

 private:
  void encode_ordinary(std::string_view text, std::vector<std::int32_t>& out) const;

  std::string name_;
  BpeModel model_;
  Pretokenizer pretokenizer_;
  std::vector<SpecialToken> specials_;
  std::int32_t vocab_size_ = 0;
};

}  // namespace meridian
