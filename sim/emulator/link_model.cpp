#include "sim/emulator/link_model.hpp"

#include <algorithm>
#include <cmath>

#include "core/util/error.hpp"

namespace meridian {

namespace {

constexpr double kParetoShape = 3.0;

double mbps_to_bytes_per_s(double mbps) { return mbps * 1e6 / 8; }

}  // namespace

double flows_bytes_per_s(const WanLink& link, double flows) {
  const double link_rate = mbps_to_bytes_per_s(link.bandwidth_mbps);
  const double flows_rate = mbps_to_bytes_per_s(link.stream_mbps) * flows;
  if (link_rate <= 0) return flows_rate;
  if (flows_rate <= 0) return link_rate;
  return std::min(link_rate, flows_rate);
}

double transfer_parallelism(int from, int to) {
  MERIDIAN_CHECK(from >= 1 && to >= 1, "from=", from, " to=", to);
  return std::max(from, to);
}

double draw_latency_s(const WanLink& link, std::mt19937_64& rng) {
  const double j = link.jitter_ms;
  double extra = 0;
  if (j > 0) {
    switch (link.jitter) {
      case WanLink::Jitter::Normal: extra = std::normal_distribution<double>(0, j)(rng); break;
      case WanLink::Jitter::Uniform: extra = std::uniform_real_distribution<double>(-j, j)(rng); break;
      case WanLink::Jitter::Pareto: {
        // Lomax (Pareto II) with mean j: scale j * (shape - 1); u in (0, 1] keeps the draw finite.
        const double u = 1.0 - std::uniform_real_distribution<double>(0, 1)(rng);
        extra = j * (kParetoShape - 1) * (std::pow(u, -1.0 / kParetoShape) - 1);
        break;
      }
    }
  }
  return std::max(0.0, link.latency_ms + extra) / 1000;
}

double draw_loss_delay_s(const WanLink& link, std::size_t bytes, double packet_bytes, std::mt19937_64& rng) {
  if (link.loss <= 0 || bytes == 0) return 0;
  const auto packets = static_cast<std::int64_t>(std::ceil(static_cast<double>(bytes) / packet_bytes));
  const auto lost = std::binomial_distribution<std::int64_t>(packets, link.loss)(rng);
  return static_cast<double>(lost) * 2 * link.latency_ms / 1000;
}

LinkDirection::LinkDirection(std::uint64_t seed, LinkModelOptions options)
    : options_(options), rng_(seed), tokens_(options.burst_bytes) {}

double LinkDirection::arrival(double now, std::size_t bytes, const WanLink& link, double flows) {
  double sent = now;  // when its last byte has left
  if (const double rate = flows_bytes_per_s(link, flows); rate > 0) {
    if (started_) tokens_ = std::min(options_.burst_bytes, tokens_ + rate * std::max(0.0, now - tokens_at_));
    started_ = true;
    tokens_at_ = now;
    tokens_ -= static_cast<double>(bytes);
    if (tokens_ < 0) sent = now - tokens_ / rate;
  }
  const double due = sent + draw_latency_s(link, rng_) +
                     draw_loss_delay_s(link, bytes, options_.packet_bytes, rng_);
  last_due_ = std::max(last_due_, due);
  return last_due_;
}

}  // namespace meridian
