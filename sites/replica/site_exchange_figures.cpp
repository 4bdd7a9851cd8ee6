// What the exchange reports and keeps: the job summary (summary.json), the figures `meridianctl
// status` shows, and its counts in a checkpoint.
#include <algorithm>
#include <utility>

#include "core/checkpoint/checkpoint.hpp"
#include "core/util/hash.hpp"
#include "sim/emulator/shaped_link.hpp"
#include "sites/replica/site_exchange.hpp"
#include "sites/replica/site_lanes.hpp"
#include "sites/replica/wan_control.hpp"
#include "transport/link/measured_link.hpp"
#include "transport/link/striped_link.hpp"

namespace meridian {
namespace {

nlohmann::json refusal_counts(const Refusals& refused) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [name, count] : refused.named()) out[name] = count;
  return out;
}

}  // namespace

std::size_t SiteExchange::held_bytes() const {
  return state_.held_bytes() + scratch_.size() * sizeof(float) + (lanes_ ? lanes_->held_bytes() : 0) +
         kept_.held_bytes();
}

std::uint64_t SiteExchange::lanes_sent() const { return lanes_ ? lanes_->lanes_bytes_sent() : 0; }

void SiteExchange::save(Checkpoint& checkpoint) const {
  // A sharded state's own records are a part: a whole checkpoint gets the whole the leader
  // gathered for it, one in parts none (each part file carries its slice, save_part), a heal's or
  // a guard's snapshot none (each member keeps its part; a join cuts anew).
  if (!state_.sharded())
    state_.save(checkpoint);
  else if (const auto records = std::exchange(checkpoint_records_, std::nullopt))
    for (const auto& name : records->names()) {
      const auto bytes = records->get(name);
      checkpoint.put(name, std::vector<std::byte>(bytes.begin(), bytes.end()));
    }
  const auto t = cross_ ? cross_->traffic() : CrossSiteTraffic{};
  checkpoint.put_value("exchange.rounds", rounds());
  checkpoint.put_value("exchange.wan_bytes_sent", static_cast<std::int64_t>(carry_.sent + t.bytes_sent + lanes_sent()));
  checkpoint.put_value("exchange.wan_bytes_received", static_cast<std::int64_t>(carry_.received + t.bytes_received));
}

std::uint64_t SiteExchange::fingerprint() const {
  const auto t = cross_ ? cross_->traffic() : CrossSiteTraffic{};
  // A sharded state's records are not in a heal's snapshot (save()).
  const std::uint64_t values[] = {state_.sharded() ? 0 : state_.fingerprint(), static_cast<std::uint64_t>(rounds()),
                                  carry_.sent + t.bytes_sent + lanes_sent(), carry_.received + t.bytes_received};
  return hash64(std::span<const std::uint64_t>(values));
}

void SiteExchange::restore(const Checkpoint& checkpoint) {
  // Before the group's first cut a sharded state's part is only a placeholder: records of the whole
  // model (a checkpoint written in one file) restore whole, so that the cut finds them all.
  if (config_.parallel.shard_outer && !outer_map_ && checkpoint.has("outer.global"))
    state_.restore(checkpoint, {0, state_.size()}, std::nullopt);
  else if (!config_.parallel.shard_outer || checkpoint.has("outer.global"))
    state_.restore(checkpoint);
  const bool counted = rounds() > 0 || (cross_ && cross_->traffic().bytes_sent > 0);
  if (counted || !checkpoint.has("exchange.rounds")) return;  // older checkpoints: counts from here
  const auto rounds = checkpoint.get_value<std::int64_t>("exchange.rounds");
  const auto sent = checkpoint.get_value<std::int64_t>("exchange.wan_bytes_sent");
  const auto received = checkpoint.get_value<std::int64_t>("exchange.wan_bytes_received");
  if (rounds < 0 || sent < 0 || received < 0)
    throw make_error(ErrorKind::Checkpoint, "records exchange.rounds / wan_bytes_sent / wan_bytes_received are negative: ",
                     rounds, " / ", sent, " / ", received);
  driver_.set_rounds(rounds);
  carry_.sent = static_cast<std::uint64_t>(sent);
  carry_.received = static_cast<std::uint64_t>(received);
}

std::string SiteExchange::unsound_for_checkpoint() {
  if (!cross_ || cross_->may_checkpoint(state_)) return {};
  return "site " + site_ + ": its copy of the outer state is not version " + std::to_string(state_.version()) +
         " (version_diverged): the last checkpoint stays";
}

std::optional<OuterState> SiteExchange::saved_outer_state() const {
  auto checkpoint = newest_checkpoint_();
  if (!checkpoint || !checkpoint->has("outer.global")) return std::nullopt;
  OuterState saved = state_;  // of its kind: restore() replaces every value it holds
  saved.restore(*checkpoint);
  return saved;
}

nlohmann::json SiteExchange::summary(std::size_t params) const {
  nlohmann::json out = {{"site", site_},
                        {"sites", placement_.sites},
                        {"algorithm", to_string(config_.outer.algorithm)},
                        {"codec", synchronous() ? "fp32" : to_string(config_.outer.codec)},
                        {"fragments", state_.fragments()},
                        {"params", params},
                        {"rounds", rounds()},
                        {"eager_steps", driver_.figures().eager_steps},
                        {"version", state_.version()}};
  if (!cross_) return out;
  auto t = cross_->traffic();
  t.bytes_sent += carry_.sent;
  t.bytes_sent += lanes_sent();
  t.bytes_received += carry_.received;
  out["wan_bytes_sent"] = t.bytes_sent;
  out["wan_bytes_received"] = t.bytes_received;
  out["refused"] = refusal_counts(t.refused);
  out["frames_refused"] = t.frames_refused;
  out["delta_requests"] = t.requests_sent;
  out["deltas_resent"] = t.deltas_resent;
  out["commits_proposed"] = t.commits_proposed;
  out["commits_won"] = t.commits_won;
  out["commits_by_deadline"] = t.commits_by_deadline;
  out["deltas_screened_out"] = t.deltas_screened_out;
  out["states_sent"] = t.states_sent;
  out["states_adopted"] = t.states_adopted;
  out["copies_rebuilt"] = t.copies_rebuilt;
  out["states_refused"] = t.states_refused;
  const auto link = links_.link->counters();
  out["peak_bytes_in_flight"] = t.peak_bytes_in_flight;
  out["frames_duplicate"] = link.duplicates;
  out["frames_rerequested"] = link.rerequests;
  out["frames_dropped"] = link.dropped;  // peers whose queue was full: dead, stopped or far behind
  out["waited_s"] = waits_.waited_s;
  if (links_.striped) {
    // What this replica (the leader) put on the WAN itself: its stripes and everything unstriped.
    const auto f = links_.striped->figures();
    out["split"] = {
        {"lanes", links_.striped->lanes()}, {"link_bytes_sent", link.bytes_sent}, {"striped_sends", f.striped_sends},
        {"stripes_in", f.stripes_in},       {"assembled", f.assembled},           {"stripes_refused", f.refused},
        {"incomplete_let_go", f.let_go},    {"parts_sent", f.parts_sent},         {"parts_in", f.parts_in},
        {"held_in_parts", f.held_in_parts}, {"parts_refused", f.parts_refused}};
  }
  if (links_.shaped) {
    const auto w = links_.shaped->shaping();
    out["wan_emulated"] = true;
    out["wan_transfers_delivered"] = w.delivered;
    out["wan_transfers_dropped"] = w.dropped_sent + w.dropped_received;
    out["wan_mean_transit_s"] = w.delivered > 0 ? w.transit_s / static_cast<double>(w.delivered) : 0.0;
  }
  out["wan_links"] = measured_links();
  if (const auto& f = driver_.figures(); f.rejoined_after_s) out["rejoined_after_s"] = *f.rejoined_after_s;
  out["max_version_gap_s"] = driver_.figures().max_version_gap_s;
  if (cross_->ended_cut_off()) out["ended_cut_off"] = true;  // on `version`, perhaps not the job's last
  // What one round (one exchange) moves per parameter and per receiving peer: ~1 for int8, ~0.5
  // for int4, and 1/P of that for streaming, whose exchanges move one fragment each.
  if (rounds() > 0 && placement_.sites > 1) {
    out["bytes_per_param_round"] =
        static_cast<double>(t.bytes_sent) / (static_cast<double>(params) * rounds() * (placement_.sites - 1));
    out["bytes_per_exchange"] = static_cast<double>(t.bytes_sent) / static_cast<double>(rounds() * (placement_.sites - 1));
  }
  return out;
}

nlohmann::json SiteExchange::measured_links() const {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [address, figures] : links_.measured->figures()) {
    const std::string* peer = cross_->known_site(address);
    out[peer ? *peer : address] = to_json(figures);
  }
  return out;
}

nlohmann::json SiteExchange::ops_figures(std::size_t params) const {
  nlohmann::json out = nlohmann::json::object();
  if (!active()) return out;
  out["version"] = state_.version();
  if (!cross_) return out;
  out["staleness"] = std::max<std::int64_t>(0, cross_->newest_commit() - state_.version());
  out["lease"] = cross_->lease();  // 0: not registered (drained); meridianctl status asks etcd about it
  const auto live = static_cast<std::int64_t>(cross_->live_sites());
  out["live_sites"] = live;
  out["quorum"] = config_.outer.quorum > 0 ? std::min<std::int64_t>(config_.outer.quorum, live) : live;
  const auto t = cross_->traffic();
  out["refused"] = refusal_counts(t.refused);
  out["deltas_screened_out"] = t.deltas_screened_out;
  for (const auto& [peer, bytes] : t.peers) out["wan"][peer] = {{"sent", bytes.sent}, {"received", bytes.received}};
  out["links"] = measured_links();
  if (wan_.control) out["wan_faults"] = wan_.control->figures();
  // Bytes on the wire per fp32 byte of the deltas they carry: ~0.25 for int8, ~0.13 for int4.
  if (rounds() > 0 && placement_.sites > 1)
    out["codec_ratio"] = static_cast<double>(carry_.sent + t.bytes_sent + lanes_sent()) / (4.0 * static_cast<double>(params) * rounds() * (placement_.sites - 1));
  return out;
}

}  // namespace meridian
