#pragma once
// Text to a model's token ids and back: through a tokenizer, or byte for byte for a byte-level
// model (vocabulary 256). What `meridian generate` and the trainer's samples read and write.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/tokenizer/tokenizer.hpp"

namespace meridian {

class TextCodec {
 public:
  // Error(Config) when the tokenizer has more tokens than the model's vocabulary, or when there is
  // none and the vocabulary is not 256 bytes (`where` names the model in that message).
  TextCodec(std::optional<Tokenizer> tokenizer, int model_vocab, const std::string& where);

  // Specials spelled in the text are those tokens: the text is the user's own.
  std::vector<std::int32_t> encode(const std::string& text) const;
  std::string decode(std::span<const std::int32_t> ids) const;
  std::optional<std::int32_t> end_of_text() const;
  // `text`'s ids, or a document's start when it is empty: the end-of-text token, else a new line.
  std::vector<std::int32_t> prompt(const std::string& text) const;

 private:
  std::optional<Tokenizer> tokenizer_;
};

}  // namespace meridian
