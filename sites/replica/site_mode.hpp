#pragma once
// The operator's say over what a site's replicas do: meridianctl drain / resume (stop taking part
// and leave cleanly, come back) and pause-outer / resume-outer (train on without the outer
// exchange). The commands reach every replica after the same step (ops_inbox); every replica holds
// the same SiteMode, and the leader writes it to the site store (site_keys::ops_mode()) for
// `meridianctl status` and for a group that re-forms (a restarted replica learns it there).
//
// While drained the group is parked: it trains nothing and talks to no other site, but its
// replicas stay up, beat their heartbeats and keep applying operator commands together, until
// one resumes it, a newer generation is published, or (across sites) the job ended without it.
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

namespace meridian {

class Communicator;
class Store;

class SiteMode {
 public:
  enum class State { Training, Draining, Drained };

  explicit SiteMode(Store& store) : store_(store) {}

  // After a (re)join: every member takes what the leader reads in the store.
  void agree(Communicator& group, bool leader);
  // drain, resume, pause-outer or resume-outer, as the group applied it. Sets result["error"]
  // when it changes nothing (resume of a site not drained, say); result["state"] otherwise.
  void command(const std::string& kind, nlohmann::json& result);

  State state() const { return state_; }
  bool outer_paused() const { return outer_paused_; }
  bool resume_wanted() const { return resume_wanted_; }
  // The drain took effect / the site came back; the leader publishes the mode with `detail`.
  void drained(bool leader, nlohmann::json detail);
  void resumed(bool leader, nlohmann::json detail);
  void publish(bool leader, nlohmann::json detail = nlohmann::json::object()) const;

 private:
  Store& store_;
  State state_ = State::Training;
  bool outer_paused_ = false;
  bool resume_wanted_ = false;
};

std::string_view to_string(SiteMode::State s);

// What the parked group needs from its replica: operator commands and the other sites.
struct ParkHooks {
  std::function<bool()> newer_generation;          // a newer generation is published (any member)
  std::function<std::int64_t()> newest_command;    // leader: the newest command filed
  std::function<void(std::int64_t)> apply;         // every member: applies commands up to this number
  std::function<bool()> job_over;                  // leader: the other sites finished the job
  std::function<double()> now;                     // monotonic seconds
};
enum class Parked { Resumed, Regroup, JobOver };

// Waits together, one tiny all-reduce every `every`, until the mode wants to resume, a newer
// generation is published, or the job is over (asked every `job_every`).
Parked park(Communicator& group, bool leader, const SiteMode& mode, const ParkHooks& hooks,
            std::chrono::milliseconds every = std::chrono::milliseconds(100),
            std::chrono::milliseconds job_every = std::chrono::milliseconds(1000));

}  // namespace meridian
