#include "crosssite/round/held_copy.hpp"

namespace meridian {

HeldCopy::HeldCopy(std::string site, std::optional<std::uint64_t> origin_hash) : site_(std::move(site)) {
  if (origin_hash) held_ = {0, *origin_hash};
}

std::optional<std::uint64_t> HeldCopy::hash_of(std::int64_t version) const {
  if (!held_ || held_->first != version) return std::nullopt;
  return held_->second;
}

std::optional<std::uint64_t> HeldCopy::expected(const OuterState& state) const {
  return state.sharded() ? std::nullopt : hash_of(state.version());
}

std::string HeldCopy::damage(const OuterState& state) const {
  const auto want = expected(state);
  if (!want) return {};
  const std::uint64_t hash = OuterState::weights_hash(state.global());
  if (hash == *want) return {};
  return "site " + site_ + ": its copy of version " + std::to_string(state.version()) + " hashes to " +
         std::to_string(hash) + ", its record says " + std::to_string(*want);
}

}  // namespace meridian
