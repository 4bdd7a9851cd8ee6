#include "core/data/sampler.hpp"

#include <algorithm>
#include <numeric>
#include <utility>

#include "core/util/error.hpp"
#include "core/util/rng.hpp"

namespace meridian {

WindowSampler::WindowSampler(std::span<const std::int32_t> tokens, int seq_len, std::uint64_t seed, int stream,
                             int n_streams)
    : tokens_(tokens),
      seq_len_(static_cast<std::size_t>(seq_len)),
      seed_(seed),
      stream_(static_cast<std::uint64_t>(stream)),
      n_streams_(static_cast<std::uint64_t>(n_streams)) {
  MERIDIAN_CHECK(seq_len > 0, "seq_len=", seq_len);
  MERIDIAN_CHECK(n_streams > 0 && stream >= 0 && stream < n_streams, "stream=", stream, " n_streams=", n_streams);
  // A window spans seq_len+1 tokens and the epoch offset can be seq_len-1, so n windows need
  // (n+1)*seq_len tokens whatever the offset.
  total_windows_ = tokens.size() / seq_len_ >= 1 ? tokens.size() / seq_len_ - 1 : 0;
  if (total_windows_ < n_streams_)
    throw make_error(ErrorKind::Data, "training data has ", tokens.size(), " tokens; ", n_streams,
                     " stream(s) of seq_len ", seq_len, " need at least ", (n_streams_ + 1) * seq_len_,
                     " (one window of seq_len+1 tokens per stream, plus up to seq_len-1 for the epoch offset)");
  share_ = (total_windows_ - stream_ + n_streams_ - 1) / n_streams_;
  load_epoch(0);
}

void WindowSampler::load_epoch(std::uint64_t epoch) {
  // Streams share (seed, epoch) but not the stream index, so they all see one order and split it.
  Rng rng = Rng::derive(seed_, epoch);
  const std::size_t offset = static_cast<std::size_t>(rng.below(seq_len_));
  std::vector<std::uint64_t> order(total_windows_);
  std::iota(order.begin(), order.end(), std::uint64_t{0});
  for (std::uint64_t i = total_windows_ - 1; i > 0; --i) std::swap(order[i], order[rng.below(i + 1)]);
  starts_.clear();
  starts_.reserve(share_);
  for (std::uint64_t i = stream_; i < total_windows_; i += n_streams_)
    starts_.push_back(offset + static_cast<std::size_t>(order[i]) * seq_len_);
  loaded_epoch_ = epoch;
}

SamplerPosition WindowSampler::advanced(SamplerPosition p, std::uint64_t by) const {
  const std::uint64_t index = p.index + by;
  return {p.epoch + index / share_, index % share_};
}

void WindowSampler::next_group_batch(int B, int member, int members, std::int32_t* inputs, std::int32_t* targets) {
  MERIDIAN_CHECK(B >= 0 && members >= 1 && member >= 0 && member < members, "B=", B, " member=", member,
                 " members=", members);
  for (int b = 0; b < B; ++b) {
    const SamplerPosition at =
        advanced(pos_, static_cast<std::uint64_t>(member) + static_cast<std::uint64_t>(b) * members);
    if (at.epoch != loaded_epoch_) load_epoch(at.epoch);
    const std::int32_t* window = tokens_.data() + starts_[at.index];
    std::copy_n(window, seq_len_, inputs + b * seq_len_);
    std::copy_n(window + 1, seq_len_, targets + b * seq_len_);
  }
  pos_ = advanced(pos_, static_cast<std::uint64_t>(B) * members);
}

void WindowSampler::seek(const SamplerPosition& pos) {
  if (pos.index >= share_)
    throw make_error(ErrorKind::Data, "sampler position index ", pos.index, " (epoch ", pos.epoch,
                     ") is beyond this stream's ", share_, " windows per epoch; the data or the stream layout changed");
  pos_ = pos;
}

std::size_t eval_window_count(std::size_t n_tokens, int seq_len) {
  MERIDIAN_CHECK(seq_len > 0, "seq_len=", seq_len);
  return n_tokens / (static_cast<std::size_t>(seq_len) + 1);
}

}  // namespace meridian
