// Reading job files: I/O and syntax problems, include chains, and the deep merge into Layers.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "core/config/layers.hpp"

namespace fs = std::filesystem;

namespace meridian::config_detail {

ConfigProblem problem_at(const Origin& where, std::string key, std::string message) {
  return ConfigProblem{where.file, where.line, std::move(key), std::move(message)};
}

std::string format_number(double v) {
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, v);  // shortest text that reads back exactly
  return std::string(buf, res.ptr);
}

std::string quote(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string describe(const toml::node& value) {
  switch (value.type()) {
    case toml::node_type::string: return "string " + quote(value.as_string()->get());
    case toml::node_type::integer: return "integer " + std::to_string(value.as_integer()->get());
    case toml::node_type::floating_point: return "float " + format_number(value.as_floating_point()->get());
    case toml::node_type::boolean: return value.as_boolean()->get() ? "boolean true" : "boolean false";
    case toml::node_type::array: return "an array";
    case toml::node_type::table: return "a table";
    case toml::node_type::date: return "a date";
    case toml::node_type::time: return "a time";
    case toml::node_type::date_time: return "a date-time";
    case toml::node_type::none: break;
  }
  return "nothing";
}

void Layers::set(const std::string& key, const Setting& s) {
  const std::string below = key + ".";
  for (auto it = leaves.lower_bound(below); it != leaves.end() && it->first.starts_with(below);)
    it = leaves.erase(it);
  for (auto dot = key.find('.'); dot != std::string::npos; dot = key.find('.', dot + 1))
    leaves.erase(key.substr(0, dot));
  leaves[key] = s;
}

int line_of(const toml::node& n) {
  if (n.source().begin.line > 0) return static_cast<int>(n.source().begin.line);
  // Tables opened implicitly ([a.b] opens a; dotted keys) may carry no position: use their first key.
  int line = 0;
  if (const auto* t = n.as_table())
    for (auto&& [k, child] : *t) {
      const int l = line_of(child);
      if (l > 0 && (line == 0 || l < line)) line = l;
    }
  return line;
}

namespace {

// Why `file` cannot be read, or nothing (and its text in `text`).
std::optional<std::string> read_text(const fs::path& file, std::string& text) {
  std::error_code ec;
  if (!fs::exists(file, ec)) return std::string("no such file");
  if (fs::is_directory(file, ec)) return std::string("is a directory, not a file");
  std::ifstream in(file, std::ios::binary);
  if (!in) return std::string(std::strerror(errno));
  std::ostringstream buf;
  buf << in.rdbuf();
  if (in.bad()) return std::string("read error");
  text = buf.str();
  return std::nullopt;
}

struct ChainEntry {
  fs::path identity;  // canonical, so two spellings of one file are one file
  std::string shown;
};

class Loader {
 public:
  Loader(Layers& layers, std::vector<ConfigProblem>& problems) : layers_(layers), problems_(problems) {}

  // `included_from`: the include line that named this file (null for the file the user named).
  void load(const fs::path& file, const std::string& shown, const Origin* included_from) {
    std::string text;
    if (auto why = read_text(file, text)) {
      if (included_from)
        problems_.push_back(problem_at(*included_from, "include", "cannot read " + shown + ": " + *why));
      else
        problems_.push_back(ConfigProblem{shown, 0, "", "cannot read the job file: " + *why});
      return;
    }
    std::unique_ptr<toml::table> doc;
    try {
      doc = std::make_unique<toml::table>(toml::parse(text, shown));
    } catch (const toml::parse_error& e) {
      problems_.push_back(ConfigProblem{shown, static_cast<int>(e.source().begin.line), "",
                                        "TOML syntax error: " + std::string(e.description())});
      return;
    }
    Origin here{shown, 0, fs::absolute(file).lexically_normal().parent_path(), 0};
    std::error_code ec;
    fs::path identity = fs::weakly_canonical(fs::absolute(file), ec);
    if (ec) identity = fs::absolute(file).lexically_normal();
    chain_.push_back({identity, shown});
    if (const toml::node* inc = doc->get("include")) include(*inc, here, shown);
    chain_.pop_back();

    here.order = layers_.next_order++;  // this file's keys go over everything its bases set
    merge(*doc, here);
    layers_.documents.push_back(std::move(doc));
  }

 private:
  void include(const toml::node& inc, Origin at, const std::string& shown) {
    at.line = line_of(inc);
    const auto* name = inc.as_string();
    if (!name || name->get().empty()) {
      problems_.push_back(problem_at(at, "include", "expected a non-empty string (a file path), found " +
                                                        (name ? std::string("an empty string") : describe(inc))));
      return;
    }
    const fs::path target = at.dir / name->get();
    const std::string target_shown = (fs::path(shown).parent_path() / name->get()).lexically_normal().string();
    std::error_code ec;
    fs::path identity = fs::weakly_canonical(target, ec);
    if (ec) identity = target.lexically_normal();
    const auto seen = std::find_if(chain_.begin(), chain_.end(), [&](const ChainEntry& e) { return e.identity == identity; });
    if (seen != chain_.end()) {
      std::string cycle;
      for (auto it = seen; it != chain_.end(); ++it) cycle += it->shown + " -> ";
      problems_.push_back(problem_at(at, "include", "include cycle: " + cycle + target_shown));
      return;
    }
    load(target, target_shown, &at);
  }

  void merge(const toml::table& doc, const Origin& file) {
    for (auto&& [k, node] : doc) {
      const std::string key(k.str());
      if (key == "include") continue;
      Origin at = file;
      at.line = line_of(node);
      const auto* table = node.as_table();
      if (!table) {
        layers_.set(key, {&node, at});
        continue;
      }
      layers_.tables[key] = at;
      layers_.leaves.erase(key);  // a table here replaces a base's scalar of the same name
      for (auto&& [k2, child] : *table) {
        Origin child_at = file;
        child_at.line = line_of(child);
        layers_.set(key + "." + std::string(k2.str()), {&child, child_at});
      }
    }
  }

  Layers& layers_;
  std::vector<ConfigProblem>& problems_;
  std::vector<ChainEntry> chain_;
};

}  // namespace

void load_layers(const fs::path& file, Layers& layers, std::vector<ConfigProblem>& problems) {
  const std::string shown = file.string();
  Loader(layers, problems).load(file, shown, nullptr);
  layers.top = Origin{shown, 1, fs::absolute(file).lexically_normal().parent_path(), layers.next_order - 1};
}

}  // namespace meridian::config_detail
