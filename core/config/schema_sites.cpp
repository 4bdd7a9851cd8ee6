// The schema of the multi-site tables: the outer loop, transport, control plane and sites.
#include <sstream>
#include <algorithm>
#include <charconv>
#include <string_view>

#include "core/config/outer_defaults.hpp"
#include "core/config/resolver.hpp"
#include "core/model/param_layout.hpp"
#include "crosssite/codec/codec.hpp"

namespace meridian::config_detail {

namespace {

using Outer = JobConfig::Outer;
using Site = JobConfig::Site;

// "http(s)://host:port" with a port in 1..65535: what meridian's etcd client dials.
bool is_endpoint(std::string_view url) {
  for (std::string_view scheme : {"http://", "https://"})
    if (url.starts_with(scheme)) {
      url.remove_prefix(scheme.size());
      const auto colon = url.rfind(':');
      if (colon == std::string_view::npos || colon == 0) return false;
      const std::string_view port = url.substr(colon + 1);
      int value = 0;
      const auto res = std::from_chars(port.data(), port.data() + port.size(), value);
      return res.ec == std::errc() && res.ptr == port.data() + port.size() && value >= 1 && value <= 65535;
    }
  return false;
}

// Whether traffic to `host` stays on this machine.
bool is_loopback(std::string_view host) {
  return host == "localhost" || host == "::1" || host == "[::1]" || host.starts_with("127.");
}

// The host of an endpoint is_endpoint accepted.
std::string_view endpoint_host(std::string_view url) {
  url.remove_prefix(url.find("://") + 3);
  return url.substr(0, url.rfind(':'));
}

// Plaintext that leaves the machine is refused unless [job] insecure = true: anyone on the path
// could read or forge it (docs/security.md). Traffic on loopback never leaves this host.
void refuse_plaintext(Resolver& r, const JobConfig& c) {
  if (c.job.insecure) return;
  const std::string why = " (or say [job] insecure = true to send it in plaintext anyway)";
  for (const auto& url : c.control.endpoints)
    if (url.starts_with("http://") && !is_loopback(endpoint_host(url))) {
      r.add(r.find("control.endpoints")->origin, "control.endpoints",
            "etcd at " + quote(url) + " is on another host: over plain http its keys, commits included, would cross "
            "the network readable and forgeable; use https:// with [control] ca_file, cert_file and key_file "
            "(`meridian keys` writes them)" + why);
      break;
    }
  if (c.sites.size() < 2 || c.transport.kind != JobConfig::Transport::Kind::Zmq || c.transport.link_key_file) return;
  for (const auto& site : c.sites)
    if (!is_loopback(site.host)) {
      r.add(r.table_origin("transport"), "transport.link_key_file",
            "site " + quote(site.name) + " is on host " + quote(site.host) +
                ": deltas between hosts travel over CURVE; name this site's key (`meridian keys` writes them)" + why);
      return;
    }
}

// Mutual TLS with etcd: all three files or none, and then every endpoint https://; without them,
// none (the client would speak plaintext to a TLS port, or the reverse).
void resolve_control_tls(Resolver& r, JobConfig& c) {
  auto& k = c.control;
  r.read_path(k.ca_file, "control", "ca_file");
  r.read_path(k.cert_file, "control", "cert_file");
  r.read_path(k.key_file, "control", "key_file");
  r.read_path(k.password_file, "control", "password_file");
  const int given = k.ca_file.has_value() + k.cert_file.has_value() + k.key_file.has_value();
  if (given != 0 && given != 3) {
    r.add(r.table_origin("control"), "control.ca_file",
          "mutual TLS with etcd takes all three of ca_file, cert_file and key_file (`meridian keys` writes them)");
    return;
  }
  for (const auto& url : k.endpoints)
    if (url.starts_with("https://") != (given == 3)) {
      r.add(r.find("control.endpoints")->origin, "control.endpoints",
            given == 3 ? "etcd at " + quote(url) + ": with [control] ca_file, cert_file and key_file every endpoint is https://"
                       : "etcd at " + quote(url) + ": https needs [control] ca_file, cert_file and key_file");
      return;
    }
}

void resolve_control(Resolver& r, JobConfig& c) {
  const std::string expected = "an array of strings \"http://host:port\" or \"https://host:port\"";
  if (const Setting* s = r.lookup("control", "endpoints")) {
    const auto* array = s->value->as_array();
    if (!array) {
      r.mismatch(*s, "control.endpoints", expected, describe(*s->value));
    } else {
      for (const auto& element : *array) {
        Origin at = s->origin;
        if (const int line = line_of(element); line > 0) at.line = line;
        const auto* url = element.as_string();
        if (url && is_endpoint(url->get())) c.control.endpoints.push_back(url->get());
        else r.add(at, "control.endpoints", "expected " + expected + ", found " + describe(element));
      }
    }
  }
  resolve_control_tls(r, c);
  r.read(c.control.lease_ttl_s, "control", "lease_ttl_s", 1);
  r.read(c.control.keepalive_ms, "control", "keepalive_ms", 100);
  r.read(c.control.end_unreachable_s, "control", "end_unreachable_s", 0);
  // Checked on the resolved values, so a default on one side still counts.
  if (static_cast<std::int64_t>(c.control.keepalive_ms) >= std::int64_t{c.control.lease_ttl_s} * 1000) {
    const Setting* s = r.find("control.keepalive_ms");
    if (!s) s = r.find("control.lease_ttl_s");
    r.add(s ? s->origin : r.table_origin("control"), "control.keepalive_ms",
          "expected less than control.lease_ttl_s * 1000 = " + std::to_string(c.control.lease_ttl_s * 1000) +
              " (a lease must be renewed before it expires), found " + std::to_string(c.control.keepalive_ms));
  }
}

// A CURVE key as Z85 writes it (40 characters of its alphabet); libzmq decodes it where it is used.
bool is_z85_key(const std::string& key) {
  static constexpr std::string_view kZ85 =
      "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";
  return key.size() == 40 && key.find_first_not_of(kZ85) == std::string::npos;
}

// CURVE on the links: all or nothing. With this site's key file named, every site's public key is
// known, listed in its entry or in link_public_key_file; keys without the secret's file are a
// mistake. "{site}" in either path stands for the site's name, so one job file serves every site
// (and `meridian launch`). UCX has no CURVE.
void resolve_link_keys(Resolver& r, JobConfig& c) {
  r.read_path(c.transport.link_key_file, "transport", "link_key_file");
  r.read_path(c.transport.link_public_key_file, "transport", "link_public_key_file");
  const bool any_key = c.transport.link_public_key_file ||
                       std::any_of(c.sites.begin(), c.sites.end(), [](const Site& s) { return !s.link_public_key.empty(); });
  if (!c.transport.link_key_file) {
    if (any_key)
      r.add(r.table_origin("transport"), "transport.link_key_file",
            "the sites' CURVE public keys are given: name the file of this site's secret key too (\"{site}\" in "
            "it stands for the site's name), as `meridian keys` writes them");
    return;
  }
  const Setting* file = r.find("transport.link_key_file");
  if (c.transport.kind == JobConfig::Transport::Kind::Ucx)
    r.add(file->origin, "transport.link_key_file", "UCX has no CURVE: keys are for [transport] kind = \"zmq\"");
  if (c.transport.link_public_key_file) return;
  for (size_t i = 0; i < c.sites.size(); ++i)
    if (c.sites[i].link_public_key.empty())
      r.add(file->origin, "site[" + std::to_string(i) + "].link_public_key",
            "the links speak CURVE (transport.link_key_file): site " + quote(c.sites[i].name) +
                " must list the public key it proves, or transport.link_public_key_file say where it is");
}

// One [[site]] entry, read by its own resolver over a view whose table is "site[i]".
Site resolve_site(Resolver& r, const Layers& layers, const Setting& array, const toml::node& entry, size_t i,
                  Layers& view) {
  const std::string table = "site[" + std::to_string(i) + "]";
  entry_view(layers, array, entry, table, view);
  Resolver sr(view);
  Site site;
  sr.require(table, "name", "a string: the site's name");
  sr.read_name(site.name, table, "name", "the site's directory, its etcd keys and user");
  sr.read(site.host, table, "host");
  sr.read(site.port, table, "port", 0);
  sr.read(site.replicas, table, "replicas", 1);
  sr.read(site.device, table, "device", {Site::Device::Cpu, Site::Device::Cuda});
  sr.read(site.precision, table, "precision", {Site::Precision::Fp32, Site::Precision::Bf16, Site::Precision::Fp16});
  sr.read(site.attention, table, "attention",
          {Site::Attention::Materialized, Site::Attention::Tiled, Site::Attention::Cudnn});
  // The CPU is the fp32 reference with materialised attention; the other forms are GPU kernels.
  if (site.device != Site::Device::Cuda) {
    if (const Setting* s = sr.find(table + ".precision"); s && site.precision != Site::Precision::Fp32)
      sr.add(s->origin, table + ".precision", "expected \"fp32\" on a site with device = \"cpu\" (mixed "
                                              "precision runs on GPUs only), found " + quote(to_string(site.precision)));
    if (const Setting* s = sr.find(table + ".attention"); s && site.attention != Site::Attention::Materialized)
      sr.add(s->origin, table + ".attention",
             "expected \"materialized\" on a site with device = \"cpu\" (the "
             "other kernels run on GPUs only), found " +
                 quote(to_string(site.attention)));
  } else if (const Setting* s = sr.find(table + ".attention");
             s && site.attention == Site::Attention::Cudnn && site.precision == Site::Precision::Fp32) {
    sr.add(s->origin, table + ".attention",
           "\"cudnn\" needs precision = \"bf16\" or \"fp16\" (cuDNN's flash "
           "attention has no fp32 form); this site's precision is \"fp32\"");
  }
  sr.read(site.speed, table, "speed", above(0));
  sr.read(site.link_public_key, table, "link_public_key");
  if (const Setting* k = sr.find(table + ".link_public_key"); k && !is_z85_key(site.link_public_key))
    sr.add(k->origin, table + ".link_public_key",
           "expected a CURVE public key (40 characters of Z85, as `meridian keys` writes it), found " +
               quote(site.link_public_key));
  sr.report_unknown();
  r.absorb(sr);
  return site;
}

void resolve_sites(Resolver& r, const Layers& layers, JobConfig& c) {
  const std::string expected = "an array of tables ([[site]])";
  const Setting* s = r.lookup_top("site", expected);
  const auto* array = s ? s->value->as_array() : nullptr;
  if (s && (!array || !array->is_array_of_tables())) r.mismatch(*s, "site", expected, describe(*s->value));
  if (!array || !array->is_array_of_tables()) {
    c.sites = {Site{.name = "local", .replicas = c.replicas.count}};
    return;
  }
  std::map<std::string, int> name_lines;                                // name -> line of its first use
  std::map<std::pair<std::string, int>, std::pair<std::string, int>> ports;  // host:port -> site, line
  for (size_t i = 0; i < array->size(); ++i) {
    Layers view;
    const Site site = resolve_site(r, layers, *s, *array->get(i), i, view);
    c.sites.push_back(site);
    const std::string table = "site[" + std::to_string(i) + "]";
    if (const auto it = view.leaves.find(table + ".name"); it != view.leaves.end() && !site.name.empty()) {
      const auto [first, fresh] = name_lines.emplace(site.name, it->second.origin.line);
      if (!fresh)
        r.add(it->second.origin, table + ".name",
              "duplicate site name " + quote(site.name) + " (lines " + std::to_string(first->second) + " and " +
                  std::to_string(it->second.origin.line) + ")");
    }
    // Port 0 asks the OS for a free port, which can never clash.
    if (const auto it = view.leaves.find(table + ".port"); it != view.leaves.end() && site.port != 0) {
      const auto [first, fresh] = ports.emplace(std::pair{site.host, int{site.port}},
                                                std::pair{site.name, it->second.origin.line});
      if (!fresh)
        r.add(it->second.origin, table + ".port",
              "port clash: " + site.host + ":" + std::to_string(site.port) + " is also used by site " +
                  quote(first->second.first) + " (line " + std::to_string(first->second.second) + ")");
    }
  }
}

}  // namespace

void entry_view(const Layers& layers, const Setting& array, const toml::node& entry, const std::string& table,
                Layers& view) {
  view.top = layers.top;
  Origin at = array.origin;
  if (const int line = line_of(entry); line > 0) at.line = line;
  view.tables[table] = at;
  if (const auto* t = entry.as_table())
    for (auto&& [k, child] : *t) {
      Origin child_at = array.origin;
      if (const int line = line_of(child); line > 0) child_at.line = line;
      view.leaves[table + "." + std::string(k.str())] = {&child, child_at};
    }
}

namespace {

// DiLoCo's outer settings the job file left out, from its shape (core/config/outer_defaults.hpp).
void derive_outer(const Resolver& r, JobConfig& c) {
  if (c.outer.algorithm == Outer::Algorithm::Sync || c.sites.size() < 2) return;
  const bool sparse = c.outer.codec == Outer::Codec::Sparse;
  const auto d = outer_defaults(static_cast<int>(c.sites.size()), c.outer.inner_steps, sparse,
                                c.outer.early_inner_steps, c.outer.early_steps);
  const auto note = [&](const char* key, double value) {
    std::ostringstream line;
    line << key << " = " << value << " (" << d.why << ")";
    c.derived.push_back(line.str());
  };
  if (!r.find("outer.lr")) {
    c.outer.lr = d.lr;
    note("outer.lr", d.lr);
  }
  if (!r.find("outer.momentum")) {
    c.outer.momentum = d.momentum;
    note("outer.momentum", d.momentum);
  }
  if (!r.find("outer.momentum_warmup")) {
    c.outer.momentum_warmup = d.momentum_warmup;
    note("outer.momentum_warmup", d.momentum_warmup);
  }
  if (sparse && !r.find("outer.density") && c.outer.block <= kSparseMaxBlock) {
    const int keep = sparse_keep_within(c.outer.block, kSparseBytesPerValue);
    c.outer.density = static_cast<double>(std::max(keep, 1)) / c.outer.block;
    std::ostringstream line;
    line << "outer.density = " << c.outer.density << " (" << std::max(keep, 1) << " of each block of " << c.outer.block
         << ": the most that fits " << kSparseBytesPerValue << " byte a parameter a round)";
    c.derived.push_back(line.str());
  }
  if (c.outer.overlap && !r.find("outer.overlap_steps")) {
    c.outer.overlap_steps = overlap_steps_default(c.outer.inner_steps);
    c.derived.push_back("outer.overlap_steps = " + std::to_string(c.outer.overlap_steps) +
                        " (a tenth of outer.inner_steps: a round's progress starts at most that many steps stale)");
  }
}

void read_outer(Resolver& r, JobConfig& c) {
  r.read(c.outer.algorithm, "outer", "algorithm", {Outer::Algorithm::Sync, Outer::Algorithm::Diloco, Outer::Algorithm::Streaming});
  r.read(c.outer.inner_steps, "outer", "inner_steps", 1);
  r.read(c.outer.early_inner_steps, "outer", "early_inner_steps", 0);
  r.read(c.outer.early_steps, "outer", "early_steps", 0);
  r.read(c.outer.lr, "outer", "lr", above(0));
  r.read(c.outer.momentum, "outer", "momentum", within(0, 1, false, true));
  r.read(c.outer.momentum_warmup, "outer", "momentum_warmup", 0);
  r.read(c.outer.nesterov, "outer", "nesterov");
  r.read(c.outer.codec, "outer", "codec", {Outer::Codec::Fp32, Outer::Codec::Bf16, Outer::Codec::Int8, Outer::Codec::Int4,
                                                Outer::Codec::Sparse});
  r.read(c.outer.block, "outer", "block", 2);
  r.read(c.outer.density, "outer", "density", within(0, 1, true, false));
  r.read(c.outer.error_feedback, "outer", "error_feedback");
  r.read(c.outer.max_staleness, "outer", "max_staleness", 0);
  r.read(c.outer.quorum, "outer", "quorum", 0);
  r.read(c.outer.deadline_ms, "outer", "deadline_ms", 0);
  r.read(c.outer.overlap, "outer", "overlap");
  r.read(c.outer.overlap_steps, "outer", "overlap_steps", 1);
  r.read(c.outer.overlap_update, "outer", "overlap_update", {Outer::OverlapUpdate::Rebase, Outer::OverlapUpdate::Eager});
  r.read(c.outer.staleness, "outer", "staleness", {Outer::Staleness::Inverse, Outer::Staleness::Constant});
  r.read(c.outer.partial_commit, "outer", "partial_commit", {Outer::PartialCommit::Scaled, Outer::PartialCommit::Averaged});
  r.read(c.outer.delayed_nesterov, "outer", "delayed_nesterov", 0);
  r.read(c.outer.deadline_k, "outer", "deadline_k", above(0));
  r.read(c.outer.max_norm_ratio, "outer", "max_norm_ratio", above(1));
  r.read(c.outer.dynamic_inner_steps, "outer", "dynamic_inner_steps");
  r.read(c.outer.fragments, "outer", "fragments", 1);
}

void check_fragments(Resolver& r, const JobConfig& c) {
  if (c.outer.fragments > 1 && c.outer.algorithm != Outer::Algorithm::Streaming) {
    const Setting* s = r.find("outer.fragments");
    r.add(s ? s->origin : r.table_origin("outer"), "outer.fragments",
          "expected 1 unless outer.algorithm = \"streaming\" (fragments are streaming DiLoCo's), found " +
              std::to_string(c.outer.fragments));
  }
  if (c.outer.algorithm == Outer::Algorithm::Streaming && c.outer.fragments > 1) {
    // Fragment p syncs every H steps at offset p * H / P: an exchange every H / P >= 1 steps, and
    // every fragment at least one whole tensor.
    const auto tensors = static_cast<int>(ParamLayout::of(c.model).views().size());
    const Setting* s = r.find("outer.fragments");
    if (c.outer.fragments > c.outer.inner_steps)
      r.add(s ? s->origin : r.table_origin("outer"), "outer.fragments",
            "expected at most outer.inner_steps = " + std::to_string(c.outer.inner_steps) +
                " (one fragment is synchronised every inner_steps / fragments steps), found " +
                std::to_string(c.outer.fragments));
    else if (c.outer.fragments > tensors)
      r.add(s ? s->origin : r.table_origin("outer"), "outer.fragments",
            "expected at most " + std::to_string(tensors) + " (the model's tensors; a fragment holds whole ones), found " +
                std::to_string(c.outer.fragments));
  }
}

// Shorter rounds first: every site must cut the job's steps into the same rounds.
void check_early_rounds(Resolver& r, const JobConfig& c) {
  const Outer& o = c.outer;
  if (o.early_inner_steps == 0 && o.early_steps == 0) return;
  const Setting* s = r.find("outer.early_steps");
  const Origin at = s ? s->origin : r.table_origin("outer");
  const auto problem = [&](const std::string& what) { r.add(at, "outer.early_steps", what); };
  const std::string found = ", found early_inner_steps = " + std::to_string(o.early_inner_steps) +
                            " and early_steps = " + std::to_string(o.early_steps);
  if (o.algorithm != Outer::Algorithm::Diloco)
    problem("shorter early rounds are for outer.algorithm = \"diloco\"" + found);
  else if (o.dynamic_inner_steps)
    problem("shorter early rounds and outer.dynamic_inner_steps = true cut rounds two ways; choose one" + found);
  else if (o.early_inner_steps < 1 || o.early_inner_steps >= o.inner_steps)
    problem("expected outer.early_inner_steps from 1 to outer.inner_steps - 1 = " + std::to_string(o.inner_steps - 1) +
            found);
  else if (o.early_steps < o.early_inner_steps || o.early_steps % o.early_inner_steps != 0)
    problem("expected outer.early_steps a positive multiple of outer.early_inner_steps (whole early rounds)" + found);
  else if (o.early_steps >= c.inner.steps)
    problem("expected outer.early_steps below inner.steps = " + std::to_string(c.inner.steps) + found);
}

// Settings that contradict each other.
void check_outer_combinations(Resolver& r, const JobConfig& c) {
  if (c.outer.codec == Outer::Codec::Sparse) {
    // It drops most of every delta: only error feedback carries the rest into later rounds.
    if (!c.outer.error_feedback) {
      const Setting* s = r.find("outer.error_feedback");
      r.add(s ? s->origin : r.table_origin("outer"), "outer.error_feedback",
            "expected true with outer.codec = \"sparse\" (what it leaves out is sent in later rounds), found false");
    }
    if (c.outer.block > 65536) {
      const Setting* s = r.find("outer.block");
      r.add(s ? s->origin : r.table_origin("outer"), "outer.block",
            "expected at most 65536 with outer.codec = \"sparse\" (positions are 16-bit), found " +
                std::to_string(c.outer.block));
    }
  }
  // Delayed Nesterov is a Nesterov variant: with heavy ball asked for, one of the two is a mistake.
  if (c.outer.delayed_nesterov > 1 && !c.outer.nesterov) {
    const Setting* s = r.find("outer.delayed_nesterov");
    r.add(s ? s->origin : r.table_origin("outer"), "outer.delayed_nesterov",
          "expected 0 or 1 with outer.nesterov = false (delayed Nesterov needs Nesterov momentum), found " +
              std::to_string(c.outer.delayed_nesterov));
  }

}

void refuse_public_ucx(Resolver& r, const JobConfig& c) {
  if (c.sites.size() >= 2 && c.transport.kind == JobConfig::Transport::Kind::Ucx &&
      c.transport.network == JobConfig::Transport::Network::Public) {
    const Setting* s = r.find("transport.kind");
    r.add(s ? s->origin : r.table_origin("transport"), "transport.kind",
          "UCX encrypts nothing and authenticates no one: it may carry deltas between sites only over a network "
          "that only this job's operator can reach; say so with [transport] network = \"private\"");
  }

}

// The synchronous baseline's gradients go from each site's leader: asked to split, it would not.
void refuse_split_sync(Resolver& r, const JobConfig& c) {
  if (c.transport.exchange != JobConfig::Transport::Exchange::Split ||
      c.outer.algorithm != JobConfig::Outer::Algorithm::Sync)
    return;
  const Setting* s = r.find("transport.exchange");
  r.add(s ? s->origin : r.table_origin("transport"), "transport.exchange",
        "expected \"leader\" with outer.algorithm = \"sync\" (the synchronous baseline sends its gradients from "
        "each site's leader; the split exchange carries DiLoCo's deltas), found \"split\"");
}

}  // namespace

void resolve_multisite(Resolver& r, const Layers& layers, JobConfig& c) {
  read_outer(r, c);
  check_fragments(r, c);
  check_early_rounds(r, c);
  check_outer_combinations(r, c);
  r.read(c.transport.kind, "transport", "kind", {JobConfig::Transport::Kind::Zmq, JobConfig::Transport::Kind::Ucx});
  r.read(c.transport.network, "transport", "network",
         {JobConfig::Transport::Network::Public, JobConfig::Transport::Network::Private});
  r.read(c.transport.exchange, "transport", "exchange",
         {JobConfig::Transport::Exchange::Leader, JobConfig::Transport::Exchange::Split});
  r.read(c.transport.chunk_bytes, "transport", "chunk_bytes", 1024);

  resolve_control(r, c);
  resolve_sites(r, layers, c);
  resolve_link_keys(r, c);
  refuse_public_ucx(r, c);
  refuse_split_sync(r, c);
  refuse_plaintext(r, c);
  resolve_wan(r, layers, c);  // after the sites: links and faults name them
  derive_outer(r, c);         // after the sites: they are its M
}

}  // namespace meridian::config_detail
