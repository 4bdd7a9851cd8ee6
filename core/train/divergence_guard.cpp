#include "core/train/divergence_guard.hpp"

#include <cmath>

#include "core/runlog/run_log.hpp"
#include "core/util/error.hpp"

namespace meridian {
namespace {

// JSON has no NaN or infinity: a non-finite figure is written as its text.
nlohmann::json figure(double v) {
  if (std::isfinite(v)) return v;
  return std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf");
}

std::string finding(const StepResult& r, const DivergenceVerdict& v) {
  std::string out = "step " + std::to_string(r.step) + ": " + std::string(to_string(v.kind)) + " (loss " +
                    std::to_string(r.loss) + ", grad norm " + std::to_string(r.grad_norm);
  if (v.kind == Divergence::LossSpike) out += ", z " + std::to_string(v.z);
  if (v.kind == Divergence::GradNormExplosion) out += ", " + std::to_string(v.grad_ratio) + "x the median";
  return out + ")";
}

}  // namespace

DivergenceGuard::DivergenceGuard(const JobConfig::Guard& options, Mode mode, RunLog& log, nlohmann::json where,
                                 ToVersion to_version)
    : options_(options),
      mode_(mode),
      to_version_(std::move(to_version)),
      log_(log),
      where_(std::move(where)),
      detector_(options) {
  MERIDIAN_CHECK(mode_ != Mode::RecoverToVersion || to_version_, "RecoverToVersion needs a way to the version");
}

void DivergenceGuard::event(const std::string& kind, nlohmann::json fields) {
  if (!report_) return;
  fields.update(where_);
  log_.event(kind, std::move(fields));
}

void DivergenceGuard::reset(const Trainer& trainer, bool report) {
  report_ = report;
  detector_.clear();
  pending_.reset();
  if (keeps_states()) {
    trusted_ = trainer.snapshot_held();
    trusted_step_ = trainer.state().step;
  }
}

DivergenceGuard::Outcome DivergenceGuard::after_step(Trainer& trainer, const StepResult& r) {
  if (r.lr_injected) event("lr_spike_injected", {{"step", r.step}, {"lr", r.lr}, {"factor", options_.inject_lr_factor}});
  // fp16 on a GPU: the loss scale after this step, against the scaler's floor.
  std::optional<LossScaleReading> scale;
  if (r.loss_scale > 0) scale = LossScaleReading{r.loss_scale, r.loss_scale_floor};
  const DivergenceVerdict v = detector_.judge(r.loss, r.grad_norm, scale);
  if (!v.diverged()) {
    detector_.accept(r.loss, r.grad_norm, scale);
    if (!keeps_states()) return Outcome::Healthy;
    // The state a step started from is healthy once that step's loss and gradients are.
    if (pending_ && pending_step_ == r.step) {
      trusted_ = std::move(*pending_);
      trusted_step_ = pending_step_;
      pending_.reset();
    }
    if (recovering_until_ && r.step >= *recovering_until_) {
      event("recovered", {{"step", r.step}, {"loss", r.loss}, {"lr", r.lr}, {"attempt", trainer.state().rollbacks}});
      recovering_until_.reset();
    }
    if (trainer.state().step % options_.snapshot_every == 0) {
      pending_ = trainer.snapshot_held();
      pending_step_ = trainer.state().step;
    }
    return Outcome::Healthy;
  }

  findings_.push_back(finding(r, v));
  event("divergence_detected", {{"step", r.step},
                                {"kind", to_string(v.kind)},
                                {"loss", figure(r.loss)},
                                {"grad_norm", figure(r.grad_norm)},
                                {"z", v.z},
                                {"grad_ratio", v.grad_ratio},
                                {"mean_loss", v.mean_loss},
                                {"median_grad_norm", v.median_grad_norm},
                                {"lr", r.lr}});
  if (mode_ == Mode::DetectOnly) {
    if (v.kind == Divergence::NonFinite) give_up(trainer, r);
    return Outcome::Healthy;
  }
  const std::int64_t attempt = trainer.state().rollbacks + 1;
  if (attempt > options_.max_attempts) give_up(trainer, r);
  const double lr_scale = trainer.state().lr_scale * options_.lr_factor;
  nlohmann::json fields = roll_back(trainer);
  trainer.set_guard_state(lr_scale, attempt);
  recovering_until_ = r.step;
  fields.update({{"from_step", r.step}, {"lr_scale", lr_scale}, {"attempt", attempt}, {"max_attempts", options_.max_attempts}});
  event("rollback", std::move(fields));
  return Outcome::RolledBack;
}

nlohmann::json DivergenceGuard::roll_back(Trainer& trainer) {
  pending_.reset();
  const std::string source = "the healthy state of step " + std::to_string(trusted_step_);
  if (mode_ == Mode::Recover) {
    trainer.restore(trusted_, source);
    return {{"to_step", trusted_step_}};
  }
  trainer.restore_optimizer(trusted_, source);
  nlohmann::json fields = to_version_(trainer);
  fields.update({{"to_step", trainer.state().step}, {"moments_from_step", trusted_step_}});
  return fields;
}

nlohmann::json DivergenceGuard::force_rollback(Trainer& trainer, double lr_scale) {
  MERIDIAN_CHECK(mode_ != Mode::Recover && to_version_, "force_rollback outside a multi-site job");
  auto fields = roll_back(trainer);
  trainer.set_guard_state(lr_scale, trainer.state().rollbacks);
  fields["lr_scale"] = lr_scale;
  return fields;
}

void DivergenceGuard::give_up(const Trainer& trainer, const StepResult& r) {
  std::string report;
  for (const auto& f : findings_) report += "\n  " + f;
  event("divergence_gave_up", {{"step", r.step},
                               {"rollbacks", trainer.state().rollbacks},
                               {"max_attempts", options_.max_attempts},
                               {"findings", findings_}});
  if (mode_ == Mode::DetectOnly)
    throw make_error(ErrorKind::Data, "training diverged at step ", r.step, ": loss ", r.loss, ", gradient norm ",
                     r.grad_norm, " (a site of this multi-site job does not roll back: it is synchronous, or [guard] across_sites is off; "
                     "lower inner.lr or raise inner.warmup_steps)");
  throw make_error(ErrorKind::Data, "training diverged ", findings_.size(), " time(s) and ", trainer.state().rollbacks,
                   " rollback(s) (guard.max_attempts = ", options_.max_attempts, ", each to ",
                   mode_ == Mode::Recover ? "the last healthy state" : "the newest version this site held",
                   ") did not cure it:", report, "\nlast healthy state: step ", trusted_step_,
                   ", learning rate scale ", trainer.state().lr_scale,
                   "; lower inner.lr or raise inner.warmup_steps, or raise guard.max_attempts");
}

}  // namespace meridian
