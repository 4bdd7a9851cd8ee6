#include "core/data/sampler.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/data/permutation.hpp"
#include "core/util/error.hpp"
#include "core/util/rng.hpp"

namespace meridian {

namespace {

constexpr std::uint64_t kGolden = 0x9E3779B97F4A7C15ULL;  // 2^64 / golden ratio

std::uint64_t segment_windows(const Corpus::Segment& s, std::uint64_t seq_len) {
  const std::uint64_t n = (s.end - s.begin) / seq_len;
  return n >= 1 ? n - 1 : 0;
}

std::uint64_t key(std::uint64_t seed, std::uint64_t a, std::uint64_t b, std::uint64_t c = 0) {
  Rng rng = Rng::derive(Rng::derive(Rng::derive(seed, a).next_u64(), b).next_u64(), c);
  return rng.next_u64();
}

}  // namespace

WindowSampler::WindowSampler(const Corpus& corpus, int seq_len, std::uint64_t seed)
    : corpus_(corpus), seq_len_(static_cast<std::uint64_t>(seq_len)), seed_(seed) {
  MERIDIAN_CHECK(seq_len > 0, "seq_len=", seq_len);
  double total_weight = 0;
  for (const auto& s : corpus.sources()) total_weight += s.weight;
  double cumulative = 0;
  for (const auto& source : corpus.sources()) {
    SourceWindows w;
    for (const auto& segment : source.segments) {
      w.first_window.push_back(w.windows);
      w.windows += segment_windows(segment, seq_len_);
    }
    if (w.windows == 0)
      throw make_error(ErrorKind::Data, "training data ", source.name, " has ", source.tokens(),
                       " tokens but no window of seq_len+1 = ", seq_len + 1,
                       " within a shard (a shard of n tokens gives floor(n/seq_len)-1 windows, whatever the offset)");
    cumulative += source.weight;
    w.threshold = cumulative >= total_weight ? UINT64_MAX
                                             : static_cast<std::uint64_t>(std::ldexp(cumulative / total_weight, 64));
    sources_.push_back(std::move(w));
  }
  pos_.taken.assign(sources_.size(), 0);
  window_.resize(seq_len_ + 1);
}

std::size_t WindowSampler::source_of(std::uint64_t position) const {
  const std::uint64_t x = position * kGolden + seed_ * kGolden * kGolden;
  for (std::size_t k = 0; k + 1 < sources_.size(); ++k)
    if (x < sources_[k].threshold) return k;
  return sources_.size() - 1;
}

void WindowSampler::copy_window(std::size_t k, std::uint64_t j, std::int32_t* window) const {
  const SourceWindows& w = sources_[k];
  const std::uint64_t epoch = j / w.windows;
  const std::uint64_t i = RandomPermutation(w.windows, key(seed_, k, epoch))(j % w.windows);
  const std::size_t seg = static_cast<std::size_t>(
      std::upper_bound(w.first_window.begin(), w.first_window.end(), i) - w.first_window.begin() - 1);
  // Segments without a window share their first_window with the next one: upper_bound skips them.
  const Corpus::Segment& segment = corpus_.sources()[k].segments[seg];
  const std::uint64_t offset = key(seed_, k, seg, epoch + 1) % seq_len_;
  corpus_.copy(segment, offset + (i - w.first_window[seg]) * seq_len_, seq_len_ + 1, window);
}

void WindowSampler::next_group_batch(int B, int member, int members, std::int32_t* inputs, std::int32_t* targets) {
  MERIDIAN_CHECK(B >= 0 && members >= 1 && member >= 0 && member < members, "B=", B, " member=", member,
                 " members=", members);
  const std::uint64_t n = static_cast<std::uint64_t>(B) * static_cast<std::uint64_t>(members);
  for (std::uint64_t q = 0; q < n; ++q) {
    const std::size_t k = source_of(pos_.windows + q);
    const std::uint64_t j = pos_.taken[k]++;
    if (q % static_cast<std::uint64_t>(members) != static_cast<std::uint64_t>(member)) continue;
    const std::uint64_t b = q / static_cast<std::uint64_t>(members);
    copy_window(k, j, window_.data());
    std::copy_n(window_.data(), seq_len_, inputs + b * seq_len_);
    std::copy_n(window_.data() + 1, seq_len_, targets + b * seq_len_);
  }
  pos_.windows += n;
}

void WindowSampler::seek(const SamplerPosition& pos) {
  if (pos.windows == 0 && pos.taken.empty()) {  // a state that never trained (an import): the start
    pos_ = {0, std::vector<std::uint64_t>(sources_.size(), 0)};
    return;
  }
  const std::uint64_t sum = std::accumulate(pos.taken.begin(), pos.taken.end(), std::uint64_t{0});
  if (pos.taken.size() != sources_.size() || sum != pos.windows)
    throw make_error(ErrorKind::Data, "the data position (", pos.windows, " windows from ", pos.taken.size(),
                     " source(s), adding up to ", sum, ") does not fit this job's ", sources_.size(),
                     " data source(s): the job's data changed since the checkpoint");
  pos_ = pos;
}

std::size_t eval_window_count(std::size_t n_tokens, int seq_len) {
  MERIDIAN_CHECK(seq_len > 0, "seq_len=", seq_len);
  return n_tokens / (static_cast<std::size_t>(seq_len) + 1);
}

}  // namespace meridian
