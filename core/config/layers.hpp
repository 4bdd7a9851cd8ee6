#pragma once
// Internal to core/config: the merged but untyped view of a job -- a file, its include chain and
// the --set overrides -- where every value remembers the file and line that set it.
#include <filesystem>
#include <iosfwd>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <toml++/toml.h>

#include "core/config/job_config.hpp"

namespace meridian::config_detail {

struct Origin {
  std::string file;  // as shown to the user
  int line = 0;      // 0: no line (a --set override, or a whole-file problem)
  std::filesystem::path dir;  // relative paths in values resolve against this
  int order = 0;              // load order of the file (base first, --set last), for sorting problems
};

struct Setting {
  const toml::node* value = nullptr;  // owned by Layers::documents
  Origin origin;
};

struct Layers {
  std::vector<std::unique_ptr<toml::table>> documents;
  // Dotted keys ("inner.lr") of the values below the top-level tables. Nested tables deeper than
  // that are kept whole as values: the schema has none, so they are reported, never merged.
  std::map<std::string, Setting> leaves;
  std::map<std::string, Origin> tables;  // top-level table -> where it was last opened
  Origin top;                            // the file the user named, line 1
  int next_order = 0;

  // A later value replaces what an earlier layer had at that key, below it, or above it.
  void set(const std::string& key, const Setting& s);
};

// The line a value starts on; a table without a position of its own takes its first key's.
int line_of(const toml::node& n);
ConfigProblem problem_at(const Origin& where, std::string key, std::string message);

// `found` half of a message: `string "abc"`, `float 2.5`, `table`, ...
std::string describe(const toml::node& value);
std::string format_number(double v);  // shortest text that reads back as v
std::string quote(std::string_view s);  // a TOML basic string: "a \"b\""

// Reads `file` and its include chain into `layers`; syntax, include and I/O problems go to `problems`.
void load_layers(const std::filesystem::path& file, Layers& layers, std::vector<ConfigProblem>& problems);
void apply_overrides(const std::vector<std::string>& overrides, Layers& layers, std::vector<ConfigProblem>& problems);
// [sim] as TOML text (schema_sim.cpp), for to_toml.
void sim_toml(std::ostream& out, const SimConfig& s);
// Checks every value against the schema and builds the typed config.
JobConfig resolve(const Layers& layers, std::vector<ConfigProblem>& problems);

}  // namespace meridian::config_detail
