#pragma once
// A job trained in process to its end in one launch, or in two: `stop_after` steps, then a fresh
// Trainer that resumes from the checkpoint the first left, as a relaunched `meridian train` does.
#include <cstdint>

#include "core/config/job_config.hpp"
#include "core/io/env.hpp"
#include "core/runlog/run_log.hpp"
#include "core/train/trainer.hpp"
#include "tests/support/tiny_job.hpp"

namespace meridian::testing {

struct TrainerRun {
  explicit TrainerRun(const JobConfig& config)
      : log(config.job.run_dir), trainer(config, posix_env(), log, nullptr, fake_clock), summary(trainer.run()) {}
  RunLog log;
  Trainer trainer;
  TrainSummary summary;
};

struct ResumedRun {
  ResumedRun(const JobConfig& config, std::int64_t stop_after)
      : first_steps(first_launch(config, stop_after)),
        log(config.job.run_dir),
        trainer(config, posix_env(), log, nullptr, fake_clock),
        summary(trainer.run()) {}
  std::int64_t first_steps;  // what the first launch trained before it stopped
  RunLog log;
  Trainer trainer;
  TrainSummary summary;

 private:
  static std::int64_t first_launch(const JobConfig& config, std::int64_t stop_after) {
    RunLog first_log(config.job.run_dir);
    Trainer first(config, posix_env(), first_log, nullptr, fake_clock);
    return first.run(stop_after).steps;
  }
};

}  // namespace meridian::testing
