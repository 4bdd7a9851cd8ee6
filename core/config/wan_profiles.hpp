#pragma once
// Named WAN link profiles for common pairs of sites ([wan] profile = "transatlantic"). Where each
// figure comes from is stated in docs/wan.md; keys given next to a profile override its values.
#include <optional>
#include <span>
#include <string_view>

#include "core/config/job_config.hpp"

namespace meridian {

struct WanProfile {
  std::string_view name;
  WanLink link;
};

// "same-region", "cross-country", "transatlantic", "transpacific".
std::span<const WanProfile> wan_profiles();
std::optional<WanLink> find_wan_profile(std::string_view name);

}  // namespace meridian
