#pragma once
// What `meridianctl` and a site agent say to each other: one JSON object per request and per
// reply over the agent's ops socket (ZeroMQ, 127.0.0.1 only). Parsing is total: any text gives a
// request or a sentence saying what is wrong with it, never an exception, so no request can
// crash the agent.
//
//   {"command": "status"}                                  read-only
//   {"command": "events", "since": <byte offset>}          read-only; reply has "next"
//   {"command": "checkpoints"}                             read-only: list and verify
//   {"command": "evict", "replica": 1, "token": "..."}     changes state: needs the ops token
//   {"command": "checkpoint", "token": "..."}
//   {"command": "set-lr", "scale": 0.5, "token": "..."}
//   {"command": "rollback", "to": "<checkpoint file, step, or v<N>>", "lr_scale": 0.5, "token": "..."}
//   {"command": "drain", "token": "..."}          and "resume": leave the job cleanly / come back
//   {"command": "pause-outer", "token": "..."}    and "resume-outer": stop / restart the outer exchange
//   {"command": "wan"}                                     read-only: measured links, the WAN's faults
//   {"command": "wan-add-fault", "kind": "partition", "sites": ["a"], "from": "+5", "to": "20",
//    "bandwidth_mbps": 10, "latency_ms": 50, "pair": true, "token": "..."}   (times: job seconds, or "+N"
//    from now; pair: only the link between the two sites)
//   {"command": "wan-clear-faults", "token": "..."}
//
// Replies: {"ok": true, ...} or {"ok": false, "error": "<sentence>"}.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace meridian {

enum class OpsCommand {
  Status, Events, Checkpoints, Evict, Checkpoint, SetLr, Rollback,
  Drain, Resume, PauseOuter, ResumeOuter, Wan, WanAddFault, WanClearFaults
};
std::string_view to_string(OpsCommand c);

struct OpsRequest {
  OpsCommand command = OpsCommand::Status;
  std::string token;
  int replica = -1;                 // evict
  double scale = 0;                 // set-lr
  std::string to;                   // rollback: a checkpoint file, or a step whose checkpoint is meant
  std::optional<std::int64_t> version;  // rollback: `to` is v<N>, a version of a multi-site job
  std::optional<double> lr_scale;   // rollback
  std::int64_t since = 0;           // events
  // wan-add-fault, as given: checked against the job by the agent (sim/emulator/operator_faults)
  std::string kind;
  std::vector<std::string> sites;
  std::string from_time, to_time;
  std::optional<double> bandwidth_mbps, latency_ms;
  bool pair = false;
};

// The request, or what is wrong with it ("unknown command \"x\" (expected one of ...)").
std::variant<OpsRequest, std::string> parse_ops_request(std::string_view text);
nlohmann::json to_json(const OpsRequest& r);
// The reply to a request that failed: {"ok": false, "error": why}.
inline nlohmann::json failure_reply(const std::string& why) { return {{"ok", false}, {"error", why}}; }

// Which of rollback's forms `to` is: v<N> (a version: N), or a checkpoint (nullopt: a step, or a
// file). Any text that starts with 'v' and holds no '/' or '.' is meant as a version (checkpoint
// files are ckpt-<step>.mrdn; a file named like a version is given as ./v12), so "v", "v1x" or
// "v-2" are refused with the sentence saying so rather than looked for on disk.
std::variant<std::optional<std::int64_t>, std::string> rollback_version(std::string_view to);

// Commands that change what the site does need the token; the others only read.
bool changes_state(OpsCommand c);
// Whether `given` is the site's token. An empty `expected` (no token configured) matches nothing.
// Compared in time independent of where they differ.
bool token_matches(std::string_view expected, std::string_view given);

}  // namespace meridian
