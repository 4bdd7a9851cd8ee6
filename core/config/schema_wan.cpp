// The schema of [wan]: the default link (optionally from a named profile), [[wan.link]] pairs
// that differ from it, and the [[wan.fault]] schedule.
#include <map>

#include "core/config/resolver.hpp"
#include "core/config/wan_profiles.hpp"

namespace meridian::config_detail {

namespace {

using Wan = JobConfig::Wan;
using Fault = Wan::Fault;

std::string site_list(const JobConfig& c) {
  std::string out;
  for (const auto& s : c.sites) out += (out.empty() ? "" : ", ") + s.name;
  return out;
}

// A link's keys in `table`: the named profile's values (else `base`) with any keys given on top.
WanLink read_link(Resolver& r, const std::string& table, WanLink base, std::string* profile) {
  std::vector<std::string> names;
  for (const auto& p : wan_profiles()) names.emplace_back(p.name);
  if (const auto i = r.read_one_of(table, "profile", names)) {
    base = wan_profiles()[*i].link;
    if (profile) *profile = names[*i];
  }
  r.read(base.latency_ms, table, "latency_ms", at_least(0));
  r.read(base.jitter_ms, table, "jitter_ms", at_least(0));
  r.read(base.jitter, table, "jitter", {WanLink::Jitter::Normal, WanLink::Jitter::Uniform, WanLink::Jitter::Pareto});
  r.read(base.bandwidth_mbps, table, "bandwidth_mbps", at_least(0));
  r.read(base.stream_mbps, table, "stream_mbps", at_least(0));
  r.read(base.loss, table, "loss", within(0, 1, false, true));
  return base;
}

// An entry's `sites`: names of the job's sites, each once, at least one; empty after a problem, so
// that checks of the count do not pile onto it.
std::vector<std::string> read_sites(Resolver& r, const std::string& table, const JobConfig& c) {
  r.require(table, "sites", "an array of site names");
  const Setting* s = r.lookup(table, "sites");
  if (!s) return {};
  const std::string key = table + ".sites";
  const auto* array = s->value->as_array();
  if (!array || array->empty()) {
    r.mismatch(*s, key, "a non-empty array of site names", array ? "an empty array" : describe(*s->value));
    return {};
  }
  std::vector<std::string> sites;
  bool ok = true;
  for (const auto& element : *array) {
    const auto* name = element.as_string();
    const bool known = name && std::any_of(c.sites.begin(), c.sites.end(), [&](const auto& site) {
      return site.name == name->get();
    });
    if (!known) {
      r.mismatch(*s, key, "names of this job's sites (" + site_list(c) + ")", describe(element));
      ok = false;
    } else if (std::find(sites.begin(), sites.end(), name->get()) != sites.end()) {
      r.add(s->origin, key, "site " + quote(name->get()) + " is named twice");
      ok = false;
    } else {
      sites.push_back(name->get());
    }
  }
  return ok ? sites : std::vector<std::string>{};
}

// A key only some kinds of fault take: read when `kind` takes it, a problem when given to another.
void read_kind_value(Resolver& r, const std::string& table, bool takes, const std::string& key,
                     std::string_view kind, double& out) {
  if (takes) {
    r.require(table, key, "a number > 0");
    r.read(out, table, key, above(0));
  } else if (const Setting* s = r.lookup(table, key)) {
    r.add(s->origin, table + "." + key, "only a fault of kind = \"" + std::string(kind) + "\" takes " + key);
  }
}

Fault read_fault(Resolver& r, const std::string& table, const JobConfig& c) {
  Fault f;
  r.require(table, "kind", "one of \"partition\", \"bandwidth\", \"latency\"");
  r.read(f.kind, table, "kind", {Fault::Kind::Partition, Fault::Kind::Bandwidth, Fault::Kind::Latency});
  f.sites = read_sites(r, table, c);
  r.read(f.pair, table, "pair");
  if (const Setting* s = r.find(table + ".pair"); s && f.pair && (f.kind == Fault::Kind::Partition || (!f.sites.empty() && f.sites.size() != 2)))
    r.add(s->origin, table + ".pair",
          f.kind == Fault::Kind::Partition ? "a partition cuts sites off from all others; pair = true is for "
                                             "bandwidth and latency faults"
                                           : "pair = true needs exactly 2 sites, found " + std::to_string(f.sites.size()));
  r.require(table, "from_s", "a number >= 0: seconds from the job's start");
  r.require(table, "to_s", "a number > from_s");
  r.read(f.from_s, table, "from_s", at_least(0));
  r.read(f.to_s, table, "to_s", at_least(0));
  const Setting* from = r.find(table + ".from_s");
  if (const Setting* to = r.find(table + ".to_s"); from && to && f.from_s >= f.to_s)
    r.add(to->origin, table + ".to_s",
          "expected a number > from_s = " + format_number(f.from_s) + ", found " + format_number(f.to_s));
  read_kind_value(r, table, f.kind == Fault::Kind::Bandwidth, "bandwidth_mbps", "bandwidth", f.bandwidth_mbps);
  read_kind_value(r, table, f.kind == Fault::Kind::Latency, "latency_ms", "latency", f.latency_ms);
  if (const Setting* s = r.find(table + ".sites");
      s && f.kind == Fault::Kind::Partition && !f.sites.empty() && f.sites.size() == c.sites.size())
    r.add(s->origin, table + ".sites", "a partition must leave some site on the other side, found every site");
  return f;
}

// Reads each entry of the array of tables wan.<key> with its own resolver (problems name
// "wan.<key>[i]"); `read_entry(resolver, table, origin)`.
template <class ReadEntry>
void for_each_entry(Resolver& r, const Layers& layers, const std::string& key, ReadEntry read_entry) {
  const Setting* s = r.lookup("wan", key);
  if (!s) return;
  const auto* array = s->value->as_array();
  if (!array || !array->is_array_of_tables())
    return r.mismatch(*s, "wan." + key, "an array of tables ([[wan." + key + "]])", describe(*s->value));
  for (size_t i = 0; i < array->size(); ++i) {
    const std::string table = "wan." + key + "[" + std::to_string(i) + "]";
    Layers view;
    entry_view(layers, *s, *array->get(i), table, view);
    Resolver er(view);
    read_entry(er, table, view.tables.at(table));
    er.report_unknown();
    r.absorb(er);
  }
}

}  // namespace

void resolve_wan(Resolver& r, const Layers& layers, JobConfig& c) {
  c.wan.link = read_link(r, "wan", WanLink{}, &c.wan.profile);

  std::map<std::pair<std::string, std::string>, int> pair_lines;  // (a, b), a < b -> line of its entry
  for_each_entry(r, layers, "link", [&](Resolver& er, const std::string& table, const Origin& at) {
    const auto sites = read_sites(er, table, c);
    // Keys not given fall back to the default link, so a pair can change its latency alone.
    const WanLink link = read_link(er, table, c.wan.link, nullptr);
    if (const Setting* s = er.find(table + ".sites"); s && !sites.empty() && sites.size() != 2) {
      er.add(s->origin, table + ".sites", "expected 2 sites (a link joins a pair), found " + std::to_string(sites.size()));
      return;
    }
    if (sites.size() != 2) return;
    const auto key = std::minmax(sites[0], sites[1]);
    const auto [first, fresh] = pair_lines.emplace(std::pair{key.first, key.second}, at.line);
    if (!fresh) {
      er.add(at, table + ".sites",
             "the link " + sites[0] + " <-> " + sites[1] + " is given twice (lines " + std::to_string(first->second) +
                 " and " + std::to_string(at.line) + ")");
      return;
    }
    c.wan.links.push_back({sites[0], sites[1], link});
  });

  for_each_entry(r, layers, "fault", [&](Resolver& er, const std::string& table, const Origin&) {
    c.wan.faults.push_back(read_fault(er, table, c));
  });
}

}  // namespace meridian::config_detail
