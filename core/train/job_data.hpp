#pragma once
// A job's tokens as its replicas see them: the files named by [data], loaded, checked against the
// model's vocabulary and split; and the check `meridian validate` runs on them before any launch.
#include <cstdint>
#include <span>

#include "core/config/job_config.hpp"
#include "core/data/sampler.hpp"
#include "core/data/tokens.hpp"

namespace meridian {

// The training and validation tokens ([data] path, or val_path when set, else the split by
// val_fraction). Error(Data) naming the file: missing, empty, malformed, or a token >= vocab.
TrainVal load_job_data(const JobConfig& config);

// The training sampler over `tokens` (data.path's); Error(Data) naming the file when they do not
// fill one window of seq_len + 1.
WindowSampler make_job_sampler(std::span<const std::int32_t> tokens, const JobConfig& config);

// Error(Data) naming the file when the validation tokens do not fill one window of seq_len + 1.
void check_validation_windows(const TrainVal& data, const JobConfig& config);

// What a replica would find wrong with the job's data at start-up, found without training:
// load_job_data, then one training and one validation window at least. Error(Data) otherwise.
void check_job_data(const JobConfig& config);

}  // namespace meridian
