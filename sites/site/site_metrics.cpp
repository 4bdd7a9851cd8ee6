#include "sites/site/site_metrics.hpp"

#include <algorithm>
#include <chrono>

#include "core/runlog/prometheus.hpp"
#include "core/util/error.hpp"
#include "intrasite/group/protocol.hpp"

namespace meridian {
namespace {

using Type = PromText::Type;

struct Figure {
  const char* key;  // in the leader's JSON
  const char* name;
  Type type;
  const char* help;
};

// The leader's figures, in the order they are shown.
constexpr Figure kLeaderFigures[] = {
    {"loss", "meridian_loss", Type::Gauge, "training loss of the last logged step (mean over the group)"},
    {"lr", "meridian_learning_rate", Type::Gauge, "learning rate of the last logged step"},
    {"lr_scale", "meridian_lr_scale", Type::Gauge, "factor on the scheduled learning rate (divergence guard, ops)"},
    {"step", "meridian_step", Type::Gauge, "inner steps completed"},
    {"tokens", "meridian_tokens_total", Type::Counter, "tokens the model has learned from, whole group"},
    {"tok_s", "meridian_tokens_per_second", Type::Gauge, "tokens per second since the previous figures"},
    {"step_s", "meridian_step_seconds", Type::Gauge, "duration of the last step"},
    {"utilization", "meridian_compute_utilization", Type::Gauge, "share of wall time spent in training steps"},
    {"goodput", "meridian_goodput", Type::Gauge, "share of the steps computed that the model kept (rollbacks discard some)"},
    {"version", "meridian_version", Type::Gauge, "global version (outer steps) this site holds"},
    {"staleness", "meridian_staleness_versions", Type::Gauge, "versions committed by any site that this site does not hold yet"},
    {"live_sites", "meridian_live_sites", Type::Gauge, "sites whose membership lease is alive"},
    {"quorum", "meridian_quorum_size", Type::Gauge, "sites a commit waits for"},
    {"heals", "meridian_heals_total", Type::Counter, "group re-formations with a state sync after the first"},
    {"heal_s", "meridian_heal_seconds", Type::Gauge, "duration of the last join (rendezvous and state sync)"},
    {"codec_ratio", "meridian_codec_ratio", Type::Gauge, "bytes on the wire per fp32 byte of a delta"},
    {"deltas_screened_out", "meridian_deltas_screened_out_total", Type::Counter, "peer deltas refused by the screen (NaN, norm, size)"},
    {"sdc_findings", "meridian_sdc_findings_total", Type::Counter, "parameter-hash disagreements found among replicas"},
    {"rollbacks", "meridian_rollbacks_total", Type::Counter, "rollbacks by the divergence guard"},
};

}  // namespace

std::string render_site_metrics(const std::string& site, const nlohmann::json& leader, const AgentFigures& agent) {
  PromText p;
  const PromText::Labels at = {{"site", site}};
  p.family("meridian_up", Type::Gauge, "1 while the site agent serves");
  p.sample(1, at);
  p.family("meridian_generation", Type::Gauge, "membership generation of the site's replica group");
  p.sample(static_cast<double>(agent.generation), at);
  p.family("meridian_replicas_live", Type::Gauge, "replicas in the current generation");
  p.sample(agent.members, at);
  p.family("meridian_replicas_configured", Type::Gauge, "replicas the site runs when all are well");
  p.sample(agent.replicas, at);
  p.family("meridian_replica_restarts_total", Type::Counter, "replica processes restarted");
  p.sample(agent.restarts, at);
  p.family("meridian_replica_evictions_total", Type::Counter, "hung replicas evicted");
  p.sample(agent.evictions, at);
  if (!leader.is_object()) return p.text();
  for (const auto& f : kLeaderFigures) {
    const auto it = leader.find(f.key);
    if (it == leader.end() || !it->is_number()) continue;
    p.family(f.name, f.type, f.help);
    p.sample(it->get<double>(), at);
  }
  if (const auto refused = leader.find("refused"); refused != leader.end() && refused->is_object()) {
    p.family("meridian_refused_total", Type::Counter,
             "what the site refused of its peers, by cause (damaged deltas, malformed requests, ...)");
    for (const auto& [what, count] : refused->items())
      if (count.is_number()) p.sample(count.get<double>(), {{"site", site}, {"what", what}});
  }
  const auto per_peer = [&](const char* group, const char* key, const std::string& name, Type type,
                            const std::string& help, double scale) {
    const auto peers = leader.find(group);
    if (peers == leader.end() || !peers->is_object()) return;
    bool any = false;
    for (const auto& [peer, figures] : peers->items()) {
      if (!figures.is_object() || !figures.contains(key) || !figures[key].is_number()) continue;
      if (!any) p.family(name, type, help);
      any = true;
      p.sample(figures[key].get<double>() * scale, {{"site", site}, {"peer", peer}});
    }
  };
  for (const char* direction : {"sent", "received"})
    per_peer("wan", direction, std::string("meridian_wan_bytes_") + direction + "_total", Type::Counter,
             std::string("payload bytes ") + direction + " over the cross-site link, per peer", 1);
  // The link as measured (MeasuredLink: probes and stamped transfers), medians over its window, in
  // base units; a figure with no sample yet is left out.
  per_peer("links", "rtt_ms", "meridian_wan_rtt_seconds", Type::Gauge, "measured round trip to the peer", 1e-3);
  per_peer("links", "in_mbps", "meridian_wan_receive_bytes_per_second", Type::Gauge,
           "measured bandwidth of the peer's transfers to this site", 1e6 / 8);
  per_peer("links", "out_mbps", "meridian_wan_send_bytes_per_second", Type::Gauge,
           "measured bandwidth of this site's transfers to the peer, as the peer saw it", 1e6 / 8);
  return p.text();
}

int metrics_port(const JobConfig& config, const std::string& site) {
  if (config.ops.metrics_port == 0) return 0;
  const auto it = std::find_if(config.sites.begin(), config.sites.end(), [&](const auto& s) { return s.name == site; });
  const int port = config.ops.metrics_port + static_cast<int>(it - config.sites.begin());
  if (port > 65535)
    throw make_error(ErrorKind::Config, "ops.metrics_port ", config.ops.metrics_port, " + the index of site '", site,
                     "' is past port 65535");
  return port;
}

void SiteFiguresBoard::update(Store& store, const AgentFigures& agent) {
  nlohmann::json leader = nlohmann::json::object();
  if (store.check(site_keys::figures())) {
    const auto bytes = store.get(site_keys::figures(), std::chrono::milliseconds(100));
    const auto* text = reinterpret_cast<const char*>(bytes.data());
    leader = nlohmann::json::parse(text, text + bytes.size(), nullptr, false);
    if (leader.is_discarded() || !leader.is_object()) leader = nlohmann::json::object();
  }
  if (store.check(site_keys::waiting())) {
    const auto bytes = store.get(site_keys::waiting(), std::chrono::milliseconds(100));
    const auto* text = reinterpret_cast<const char*>(bytes.data());
    auto waiting = nlohmann::json::parse(text, text + bytes.size(), nullptr, false);
    if (waiting.is_object() && waiting.contains("for") && waiting["for"].is_string() && waiting.contains("s") &&
        waiting["s"].is_number())
      leader["waiting"] = std::move(waiting);
  }
  std::lock_guard lock(mu_);
  leader_ = std::move(leader);
  agent_ = agent;
}

nlohmann::json SiteFiguresBoard::leader() const {
  std::lock_guard lock(mu_);
  return leader_;
}

std::string SiteFiguresBoard::render() const {
  std::lock_guard lock(mu_);
  return render_site_metrics(site_, leader_, agent_);
}

}  // namespace meridian
