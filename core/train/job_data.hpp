#pragma once
// A job's tokens as its replicas see them: the sources named by [data], mapped and checked against
// the model's vocabulary, the held-out tokens for evaluation; and the check `meridian validate`
// runs on them before any launch.
#include <cstdint>
#include <vector>

#include "core/config/job_config.hpp"
#include "core/data/corpus.hpp"
#include "core/data/sampler.hpp"
#include "core/tokenizer/tokenizer_file.hpp"

namespace meridian {

struct JobData {
  Corpus train;
  // The evaluation's tokens: the front of val_path's files, or of the last val_fraction of the
  // first source; at most log.eval_windows windows' worth.
  std::vector<std::int32_t> val;
  std::string val_source;  // what they came from, for messages
};

// Error(Data) naming the file: missing, empty, malformed, a token >= vocab, an empty glob.
JobData load_job_data(const JobConfig& config);

// The training sampler; Error(Data) naming the source that does not fill one window.
WindowSampler make_job_sampler(const Corpus& train, const JobConfig& config);

// Error(Data) naming the source when the validation tokens do not fill one window of seq_len + 1.
void check_validation_windows(const JobData& data, const JobConfig& config);

// [data] tokenizer, read and checked (read_job_tokenizer); nullopt when the job names none.
std::optional<TokenizerFile> load_job_tokenizer(const JobConfig& config);

// What a replica would find wrong with the job's data and tokenizer at start-up, found without
// training: load_job_data, one training and one validation window at least, the tokenizer's file
// and vocabulary. Error(Data) or Error(Config) otherwise.
void check_job_data(const JobConfig& config);

}  // namespace meridian
