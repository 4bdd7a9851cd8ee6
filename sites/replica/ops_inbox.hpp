#pragma once
// Operator commands the whole replica group applies at the same step (checkpoint now, set the
// learning-rate scale, roll back to a checkpoint or, across sites, to the site's newest version,
// drain / resume, pause / resume the outer exchange). The site agent files them in the site store
// (site_keys::ops_command(n), then bumps site_keys::ops_commands()); the leader reads the newest
// number inside the step's control all-reduce, so every replica learns it together and applies
// the same commands, in order, after the same step.
#include <cstdint>
#include <functional>
#include <optional>
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

  // How `rollback` to a version is done here (a site of a multi-site job): the fields of what it
  // did, or Error when this site cannot go to that version. Without one such a command is refused.
  using VersionRollback = std::function<nlohmann::json(Trainer&, std::int64_t version, std::optional<double> lr_scale)>;
  void on_version_rollback(VersionRollback rollback) { version_rollback_ = std::move(rollback); }

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
  VersionRollback version_rollback_;
};

}  // namespace meridian
