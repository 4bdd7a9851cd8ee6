#include "core/tokenizer/tokenizer.hpp"

#include <algorithm>
#include <map>

#include "core/util/error.hpp"

namespace meridian {

Tokenizer::Tokenizer(std::string name, BpeModel model, Pretokenizer pretokenizer, std::vector<SpecialToken> specials)
    : name_(std::move(name)), model_(std::move(model)), pretokenizer_(std::move(pretokenizer)), specials_(std::move(specials)) {
  vocab_size_ = static_cast<std::int32_t>(model_.size());
  std::map<std::int32_t, std::string> taken;
  for (const auto& s : specials_) {
    if (s.text.empty() || s.id < 0)
      throw make_error(ErrorKind::Config, name_, ": special token \"", s.text, "\" (id ", s.id, ") is empty or negative");
    if (static_cast<std::size_t>(s.id) < model_.size() && model_.bytes(s.id) != s.text)
      throw make_error(ErrorKind::Config, name_, ": special token \"", s.text, "\" has id ", s.id,
                       ", which is the ordinary token \"", model_.bytes(s.id), "\"");
    if (const auto [it, fresh] = taken.emplace(s.id, s.text); !fresh)
      throw make_error(ErrorKind::Config, name_, ": special tokens \"", it->second, "\" and \"", s.text, "\" share id ", s.id);
    vocab_size_ = std::max(vocab_size_, s.id + 1);
  }
  // Longest first, so that of two specials where one begins the other the longer wins.
  std::stable_sort(specials_.begin(), specials_.end(),
                   [](const SpecialToken& a, const SpecialToken& b) { return a.text.size() > b.text.size(); });
}

std::optional<std::int32_t> Tokenizer::special(std::string_view text) const {
  for (const auto& s : specials_)
    if (s.text == text) return s.id;
  return std::nullopt;
}

std::optional<std::int32_t> Tokenizer::end_of_text() const {
  if (const auto id = special("<|endoftext|>")) return id;
  return special("<|end_of_text|>");
}

void Tokenizer::encode_ordinary(std::string_view text, std::vector<std::int32_t>& out) const {
  pretokenizer_.split(text, [&](std::string_view piece) { model_.encode_piece(piece, out); });
}

void Tokenizer::encode(std::string_view text, std::vector<std::int32_t>& out, bool allow_specials) const {
  if (!allow_specials || specials_.empty()) return encode_ordinary(text, out);
  std::size_t at = 0;
  while (at < text.size()) {
    // The earliest special from `at` (the longest of those starting there).
    std::size_t best = std::string_view::npos;
    const SpecialToken* found = nullptr;
    for (const auto& s : specials_) {
      const std::size_t p = text.find(s.text, at);
      if (p < best) best = p, found = &s;
    }
    if (!found) break;
    encode_ordinary(text.substr(at, best - at), out);
    out.push_back(found->id);
    at = best + found->text.size();
  }
  encode_ordinary(text.substr(at), out);
}

std::vector<std::int32_t> Tokenizer::encode(std::string_view text, bool allow_specials) const {
  std::vector<std::int32_t> out;
  encode(text, out, allow_specials);
  return out;
}

std::string Tokenizer::decode(std::span<const std::int32_t> ids) const {
  std::string out;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const std::int32_t id = ids[i];
    if (id >= 0 && static_cast<std::size_t>(id) < model_.size()) {
      out += model_.bytes(id);
      continue;
    }
    const auto s = std::find_if(specials_.begin(), specials_.end(), [&](const SpecialToken& t) { return t.id == id; });
    if (s == specials_.end())
      throw make_error(ErrorKind::Data, name_, ": id ", id, " at position ", i, " is no token of this tokenizer");
    out += s->text;
  }
  return out;
}

}  // namespace meridian
