#pragma once
// A strict reader of the Prometheus text exposition format (0.0.4), for tests: every line is a
// # HELP, a # TYPE, another comment or a sample; names, label syntax, escapes and values are
// checked; a family's TYPE comes before its samples and its samples are contiguous; no series is
// repeated. Returns the samples, or throws std::runtime_error naming the line and what is wrong.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace meridian::testing {

struct PromSample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

struct PromExposition {
  std::map<std::string, std::string> types;  // family -> counter, gauge, ...
  std::map<std::string, std::string> help;
  std::vector<PromSample> samples;

  // The value of the one sample of `name` whose labels include `labels`; throws when none or several match.
  double value(const std::string& name, const std::map<std::string, std::string>& labels = {}) const {
    const PromSample* found = nullptr;
    for (const auto& s : samples) {
      if (s.name != name) continue;
      bool match = true;
      for (const auto& [k, v] : labels) match = match && s.labels.count(k) && s.labels.at(k) == v;
      if (!match) continue;
      if (found) throw std::runtime_error("several samples of " + name + " match");
      found = &s;
    }
    if (!found) throw std::runtime_error("no sample of " + name);
    return found->value;
  }
  bool has(const std::string& name) const {
    for (const auto& s : samples)
      if (s.name == name) return true;
    return false;
  }
};

namespace prom_detail {

inline bool name_char(char c, bool first, bool colons) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || (colons && c == ':') ||
         (!first && std::isdigit(static_cast<unsigned char>(c)));
}

inline std::string take_name(std::string_view line, std::size_t& i, bool colons) {
  const std::size_t start = i;
  while (i < line.size() && name_char(line[i], i == start, colons)) ++i;
  return std::string(line.substr(start, i - start));
}

inline double parse_value(const std::string& text, const std::string& where) {
  if (text == "NaN") return NAN;
  if (text == "+Inf" || text == "Inf") return INFINITY;
  if (text == "-Inf") return -INFINITY;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || text.find_first_of("xXnNiI") != std::string::npos)
    throw std::runtime_error(where + ": not a sample value: '" + text + "'");
  return v;
}

// The family a sample belongs to (histogram and summary samples carry a suffix).
inline std::string family_of(const std::string& name, const std::map<std::string, std::string>& types) {
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    const std::string s = suffix;
    if (name.size() > s.size() && name.ends_with(s)) {
      const auto base = name.substr(0, name.size() - s.size());
      if (types.count(base) && (types.at(base) == "histogram" || types.at(base) == "summary")) return base;
    }
  }
  return name;
}

}  // namespace prom_detail

inline PromExposition parse_prometheus(std::string_view text) {
  using namespace prom_detail;
  PromExposition out;
  if (text.empty() || text.back() != '\n') throw std::runtime_error("the exposition must end with a newline");
  std::set<std::string> finished;  // families whose samples are over
  std::string current;             // the family of the last sample
  std::set<std::string> series;
  int number = 0;
  for (std::size_t start = 0; start < text.size();) {
    const std::size_t end = text.find('\n', start);
    const std::string_view line = text.substr(start, end - start);
    start = end + 1;
    const std::string where = "line " + std::to_string(++number);
    if (line.empty()) continue;
    if (line.find('\r') != std::string_view::npos) throw std::runtime_error(where + ": carriage return");
    if (line[0] == '#') {
      if (line.starts_with("# HELP ") || line.starts_with("# TYPE ")) {
        std::size_t i = 7;
        const std::string name = take_name(line, i, true);
        if (name.empty() || i >= line.size() || line[i] != ' ')
          throw std::runtime_error(where + ": expected a metric name and a space");
        const std::string rest(line.substr(i + 1));
        if (line[2] == 'H') {
          if (!out.help.emplace(name, rest).second) throw std::runtime_error(where + ": second HELP for " + name);
          for (std::size_t k = 0; k < rest.size(); ++k)
            if (rest[k] == '\\' && (k + 1 >= rest.size() || (rest[k + 1] != '\\' && rest[k + 1] != 'n')))
              throw std::runtime_error(where + ": bad escape in HELP");
            else if (rest[k] == '\\') ++k;
        } else {
          static const std::set<std::string> kinds = {"counter", "gauge", "histogram", "summary", "untyped"};
          if (!kinds.count(rest)) throw std::runtime_error(where + ": unknown type '" + rest + "'");
          if (!out.types.emplace(name, rest).second) throw std::runtime_error(where + ": second TYPE for " + name);
          for (const auto& s : out.samples)
            if (family_of(s.name, out.types) == name)
              throw std::runtime_error(where + ": TYPE for " + name + " after its samples");
        }
      }
      continue;
    }
    PromSample s;
    std::size_t i = 0;
    s.name = take_name(line, i, true);
    if (s.name.empty()) throw std::runtime_error(where + ": expected a metric name");
    std::string key = s.name + "{";
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (true) {
        if (i < line.size() && line[i] == '}') {
          ++i;
          break;
        }
        const std::string label = take_name(line, i, false);
        if (label.empty() || i + 1 >= line.size() || line[i] != '=' || line[i + 1] != '"')
          throw std::runtime_error(where + ": expected label=\"value\"");
        i += 2;
        std::string value;
        while (true) {
          if (i >= line.size()) throw std::runtime_error(where + ": unterminated label value");
          const char c = line[i++];
          if (c == '"') break;
          if (c != '\\') {
            value += c;
            continue;
          }
          if (i >= line.size()) throw std::runtime_error(where + ": unterminated escape");
          const char e = line[i++];
          if (e == '\\') value += '\\';
          else if (e == '"') value += '"';
          else if (e == 'n') value += '\n';
          else throw std::runtime_error(where + ": bad escape \\" + std::string(1, e));
        }
        if (!s.labels.emplace(label, value).second) throw std::runtime_error(where + ": label " + label + " twice");
        if (i < line.size() && line[i] == ',') ++i;
        else if (i >= line.size() || line[i] != '}') throw std::runtime_error(where + ": expected , or }");
      }
    }
    for (const auto& [k, v] : s.labels) key += k + "=" + v + ",";
    if (i >= line.size() || line[i] != ' ') throw std::runtime_error(where + ": expected a space before the value");
    const std::string rest(line.substr(i + 1));
    const auto space = rest.find(' ');
    s.value = parse_value(rest.substr(0, space), where);
    if (space != std::string::npos) {
      const std::string ts = rest.substr(space + 1);
      if (ts.empty() || !std::all_of(ts.begin() + (ts[0] == '-'), ts.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
        throw std::runtime_error(where + ": bad timestamp '" + ts + "'");
    }
    const std::string family = family_of(s.name, out.types);
    if (family != current) {
      if (finished.count(family)) throw std::runtime_error(where + ": samples of " + family + " are not contiguous");
      if (!current.empty()) finished.insert(current);
      current = family;
    }
    if (!series.insert(key).second) throw std::runtime_error(where + ": series " + key + "} repeated");
    out.samples.push_back(std::move(s));
  }
  return out;
}

}  // namespace meridian::testing
