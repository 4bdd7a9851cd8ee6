// A trainer's resume: from the newest checkpoint that verifies, whole, or leaving a checkpoint's
// parts on disk for the replicas of a sharded site to take by range once their group has formed.
#include "core/checkpoint/store.hpp"
#include "core/runlog/progress.hpp"
#include "core/runlog/run_log.hpp"
#include "core/train/trainer.hpp"

namespace meridian {

CheckpointStore Trainer::checkpoint_store() const {
  return CheckpointStore(env_, config_.job.run_dir / "checkpoints", config_.checkpoint.keep);
}

void Trainer::checkpoint_rejected(const std::string& why) {
  log_.event("checkpoint_rejected", {{"reason", why}});
  if (progress_) progress_->line("warning: " + why);
}

std::optional<Checkpoint> Trainer::newest_checkpoint() {
  auto loaded = checkpoint_store().load_latest([this](const std::string& why) { checkpoint_rejected(why); });
  if (!loaded) return std::nullopt;
  return std::move(loaded->checkpoint);
}

std::optional<CheckpointStore::LoadedHead> Trainer::newest_checkpoint_head() {
  return checkpoint_store().load_latest_head([this](const std::string& why) { checkpoint_rejected(why); });
}

bool Trainer::try_resume() {
  auto loaded = checkpoint_store().load_latest([this](const std::string& why) { checkpoint_rejected(why); });
  if (!loaded) return false;
  restore(loaded->checkpoint, loaded->path.string());
  resumed(loaded->path);
  return true;
}

void Trainer::resume_from(const CheckpointStore::LoadedHead& loaded) {
  restore_head(loaded.checkpoint, loaded.path.string());
  resumed(loaded.path);
}

void Trainer::restore_head(const CheckpointHead& checkpoint, const std::string& source) {
  if (!checkpoint.parts) return restore(checkpoint.head, source);
  // The moments stay on disk: restore_moments takes them by range.
  state_ = decode_train_weights(checkpoint.head, source, config_.model, model_->params(), opt_);
  restored(checkpoint.head);
}

void Trainer::resumed(const std::filesystem::path& path) {
  log_.event("resume", {{"step", state_.step}, {"checkpoint", path.string()}});
  if (progress_) progress_->line("resumed from " + path.string() + " at step " + std::to_string(state_.step));
}

}  // namespace meridian
