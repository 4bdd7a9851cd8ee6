#include "core/config/wan_profiles.hpp"

#include <algorithm>
#include <array>

namespace meridian {

namespace {

// One-way latency is half the round trip Azure publishes between a representative pair of its
// regions; bandwidth is the single-flow limit AWS states for traffic leaving a placement group (one
// site-to-site link is one connection). Jitter and loss have no public per-pair figure: they are
// stated assumptions (docs/wan.md), small enough not to dominate the latency.
constexpr std::array kProfiles{
    // Two availability zones of one region: under 2 ms round trip.
    WanProfile{"same-region", {.latency_ms = 1.0, .jitter_ms = 0.1, .bandwidth_mbps = 5000.0, .loss = 0.0}},
    // US East (Virginia) <-> US West (California): ~70 ms round trip.
    WanProfile{"cross-country", {.latency_ms = 35.0, .jitter_ms = 1.0, .bandwidth_mbps = 5000.0, .loss = 1e-5}},
    // US East (Virginia) <-> West Europe (Netherlands): ~80 ms round trip.
    WanProfile{"transatlantic", {.latency_ms = 40.0, .jitter_ms = 1.0, .bandwidth_mbps = 5000.0, .loss = 1e-5}},
    // US West (California) <-> Japan East (Tokyo): ~110 ms round trip.
    WanProfile{"transpacific", {.latency_ms = 55.0, .jitter_ms = 2.0, .bandwidth_mbps = 5000.0, .loss = 1e-4}},
};

}  // namespace

std::span<const WanProfile> wan_profiles() { return kProfiles; }

std::optional<WanLink> find_wan_profile(std::string_view name) {
  const auto it = std::find_if(kProfiles.begin(), kProfiles.end(), [&](const WanProfile& p) { return p.name == name; });
  if (it == kProfiles.end()) return std::nullopt;
  return it->link;
}

}  // namespace meridian
