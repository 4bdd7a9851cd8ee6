#include "sites/replica/site_exchange.hpp"

#include <algorithm>
#include <chrono>
#include <utility>

#include "core/runlog/run_log.hpp"
#include "core/train/trainer.hpp"
#include "core/util/error.hpp"
#include "core/util/hash.hpp"
#include "core/util/pages.hpp"
#include "crosssite/control/etcd_client.hpp"
#include "crosssite/control/etcd_watch.hpp"
#include "crosssite/control/lease_keeper.hpp"
#include "crosssite/outer/outer_parts.hpp"
#include "crosssite/round/courier.hpp"
#include "sim/emulator/shaped_link.hpp"
#include "sim/emulator/wan_start.hpp"
#include "sites/keys/etcd_keys.hpp"
#include "sites/keys/link_keys.hpp"
#include "sites/replica/exchange_options.hpp"
#include "sites/replica/group_channel.hpp"
#include "sites/replica/group_parts.hpp"
#include "sites/replica/lane_wiring.hpp"
#include "sites/replica/outer_cut.hpp"
#include "sites/replica/site_lanes.hpp"
#include "sites/replica/trainer_training.hpp"
#include "sites/replica/wan_control.hpp"
#include "transport/link/measured_link.hpp"
#include "transport/link/striped_link.hpp"

namespace meridian {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

// How long the leader pumps before the members hear from it again: short against any collective timeout.
constexpr auto kAttempt = 200ms;
// The same in a split exchange: the stripes that reach the members' lanes wait for the end of the
// leader's attempt, so an attempt there is short (a few small collectives each).
constexpr auto kLaneAttempt = 20ms;
// A wait this long is said to the site's agent (on_wait), and again every as long while it lasts.
constexpr double kWaitReportS = 1.0;

// What replica `replica` holds of the outer state until its group's first cut: with [parallel]
// shard_outer and several replicas, its part and the next one's mirror under the cut its whole
// group makes (so no replica holds the whole state at start-up, and that cut moves nothing); else
// all of it. From the trainer's initial weights: a stage-3 replica holding only its first parts
// of them (Trainer::holds_first_parts), cut as this state is, lends just those, and one cut
// otherwise builds them whole first.
OuterState outer_state_before_cut(const JobConfig& c, const std::string& site, int replica, Trainer& trainer) {
  int replicas = 1;
  for (const auto& s : c.sites)
    if (s.name == site) replicas = s.replicas;
  // A job of one site exchanges nothing: its state is a part of no values, so that no replica
  // keeps the weights, momentum and residuals of an outer optimizer that never steps.
  if (c.sites.size() < 2)
    return OuterState(trainer.weights_as_held(), outer_options(c), codec_options(c), false,
                      whole_model(trainer.param_count()), ShardRange{0, 0});
  const std::size_t size = trainer.param_count();
  std::vector<ShardRange> held;
  if (c.parallel.shard_outer && replicas > 1)
    held = held_ranges(ShardMap(size, replicas, outer_shard_unit(c)), std::clamp(replica, 0, replicas - 1));
  const auto state = [&](std::span<const float> initial) {
    return OuterState(initial, outer_options(c), codec_options(c), c.outer.error_feedback, fragment_plan(c, size),
                      held.empty() ? std::nullopt : std::optional(held[0]),
                      held.size() > 1 ? std::optional(held[1]) : std::nullopt);
  };
  if (trainer.holds_first_parts()) {
    const auto first = trainer.first_parts();
    if (held.size() == 2 && held[0] == first.own && held[1] == first.mirror) {
      ZeroPageVector<float> lent(size);  // zero pages outside the two, never read: never held
      std::copy(first.own_values.begin(), first.own_values.end(),
                lent.begin() + static_cast<std::ptrdiff_t>(first.own.offset));
      std::copy(first.mirror_values.begin(), first.mirror_values.end(),
                lent.begin() + static_cast<std::ptrdiff_t>(first.mirror.offset));
      return state(lent);
    }
    trainer.build_initial_weights();
  }
  return state(trainer.model().params());
}

}  // namespace

SiteExchange::SiteExchange(const JobConfig& config, std::string site, int replica, Trainer& trainer, RunLog& log,
                           ExchangeClocks clocks)
    : config_(config),
      site_(std::move(site)),
      log_(log),
      clocks_(std::move(clocks)),
      state_(outer_state_before_cut(config, site_, replica, trainer)),
      origin_hash_(state_.sharded() ? std::nullopt : std::optional(OuterState::weights_hash(state_.global()))),
      newest_checkpoint_([&trainer] { return trainer.newest_checkpoint(); }),
      driver_(round_plan(config, site_, state_.fragments()), state_, *this, clocks_.monotonic) {
  placement_.sites = static_cast<int>(config.sites.size());
  placement_.data_replicas = 0;
  for (const auto& s : config_.sites) {
    if (s.name == site_) placement_.data_offset = placement_.data_replicas;
    placement_.data_replicas += s.replicas;
  }
  if (active() && config_.transport.exchange == JobConfig::Transport::Exchange::Split && !synchronous())
    lanes_ = std::make_unique<SiteLanes>(
        static_cast<std::uint16_t>(LinkTag::Stripe),
        [this](const SiteLanes::SiteOf& site_of) { return lane_link(site_of); },
        [this](double start) {
          if (wan_.schedule && !wan_.schedule->start()) wan_.schedule->set_start(start);
        },
        cut_part_on, kept_);
  // Peers' deltas come in parts where the outer state is sharded: each replica journals its own
  // (the site's run directory is every replica's).
  if (lanes_ && config_.parallel.shard_outer)
    parts_journal_ = std::make_unique<FileDeltaJournal>(config_.job.run_dir / "delta-journal");
  if (active() && config_.control.endpoints.empty())
    throw make_error(ErrorKind::Config, "job '", config_.job.name, "' has ", placement_.sites,
                     " sites but no [control] endpoints: start it with `meridian launch`, or name its etcd cluster");
}

SiteExchange::~SiteExchange() = default;

std::unique_ptr<Link> SiteExchange::lane_link(const std::function<const std::string*(const std::string&)>& site_of) {
  auto me = *std::find_if(config_.sites.begin(), config_.sites.end(), [&](const auto& s) { return s.name == site_; });
  me.port = 0;  // the site's port is its leader's link
  auto link = make_link(config_, me);
  if (!config_.wan.emulated()) return link;
  // The lane's own shaping: its stream across the emulated WAN is one more, with its own ceiling.
  if (!wan_.schedule) wan_.schedule = std::make_shared<WanSchedule>(config_);
  const auto address = link->address();
  return std::make_unique<ShapedLink>(std::move(link), site_, wan_.schedule, site_of, clocks_.wall,
                                      hash64(address.data(), address.size(), config_.job.seed));
}

void SiteExchange::open_lanes(Communicator& group, bool leader) {
  if (!lanes_) return;
  // A sharded site takes peers' deltas in parts, part i for rank i.
  const auto parts = state_.sharded() ? outer_map_ : std::nullopt;
  const LaneLeader lead = leader ? LaneLeader{cross_.get(), links_.striped} : LaneLeader{};
  open_site_lanes(*lanes_, kept_, group, lead, parts, outer_shard_unit(config_));
}

void SiteExchange::sync_lanes(Communicator& group, bool leader) {
  if (!lanes_) return;
  const LaneLeader lead = leader ? LaneLeader{cross_.get(), links_.striped} : LaneLeader{};
  sync_site_lanes(*lanes_, group, lead, wan_.schedule ? wan_.schedule->start() : std::nullopt);
}

void SiteExchange::encoded(std::vector<std::byte> bytes) {
  if (lanes_) lanes_->hold(std::move(bytes));
}

nlohmann::json SiteExchange::lane_figures() const { return lanes_ ? lanes_->figures() : nlohmann::json::object(); }

void SiteExchange::ensure_leader_side() {
  if (cross_) return;
  EtcdOptions etcd = etcd_options(config_, site_);
  // A member that stopped answering costs one attempt, then the next member is tried; the whole
  // call gives up quickly so that a cut-off site goes on training (CrossSite retries later).
  etcd.request_timeout = std::chrono::milliseconds(500);
  etcd.timeout = std::chrono::milliseconds(1500);
  // Only a job that asks for an emulated WAN pays for one: the hook and the shaping decorator.
  if (config_.wan.emulated()) {
    wan_.schedule = std::make_shared<WanSchedule>(config_);
    etcd.reachable = control_reachable(wan_.schedule, site_, clocks_.wall);
  }
  etcd_ = std::make_unique<EtcdClient>(etcd);
  const JobConfig::Site* me = nullptr;
  CrossSiteOptions o;
  o.job = config_.job.name;
  o.site = site_;
  for (const auto& s : config_.sites) {
    o.sites.push_back(s.name);
    if (s.name == site_) me = &s;
  }
  links_.link = make_link(config_, *me);
  o.link_keys = listed_link_keys(config_);
  o.origin_hash = origin_hash_;
  if (wan_.schedule) {
    // The link asks CrossSite for a peer's site without reading etcd: it runs inside its pumps.
    auto site_of = [this](const std::string& address) { return cross_ ? cross_->known_site(address) : nullptr; };
    auto shaped = std::make_unique<ShapedLink>(std::move(links_.link), site_, wan_.schedule, site_of, clocks_.wall,
                                               hash64(site_.data(), site_.size(), config_.job.seed));
    links_.shaped = shaped.get();
    links_.link = std::move(shaped);
    wan_.control = std::make_unique<WanControl>(config_, site_, wan_.schedule, *etcd_, log_, clocks_.wall);
  }
  if (lanes_) {
    // Only a delta's first send to a peer goes in stripes: one asked for again goes whole.
    StripedLink::Options striping{static_cast<std::uint16_t>(LinkTag::Stripe), [](std::uint64_t id, std::uint16_t tag) {
                                    return tag == static_cast<std::uint16_t>(LinkTag::Delta) && first_attempt(id);
                                  }};
    // A peer that takes parts gets them cut on its unit, when this site's codec codes whole blocks
    // in it; this replica keeps its own part of a delta that comes in parts.
    const std::size_t unit = outer_shard_unit(config_);
    striping.cuts = [unit](std::uint64_t peer_unit) { return peer_unit > 0 && peer_unit % unit == 0; };
    striping.cut_part = cut_part_on;
    striping.keep_part = [this](const std::string& owner, const Stripe& stripe) { return kept_.keep(owner, stripe); };
    auto striped = std::make_unique<StripedLink>(std::move(links_.link), std::move(striping));
    links_.striped = striped.get();
    links_.link = std::move(striped);
    lanes_->lead(links_.striped);
  }
  // Outside the shaping: it measures what the protocol's transfers get, emulated WAN included.
  auto measured = std::make_unique<MeasuredLink>(std::move(links_.link), clocks_.wall, MeasuredLink::Options{});
  links_.measured = measured.get();
  links_.link = std::move(measured);
  o.rule.quorum = config_.outer.quorum;
  o.rule.staleness.max_staleness = config_.outer.max_staleness;
  o.rule.staleness.decay = staleness_decay(config_);
  o.rule.scale_partial = config_.outer.partial_commit == JobConfig::Outer::PartialCommit::Scaled;
  o.rule.fragments = state_.fragments();
  // Rounds come P times as often, each 1/P of the model: a site keeps P times as many of its own
  // to send again (the same bytes), so a peer that missed some while the control plane was away
  // still gets them.
  o.keep_own_rounds *= static_cast<std::size_t>(state_.fragments());
  o.deadline.k = config_.outer.deadline_k;
  o.deadline.fixed_s = config_.outer.deadline_ms / 1000.0;
  o.screen.max_norm_ratio = config_.outer.max_norm_ratio;
  o.control_retry = std::chrono::milliseconds(1000);
  o.lease_ttl_s = config_.control.lease_ttl_s;
  o.end_unreachable_s = config_.control.end_unreachable_s;
  const auto keepalive = std::chrono::milliseconds(config_.control.keepalive_ms);
  o.keep_lease = [etcd, keepalive](std::int64_t lease) { return std::make_unique<LeaseKeeper>(etcd, lease, keepalive); };
  o.change_feed = [etcd](const std::string& root, std::vector<std::string> areas) {
    return std::make_unique<EtcdWatch>(etcd, root, std::chrono::milliseconds(1000), std::move(areas));
  };
  // The replica's run directory is its site's: a replica that leads after a restart reads it back.
  o.journal = std::make_shared<FileDeltaJournal>(config_.job.run_dir / "delta-journal");
  o.checkpoints = config_.checkpoint.every > 0;
  if (o.checkpoints && !config_.parallel.shard_outer) o.saved_state = [this] { return saved_outer_state(); };
  cross_ = std::make_unique<CrossSite>(o, *etcd_, *links_.link, clocks_.monotonic);
  cross_->serve_state(&state_);
  cross_->set_proposing(!driver_.paused());
  driver_.lead(cross_.get());
  log_.event("link_open",
             {{"site", site_}, {"address", links_.link->address()}, {"transport", to_string(config_.transport.kind)}});
}

void SiteExchange::release_leader_side() {
  if (!cross_) return;
  driver_.lead(nullptr);
  if (lanes_) lanes_->lead(nullptr);
  cross_.reset();
  wan_.control.reset();
  links_ = LinkStack{};
  etcd_.reset();
  log_.event("leader_side_released", {{"site", site_}});
}

bool SiteExchange::wan_started() {
  if (!wan_.schedule || wan_.schedule->start()) return true;
  try {
    agree_wan_start(*wan_.schedule, *etcd_, config_.job.name, clocks_.wall());
  } catch (const Error&) {
    // etcd unreachable now: the join, which needs it too, tries again.
  }
  return wan_.schedule->start().has_value();
}

void SiteExchange::report_wait(double began, double& said_at) const {
  const double now = clocks_.monotonic();
  if (!waits_.reporter || !cross_ || now - said_at < kWaitReportS) return;
  said_at = now;
  waits_.reporter({{"for", cross_->describe_wait()}, {"s", now - began}});
}

void SiteExchange::wait_together(Communicator& group, bool leader, const std::function<bool()>& attempt) {
  const double t0 = clocks_.monotonic();
  double said_at = t0;
  while (true) {
    std::uint8_t done = leader && attempt() ? 1 : 0;
    if (leader) {
      // Said as they happen: a wait may be long, and what it waits on is often among them.
      log_cross_site_events();
      if (!done) report_wait(t0, said_at);
    }
    group.broadcast(std::as_writable_bytes(std::span<std::uint8_t>(&done, 1)), 0);
    if (done) break;
  }
  if (said_at > t0) waits_.reporter(json::object());  // said_at moves only where the reporter is set
  waits_.waited_s += clocks_.monotonic() - t0;
}

void SiteExchange::drive(Communicator& group, bool leader, Trainer& trainer, const std::function<void(Replica&)>& start) {
  if (leader) ensure_leader_side();
  driver_.lead(leader ? cross_.get() : nullptr);
  GroupChannel::HeldRanges held;
  if (state_.sharded()) held = [map = *outer_map_](int rank) { return held_ranges(map, rank); };
  GroupChannel channel(group, leader, state_.fragments(), std::move(held), &kept_, parts_journal_.get());
  TrainerTraining training(trainer, group.size(),
                           static_cast<std::int64_t>(config_.inner.batch_per_replica) * config_.model.seq_len);
  std::optional<GroupParts> parts;
  if (state_.sharded()) parts.emplace(group, *outer_map_);
  Replica replica{channel, training, parts ? &*parts : nullptr};
  // A part a commit names that some replica no longer keeps fails the apply on every replica
  // alike, before anything is applied: the leader lets go of what it holds in parts (each asked
  // for whole again) and the site catches up, with no regroup.
  const auto guarded = [&](const std::function<bool()>& step) {
    try {
      return step();
    } catch (const PartsNotKept& e) {
      if (leader) {
        cross_->drop_held_in_parts();
        log_.event("parts_not_kept", {{"site", site_}, {"version", state_.version()}, {"why", e.what()}});
      }
      driver_.catch_up();
      return true;
    }
  };
  guarded([&] {
    start(replica);
    return true;
  });
  sync_lanes(group, leader);
  const bool polling = driver_.polling();
  const double t0 = clocks_.monotonic();
  double said_at = t0;
  bool more = true;
  while (more) {
    more = guarded([&] { return driver_.attempt(replica, lanes_ ? kLaneAttempt : kAttempt); });
    sync_lanes(group, leader);  // every replica attempts as often: the same answer everywhere
    if (more && leader) report_wait(t0, said_at);
  }
  if (said_at > t0) waits_.reporter(json::object());
  if (!polling) waits_.waited_s += clocks_.monotonic() - t0;
  group_received_ += channel.received_bytes();
}

void SiteExchange::cut_outer(Communicator& group, bool leader, Trainer& trainer) {
  if (!config_.parallel.shard_outer) return;
  const double t0 = clocks_.monotonic();
  outer_map_.emplace(state_.size(), group.size(), outer_shard_unit(config_));
  const bool fresh = state_.version() == 0 && trainer.state().step == 0;
  // A fresh replica still holding its first parts of the weights (the whole group kept them:
  // intrasite/group/state_sync) holds its cut of the state already, built from them: the cut
  // reads no weights, and none are gathered for it.
  std::span<float> weights;
  if (!(fresh && trainer.holds_first_parts())) weights = trainer.model().params();
  const OuterCut cut = cut_outer_state(group, state_, *outer_map_, weights, false, fresh);
  if (!leader) return;
  if (cross_) cross_->forget_proposal();
  json fields = {{"site", site_},          {"replicas", group.size()}, {"version", cut.version},
                 {"sources", cut.sources}, {"mirrors", cut.mirrors},   {"moved", cut.moved},
                 {"bytes", cut.bytes},     {"ms", 1000 * (clocks_.monotonic() - t0)}};
  if (cut.older) fields["older"] = "the newest version's parts had a hole: an older whole state, its round dropped";
  log_.event("outer_cut", fields);
}

std::size_t SiteExchange::restore_from_parts(const CheckpointParts& parts, int rank, int replicas) {
  if (!config_.parallel.shard_outer || !parts.has_slices()) return 0;
  const auto held = held_ranges(ShardMap(state_.size(), replicas, outer_shard_unit(config_)), rank);
  const Checkpoint own = parts.slice(held[0].offset, held[0].count);
  if (held.size() == 1) {
    state_.restore_part(own, held[0]);
    return held[0].count;
  }
  const Checkpoint mirror = parts.slice(held[1].offset, held[1].count);
  state_.restore_part(own, held[0], &mirror, held[1]);
  return held[0].count + held[1].count;
}

void SiteExchange::gather_for_checkpoint(Communicator& group, bool leader) {
  checkpoint_records_.reset();
  if (!state_.sharded()) return;
  Checkpoint mine;
  state_.save(mine);
  const auto parts = GroupParts(group, *outer_map_).gather(encode_checkpoint(mine));
  if (!leader) return;
  std::vector<Checkpoint> held;
  for (std::size_t r = 0; r < parts.size(); ++r)
    held.push_back(decode_checkpoint(parts[r], "replica " + std::to_string(r) + "'s outer part"));
  checkpoint_records_ = join_outer_parts(held);
}

void SiteExchange::save_part(Checkpoint& part) const {
  if (!state_.sharded()) return;
  Checkpoint mine;
  state_.save(mine);
  put_outer_slice(part, mine);
}

void SiteExchange::join(Communicator& group, bool leader, Trainer& trainer) {
  if (!active()) return;
  if (!leader) release_leader_side();
  cut_outer(group, leader, trainer);
  if (leader) ensure_leader_side();
  open_lanes(group, leader);
  // A leader that died mid-wait left what it waited for in the store: it is not waited for now.
  if (leader && waits_.reporter) waits_.reporter(json::object());
  const double t0 = clocks_.monotonic();
  wait_together(group, leader, [&] {
    const bool timed = wan_started();
    // A site that (re)joins while an operator's partition holds must honour it from the start.
    if (wan_.control) wan_.control->tick();
    return cross_->poll_join(kAttempt) && timed;
  });
  if (leader)
    log_.event("sites_joined", {{"site", site_}, {"sites", placement_.sites}, {"ms", 1000 * (clocks_.monotonic() - t0)}});
  if (synchronous()) return;
  // A job under way: take the versions committed while this site was away before training on.
  drive(group, leader, trainer, [&](Replica&) { driver_.catch_up(); });
}

bool SiteExchange::round_ends(std::int64_t steps_done) const {
  return active() && !synchronous() && driver_.round_ends(steps_done);
}

void SiteExchange::after_step(Communicator& group, bool leader, Trainer& trainer, std::int64_t done, bool last,
                              bool hold) {
  if (!active() || synchronous()) return;
  drive(group, leader, trainer, [&](Replica& r) { driver_.after_step(r, done, last, hold); });
}

nlohmann::json SiteExchange::roll_back(Trainer& trainer, Communicator& group) {
  MERIDIAN_CHECK(active() && !synchronous(), "roll_back: a DiLoCo job of several sites only");
  TrainerTraining training(trainer, 1, 0);
  std::optional<GroupParts> parts;
  if (state_.sharded()) parts.emplace(group, *outer_map_);
  const auto r = driver_.roll_back(training, parts ? &*parts : nullptr);
  return {{"to_version", r.to_version},
          {"discarded_steps", r.discarded_steps},
          {"params_hash", std::to_string(r.params_hash)}};
}

void SiteExchange::pause_outer(bool paused) {
  driver_.pause(paused);
  if (cross_) cross_->set_proposing(!paused);
}

nlohmann::json SiteExchange::drain(Communicator& group, bool leader, Trainer& trainer) {
  const double t0 = clocks_.monotonic();
  drive(group, leader, trainer, [&](Replica&) { driver_.drain(); });
  nlohmann::json out = {{"version", state_.version()}, {"step", trainer.state().step}};
  if (leader) {
    out["last_round"] = driver_.figures().last_round;
    out["ms"] = 1000 * (clocks_.monotonic() - t0);
  }
  return out;
}

void SiteExchange::rejoin(Communicator& group, bool leader, Trainer& trainer) {
  if (!active()) return;
  join(group, leader, trainer);
  if (synchronous()) return;
  drive(group, leader, trainer, [&](Replica&) { driver_.take_up_job(); });
}

bool SiteExchange::job_over() { return cross_ && cross_->job_over(); }

void SiteExchange::log_cross_site_events() {
  if (wan_.control) wan_.control->tick();
  for (const auto& e : cross_->take_events())
    log_.event(e.kind, {{"site", site_}, {"peer", e.site}, {"number", e.number}, {"detail", e.detail}});
}

void SiteExchange::applied(const AppliedVersion& v) {
  json fields = {{"site", site_},
                 {"step", v.step},
                 {"version", v.version},
                 {"from_version", v.from_version},
                 {"fragments", v.fragments},
                 {"params_hash", std::to_string(v.params_hash)}};
  if (v.record != nullptr) {
    fields["proposer"] = v.record->proposer;
    json entries = json::array();
    for (const auto& e : v.record->entries)
      entries.push_back({{"site", e.site}, {"round", e.round}, {"base", e.base_version}, {"weight", e.weight}});
    fields["deltas"] = entries;
  }
  log_.event(v.adopted ? "state_adopted" : "commit_applied", fields);
}

void SiteExchange::dropped(std::int64_t round, std::int64_t step, std::int64_t version, int in_a_row) {
  log_.event("round_dropped", {{"site", site_},
                               {"round", round},
                               {"step", step},
                               {"version", version},
                               {"in_a_row", in_a_row},
                               {"why", "every live site's round on this version was refused for its values: "
                                       "no version can merge any of them"}});
}

void SiteExchange::fast_forwarded(std::int64_t from_step, std::int64_t step) {
  log_.event("fast_forward", {{"site", site_}, {"from_step", from_step}, {"step", step}});
}

void SiteExchange::caught_up(std::int64_t from_version, std::int64_t version, double seconds) {
  log_.event("caught_up", {{"site", site_}, {"from_version", from_version}, {"version", version}, {"ms", 1000 * seconds}});
}

void SiteExchange::mirrors_repaired(const std::vector<int>& replicas, std::int64_t version, std::size_t bytes) {
  log_.event("outer_mirrors_repaired",
             {{"site", site_},
              {"version", version},
              {"replicas", replicas},
              {"bytes", bytes},
              {"why",
               "these replicas' mirrors of the next one's outer part differed from it (corrupted since "
               "the cut): the parts were cut anew from their owners"}});
}

void SiteExchange::leave() const {
  if (!cross_) return;
  const auto lease = cross_->lease();
  if (lease == 0) return;
  try {
    EtcdOptions etcd = etcd_options(config_, site_);
    etcd.timeout = std::chrono::milliseconds(1000);
    if (wan_.schedule) etcd.reachable = control_reachable(wan_.schedule, site_, clocks_.wall);
    EtcdClient(etcd).revoke_lease(lease);
  } catch (const Error&) {
    // Then the lease lapses after its TTL: peers learn the same, only later.
  }
}

void SiteExchange::reduce_across_sites(Communicator& group, bool leader, std::int64_t step, std::span<float> grads,
                                       double& loss) {
  scratch_.resize(grads.size() + 1);
  std::copy(grads.begin(), grads.end(), scratch_.begin());
  scratch_.back() = static_cast<float>(loss);
  if (leader) {
    ensure_leader_side();
    cross_->send_gradients(step, scratch_);
    log_cross_site_events();
  }
  wait_together(group, leader, [&] { return cross_->poll_gradients(step, scratch_, kAttempt); });
  group.broadcast(std::as_writable_bytes(std::span<float>(scratch_)), 0);
  std::copy(scratch_.begin(), scratch_.end() - 1, grads.begin());
  loss = scratch_.back();
  driver_.count_round();
}

}  // namespace meridian
