#pragma once
// The merge table of a byte-level BPE: each token's bytes, and for every pair of tokens that
// merges, the merge's rank and the token it makes. A piece of text is encoded by starting from
// its bytes' tokens and merging, again and again, the adjacent pair of lowest rank (the leftmost
// of equals) until no pair merges: tiktoken's and Hugging Face's byte-level BPE alike, the one
// ranking tokens, the other merges.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace meridian {

class BpeModel {
 public:
  // tiktoken: token id = rank; a pair merges when its concatenation is a token, at that token's
  // rank. A piece that is a token is that token without merging (tiktoken does so).
  static BpeModel from_ranks(std::vector<std::string> tokens);
  // Hugging Face: merges[i] = (left id, right id) merges at rank i into the token of their
  // concatenated bytes. whole_pieces: tokenizer.json's ignore_merges.
  static BpeModel from_merges(std::vector<std::string> tokens, const std::vector<std::pair<std::int32_t, std::int32_t>>& merges,
                              bool whole_pieces);

  // Appends the ids of `piece`.
  void encode_piece(std::string_view piece, std::vector<std::int32_t>& out) const;

  std::size_t size() const { return tokens_.size(); }
  const std::string& bytes(std::int32_t id) const { return tokens_[static_cast<std::size_t>(id)]; }
  std::optional<std::int32_t> find(std::string_view bytes) const;

  // Why these tokens cannot be a byte-level BPE (a byte without a token, two tokens of the same
  // bytes, an empty token), or empty. Checked by the loaders, which name the file.
  static std::string problem(const std::vector<std::string>& tokens);

 private:
  struct Merge {
    std::int32_t rank, id;
  };
  static std::uint64_t key(std::int32_t left, std::int32_t right) {
    return static_cast<std::uint64_t>(static_cast<std::uint32_t>(left)) << 32 | static_cast<std::uint32_t>(right);
  }
  explicit BpeModel(std::vector<std::string> tokens, bool whole_pieces);
  const Merge* merge(std::int32_t left, std::int32_t right) const;

  std::vector<std::string> tokens_;
  std::unordered_map<std::string_view, std::int32_t> ids_;  // views into tokens_
  std::array<std::int32_t, 256> byte_ids_{};
  std::unordered_map<std::uint64_t, Merge> merges_;
  bool whole_pieces_;
};

}  // namespace meridian
