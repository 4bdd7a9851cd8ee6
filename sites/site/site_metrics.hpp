#pragma once
// What a site's /metrics endpoint shows: the figures its group leader publishes in the site store
// (site_keys::figures(), JSON, written every logged step) and the agent's own view of its
// replicas, as Prometheus text. Every sample carries site="<name>"; per-peer WAN traffic also
// peer="<name>". A figure the leader has not published (yet, or ever: a one-site job has no WAN)
// is left out rather than shown as 0.
#include <cstdint>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "core/config/job_config.hpp"
#include "intrasite/comm/store.hpp"

namespace meridian {

struct AgentFigures {
  std::int64_t generation = 0;
  int members = 0;     // in the current generation
  int replicas = 0;    // configured
  int restarts = 0;    // replica processes restarted, over the run
  int evictions = 0;   // hung replicas evicted, over the run
};

// `leader`: the leader's last figures, an empty object before the first. Fields of the wrong type
// are skipped: the store is shared with every replica process and must not crash the agent.
std::string render_site_metrics(const std::string& site, const nlohmann::json& leader, const AgentFigures& agent);

// [ops] metrics_port + the site's place in the job's [[site]] list, or 0 (any free port).
// Error(Config) past port 65535.
int metrics_port(const JobConfig& config, const std::string& site);

// What the endpoint serves, shared between the agent's loop (update, every ~100 ms) and the
// server's thread (render, once per scrape).
class SiteFiguresBoard {
 public:
  explicit SiteFiguresBoard(std::string site) : site_(std::move(site)) {}
  // Reads the leader's figures from the store; unreadable ones (a replica wrote them: input) are left out.
  void update(Store& store, const AgentFigures& agent);
  std::string render() const;
  nlohmann::json leader() const;  // the leader's last figures, for meridianctl status

 private:
  std::string site_;
  mutable std::mutex mu_;
  nlohmann::json leader_ = nlohmann::json::object();
  AgentFigures agent_;
};

}  // namespace meridian
