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
// JIT's stack is 32 KiB by default, which a pattern that recurses per repetition of a group
// ("(a|aa)+") outgrows within a few thousand bytes; this one grows to 8 MiB.
struct MatchData {
  pcre2_match_data* data = pcre2_match_data_create(32, nullptr);
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  MatchData() {
    MERIDIAN_CHECK(data && stack && context, "PCRE2 match state not allocated");
    pcre2_jit_stack_assign(context, nullptr, stack);
  }
  ~MatchData() {
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
    pcre2_match_data_free(data);
  }
};

// The limits PCRE2 puts on one match (its backtracking steps, depth, heap, JIT stack): a pattern
// that backtracks past them on some text is a property of the pattern and that text, not a bug.
bool is_limit(int rc) {
  return rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT || rc == PCRE2_ERROR_HEAPLIMIT ||
         rc == PCRE2_ERROR_JIT_STACKLIMIT;
}

}  // namespace

Pretokenizer::Pretokenizer(const std::string& pattern, const std::string& source)
    : pattern_(pattern), source_(source), compiled_(std::make_unique<Compiled>()) {
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
  const auto run = [&](std::uint32_t options) {
    return pcre2_match(compiled_->code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), from, options,
                       match.data, match.context);
  };
  int rc = run(0);
  if (rc == PCRE2_ERROR_JIT_STACKLIMIT) rc = run(PCRE2_NO_JIT);  // the interpreter backtracks on the heap
  if (rc == PCRE2_ERROR_NOMATCH) return {text.size(), text.size()};
  if (is_limit(rc))
    throw make_error(ErrorKind::Data, source_, ": the pre-tokenizer pattern gives up on the text at byte ", from,
                     " of ", text.size(), " (", pcre2_message(rc), "): it backtracks too much to split that text");
  MERIDIAN_CHECK(rc >= 0, "pcre2_match failed: ", pcre2_message(rc));
  const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match.data);
  std::size_t begin = ovector[0], end = ovector[1];
  if (end == begin) {  // an empty match: take one byte, so the text advances (no shipped pattern has one)
    end = begin + 1;
  }
  return {begin, end};
}

}  // namespace meridian
