#include "core/data/corpus.hpp"

#include <algorithm>
#include <cmath>

#include "core/data/data_paths.hpp"
#include "core/util/error.hpp"

namespace meridian {

std::uint64_t Corpus::Source::tokens() const {
  std::uint64_t n = 0;
  for (const auto& s : segments) n += s.end - s.begin;
  return n;
}

std::uint64_t Corpus::tokens() const {
  std::uint64_t n = 0;
  for (const auto& s : sources_) n += s.tokens();
  return n;
}

Corpus Corpus::open(const std::vector<SourceSpec>& specs, DataFormat format, int vocab) {
  MERIDIAN_CHECK(!specs.empty(), "a corpus of no source");
  Corpus corpus;
  for (const auto& spec : specs) {
    if (!(spec.weight > 0) || !std::isfinite(spec.weight))
      throw make_error(ErrorKind::Config, "data source ", spec.path, " has weight ", spec.weight,
                       ", expected a number > 0");
    Source source{spec.path.string(), spec.weight, {}};
    for (const auto& file : expand_data_path(spec.path)) {
      auto shard = std::make_shared<const TokenShard>(TokenShard::open(file, format));
      shard->check_vocab(vocab);
      source.segments.push_back({corpus.shards_.size(), 0, shard->size()});
      corpus.shards_.push_back(std::move(shard));
    }
    corpus.sources_.push_back(std::move(source));
  }
  return corpus;
}

void Corpus::copy(const Segment& segment, std::uint64_t at, std::uint64_t n, std::int32_t* out) const {
  MERIDIAN_CHECK(segment.shard < shards_.size() && at <= segment.end - segment.begin &&
                     n <= segment.end - segment.begin - at,
                 "shard ", segment.shard, " of ", shards_.size(), ", [", segment.begin, ", ", segment.end, ") at ", at,
                 " n ", n);
  shards_[segment.shard]->copy(segment.begin + at, n, out);
}

std::vector<std::int32_t> Corpus::read_front(std::uint64_t max_tokens) const {
  const Source& source = sources_.at(0);
  const std::uint64_t total = source.tokens();
  std::vector<std::int32_t> out(max_tokens > 0 ? std::min(max_tokens, total) : total);
  std::uint64_t filled = 0;
  for (const auto& segment : source.segments) {
    if (filled == out.size()) break;
    const std::uint64_t n = std::min<std::uint64_t>(segment.end - segment.begin, out.size() - filled);
    copy(segment, 0, n, out.data() + filled);
    filled += n;
  }
  return out;
}

Corpus Corpus::hold_out(double fraction) {
  if (!(fraction >= 0.0 && fraction < 1.0))
    throw make_error(ErrorKind::Config, "val_fraction is ", fraction, ", expected a value in [0, 1)");
  Source& source = sources_.at(0);
  // Rounding (not truncation) keeps e.g. 0.1 of 1000 tokens at exactly 100 despite binary fractions.
  std::uint64_t left = static_cast<std::uint64_t>(std::llround(static_cast<double>(source.tokens()) * fraction));
  Corpus held;
  held.shards_ = shards_;
  held.sources_.push_back({source.name + " (held out)", 1, {}});
  auto& taken = held.sources_.back().segments;
  while (left > 0) {
    Segment& last = source.segments.back();
    const std::uint64_t n = std::min(left, last.end - last.begin);
    taken.insert(taken.begin(), {last.shard, last.end - n, last.end});
    last.end -= n;
    left -= n;
    if (last.end == last.begin) source.segments.pop_back();
  }
  return held;
}

}  // namespace meridian
