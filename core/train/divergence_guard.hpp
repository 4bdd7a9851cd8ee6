#pragma once
// The divergence guard's action: keeps the last healthy training state in memory (one every
// guard.snapshot_every steps, trusted once the step after it was judged healthy), and when the
// detector finds a diverging step, rolls the trainer back to it, multiplies the learning rate by
// guard.lr_factor and lets training go on -- OPT-175B's "mid-flight correction", automated. After
// guard.max_attempts rollbacks the next divergence ends the run with a report (Error(Data)).
//
// Every input of a decision is the same on every replica of a group (all-reduced loss and
// gradients, a rollback count that is part of the training state), so a group decides as one.
//
// A site of a job of several sites cannot go back in time alone: what it shares with the others
// (the job's versions, its announced rounds) has moved on. There the rollback is to the newest
// version the site holds (RecoverToVersion): the caller's `to_version` puts the weights there and
// drops the site's in-flight round, the optimizer's moments come from the last healthy state (a
// diverging step's gradients would otherwise steer the next steps), and the steps go on.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/checkpoint/checkpoint.hpp"
#include "core/config/job_config.hpp"
#include "core/train/divergence_detector.hpp"
#include "core/train/trainer.hpp"

namespace meridian {

class RunLog;

class DivergenceGuard {
 public:
  enum class Mode {
    Recover,           // roll back to the last healthy state and lower the learning rate
    RecoverToVersion,  // a site of a multi-site job: back to the newest version, lower the learning rate
    DetectOnly,        // log spikes and go on; a non-finite step still ends the run (jobs of several sites
                       // unless [guard] across_sites)
  };
  enum class Outcome { Healthy, RolledBack };
  // RecoverToVersion: puts the trainer's weights on the newest version the site holds and drops its
  // in-flight round; returns what the rollback event adds (the version).
  using ToVersion = std::function<nlohmann::json(Trainer&)>;

  // `where` is merged into every event ({"site": ..., "replica": ...}).
  DivergenceGuard(const JobConfig::Guard& options, Mode mode, RunLog& log, nlohmann::json where,
                  ToVersion to_version = {});

  // A fresh window and the trainer's present state as the healthy one: at the start and at every
  // (re)join of a group, after its members synchronised. Only a group's reporter writes events.
  void reset(const Trainer& trainer, bool report);

  // Judges the step `trainer` just took (`r`). RolledBack: the trainer holds the last healthy
  // state (RecoverToVersion: the newest version, at the same step) with a lower learning rate, and
  // `r` is void. Error(Data) when the attempts are spent.
  Outcome after_step(Trainer& trainer, const StepResult& r);

  // The RecoverToVersion action asked for by the operator, in either mode given a `to_version`: at
  // `lr_scale`, not counted as an attempt. Returns what it did (the version, the step the moments
  // come from).
  nlohmann::json force_rollback(Trainer& trainer, double lr_scale);

  // The healthy states kept, in bytes.
  std::size_t held_bytes() const { return trusted_.bytes() + (pending_ ? pending_->bytes() : 0); }

 private:
  // Mode's action; the fields it adds to the rollback event.
  nlohmann::json roll_back(Trainer& trainer);
  // Whether healthy states are kept: to roll back to, or for the moments of a forced rollback.
  bool keeps_states() const { return mode_ != Mode::DetectOnly || to_version_ != nullptr; }
  [[noreturn]] void give_up(const Trainer& trainer, const StepResult& r);
  void event(const std::string& kind, nlohmann::json fields);

  JobConfig::Guard options_;
  Mode mode_;
  ToVersion to_version_;
  RunLog& log_;
  nlohmann::json where_;
  bool report_ = false;
  DivergenceDetector detector_;
  Checkpoint trusted_;
  std::int64_t trusted_step_ = 0;
  std::optional<Checkpoint> pending_;  // taken at pending_step_, trusted once that step proves healthy
  std::int64_t pending_step_ = 0;
  std::optional<std::int64_t> recovering_until_;  // the step that diverged, until training passes it again
  std::vector<std::string> findings_;             // one line per divergence, for the final report
};

}  // namespace meridian
