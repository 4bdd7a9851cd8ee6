#pragma once
// Operator commands the whole replica group applies at the same step (checkpoint now, set the
// learning-rate scale, roll back to a checkpoint, drain / resume, pause / resume the outer exchange). The site agent files them in the site store
// (site_keys::ops_command(n), then bumps site_keys::ops_commands()); the leader reads the newest
// number inside the step's control all-reduce, so every replica learns it together and applies
// the same commands, in order, after the same step.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace meridian {

class Env;
class Store;
class Trainer;

class OpsInbox {
 public:
  // `on_mode`: drain, resume, pause-outer and resume-outer are the caller's (sites/replica/site_mode),
  // handed over with the result to fill.
  using ModeHandler = std::function<void(const std::string& kind, nlohmann::json& result)>;
  OpsInbox(Store& store, Env& env, ModeHandler on_mode) : store_(store), env_(env), on_mode_(std::move(on_mode)) {}

  // The newest command number filed, read by the leader (the others give 0 to the sum).
  float newest(bool leader);
  // At a (re)join, with the number the group agreed on: what was filed before is not replayed.
  void skip_to(std::int64_t newest) { applied_ = newest; }

  struct Applied {
    bool restored = false;            // the trainer's state was replaced (a rollback)
    std::vector<nlohmann::json> done;  // one per command: {"command", ...} or {"command", "error"}
  };
  // Applies the commands after the last applied, up to `newest`. A command that cannot be
  // applied (a checkpoint that no longer reads) is reported in `done` and skipped.
  Applied apply(std::int64_t newest, Trainer& trainer, bool leader);

 private:
  Store& store_;
  Env& env_;
  ModeHandler on_mode_;
  std::int64_t applied_ = 0;
};

}  // namespace meridian
