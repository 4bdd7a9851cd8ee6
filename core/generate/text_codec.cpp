#include "core/generate/text_codec.hpp"

#include "core/util/error.hpp"

namespace meridian {

TextCodec::TextCodec(std::optional<Tokenizer> tokenizer, int model_vocab, const std::string& where)
    : tokenizer_(std::move(tokenizer)) {
  if (!tokenizer_ && model_vocab != 256)
    throw make_error(ErrorKind::Config, where, " has no tokenizer and its vocabulary of ", model_vocab,
                     " is not the 256 bytes of a byte-level model: name its tokenizer");
  if (tokenizer_ && tokenizer_->vocab_size() > model_vocab)
    throw make_error(ErrorKind::Config, "tokenizer ", tokenizer_->name(), " has ", tokenizer_->vocab_size(),
                     " tokens, more than the vocabulary of ", where, " (", model_vocab, ")");
}

std::vector<std::int32_t> TextCodec::encode(const std::string& text) const {
  if (tokenizer_) return tokenizer_->encode(text, /*allow_specials=*/true);
  std::vector<std::int32_t> bytes;
  for (const unsigned char b : text) bytes.push_back(b);
  return bytes;
}

std::string TextCodec::decode(std::span<const std::int32_t> ids) const {
  if (tokenizer_) return tokenizer_->decode(ids);
  std::string bytes;
  for (const std::int32_t id : ids) bytes.push_back(static_cast<char>(id));
  return bytes;
}

std::optional<std::int32_t> TextCodec::end_of_text() const {
  return tokenizer_ ? tokenizer_->end_of_text() : std::nullopt;
}

std::vector<std::int32_t> TextCodec::prompt(const std::string& text) const {
  if (!text.empty()) return encode(text);
  if (const auto eot = end_of_text()) return {*eot};
  return encode("\n");
}

}  // namespace meridian
