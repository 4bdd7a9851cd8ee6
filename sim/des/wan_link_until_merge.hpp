#pragma once
// The typed [wan] link as the wan-emu branch defines it in core/config/job_config.hpp; this copy
// goes when that commit is merged.
namespace meridian {
struct WanLink {
  enum class Jitter { Normal, Uniform, Pareto };
  double latency_ms = 0;
  double jitter_ms = 0;
  Jitter jitter = Jitter::Normal;
  double bandwidth_mbps = 0;
  double loss = 0;
  bool operator==(const WanLink&) const = default;
};
}  // namespace meridian
