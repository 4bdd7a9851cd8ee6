#pragma once
// The site agent's command socket for meridianctl: a ZeroMQ ROUTER on 127.0.0.1 that the
// agent's loop polls without waiting (so commands run on the agent's thread, between its
// rounds, with no locking). Read-only commands are answered for anyone on loopback; commands
// that change anything need the site's ops token, and a refusal is logged (ops_refused).
// Accepted changes are logged too (ops_command). Group commands (checkpoint, set-lr, rollback,
// drain, resume, pause-outer, resume-outer) are filed in the site store for the replicas
// (sites/replica/ops_inbox, site_mode). status also reads the job's etcd cluster (bounded). WAN fault
// changes go to etcd for every site (ops_wan.hpp).
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/config/job_config.hpp"
#include "sites/site/ops_protocol.hpp"

namespace meridian {

class RunLog;
class SiteAgent;
class SiteFiguresBoard;
class Store;

class OpsWan;

class OpsService {
 public:
  // Binds tcp://127.0.0.1:[ops] port and writes <log dir>/ops.json ({"endpoint", "pid", "site"}),
  // where meridianctl finds it; removes it on destruction.
  // `token`: the site's ops token (empty: every state-changing command is refused).
  OpsService(const JobConfig& config, std::string site, std::string token, SiteAgent& agent, Store& store,
             RunLog& log, const SiteFiguresBoard& board, std::function<double()> clock);
  ~OpsService();
  OpsService(const OpsService&) = delete;
  OpsService& operator=(const OpsService&) = delete;

  const std::string& endpoint() const { return endpoint_; }
  // Answers every request waiting now; returns at once when there is none.
  void poll();

  // The reply to one request's text (what poll sends back): exposed so tests can drive it directly.
  nlohmann::json answer(std::string_view request);

 private:
  nlohmann::json execute(const OpsRequest& r);
  nlohmann::json file_group_command(nlohmann::json command);
  // drain, resume, pause-outer, resume-outer: refused where they cannot apply, else filed.
  nlohmann::json change_mode(OpsCommand c);
  // What the group leader says the site does now (site_keys::ops_mode()), for status.
  nlohmann::json mode() const;
  // The job's etcd cluster (members, leader, the site's lease as the leader's figures name it;
  // 0: none), read with short timeouts; a one-site job says it has none.
  nlohmann::json control(std::int64_t lease) const;
  // A site of a multi-site job back to its newest version (the replicas check it is `version`);
  // refused in a one-site or synchronous job, and for a version older than the site holds.
  nlohmann::json rollback_to_version(std::int64_t version, std::optional<double> lr_scale);
  nlohmann::json checkpoints() const;
  nlohmann::json events(std::int64_t since, std::size_t max_bytes) const;

  struct Socket;
  JobConfig config_;
  std::string site_, token_;
  SiteAgent& agent_;
  Store& store_;
  RunLog& log_;
  const SiteFiguresBoard& board_;
  std::function<double()> clock_;
  std::unique_ptr<Socket> socket_;
  std::unique_ptr<OpsWan> wan_;
  std::string endpoint_;
  bool drain_filed_ = false, pause_filed_ = false;  // the last such command filed for the replicas
};

}  // namespace meridian
