#include "core/runlog/prometheus.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>

#include "core/util/error.hpp"

namespace meridian {
namespace {

bool valid_name(std::string_view name, bool colons) {
  const auto first = [&](char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || (colons && c == ':'); };
  if (name.empty() || !first(name[0])) return false;
  return std::all_of(name.begin() + 1, name.end(),
                     [&](char c) { return first(c) || std::isdigit(static_cast<unsigned char>(c)); });
}

std::string escape(std::string_view s, bool quotes) {
  std::string out;
  for (char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else if (c == '"' && quotes) out += "\\\"";
    else out += c;
  }
  return out;
}

std::string number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);  // shortest text that reads back as v
  return std::string(buf, end);
}

}  // namespace

void PromText::family(std::string_view name, Type type, std::string_view help) {
  MERIDIAN_CHECK(valid_name(name, true), "metric name '", name, "'");
  MERIDIAN_CHECK(type != Type::Counter || name.ends_with("_total"), "counter '", name, "' must end in _total");
  MERIDIAN_CHECK(std::find(families_.begin(), families_.end(), name) == families_.end(), "family '", name,
                 "' started twice");
  families_.emplace_back(name);
  current_ = name;
  text_.append("# HELP ").append(name).append(" ").append(escape(help, false)).append("\n");
  text_.append("# TYPE ").append(name).append(type == Type::Gauge ? " gauge\n" : " counter\n");
}

void PromText::sample(double value, const Labels& labels) {
  MERIDIAN_CHECK(!current_.empty(), "a sample before any family");
  text_.append(current_);
  if (!labels.empty()) {
    text_.push_back('{');
    for (std::size_t i = 0; i < labels.size(); ++i) {
      MERIDIAN_CHECK(valid_name(labels[i].first, false) && !labels[i].first.starts_with("__"), "label name '",
                     labels[i].first, "'");
      text_.append(i ? "," : "").append(labels[i].first).append("=\"").append(escape(labels[i].second, true)).append("\"");
    }
    text_.push_back('}');
  }
  text_.append(" ").append(number(value)).append("\n");
}

}  // namespace meridian
