#include "core/tokenizer/pretokenizer.hpp"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/util/error.hpp"

namespace meridian {

struct Pretokenizer::Compiled {
  pcre2_code* code = nullptr;
  ~Compiled() { pcre2_code_free(code); }
};

namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof buffer);
  return reinterpret_cast<const char*>(buffer);
}

// Match state per thread: pcre2_match_data is not shareable, and allocating it per call costs more
// than a short match. Only the whole match's offsets are read, so one size serves every pattern.
struct MatchData {
  pcre2_match_data* data = pcre2_match_data_create(32, nullptr);
  ~MatchData() { pcre2_match_data_free(data); }
};

}  // namespace

Pretokenizer::Pretokenizer(const std::string& pattern, const std::string& source)
    : pattern_(pattern), compiled_(std::make_unique<Compiled>()) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  // UTF: the pattern and text are UTF-8; UCP: \s, \d, \w and POSIX classes by Unicode properties;
  // MATCH_INVALID_UTF: invalid sequences in the text are no error, they only never match.
  compiled_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                  PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error, &offset, nullptr);
  if (!compiled_->code)
    throw make_error(ErrorKind::Config, source, ": the pre-tokenizer pattern does not compile at offset ", offset,
                     ": ", pcre2_message(error));
  pcre2_jit_compile(compiled_->code, PCRE2_JIT_COMPLETE);  // without JIT (an unsupported CPU) matching still works
}

Pretokenizer::~Pretokenizer() = default;
Pretokenizer::Pretokenizer(Pretokenizer&&) noexcept = default;
Pretokenizer& Pretokenizer::operator=(Pretokenizer&&) noexcept = default;

std::pair<std::size_t, std::size_t> Pretokenizer::next_match(std::string_view text, std::size_t from) const {
  thread_local MatchData match;
  const int rc = pcre2_match(compiled_->code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), from, 0,
                             match.data, nullptr);
  if (rc == PCRE2_ERROR_NOMATCH) return {text.size(), text.size()};
  MERIDIAN_CHECK(rc >= 0, "pcre2_match failed: ", pcre2_message(rc));
  const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match.data);
  std::size_t begin = ovector[0], end = ovector[1];
  if (end == begin) {  // an empty match: take one byte, so the text advances (no shipped pattern has one)
    end = begin + 1;
  }
  return {begin, end};
}

}  // namespace meridian
