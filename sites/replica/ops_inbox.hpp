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

  // How `rollback` to a checkpoint file is read and restored here (every member at the same step):
  // fields to add to what it did. Without one the file is read whole (read_checkpoint).
  using CheckpointRollback = std::function<nlohmann::json(Trainer&, const std::string& path)>;
  void on_checkpoint_rollback(CheckpointRollback rollback) { checkpoint_rollback_ = std::move(rollback); }

  // The newest command number filed, read by the leader (the others give 0 to the sum).
  float newest(bool leader);
  // The commands this replica applied, once it has been in a group (a fresh process: none known).
  std::optional<std::int64_t> applied() const { return joined_ ? std::optional(applied_) : std::nullopt; }
  // At a (re)join, with the number the group agreed on (resume_after): nothing up to it is applied.
  void skip_to(std::int64_t applied) {
    applied_ = applied;
    joined_ = true;
  }
  // Where a (re)joining group goes on from. `applied`: per member, what it applied (applied()),
  // nullopt for a fresh replica. A member that was in a group knows, and the group's state comes
  // from such a member: a command filed while the group re-formed is applied, not lost. A group of
  // fresh replicas does not replay what was filed before it: it starts after `filed`.
  static std::int64_t resume_after(const std::vector<std::optional<std::int64_t>>& applied, std::int64_t filed);

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
  bool joined_ = false;
  VersionRollback version_rollback_;
  CheckpointRollback checkpoint_rollback_;
};

}  // namespace meridian
