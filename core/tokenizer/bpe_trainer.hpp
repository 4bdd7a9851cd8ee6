#pragma once
// Trains a byte-level BPE on a corpus, as Hugging Face's BpeTrainer does: the text is cut into
// pieces by the pre-tokenizer, the pieces counted, and from the 256 bytes on, the most frequent
// adjacent pair of tokens (over all pieces, weighted by their counts) is merged into a new token,
// again and again, until the vocabulary is full or no pair is frequent enough. Deterministic: a tie
// goes to the pair whose bytes come first.
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/tokenizer/hf_tokenizer.hpp"
#include "core/tokenizer/pretokenizer.hpp"

namespace meridian {

// Piece counts of a corpus; one per thread, then merged (counts add, so the order does not matter).
class PieceCounts {
 public:
  void add(const Pretokenizer& pretokenizer, std::string_view text);
  void merge(const PieceCounts& other);
  const std::unordered_map<std::string, std::int64_t>& counts() const { return counts_; }

 private:
  std::unordered_map<std::string, std::int64_t> counts_;
};

struct BpeTrainOptions {
  int vocab = 8192;          // tokens in all: the 256 bytes, the merges and the specials
  std::int64_t min_frequency = 2;  // a pair seen fewer times is not merged
  std::string pattern;       // the pre-tokenizer's, written into the tokenizer
  std::vector<std::string> specials = {"<|endoftext|>"};  // ids after the merges, in this order
};

ByteLevelBpe train_bpe(const PieceCounts& pieces, const BpeTrainOptions& options);

}  // namespace meridian
