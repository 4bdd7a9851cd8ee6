#include "core/tokenizer/bpe_trainer.hpp"

#include <algorithm>
#include <map>
#include <queue>
#include <set>

#include "core/util/error.hpp"

namespace meridian {

void PieceCounts::add(const Pretokenizer& pretokenizer, std::string_view text) {
  pretokenizer.split(text, [&](std::string_view piece) { ++counts_[std::string(piece)]; });
}

void PieceCounts::merge(const PieceCounts& other) {
  for (const auto& [piece, n] : other.counts_) counts_[piece] += n;
}

namespace {

using Pair = std::pair<std::int32_t, std::int32_t>;

struct Word {
  std::vector<std::int32_t> ids;
  std::int64_t count;
};

class Trainer {
 public:
  Trainer(const PieceCounts& pieces, std::vector<std::string>& tokens) : tokens_(tokens) {
    // Pieces in byte order, so that everything after depends on the corpus only.
    std::vector<const std::pair<const std::string, std::int64_t>*> sorted;
    for (const auto& p : pieces.counts()) sorted.push_back(&p);
    std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->first < b->first; });
    for (const auto* p : sorted) {
      Word w{{}, p->second};
      for (unsigned char b : p->first) w.ids.push_back(b);
      words_.push_back(std::move(w));
    }
    for (std::size_t i = 0; i < words_.size(); ++i) count_pairs(i, +1);
    for (const auto& [pair, n] : counts_) queue_.push({n, pair});
  }

  // The next merge, or none when no pair is seen min_frequency times.
  std::optional<Pair> best(std::int64_t min_frequency) {
    while (!queue_.empty()) {
      const auto [n, pair] = queue_.top();
      queue_.pop();
      const auto it = counts_.find(pair);
      const std::int64_t now = it == counts_.end() ? 0 : it->second;
      if (now != n) {  // stale: counted again since it was queued
        if (now > 0) queue_.push({now, pair});
        continue;
      }
      if (n < min_frequency) return std::nullopt;
      return pair;
    }
    return std::nullopt;
  }

  void merge(Pair pair, std::int32_t made) {
    const auto users = std::move(where_[pair]);
    where_.erase(pair);
    std::set<std::size_t> done;
    for (std::size_t w : users) {
      if (!done.insert(w).second) continue;
      count_pairs(w, -1);
      auto& ids = words_[w].ids;
      std::vector<std::int32_t> merged;
      for (std::size_t i = 0; i < ids.size(); ++i) {
        if (i + 1 < ids.size() && ids[i] == pair.first && ids[i + 1] == pair.second) {
          merged.push_back(made);
          ++i;
        } else {
          merged.push_back(ids[i]);
        }
      }
      ids = std::move(merged);
      count_pairs(w, +1);
    }
    for (const auto& [p, n] : touched_) queue_.push({counts_[p], p});
    touched_.clear();
  }

 private:
  struct Ranked {
    std::int64_t count;
    Pair pair;
  };
  // The larger count first; of equal counts, the pair whose bytes come first.
  struct Less {
    const std::vector<std::string>* tokens;
    bool operator()(const Ranked& a, const Ranked& b) const {
      if (a.count != b.count) return a.count < b.count;
      const auto& t = *tokens;
      return std::tie(t[a.pair.first], t[a.pair.second]) > std::tie(t[b.pair.first], t[b.pair.second]);
    }
  };

  void count_pairs(std::size_t w, int sign) {
    const auto& word = words_[w];
    for (std::size_t i = 0; i + 1 < word.ids.size(); ++i) {
      const Pair p{word.ids[i], word.ids[i + 1]};
      auto& n = counts_[p];
      n += sign * word.count;
      if (n == 0) counts_.erase(p);
      if (sign > 0) where_[p].push_back(w);
      touched_[p] = true;
    }
  }

  std::vector<std::string>& tokens_;
  std::vector<Word> words_;
  std::map<Pair, std::int64_t> counts_;
  std::map<Pair, std::vector<std::size_t>> where_;
  std::map<Pair, bool> touched_;
  std::priority_queue<Ranked, std::vector<Ranked>, Less> queue_{Less{&tokens_}};
};

}  // namespace

ByteLevelBpe train_bpe(const PieceCounts& pieces, const BpeTrainOptions& options) {
  const int merges = options.vocab - 256 - static_cast<int>(options.specials.size());  // new tokens, at most
  if (merges < 0)
    throw make_error(ErrorKind::Usage, "--vocab ", options.vocab, " is below the 256 bytes and ", options.specials.size(),
                     " special token(s) every byte-level BPE has");
  ByteLevelBpe bpe;
  std::unordered_map<std::string, std::int32_t> ids;
  for (int b = 0; b < 256; ++b) {
    bpe.tokens.emplace_back(1, static_cast<char>(b));
    ids.emplace(bpe.tokens.back(), b);
  }
  Trainer trainer(pieces, bpe.tokens);
  while (static_cast<int>(bpe.tokens.size()) < 256 + merges) {
    const auto pair = trainer.best(options.min_frequency);
    if (!pair) break;
    // Two merges can make the same bytes ("a"+"bc", "ab"+"c"): the second takes the first's token.
    const std::string made = bpe.tokens[static_cast<std::size_t>(pair->first)] + bpe.tokens[static_cast<std::size_t>(pair->second)];
    const auto [it, fresh] = ids.emplace(made, static_cast<std::int32_t>(bpe.tokens.size()));
    if (fresh) bpe.tokens.push_back(made);
    bpe.merges.push_back(*pair);
    trainer.merge(*pair, it->second);
  }
  bpe.pattern = options.pattern;
  for (const auto& s : options.specials) bpe.specials.push_back({s, static_cast<std::int32_t>(bpe.tokens.size() + bpe.specials.size())});
  return bpe;
}

}  // namespace meridian
