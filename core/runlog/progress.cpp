#include "core/runlog/progress.hpp"

#include <unistd.h>

#include <cmath>
#include <sstream>

namespace meridian {

std::string format_progress(const ProgressState& s) {
  std::ostringstream out;
  out.setf(std::ios::fixed);
  out.precision(4);
  out << "step " << s.step << "/" << s.total_steps << " | loss " << s.loss;
  out.precision(0);
  out << " | " << s.tokens_per_s << " tok/s";
  const long eta = std::lround(std::max(0.0, s.eta_s));
  out << " | ETA " << eta / 60 << "m" << (eta % 60 < 10 ? "0" : "") << eta % 60 << "s";
  return out.str();
}

ProgressPrinter::ProgressPrinter(std::FILE* out) : out_(out), terminal_(::isatty(::fileno(out)) != 0) {}

void ProgressPrinter::update(const ProgressState& s) { update(format_progress(s)); }

void ProgressPrinter::update(const std::string& text) {
  if (terminal_) {
    std::fprintf(out_, "\r\033[K%s", text.c_str());
    pending_ = true;
  } else {
    std::fprintf(out_, "%s\n", text.c_str());
  }
  std::fflush(out_);
}

void ProgressPrinter::line(const std::string& text) {
  if (pending_) std::fputs("\r\033[K", out_);
  std::fprintf(out_, "%s\n", text.c_str());
  pending_ = false;
  std::fflush(out_);
}

void ProgressPrinter::finish() {
  if (pending_) std::fputc('\n', out_);
  pending_ = false;
  std::fflush(out_);
}

}  // namespace meridian
