#include "core/train/job_data.hpp"

#include <sstream>

#include "core/util/error.hpp"

namespace meridian {

JobData load_job_data(const JobConfig& c) {
  JobData data{Corpus::open(c.data.sources, c.data.format, c.model.vocab), {}, {}};
  const std::uint64_t eval_tokens =
      static_cast<std::uint64_t>(c.log.eval_windows) * (static_cast<std::uint64_t>(c.model.seq_len) + 1);
  if (c.data.val_path) {
    data.val = Corpus::open({{*c.data.val_path, 1}}, c.data.format, c.model.vocab).read_front(eval_tokens);
    data.val_source = c.data.val_path->string();
  } else {
    data.val = data.train.hold_out(c.data.val_fraction).read_front(eval_tokens);
    std::ostringstream source;
    source << "the last " << c.data.val_fraction << " of " << c.data.sources.front().path.string();
    data.val_source = source.str();
  }
  return data;
}

WindowSampler make_job_sampler(const Corpus& train, const JobConfig& c) {
  return WindowSampler(train, c.model.seq_len, c.job.seed);
}

void check_validation_windows(const JobData& data, const JobConfig& c) {
  if (eval_window_count(data.val.size(), c.model.seq_len) == 0)
    throw make_error(ErrorKind::Data, "validation data (", data.val_source, ") has ", data.val.size(),
                     " tokens, fewer than one window of seq_len+1 = ", c.model.seq_len + 1);
}

std::optional<TokenizerFile> load_job_tokenizer(const JobConfig& c) {
  if (!c.data.tokenizer) return std::nullopt;
  return read_job_tokenizer(*c.data.tokenizer, c.data.tokenizer_encoding, c.model.vocab);
}

void check_job_data(const JobConfig& c) {
  load_job_tokenizer(c);
  const JobData data = load_job_data(c);
  make_job_sampler(data.train, c);
  check_validation_windows(data, c);
}

}  // namespace meridian
