#pragma once
// Faults an operator adds to the emulated WAN while the job runs (`meridianctl wan add-fault`),
// as pure functions of (the request, the job, the time in job seconds): checking and resolving a
// request, the list's JSON form, and what clearing it leaves. The list lives in etcd
// (wan_faults_key), written by compare-and-swap; every site's leader reads it and runs the
// config's faults followed by these (WanSchedule::replace_faults), so both sides of a partition
// see it.
//
// Lead time: a partition cuts its sites off etcd when it begins, so they must have read it before:
// one begins kMinLeadS or more after the request (leaders read the list every
// kFaultsReadEveryS). A bandwidth or latency fault does not cut anyone off and may begin at once
// (or up to kGraceS in the past: the operator's clock and the command's trip), a site that reads
// it a moment late only applies it a moment late.
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/config/job_config.hpp"

namespace meridian {

using WanFault = JobConfig::Wan::Fault;

inline constexpr double kFaultsReadEveryS = 1.0;
inline constexpr double kMinLeadS = 3.0;
inline constexpr double kGraceS = 1.0;

// The etcd key holding the operator's faults of `job` ({"faults": [...]}).
std::string wan_faults_key(const std::string& job);

// A time as given on the command line: "12.5" (seconds from the job's start) or "+5" (from now).
struct FaultTime {
  bool relative = false;
  double seconds = 0;
};
// The time, or what is wrong with the text.
std::variant<FaultTime, std::string> parse_fault_time(std::string_view text);
std::optional<WanFault::Kind> parse_fault_kind(std::string_view text);

// What the operator asked for, before it is checked against the job.
struct FaultRequest {
  std::string kind;
  std::vector<std::string> sites;
  std::string from, to;
  std::optional<double> bandwidth_mbps, latency_ms;
  bool pair = false;  // bandwidth or latency: only the link between the two `sites`
};

// The fault in job seconds, `now_s` seconds after the job's start, or the sentence saying why it
// is refused: a job without [wan] emulation, a bad kind or time, unknown or repeated sites, a
// partition of every site, to <= from, a start in the past (beyond kGraceS), a partition sooner
// than kMinLeadS, a missing or extra figure for the kind, a pair that is not two sites or is a
// partition (as the config's [[wan.fault]] pair).
std::variant<WanFault, std::string> resolve_fault(const FaultRequest& request, const JobConfig& job, double now_s);

// Whether `f` holds at `t` seconds after the job's start (from_s <= t < to_s, as WanSchedule).
bool holds(const WanFault& f, double t);

// What `clear-faults` leaves at `now_s`: every fault that did not begin, and bandwidth and latency
// faults holding now, go; a partition holding now stays until its end, because its sites are cut
// off etcd and could not read that it was lifted (the two sides would disagree).
struct Cleared {
  std::vector<WanFault> kept, removed;
};
Cleared clear_faults(const std::vector<WanFault>& faults, double now_s);

// The config's faults, then the operator's: what a leader hands WanSchedule::replace_faults.
std::vector<WanFault> merged_faults(const std::vector<WanFault>& config, const std::vector<WanFault>& operator_faults);

nlohmann::json to_json(const WanFault& f);
// The operator's list as stored in etcd, and back. Error(Peer) naming `where` for text that is not
// such a list (etcd is shared: input, not an invariant).
std::string encode_faults(const std::vector<WanFault>& faults);
std::vector<WanFault> decode_faults(std::string_view text, std::string_view where);

}  // namespace meridian
