// --set key=value overrides: the last layer, on top of the job file and its includes.
#include <algorithm>
#include <cctype>

#include "core/config/layers.hpp"

namespace fs = std::filesystem;

namespace meridian::config_detail {

namespace {

std::string trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  return std::string(s.substr(first, s.find_last_not_of(" \t") - first + 1));
}

bool is_dotted_key(const std::string& key) {
  if (key.empty() || key.front() == '.' || key.back() == '.' || key.find("..") != std::string::npos) return false;
  return std::all_of(key.begin(), key.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.'; });
}

// The value as TOML when it is one ("3e-3", "true", "\"a b\"", "[1, 2]"), else the bare text as a
// string, so that paths need no quoting on a command line.
std::unique_ptr<toml::table> parse_value(const std::string& text) {
  try {
    auto doc = std::make_unique<toml::table>(toml::parse("v = " + text));
    if (doc->size() == 1 && doc->contains("v")) return doc;
  } catch (const toml::parse_error&) {
  }
  auto doc = std::make_unique<toml::table>();
  doc->insert("v", text);
  return doc;
}

}  // namespace

void apply_overrides(const std::vector<std::string>& overrides, Layers& layers, std::vector<ConfigProblem>& problems) {
  const int order = layers.next_order++;
  for (const auto& text : overrides) {
    const Origin at{"--set " + text, 0, fs::current_path(), order};
    const auto eq = text.find('=');
    if (eq == std::string::npos) {
      problems.push_back(problem_at(at, "", "expected key=value, for example inner.lr=3e-3"));
      continue;
    }
    const std::string key = trim(std::string_view(text).substr(0, eq));
    if (!is_dotted_key(key)) {
      problems.push_back(problem_at(at, key, "expected a dotted key such as inner.lr, found \"" + key + "\""));
      continue;
    }
    if (key == "include") {
      problems.push_back(problem_at(at, key, "include can only be given in a job file"));
      continue;
    }
    layers.documents.push_back(parse_value(trim(std::string_view(text).substr(eq + 1))));
    layers.set(key, {layers.documents.back()->get("v"), at});
  }
}

}  // namespace meridian::config_detail
