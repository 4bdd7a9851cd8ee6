#pragma once
// The learning-rate schedule a job's [inner] table describes, built in one place for the trainer
// and for the checks of validation.
#include "core/config/job_config.hpp"
#include "core/optim/schedule.hpp"

namespace meridian {

inline LrSchedule inner_schedule(const JobConfig::Inner& inner) {
  return {inner.schedule,       inner.lr,         inner.min_lr_ratio, inner.warmup_steps, inner.steps,
          inner.decay_fraction, inner.decay_shape};
}

}  // namespace meridian
