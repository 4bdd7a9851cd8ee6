#include "crosssite/round/cross_site_types.hpp"

namespace meridian {

std::vector<std::pair<const char*, std::uint64_t>> Refusals::named() const {
  return {{"deltas_damaged", deltas_damaged},
          {"deltas_over_hold_bound", deltas_over_hold_bound},
          {"announcements_unreadable", announcements_unreadable},
          {"requests_malformed", requests_malformed},
          {"transfers_from_non_members", transfers_from_non_members},
          {"transfers_unknown_tag", transfers_unknown_tag},
          {"gradients_refused", gradients_refused}};
}

std::uint64_t Refusals::total() const {
  std::uint64_t n = 0;
  for (const auto& [name, count] : named()) n += count;
  return n;
}

}  // namespace meridian
