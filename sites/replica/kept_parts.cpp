#include "sites/replica/kept_parts.hpp"

#include <algorithm>

#include "core/util/error.hpp"
#include "crosssite/codec/codec_parts.hpp"
#include "crosssite/codec/delta_digest.hpp"
#include "crosssite/round/held_parts.hpp"
#include "crosssite/round/mutant.hpp"

namespace meridian {
namespace {

// Values decoded at a time for the tally.
constexpr std::size_t kPiece = std::size_t{1} << 16;

}  // namespace

std::vector<std::byte> cut_part_on(std::span<const std::byte> whole, int index, int count, std::uint64_t unit) {
  const ShardRange part = ShardMap(encoded_count(whole), count, unit).part(index);
  return encoded_part(whole, part.offset, part.count);
}

void KeptParts::reform(int rank, std::optional<ShardMap> map) {
  rank_ = rank;
  map_ = std::move(map);
  kept_.clear();
  taken_.clear();
  previewed_.clear();
}

std::optional<std::vector<std::byte>> KeptParts::keep(const std::string& owner, const Stripe& stripe) {
  if (!map_ || stripe.index != rank_ || stripe.count != map_->ranks()) {
    ++refused_;  // cut for another group than this one
    return std::nullopt;
  }
  const std::string name = parts_ref(owner, stripe.transfer_id);
  if (std::find(taken_.begin(), taken_.end(), name) != taken_.end()) {
    if (!mutant(Mutant::KeepLastPart)) {
      ++refused_;
      return std::nullopt;
    }
    forget(name);
  }
  const ShardRange mine = map_->part(rank_);
  std::vector<std::byte> bytes(stripe.bytes.begin(), stripe.bytes.end());
  PartReport report{{}, DeltaScreen::Tally(mine.offset)};
  try {
    if (encoded_count(bytes) != mine.count) {
      ++refused_;
      return std::nullopt;
    }
    report.units = unit_digests(bytes);
    std::vector<float> piece(std::min(kPiece, mine.count));
    for (std::size_t at = 0; at < mine.count; at += kPiece) {
      const std::span<float> values(piece.data(), std::min(kPiece, mine.count - at));
      decode_range(bytes, at, values);
      report.tally.add(values);
    }
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::Peer) throw;
    ++refused_;  // no encoded delta: the leader's digest check would refuse it; it is asked again whole
    return std::nullopt;
  }
  taken_.push_back(name);
  while (taken_.size() > 4 * max_kept_) taken_.pop_front();
  kept_.emplace_back(name, std::move(bytes));
  while (kept_.size() > max_kept_) kept_.pop_front();
  return encode_part_report(report);
}

const std::vector<std::byte>* KeptParts::part(const std::string& ref) const {
  const auto it = std::find_if(kept_.begin(), kept_.end(), [&](const auto& k) { return k.first == ref; });
  return it == kept_.end() ? nullptr : &it->second;
}

void KeptParts::forget(const std::string& ref) {
  std::erase_if(kept_, [&](const auto& k) { return k.first == ref; });
}

void KeptParts::forget_previewed() {
  for (const auto& ref : std::exchange(previewed_, {})) forget(ref);
}

std::size_t KeptParts::held_bytes() const {
  std::size_t n = 0;
  for (const auto& [name, bytes] : kept_) n += bytes.size();
  return n;
}

}  // namespace meridian
