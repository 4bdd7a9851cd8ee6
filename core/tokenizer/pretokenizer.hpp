#pragma once
// The pre-tokenizer of a byte-level BPE: a Unicode regular expression (PCRE2, compiled with
// Unicode properties and JIT) that cuts text into the pieces BPE then encodes one by one. Every
// byte of the text lands in exactly one piece: what no match covers (invalid UTF-8, which never
// matches, or a character no alternative takes) is a piece of its own, so byte-level BPE encodes
// any bytes and decoding gives them back.
#include <memory>
#include <string>
#include <string_view>

namespace meridian {

class Pretokenizer {
 public:
  // Error(Config) naming `source` and the offset when the pattern does not compile.
  Pretokenizer(const std::string& pattern, const std::string& source);
  ~Pretokenizer();
  Pretokenizer(Pretokenizer&&) noexcept;
  Pretokenizer& operator=(Pretokenizer&&) noexcept;

  const std::string& pattern() const { return pattern_; }

  // Calls piece(view) for each piece of `text`, in order; the pieces concatenate to `text`.
  // Safe from several threads at once (each call has its own match state). Error(Data) naming the
  // pattern's source and the byte where it gave up, when the pattern backtracks past PCRE2's
  // limits on this text (a pattern of nested repeats, "(\w+\s?)+$", read from a file).
  template <class F>
  void split(std::string_view text, F&& piece) const {
    std::size_t at = 0;
    while (at < text.size()) {
      const auto [begin, end] = next_match(text, at);
      if (begin > at) piece(text.substr(at, begin - at));  // bytes no match covered
      if (end == begin) break;                              // no further match: the rest was the gap
      piece(text.substr(begin, end - begin));
      at = end;
    }
  }

 private:
  struct Compiled;
  // The next match at or after `from`: [begin, end); (text.size(), text.size()) when none.
  std::pair<std::size_t, std::size_t> next_match(std::string_view text, std::size_t from) const;

  std::string pattern_;
  std::string source_;  // names the pattern's file in errors
  std::unique_ptr<Compiled> compiled_;
};

}  // namespace meridian
