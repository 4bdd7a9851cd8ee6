#pragma once
// Internal to core/config: the Resolver, which reads typed values out of Layers and collects problems.
// Keys are known by being read, so the list of valid keys cannot drift from the reader.
#include <algorithm>
#include <cctype>
#include <climits>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <utility>

#include "core/config/layers.hpp"

namespace meridian::config_detail {

inline size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

inline std::string did_you_mean(std::string_view name, const std::set<std::string>& known) {
  std::string best;
  // Within distance 2, but not more than half the name: "foo" is no typo of "job".
  size_t best_distance = std::min<size_t>(2, name.size() / 2) + 1;
  for (const auto& k : known)
    if (const size_t d = edit_distance(name, k); d < best_distance) best = k, best_distance = d;
  return best.empty() ? "" : " (did you mean " + best + "?)";
}

// An interval of acceptable numbers; an absent bound is open-ended.
struct Range {
  std::optional<double> lo, hi;
  bool lo_open = false, hi_open = false;

  bool contains(double v) const {
    return std::isfinite(v) && (!lo || (lo_open ? v > *lo : v >= *lo)) && (!hi || (hi_open ? v < *hi : v <= *hi));
  }
  std::string text() const {
    if (!hi) return (lo_open ? "> " : ">= ") + format_number(*lo);
    return std::string("in ") + (lo_open ? "(" : "[") + format_number(*lo) + ", " + format_number(*hi) +
           (hi_open ? ")" : "]");
  }
};
inline Range above(double lo) { return {lo, std::nullopt, true, false}; }
inline Range at_least(double lo) { return {lo, std::nullopt, false, false}; }
inline Range within(double lo, double hi, bool lo_open, bool hi_open) { return {lo, hi, lo_open, hi_open}; }

class Resolver {
 public:
  explicit Resolver(const Layers& layers) : layers_(layers) {}

  // Registers table.key as a known key; the value set for it, if any.
  const Setting* lookup(const std::string& table, const std::string& key) {
    known_[table].insert(key);
    const auto it = layers_.leaves.find(table + "." + key);
    return it == layers_.leaves.end() ? nullptr : &it->second;
  }

  // Registers a top-level key that is not a table ([[site]] is an array of tables, so a leaf);
  // `expected` says what it should be when it is given as a plain [table] instead.
  const Setting* lookup_top(const std::string& key, const std::string& expected) {
    known_top_[key] = expected;
    return find(key);
  }

  // Takes over the problems of a resolver run over a sub-view (one [[site]] entry).
  void absorb(Resolver& other) {
    problems_.insert(problems_.end(), other.problems_.begin(), other.problems_.end());
    other.problems_.clear();
  }

  void add(const Origin& at, std::string key, std::string message) {
    problems_.push_back({at.order, problem_at(at, std::move(key), std::move(message))});
  }

  void mismatch(const Setting& s, const std::string& key, const std::string& expected, const std::string& found) {
    add(s.origin, key, "expected " + expected + ", found " + found);
  }

  // Integers of type T within [lo, max of T]; no lo: any integer.
  template <class T>
  void read(T& out, const std::string& table, const std::string& key, std::optional<std::int64_t> lo) {
    const Setting* s = lookup(table, key);
    if (!s) return;
    const std::int64_t hi = std::cmp_greater(std::numeric_limits<T>::max(), INT64_MAX)
                                ? INT64_MAX
                                : static_cast<std::int64_t>(std::numeric_limits<T>::max());
    const std::int64_t low = lo.value_or(std::numeric_limits<T>::min());
    const std::string expected = lo ? "an integer >= " + std::to_string(*lo) : "an integer";
    const auto* v = s->value->as_integer();
    if (!v) return mismatch(*s, table + "." + key, expected, describe(*s->value));
    if (v->get() < low) return mismatch(*s, table + "." + key, expected, std::to_string(v->get()));
    if (v->get() > hi)
      return mismatch(*s, table + "." + key, "an integer <= " + std::to_string(hi), std::to_string(v->get()));
    out = static_cast<T>(v->get());
  }

  // Floats; integers are accepted too (lr = 1 means 1.0), never the reverse.
  void read(double& out, const std::string& table, const std::string& key, const Range& range) {
    const Setting* s = lookup(table, key);
    if (!s) return;
    const std::string expected = "a number " + range.text();
    std::optional<double> v;
    if (const auto* f = s->value->as_floating_point()) v = f->get();
    if (const auto* i = s->value->as_integer()) v = static_cast<double>(i->get());
    if (!v) return mismatch(*s, table + "." + key, expected, describe(*s->value));
    if (!range.contains(*v)) return mismatch(*s, table + "." + key, expected, format_number(*v));
    out = *v;
  }

  void read(bool& out, const std::string& table, const std::string& key) {
    const Setting* s = lookup(table, key);
    if (!s) return;
    const auto* v = s->value->as_boolean();
    if (!v) return mismatch(*s, table + "." + key, "true or false", describe(*s->value));
    out = v->get();
  }

  // Non-empty strings.
  void read(std::string& out, const std::string& table, const std::string& key) {
    if (const auto* s = non_empty_string(table, key, "a non-empty string")) out = *s;
  }

  // A name that becomes a directory, an etcd key's component and an etcd user (a job's, a
  // site's): 1 to 64 letters, digits, '_', '-' and '.', not starting with '.' or '-', so that it
  // can never climb out of the run directory, split a key, or pass for a command-line option.
  void read_name(std::string& out, const std::string& table, const std::string& key, const std::string& names) {
    const std::string expected =
        "a name of 1 to 64 letters, digits, '_', '-' and '.', not starting with '.' or '-' "
        "(it names " +
        names + ")";
    const auto* s = non_empty_string(table, key, expected);
    if (!s) return;
    const bool plain =
        s->size() <= 64 && s->front() != '.' && s->front() != '-' && std::all_of(s->begin(), s->end(), [](char ch) {
          return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-' || ch == '.';
        });
    if (!plain) return mismatch(layers_.leaves.at(table + "." + key), table + "." + key, expected, quote(*s));
    out = *s;
  }

  // A file path, made absolute against the directory of the file (or cwd for --set) that set it.
  void read_path(std::optional<std::filesystem::path>& out, const std::string& table, const std::string& key) {
    if (const auto* s = non_empty_string(table, key, "a non-empty string (a file path)"))
      out = (layers_.leaves.at(table + "." + key).origin.dir / *s).lexically_normal();
  }

  // One of `names`; the index of the match.
  std::optional<size_t> read_one_of(const std::string& table, const std::string& key,
                                    const std::vector<std::string>& names) {
    const Setting* s = lookup(table, key);
    if (!s) return std::nullopt;
    std::string expected = "one of";
    for (size_t i = 0; i < names.size(); ++i) expected += (i ? ", " : " ") + quote(names[i]);
    const auto* v = s->value->as_string();
    if (!v) return mismatch(*s, table + "." + key, expected, describe(*s->value)), std::nullopt;
    const auto it = std::find(names.begin(), names.end(), v->get());
    if (it == names.end()) return mismatch(*s, table + "." + key, expected, quote(v->get())), std::nullopt;
    return static_cast<size_t>(it - names.begin());
  }

  template <class E>
  void read(E& out, const std::string& table, const std::string& key, std::initializer_list<E> all) {
    std::vector<std::string> names;
    for (E e : all) names.emplace_back(to_string(e));
    if (const auto i = read_one_of(table, key, names)) out = all.begin()[*i];
  }

  void require(const std::string& table, const std::string& key, const std::string& expected) {
    if (lookup(table, key)) return;
    add(table_origin(table), table + "." + key, "missing required key (expected " + expected + ")");
  }

  // Where a problem of a whole table is reported: where it was opened, else the top of the job file.
  Origin table_origin(const std::string& table) const {
    const auto it = layers_.tables.find(table);
    return it != layers_.tables.end() && it->second.line > 0 ? it->second : layers_.top;
  }

  const Setting* find(const std::string& dotted) const {
    const auto it = layers_.leaves.find(dotted);
    return it == layers_.leaves.end() ? nullptr : &it->second;
  }

  // Everything set that no read above asked for.
  void report_unknown() {
    std::set<std::string> tables, reported;
    for (const auto& [t, keys] : known_) tables.insert(t);
    for (const auto& [t, expected] : known_top_) tables.insert(t);  // [[site]] is a suggestion for [sites]
    std::set<std::string> top_level = tables;
    top_level.insert("include");
    for (const auto& [name, s] : layers_.leaves) {
      auto dot = name.find('.');
      // An entry's table ("wan.link[0]") holds a dot of its own.
      for (const auto& [t, keys] : known_)
        if (t.find('.') != std::string::npos && name.starts_with(t + ".")) dot = t.size();
      const std::string table = name.substr(0, dot);
      const auto known = known_.find(table);
      if (const auto top = known_top_.find(table); top != known_top_.end()) {
        if (dot != std::string::npos && reported.insert(table).second)
          add(table_origin(table), table, "expected " + top->second + ", found a table");
      } else if (dot == std::string::npos) {
        if (known != known_.end()) mismatch(s, table, "a table", describe(*s.value));
        else add(s.origin, table, "unknown key" + did_you_mean(table, top_level));
      } else if (known == known_.end()) {
        if (reported.insert(table).second) add(table_origin(table), table, "unknown table" + did_you_mean(table, tables));
      } else if (const std::string key = name.substr(dot + 1); !known->second.contains(key)) {
        add(s.origin, name, "unknown key" + did_you_mean(key, known->second));
      }
    }
    for (const auto& [table, at] : layers_.tables)
      if (!known_.contains(table) && reported.insert(table).second)
        add(at, table, known_top_.contains(table) ? "expected " + known_top_.at(table) + ", found a table" :
            "unknown table" + did_you_mean(table, tables));
  }

  // In file order (bases first, --set last), then by line.
  void flush(std::vector<ConfigProblem>& out) {
    std::stable_sort(problems_.begin(), problems_.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first < b.first : a.second.line < b.second.line;
    });
    for (auto& [order, p] : problems_) out.push_back(std::move(p));
  }

 private:
  const std::string* non_empty_string(const std::string& table, const std::string& key, const std::string& expected) {
    const Setting* s = lookup(table, key);
    if (!s) return nullptr;
    const auto* v = s->value->as_string();
    if (!v) return mismatch(*s, table + "." + key, expected, describe(*s->value)), nullptr;
    if (v->get().empty()) return mismatch(*s, table + "." + key, expected, "an empty string"), nullptr;
    return &v->get();
  }

  const Layers& layers_;
  std::map<std::string, std::set<std::string>> known_;
  std::map<std::string, std::string> known_top_;  // top-level non-table key -> what it must be
  std::vector<std::pair<int, ConfigProblem>> problems_;
};

// The multi-site tables: [outer], [transport], [control], [[site]] (schema_sites.cpp), then [wan].
void resolve_multisite(Resolver& r, const Layers& layers, JobConfig& c);
// [wan]: the default link, [[wan.link]] and [[wan.fault]] (schema_wan.cpp); after the sites.
void resolve_wan(Resolver& r, const Layers& layers, JobConfig& c);

// One entry of an array of tables ([[site]], [[wan.link]]) as a view whose only table is `table`
// ("site[0]", "wan.link[0]"): a resolver over it names the entry in its problems and finds its
// unknown keys like any table's.
void entry_view(const Layers& layers, const Setting& array, const toml::node& entry, const std::string& table,
                Layers& view);
// [sim] and [[sim.failure]], the simulator's assumptions (schema_sim.cpp).
void resolve_sim(Resolver& r, const Layers& layers, JobConfig& c);

}  // namespace meridian::config_detail
