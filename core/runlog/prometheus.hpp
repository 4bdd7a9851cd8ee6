#pragma once
// Prometheus text exposition (format 0.0.4) of a set of metric families: what a site's /metrics
// endpoint answers. Names are meridian's own (checked as invariants); label values come from
// outside (site and peer names) and are escaped.
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace meridian {

class PromText {
 public:
  enum class Type { Gauge, Counter };
  using Labels = std::vector<std::pair<std::string, std::string>>;

  // Starts a family: its # HELP and # TYPE lines. A family is started once; a counter's name ends in _total.
  void family(std::string_view name, Type type, std::string_view help);
  // One sample of the family started last. NaN and infinities are written as Prometheus spells them.
  void sample(double value, const Labels& labels = {});

  const std::string& text() const { return text_; }
  static constexpr std::string_view kContentType = "text/plain; version=0.0.4; charset=utf-8";

 private:
  std::string text_;
  std::string current_;
  std::vector<std::string> families_;
};

}  // namespace meridian
