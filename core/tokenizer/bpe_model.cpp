#include "core/tokenizer/bpe_model.hpp"

#include <limits>

#include "core/util/error.hpp"

namespace meridian {

std::string BpeModel::problem(const std::vector<std::string>& tokens) {
  std::unordered_map<std::string_view, std::size_t> seen;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i].empty()) return "token " + std::to_string(i) + " is empty";
    if (const auto [it, fresh] = seen.emplace(tokens[i], i); !fresh)
      return "tokens " + std::to_string(it->second) + " and " + std::to_string(i) + " have the same bytes";
  }
  for (int b = 0; b < 256; ++b)
    if (!seen.contains(std::string_view(std::string(1, static_cast<char>(b)))))
      return "byte " + std::to_string(b) + " has no token of its own (a byte-level BPE needs all 256)";
  return {};
}

BpeModel::BpeModel(std::vector<std::string> tokens, bool whole_pieces)
    : tokens_(std::move(tokens)), whole_pieces_(whole_pieces) {
  MERIDIAN_CHECK(problem(tokens_).empty(), problem(tokens_));
  MERIDIAN_CHECK(tokens_.size() < static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()), tokens_.size());
  ids_.reserve(tokens_.size());
  for (std::size_t i = 0; i < tokens_.size(); ++i) ids_.emplace(tokens_[i], static_cast<std::int32_t>(i));
  for (int b = 0; b < 256; ++b) byte_ids_[b] = *find(std::string(1, static_cast<char>(b)));
}

BpeModel BpeModel::from_ranks(std::vector<std::string> tokens) {
  BpeModel m(std::move(tokens), true);
  // Every way of cutting a token in two tokens is a merge at the whole token's rank.
  for (std::size_t id = 0; id < m.tokens_.size(); ++id) {
    const std::string_view t = m.tokens_[id];
    for (std::size_t cut = 1; cut < t.size(); ++cut) {
      const auto left = m.find(t.substr(0, cut)), right = m.find(t.substr(cut));
      if (left && right) m.merges_.emplace(key(*left, *right), Merge{static_cast<std::int32_t>(id), static_cast<std::int32_t>(id)});
    }
  }
  return m;
}

BpeModel BpeModel::from_merges(std::vector<std::string> tokens,
                               const std::vector<std::pair<std::int32_t, std::int32_t>>& merges, bool whole_pieces) {
  BpeModel m(std::move(tokens), whole_pieces);
  for (std::size_t rank = 0; rank < merges.size(); ++rank) {
    const auto [left, right] = merges[rank];
    const auto made = m.find(m.bytes(left) + m.bytes(right));
    MERIDIAN_CHECK(made.has_value(), "merge ", rank, " makes no token");  // the loader checks this first
    m.merges_.emplace(key(left, right), Merge{static_cast<std::int32_t>(rank), *made});  // the first of repeats wins
  }
  return m;
}

std::optional<std::int32_t> BpeModel::find(std::string_view bytes) const {
  const auto it = ids_.find(bytes);
  return it == ids_.end() ? std::nullopt : std::optional(it->second);
}

const BpeModel::Merge* BpeModel::merge(std::int32_t left, std::int32_t right) const {
  const auto it = merges_.find(key(left, right));
  return it == merges_.end() ? nullptr : &it->second;
}

void BpeModel::encode_piece(std::string_view piece, std::vector<std::int32_t>& out) const {
  if (piece.empty()) return;
  if (whole_pieces_)
    if (const auto whole = find(piece)) {
      out.push_back(*whole);
      return;
    }
  std::vector<std::int32_t> parts(piece.size());
  for (std::size_t i = 0; i < piece.size(); ++i) parts[i] = byte_ids_[static_cast<unsigned char>(piece[i])];
  // rank[i]: the merge of parts i and i+1 (max when they do not merge)
  constexpr std::int32_t kNone = std::numeric_limits<std::int32_t>::max();
  std::vector<std::int32_t> rank(parts.size(), kNone);
  const auto rank_at = [&](std::size_t i) {
    if (i + 1 >= parts.size()) return kNone;
    const Merge* m = merge(parts[i], parts[i + 1]);
    return m ? m->rank : kNone;
  };
  for (std::size_t i = 0; i + 1 < parts.size(); ++i) rank[i] = rank_at(i);
  while (parts.size() > 1) {
    std::size_t best = 0;
    for (std::size_t i = 1; i + 1 < parts.size(); ++i)
      if (rank[i] < rank[best]) best = i;
    if (rank[best] == kNone) break;
    parts[best] = merge(parts[best], parts[best + 1])->id;
    parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(best) + 1);
    rank.erase(rank.begin() + static_cast<std::ptrdiff_t>(best) + 1);
    rank[best] = rank_at(best);
    if (best > 0) rank[best - 1] = rank_at(best - 1);
  }
  out.insert(out.end(), parts.begin(), parts.end());
}

}  // namespace meridian
