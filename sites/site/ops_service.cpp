#include "sites/site/ops_service.hpp"

#include <unistd.h>

#include <fstream>

#include <zmq.hpp>

#include "core/checkpoint/checkpoint.hpp"
#include "core/checkpoint/store.hpp"
#include "core/io/atomic_write.hpp"
#include "core/io/env.hpp"
#include "core/runlog/run_log.hpp"
#include "core/util/error.hpp"
#include "sim/emulator/wan_start.hpp"
#include "sites/site/agent.hpp"
#include "sites/site/ops_wan.hpp"
#include "sites/site/site_metrics.hpp"
#include "intrasite/comm/store.hpp"
#include "sites/keys/etcd_keys.hpp"
#include "crosssite/control/control_health.hpp"
#include "intrasite/group/protocol.hpp"

namespace meridian {
namespace {

constexpr std::size_t kMaxRequestBytes = 64 * 1024;
constexpr std::size_t kStatusEvents = 10;

// Complete lines of `path` from byte `since` (a line being written is left for the next call).
std::pair<std::vector<nlohmann::json>, std::int64_t> read_events(const std::filesystem::path& path, std::int64_t since,
                                                                 std::size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  std::vector<nlohmann::json> out;
  if (!in) return {out, since};
  in.seekg(0, std::ios::end);
  const std::int64_t size = in.tellg();
  const std::int64_t from = std::min(since, size);
  in.seekg(from);
  std::string chunk(static_cast<std::size_t>(std::min<std::int64_t>(size - from, static_cast<std::int64_t>(max_bytes))), '\0');
  in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
  std::int64_t next = from;
  for (std::size_t start = 0; start < chunk.size();) {
    const auto end = chunk.find('\n', start);
    if (end == std::string::npos) break;
    auto j = nlohmann::json::parse(chunk.substr(start, end - start), nullptr, false);
    if (!j.is_discarded()) out.push_back(std::move(j));
    next = from + static_cast<std::int64_t>(end + 1);
    start = end + 1;
  }
  return {out, next};
}

}  // namespace

struct OpsService::Socket {
  zmq::context_t context{1};
  zmq::socket_t socket{context, zmq::socket_type::router};
};

OpsService::OpsService(const JobConfig& config, std::string site, std::string token, SiteAgent& agent, Store& store,
                       RunLog& log, const SiteFiguresBoard& board, std::function<double()> clock)
    : config_(config),
      site_(std::move(site)),
      token_(std::move(token)),
      agent_(agent),
      store_(store),
      log_(log),
      board_(board),
      clock_(std::move(clock)),
      socket_(std::make_unique<Socket>()),
      wan_(std::make_unique<OpsWan>(config, site_, log, wall_clock_s)) {
  auto& s = socket_->socket;
  s.set(zmq::sockopt::linger, 0);
  s.set(zmq::sockopt::maxmsgsize, static_cast<std::int64_t>(kMaxRequestBytes));
  try {
    s.bind("tcp://127.0.0.1:" + std::to_string(config.ops.port));
  } catch (const zmq::error_t& e) {
    throw make_error(ErrorKind::Io, "cannot bind the ops socket on 127.0.0.1:", config.ops.port, ": ", e.what());
  }
  endpoint_ = s.get(zmq::sockopt::last_endpoint);
  const std::string record = nlohmann::json{{"endpoint", endpoint_}, {"pid", ::getpid()}, {"site", site_}}.dump() + "\n";
  const auto path = log_.dir() / "ops.json";
  write_atomically(posix_env(), path, path.string() + ".tmp",
                   [&](WritableFile& f) { f.append(std::as_bytes(std::span(record.data(), record.size()))); });
}

OpsService::~OpsService() {
  std::error_code ignored;
  std::filesystem::remove(log_.dir() / "ops.json", ignored);
}

void OpsService::poll() {
  auto& s = socket_->socket;
  for (;;) {
    std::vector<zmq::message_t> frames;
    zmq::message_t part;
    if (!s.recv(part, zmq::recv_flags::dontwait)) return;
    frames.push_back(std::move(part));
    while (frames.back().more() && frames.size() < 8) {
      zmq::message_t next;
      if (!s.recv(next, zmq::recv_flags::dontwait)) break;
      frames.push_back(std::move(next));
    }
    while (frames.back().more()) {  // more parts than any request has: drained and refused below
      zmq::message_t rest;
      if (!s.recv(rest, zmq::recv_flags::dontwait)) break;
    }
    // ROUTER: [peer][request] from a DEALER, [peer][empty][request] from a REQ.
    const bool req = frames.size() == 3 && frames[1].size() == 0;
    nlohmann::json reply = frames.size() == 2 || req ? answer(frames.back().to_string_view())
                                                     : failure_reply("malformed request: expected one frame of JSON");
    const std::string text = reply.dump();
    s.send(frames[0], zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    if (req) s.send(zmq::message_t(), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    s.send(zmq::buffer(text), zmq::send_flags::dontwait);
  }
}

nlohmann::json OpsService::answer(std::string_view request) {
  auto parsed = parse_ops_request(request);
  if (auto* problem = std::get_if<std::string>(&parsed)) return failure_reply(*problem);
  const auto& r = std::get<OpsRequest>(parsed);
  if (changes_state(r.command) && !token_matches(token_, r.token)) {
    const std::string why = token_.empty() ? "this site has no ops token ([ops] token_file or MERIDIAN_OPS_TOKEN), so it "
                                             "accepts no command that changes anything"
                                           : (r.token.empty() ? "no ops token given" : "wrong ops token");
    log_.event("ops_refused", {{"site", site_}, {"command", to_string(r.command)}, {"reason", why}});
    return failure_reply("refused: " + std::string(to_string(r.command)) + " needs the site's ops token (" + why + ")");
  }
  try {
    auto reply = execute(r);
    if (changes_state(r.command) && reply.value("ok", false)) {
      auto logged = to_json(r);
      logged.erase("token");
      log_.event("ops_command", {{"site", site_}, {"request", logged}});
    }
    return reply;
  } catch (const Error& e) {
    return failure_reply(e.what());
  }
}

nlohmann::json OpsService::execute(const OpsRequest& r) {
  switch (r.command) {
    case OpsCommand::Status: {
      auto [recent, next] = read_events(log_.dir() / "events.jsonl", 0, std::size_t{1} << 30);
      if (recent.size() > kStatusEvents) recent.erase(recent.begin(), recent.end() - kStatusEvents);
      auto out = agent_.status(clock_());
      const auto figures = board_.leader();
      const auto now = mode();
      // A drained leader publishes no figures: the lease they name is the one it gave up.
      const auto state = now.find("state");
      const auto lease = figures.find("lease");
      const bool registered = lease != figures.end() && lease->is_number_integer() &&
                              !(state != now.end() && *state == "drained");
      out.update({{"ok", true}, {"site", site_}, {"figures", figures}, {"events", recent},
                  {"mode", now}, {"control", control(registered ? lease->get<std::int64_t>() : 0)}});
      return out;
    }
    case OpsCommand::Events: {
      auto [events, next] = read_events(log_.dir() / "events.jsonl", r.since, 256 * 1024);
      return {{"ok", true}, {"events", events}, {"next", next}};
    }
    case OpsCommand::Checkpoints: return checkpoints();
    case OpsCommand::Evict:
      if (!agent_.evict_replica(r.replica, "evicted by the operator", clock_()))
        return failure_reply("evict: replica " + std::to_string(r.replica) + " is not running in site " + site_);
      return {{"ok", true}, {"evicted", r.replica}};
    case OpsCommand::Checkpoint: return file_group_command({{"command", "checkpoint"}});
    case OpsCommand::SetLr: return file_group_command({{"command", "set-lr"}, {"scale", r.scale}});
    case OpsCommand::Drain:
    case OpsCommand::Resume:
    case OpsCommand::PauseOuter:
    case OpsCommand::ResumeOuter: return change_mode(r.command);
    case OpsCommand::Rollback: {
      if (r.version) return rollback_to_version(*r.version, r.lr_scale);
      if (config_.sites.size() > 1)
        return failure_reply(
            "rollback: a site of a job of several sites goes back to a version, not to a checkpoint (the "
            "sites' shared outer state would have to roll back too): --to v<N>, N its newest version");
      CheckpointStore checkpoints(posix_env(), log_.dir() / "checkpoints", config_.checkpoint.keep);
      std::filesystem::path path = r.to;
      if (!r.to.empty() && r.to.find_first_not_of("0123456789") == std::string::npos && r.to.size() < 11)
        path = checkpoints.path_for(std::stoll(r.to));
      if (!posix_env().exists(path)) return failure_reply("rollback: no checkpoint " + path.string());
      read_checkpoint(posix_env(), path);  // verified, with its parts, before any replica reads it
      nlohmann::json command = {{"command", "rollback"}, {"path", std::filesystem::absolute(path).string()}};
      if (r.lr_scale) command["lr_scale"] = *r.lr_scale;
      return file_group_command(std::move(command));
    }
    case OpsCommand::Wan: return wan_->report(board_.leader());
    case OpsCommand::WanAddFault:
      return wan_->add_fault({r.kind, r.sites, r.from_time, r.to_time, r.bandwidth_mbps, r.latency_ms, r.pair});
    case OpsCommand::WanClearFaults: return wan_->clear_faults();
  }
  return failure_reply("unhandled command");
}

nlohmann::json OpsService::change_mode(OpsCommand c) {
  const std::string name(to_string(c));
  const bool several = config_.sites.size() > 1;
  const bool sync = config_.outer.algorithm == JobConfig::Outer::Algorithm::Sync;
  const bool outer = c == OpsCommand::PauseOuter || c == OpsCommand::ResumeOuter;
  if (outer && !several) return failure_reply(name + ": a one-site job has no outer exchange to pause");
  if (several && sync)
    return failure_reply(name +
                         ": not with [outer] algorithm = \"sync\" (every site's gradients are needed at every step: "
                         "the other sites would stop with this one)");
  // What the replicas were asked last (they apply it at their next step or round): a command that
  // would change nothing is refused here, with the reason, rather than filed.
  if (c == OpsCommand::Drain && drain_filed_)
    return failure_reply("drain: the site is drained already (or draining); resume brings it back");
  if (c == OpsCommand::Resume && !drain_filed_) return failure_reply("resume: the site is not drained");
  if (c == OpsCommand::PauseOuter && pause_filed_)
    return failure_reply("pause-outer: the outer exchange is paused already");
  if (c == OpsCommand::ResumeOuter && !pause_filed_)
    return failure_reply("resume-outer: the outer exchange is not paused");
  auto reply = file_group_command({{"command", name}});
  if (c == OpsCommand::Drain || c == OpsCommand::Resume) drain_filed_ = c == OpsCommand::Drain;
  else pause_filed_ = c == OpsCommand::PauseOuter;
  reply["note"] = c == OpsCommand::Drain
                      ? (several ? "the site stops after its current round is merged, and leaves the job" : "the site stops after its current step, with a checkpoint")
                      : "the replicas apply it after their current step";
  return reply;
}

nlohmann::json OpsService::mode() const {
  if (store_.check(site_keys::ops_mode())) {
    const auto bytes = store_.get(site_keys::ops_mode(), std::chrono::milliseconds(0));
    auto j = nlohmann::json::parse(reinterpret_cast<const char*>(bytes.data()),
                                   reinterpret_cast<const char*>(bytes.data()) + bytes.size(), nullptr, false);
    if (j.is_object()) return j;  // written by the group leader: anything else is left out
  }
  return {{"state", "training"}, {"outer_paused", false}};
}

nlohmann::json OpsService::control(std::int64_t lease) const {
  if (config_.sites.size() <= 1) return {{"etcd", false}, {"note", "a one-site job has no control plane"}};
  const ControlHealthOptions options{etcd_options(config_, site_), std::chrono::milliseconds(500)};
  auto out = to_json(read_control_health(options, lease));
  if (lease == 0) out["lease"] = nullptr;  // not registered (starting, or drained)
  return out;
}

nlohmann::json OpsService::rollback_to_version(std::int64_t version, std::optional<double> lr_scale) {
  const std::string what = "rollback --to v" + std::to_string(version) + ": ";
  if (config_.sites.size() == 1)
    return failure_reply(what +
                         "a one-site job has no versions; roll back to a checkpoint instead (--to STEP or --to FILE)");
  if (config_.outer.algorithm == JobConfig::Outer::Algorithm::Sync)
    return failure_reply(what + "a synchronous job has no versions of its own to go back to");
  // Versions only grow, so a published one at most trails the site's: one above `version` proves
  // it older. A newer one is the replicas' to judge, against the version they hold then.
  const auto figures = board_.leader();
  if (const auto held = figures.find("version"); held != figures.end() && held->is_number_integer() &&
                                                  held->get<std::int64_t>() > version)
    return failure_reply(
        what + "this site holds version " + std::to_string(held->get<std::int64_t>()) +
        "; going back to an older version would revert the whole job (a new commit of that version's "
        "weights, on every site), which meridian does not do: roll this site back to its newest version");
  nlohmann::json command = {{"command", "rollback"}, {"version", version}};
  if (lr_scale) command["lr_scale"] = *lr_scale;
  return file_group_command(std::move(command));
}

nlohmann::json OpsService::file_group_command(nlohmann::json command) {
  const std::int64_t number = store_.add(site_keys::ops_commands(), 0) + 1;
  const std::string text = command.dump();
  store_.set(site_keys::ops_command(number), std::as_bytes(std::span(text.data(), text.size())));
  store_.add(site_keys::ops_commands(), 1);  // only now may the replicas read it
  return {{"ok", true}, {"filed", number}, {"note", "the replicas apply it after their current step"}};
}

nlohmann::json OpsService::checkpoints() const {
  CheckpointStore store(posix_env(), log_.dir() / "checkpoints", config_.checkpoint.keep);
  nlohmann::json list = nlohmann::json::array();
  for (const auto step : store.steps()) {
    const auto path = store.path_for(step);
    nlohmann::json entry = {{"step", step}, {"path", path.string()}};
    try {
      entry["bytes"] = posix_env().read_all(path).size();
      const auto ckpt = read_checkpoint(posix_env(), path);  // with its parts, when it has any
      entry["verified"] = true;
      entry["records"] = ckpt.size();
      if (ckpt.has("adamw.parts")) entry["parts"] = ckpt.get_pod<std::uint64_t>("adamw.parts").front();
    } catch (const Error& e) {
      entry["verified"] = false;
      entry["error"] = e.what();
    }
    list.push_back(std::move(entry));
  }
  return {{"ok", true}, {"checkpoints", list}};
}

}  // namespace meridian
