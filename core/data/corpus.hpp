#pragma once
// A job's training tokens: one or more sources (a file, a directory or a glob of shards each, with
// a weight), every shard memory-mapped and checked against the model's vocabulary when opened, so
// that bad data stops a job at start-up, never in the middle of a run.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/data/token_shard.hpp"

namespace meridian {

struct SourceSpec {
  std::filesystem::path path;  // a file, a directory or a glob
  double weight = 1;           // share of the training tokens, relative to the other sources'
  bool operator==(const SourceSpec&) const = default;
};

class Corpus {
 public:
  // A run of one shard's tokens, [begin, end).
  struct Segment {
    std::size_t shard;
    std::uint64_t begin, end;
  };
  struct Source {
    std::string name;  // the path as the job gives it
    double weight;
    std::vector<Segment> segments;  // in shard name order
    std::uint64_t tokens() const;
  };

  // Opens every file of every source (expand_data_path, TokenShard::open) and reads each once for
  // TokenShard::check_vocab. Error(Data) naming the file or the source; Error(Config) for a weight
  // that is not positive.
  static Corpus open(const std::vector<SourceSpec>& sources, DataFormat format, int vocab);

  const std::vector<Source>& sources() const { return sources_; }
  std::size_t shard_count() const { return shards_.size(); }
  std::uint64_t tokens() const;  // of every source
  // Tokens [at, at + n) of a segment, as int32.
  void copy(const Segment& segment, std::uint64_t at, std::uint64_t n, std::int32_t* out) const;

  // The first `max_tokens` of source 0 (0 = all), its segments one after the other: held-out text
  // read whole for evaluation.
  std::vector<std::int32_t> read_front(std::uint64_t max_tokens) const;
  // Takes the last `fraction` of source 0's tokens (rounded to the nearest token) out of it and
  // returns them as a corpus of their own: the validation split of a job without val_path.
  Corpus hold_out(double fraction);

 private:
  std::vector<std::shared_ptr<const TokenShard>> shards_;
  std::vector<Source> sources_;
};

}  // namespace meridian
