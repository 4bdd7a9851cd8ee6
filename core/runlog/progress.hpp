#pragma once
// The live progress line: rewritten in place on a terminal, one plain line per update otherwise
// (so logs piped to a file stay readable).
#include <cstdint>
#include <cstdio>
#include <string>

namespace meridian {

struct ProgressState {
  std::int64_t step = 0, total_steps = 0;
  double loss = 0, tokens_per_s = 0;
  double eta_s = 0;
};

std::string format_progress(const ProgressState& s);  // "step 120/1000 | loss 2.3456 | 15200 tok/s | ETA 1m05s"

class ProgressPrinter {
 public:
  explicit ProgressPrinter(std::FILE* out);  // terminal detected with isatty
  ProgressPrinter(std::FILE* out, bool terminal) : out_(out), terminal_(terminal) {}
  void update(const ProgressState& s);
  void update(const std::string& text);  // any progress text, in place on a terminal
  void line(const std::string& text);  // a permanent line (eval results, checkpoints)
  void finish();

 private:
  std::FILE* out_;
  bool terminal_;
  bool pending_ = false;  // a \r line is on screen
};

}  // namespace meridian
