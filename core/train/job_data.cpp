#include "core/train/job_data.hpp"

#include "core/util/error.hpp"

namespace meridian {

TrainVal load_job_data(const JobConfig& c) {
  TokenFile train = load_token_file(c.data.path, c.data.format);
  check_vocab(train, c.model.vocab, c.data.path);
  if (c.data.val_path) {
    TokenFile val = load_token_file(*c.data.val_path, c.data.format);
    check_vocab(val, c.model.vocab, *c.data.val_path);
    return {std::move(train.ids), std::move(val.ids)};
  }
  return split_train_val(std::move(train.ids), c.data.val_fraction);
}

// The sampler checks that the tokens fill its windows but does not know where they came from.
WindowSampler make_job_sampler(std::span<const std::int32_t> tokens, const JobConfig& c) {
  try {
    return WindowSampler(tokens, c.model.seq_len, c.job.seed);
  } catch (const Error& e) {
    throw make_error(e.kind(), c.data.path.string(), ": ", e.what());
  }
}

void check_validation_windows(const TrainVal& data, const JobConfig& c) {
  if (eval_window_count(data.val.size(), c.model.seq_len) == 0)
    throw make_error(ErrorKind::Data, "validation data (",
                     c.data.val_path ? c.data.val_path->string() : c.data.path.string(), ") has ", data.val.size(),
                     " tokens, fewer than one window of seq_len+1 = ", c.model.seq_len + 1);
}

void check_job_data(const JobConfig& c) {
  const TrainVal data = load_job_data(c);
  make_job_sampler(data.train, c);
  check_validation_windows(data, c);
}

}  // namespace meridian
