#include "sites/replica/site_exchange.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <utility>

#include "core/runlog/run_log.hpp"
#include "core/train/trainer.hpp"
#include "core/util/error.hpp"
#include "core/util/hash.hpp"
#include "sites/keys/etcd_keys.hpp"
#include "sites/keys/link_keys.hpp"
#include "sites/replica/exchange_options.hpp"
#include "sites/replica/wan_control.hpp"
#include "sim/emulator/shaped_link.hpp"
#include "sim/emulator/wan_start.hpp"
#include "sync/codec/codec.hpp"
#include "sync/control/etcd_client.hpp"
#include "sync/outer/delta_mean.hpp"
#include "sync/round/local_steps.hpp"
#include "transport/link/measured_link.hpp"

namespace meridian {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

// How long the leader pumps before the members hear from it again: short against any collective timeout.
constexpr auto kAttempt = 200ms;
// A wait this long is said to the site's agent (on_wait), and again every as long while it lasts.
constexpr double kWaitReportS = 1.0;
// Rounds in a row of which every site's was refused before a site gives up: one is a transient
// (a spike), this many a job whose progress no version can take any more (it diverges, or its
// deltas grew far past what the sites merged before, e.g. an operator's set-lr).
constexpr int kMaxDroppedRounds = 3;
// Rounds of a site announced but not merged yet that it may train on with (overlap).
constexpr std::int64_t kMaxBacklog = 1;

// What the leader tells its group after each attempt.
enum Update : std::uint8_t { kNothing = 0, kCommit = 1, kSnapshot = 2, kDropRound = 3 };

// Broadcast moves bytes: integers ride along bit for bit.
template <class T>
void broadcast_value(Communicator& group, T& value) {
  group.broadcast(std::as_writable_bytes(std::span<T>(&value, 1)), 0);
}

}  // namespace

SiteExchange::SiteExchange(const JobConfig& config, std::string site, std::span<const float> initial, RunLog& log,
                           std::function<double()> clock)
    : config_(config),
      site_(std::move(site)),
      log_(log),
      clock_(std::move(clock)),
      sites_(static_cast<int>(config.sites.size())),
      state_(initial, outer_options(config), codec_options(config), config.outer.error_feedback,
             fragment_plan(config, initial.size())),
      inner_steps_(config.outer.inner_steps),
      started_at_(clock_()) {
  data_replicas_ = 0;
  const JobConfig::Site* me = nullptr;
  double fastest = 0;
  for (const auto& s : config_.sites) {
    if (s.name == site_) {
      data_offset_ = data_replicas_;
      me = &s;
    }
    data_replicas_ += s.replicas;
    fastest = std::max(fastest, s.speed);
  }
  if (me == nullptr) throw make_error(ErrorKind::Config, "site '", site_, "' is not a [[site]] of the job");
  replicas_ = me->replicas;
  // Dynamic local updates: a slower site ends its rounds after fewer steps, so its deltas come as
  // often as the fastest site's and nobody's round is held back by it.
  if (config_.outer.dynamic_inner_steps) inner_steps_ = local_steps(me->speed, fastest, config_.outer.inner_steps);
  // Streaming: an exchange every H / P steps, each one fragment's (H of that fragment's steps).
  inner_steps_ = std::max(1, inner_steps_ / state_.fragments());
  if (active() && config_.control.endpoints.empty())
    throw make_error(ErrorKind::Config, "job '", config_.job.name, "' has ", sites_,
                     " sites but no [control] endpoints: start it with `meridian launch`, or name its etcd cluster");
}

SiteExchange::~SiteExchange() = default;

void SiteExchange::ensure_leader_side() {
  if (cross_) return;
  EtcdOptions etcd = etcd_options(config_, site_);
  // A member that stopped answering costs one attempt, then the next member is tried; the whole
  // call gives up quickly so that a cut-off site goes on training (CrossSite retries later).
  etcd.request_timeout = std::chrono::milliseconds(500);
  etcd.timeout = std::chrono::milliseconds(1500);
  // Only a job that asks for an emulated WAN pays for one: the hook and the shaping decorator.
  if (config_.wan.emulated()) {
    wan_ = std::make_shared<WanSchedule>(config_);
    etcd.reachable = control_reachable(wan_, site_, wall_clock_s);
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
  link_ = make_link(config_, *me);
  o.link_keys = listed_link_keys(config_);
  if (wan_) {
    // The link asks CrossSite for a peer's site without reading etcd: it runs inside its pumps.
    auto site_of = [this](const std::string& address) { return cross_ ? cross_->known_site(address) : nullptr; };
    auto shaped = std::make_unique<ShapedLink>(std::move(link_), site_, wan_, site_of, wall_clock_s,
                                               hash64(site_.data(), site_.size(), config_.job.seed));
    shaped_ = shaped.get();
    link_ = std::move(shaped);
    wan_control_ = std::make_unique<WanControl>(config_, site_, wan_, *etcd_, log_, wall_clock_s);
  }
  // Outside the shaping: it measures what the protocol's transfers get, emulated WAN included.
  auto measured = std::make_unique<MeasuredLink>(std::move(link_), wall_clock_s, MeasuredLink::Options{});
  measured_ = measured.get();
  link_ = std::move(measured);
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
  o.etcd = etcd;
  o.control_retry = std::chrono::milliseconds(1000);
  o.lease_ttl_s = config_.control.lease_ttl_s;
  o.keepalive = std::chrono::milliseconds(config_.control.keepalive_ms);
  // The replica's run directory is its site's: a replica that leads after a restart reads it back.
  o.journal = std::make_shared<FileDeltaJournal>(config_.job.run_dir / "delta-journal");
  o.checkpoints = config_.checkpoint.every > 0;
  cross_ = std::make_unique<CrossSite>(o, *etcd_, *link_, clock_);
  cross_->serve_state(&state_);
  cross_->set_proposing(!outer_paused_);
  log_.event("link_open", {{"site", site_}, {"address", link_->address()}, {"transport", to_string(config_.transport.kind)}});
}

bool SiteExchange::wan_started() {
  if (!wan_ || wan_->start()) return true;
  try {
    agree_wan_start(*wan_, *etcd_, config_.job.name, wall_clock_s());
  } catch (const Error&) {
    // etcd unreachable now: the join, which needs it too, tries again.
  }
  return wan_->start().has_value();
}

void SiteExchange::wait_together(Communicator& group, bool leader, const std::function<bool()>& attempt) {
  const double t0 = clock_();
  double said_at = t0;
  while (true) {
    std::uint8_t done = leader && attempt() ? 1 : 0;
    if (leader) {
      // Said as they happen: a wait may be long, and what it waits on is often among them.
      log_cross_site_events();
      if (const double now = clock_(); !done && wait_reporter_ && cross_ && now - said_at >= kWaitReportS) {
        said_at = now;
        wait_reporter_({{"for", cross_->describe_wait()}, {"s", now - t0}});
      }
    }
    broadcast_value(group, done);
    if (done) break;
  }
  if (said_at > t0) wait_reporter_(json::object());  // said_at moves only where wait_reporter_ is set
  waited_s_ += clock_() - t0;
}

void SiteExchange::join(Communicator& group, bool leader, Trainer& trainer) {
  if (!active()) return;
  if (leader) ensure_leader_side();
  // A leader that died mid-wait left what it waited for in the store: it is not waited for now.
  if (leader && wait_reporter_) wait_reporter_(json::object());
  const double t0 = clock_();
  wait_together(group, leader, [&] {
    const bool timed = wan_started();
    // A site that (re)joins while an operator's partition holds must honour it from the start.
    if (wan_control_) wan_control_->tick();
    return cross_->poll_join(kAttempt) && timed;
  });
  if (leader) log_.event("sites_joined", {{"site", site_}, {"sites", sites_}, {"ms", 1000 * (clock_() - t0)}});
  if (synchronous()) return;
  // A job under way: take the versions committed while this site was away before training on.
  const std::int64_t from = state_.version();
  std::optional<CrossSite::Commit> update;
  while (true) {
    wait_together(group, leader, [&] {
      if (cross_->newest_commit() <= state_.version()) return true;
      update = cross_->poll_commit(state_, kAttempt);
      return update.has_value();
    });
    if (!apply_update(group, leader, trainer, std::move(update))) break;
    update.reset();
  }
  if (leader && state_.version() != from)
    log_.event("caught_up", {{"site", site_}, {"from_version", from}, {"version", state_.version()},
                             {"ms", 1000 * (clock_() - t0)}});
  last_version_at_ = clock_();
}

bool SiteExchange::round_ends(std::int64_t steps_done) const {
  return active() && !synchronous() && (steps_done % inner_steps_ == 0 || steps_done == config_.inner.steps);
}

void SiteExchange::end_round(Communicator& group, bool leader, Trainer& trainer, std::int64_t steps_in_round,
                             bool last) {
  auto params = trainer.model().params();
  steps_in_round += std::exchange(carried_steps_, 0);  // a round that spans a pause carries its tokens
  // And its rounds, for the peers' norm screen. Streaming: a fragment is due once in P exchanges,
  // so k exchanges skipped are at most ceil(k / P) rounds of the fragment sent now.
  const int fragments = state_.fragments();
  const int rounds_spanned = 1 + (std::exchange(carried_rounds_, 0) + fragments - 1) / fragments;
  // A rollback in this round dropped the steps before it: the delta carries only those after.
  const std::int64_t done = trainer.state().step;
  if (rolled_back_at_ > done - steps_in_round) steps_in_round = std::max<std::int64_t>(1, done - rolled_back_at_);
  const std::int64_t tokens = steps_in_round * trainer.grad_accum() * group.size() * config_.inner.batch_per_replica *
                              config_.model.seq_len;
  // Streaming: the exchange that ends at step s (a multiple of H / P) is fragment s / (H / P) - 1,
  // mod P, so fragments take turns in the order versions take them. The last exchange sends every
  // fragment, from the one due on, so that all of every site's progress is merged in the end; one
  // at a time, each once the one before it is (nearly) merged, so the end keeps no more in flight
  // than the run did.
  const int due = static_cast<int>(((done + inner_steps_ - 1) / inner_steps_ - 1) % fragments);
  const int count = last ? fragments : 1;
  for (int i = 0; i < count; ++i) {
    const int fragment = (due + i) % fragments;
    // Every member encodes: the bytes are only sent by the leader, but the error-feedback residual
    // they leave behind must be the same on every member.
    auto encoded = state_.encode_delta(params, fragment);
    if (eager() && !last) {
      fresh_.resize(state_.fragment(fragment).size);
      decode(encoded, fresh_);  // what the peers will merge, codec error included
    }
    if (leader) {
      ensure_leader_side();
      const std::int64_t round = std::max(cross_->next_round(), next_round_);
      next_round_ = round + 1;
      DeltaAnnouncement a{site_,          round,         state_.version(),       tokens,  encoded.size(),
                          sha256(encoded), last && i == count - 1, fragment, rounds_spanned};
      // Hashed here, right after the encode, rather than by the link on the transfer's path.
      ChunkHashes hashes = chunk_hashes(encoded, cross_->chunk_bytes());
      cross_->submit(a, std::move(encoded), std::move(hashes));
    }
    ++rounds_;
    if (i + 1 < count) drain_backlog(group, leader, trainer, kMaxBacklog);
  }
  if (last) state_.end_feedback();
  if (config_.outer.overlap && !last) {
    // Merged already (a peer ahead committed it during the drain): the version holds the truth.
    const std::int64_t backlog = drain_backlog(group, leader, trainer, kMaxBacklog);
    if (backlog > 0 && eager()) step_ahead(params, due);
    since_sent_ = backlog > 0 ? 0 : -1;
    return;
  }
  // Without overlap: the next version. In the last round: every version until all live sites'
  // last deltas are merged, so every site ends on the same one.
  std::optional<CrossSite::Commit> update;
  while (true) {
    bool finished = false;
    wait_together(group, leader, [&] {
      update = cross_->poll_commit(state_, kAttempt);
      if (!update && last) finished = cross_->finished(state_);
      return update.has_value() || finished || cross_->lost_round(state_, dropped_round_).has_value();
    });
    const bool applied = apply_update(group, leader, trainer, std::move(update));
    update.reset();
    if (applied && !last) return;
    std::uint8_t done = leader && finished ? 1 : 0;
    broadcast_value(group, done);
    if (done) return;
  }
}

void SiteExchange::drop_lost_round(Communicator& group, bool leader, Trainer& trainer, std::int64_t round) {
  broadcast_value(group, round);
  dropped_round_ = round;
  const std::int64_t step = trainer.state().step;
  // Its progress would be on top of a version no commit made; as a commit without the round
  // would have, the site goes back to the version it holds. The error-feedback residual goes too.
  state_.drop_in_flight(trainer.model().params());
  rolled_back_at_ = step;
  ++dropped_in_a_row_;
  if (leader)
    log_.event("round_dropped", {{"site", site_},
                                 {"round", round},
                                 {"step", step},
                                 {"version", state_.version()},
                                 {"in_a_row", dropped_in_a_row_},
                                 {"why", "every live site's round on this version was refused for its values: "
                                         "no version can merge any of them"}});
  if (dropped_in_a_row_ >= kMaxDroppedRounds)
    throw make_error(ErrorKind::Data, "site ", site_, ": every live site's round was refused for its values ",
                     dropped_in_a_row_, " rounds in a row (the latest, round ", round, ", on version ",
                     state_.version(), "; delta_refused events say why): the job diverges, or its deltas grew far "
                     "past the merged ones (a raised learning rate), and no version can take its progress; resume "
                     "from a checkpoint before it with a lower [inner] lr or [outer] lr");
}

nlohmann::json SiteExchange::roll_back(Trainer& trainer) {
  MERIDIAN_CHECK(active() && !synchronous(), "roll_back: a DiLoCo job of several sites only");
  const std::int64_t step = trainer.state().step;
  // The round ends after this step when it is a multiple of the round's length: it is all dropped.
  const std::int64_t dropped = std::min((step - 1) % inner_steps_ + 1, step - std::max<std::int64_t>(rolled_back_at_, 0));
  state_.drop_in_flight(trainer.model().params());
  rolled_back_at_ = step;
  return {{"to_version", state_.version()},
          {"discarded_steps", dropped},
          {"params_hash", std::to_string(OuterState::weights_hash(state_.global()))}};
}

void SiteExchange::step_ahead(std::span<float> params, int fragment) {
  // The site's share of a commit's tokens when every site's delta is in it.
  const double share = static_cast<double>(replicas_) / static_cast<double>(data_replicas_);
  std::vector<float> estimate(fresh_.size());
  eager_estimate(fresh_, share, estimate);
  state_.step_ahead(params, fragment, estimate);
  ++eager_steps_;
}

std::int64_t SiteExchange::drain_backlog(Communicator& group, bool leader, Trainer& trainer, std::int64_t keep) {
  // Overlap by a round, not more: a site whose earlier rounds are still unmerged waits for a
  // version before training on. Otherwise a backlog formed while a peer was missed (before its
  // lease lapsed) never drains, every delta then merges several versions stale, and the job
  // learns at a fraction of its pace. A site cut off from etcd has no backlog by this count.
  std::int64_t backlog = leader ? cross_->backlog(state_) : 0;
  broadcast_value(group, backlog);
  std::optional<CrossSite::Commit> update;
  while (backlog > keep) {
    wait_together(group, leader, [&] {
      update = cross_->poll_commit(state_, kAttempt);
      return update.has_value() || cross_->backlog(state_) <= keep;
    });
    apply_update(group, leader, trainer, std::move(update));
    update.reset();
    backlog = leader ? cross_->backlog(state_) : 0;
    broadcast_value(group, backlog);
  }
  return backlog;
}

void SiteExchange::poll(Communicator& group, bool leader, Trainer& trainer) {
  // A paused site follows the versions others commit whether it overlaps its rounds or not.
  if (!active() || synchronous() || (!config_.outer.overlap && !outer_paused_)) return;
  // The overlap's bound: past it the round's progress would build on too stale a base.
  if (since_sent_ >= 0 && ++since_sent_ >= config_.outer.overlap_steps && !outer_paused_) {
    since_sent_ = -1;
    drain_backlog(group, leader, trainer, 0);
    return;
  }
  std::optional<CrossSite::Commit> update;
  if (leader) update = cross_->poll_commit(state_, std::chrono::milliseconds(0));
  apply_update(group, leader, trainer, std::move(update));
}

bool SiteExchange::apply_update(Communicator& group, bool leader, Trainer& trainer,
                                std::optional<CrossSite::Commit> update) {
  if (leader) log_cross_site_events();
  const auto lost = leader && !update ? cross_->lost_round(state_, dropped_round_) : std::nullopt;
  std::uint8_t kind = !leader  ? kNothing
                      : update ? (update->snapshot.empty() ? kCommit : kSnapshot)
                      : lost   ? kDropRound
                               : kNothing;
  broadcast_value(group, kind);
  if (kind == kNothing) return false;
  if (kind == kDropRound) {
    drop_lost_round(group, leader, trainer, lost.value_or(0));  // the members learn it from the leader
    return true;
  }
  dropped_in_a_row_ = 0;  // a version came: the job makes progress
  const double t0 = clock_();
  const std::int64_t from = state_.version();
  std::int64_t version = leader ? update->record.number : 0;
  std::uint64_t expected = leader ? update->record.params_hash : 0;
  broadcast_value(group, version);
  broadcast_value(group, expected);
  auto params = trainer.model().params();
  // The fragments the commit changes (one, but for a delta that came late) and their means.
  std::vector<int> fragments = leader ? update->fragments : std::vector<int>{};
  std::uint64_t count = fragments.size(), values = leader ? update->mean_delta.size() : 0;
  broadcast_value(group, count);
  broadcast_value(group, values);
  fragments.resize(count);
  group.broadcast(std::as_writable_bytes(std::span<int>(fragments)), 0);
  if (kind == kCommit) {
    scratch_.resize(values);
    if (leader) scratch_ = std::move(update->mean_delta);
    group.broadcast(std::as_writable_bytes(std::span<float>(scratch_)), 0);
    auto outcome = state_.preview(fragments, scratch_);
    if (outcome.hash != expected)
      throw make_error(ErrorKind::Data, "site ", site_, ": version ", version, " computed here hashes to ",
                       outcome.hash, ", the commit says ", expected, ": this site's copy of version ", from,
                       " differs from its peers'");
    state_.commit(version, std::move(outcome));
  } else {
    std::uint64_t size = leader ? update->snapshot.size() : 0;
    broadcast_value(group, size);
    std::vector<std::byte> snapshot = leader ? std::move(update->snapshot) : std::vector<std::byte>(size);
    group.broadcast(snapshot, 0);
    // The leader checked it against the commit's hash: a failure here is a bug, not a peer's fault.
    state_.adopt(snapshot, expected, params);
    take_up_job(group, leader, trainer, leader ? job_step(update->record.merged) : 0);
    if (!rejoined_after_s_) rejoined_after_s_ = clock_() - started_at_;
  }
  if (kind == kCommit)
    for (const int f : fragments) state_.rebase(params, f);
  const double now = clock_();
  if (last_version_at_ > 0) max_version_gap_s_ = std::max(max_version_gap_s_, now - last_version_at_);
  last_version_at_ = now;
  if (leader) {
    json fields = {{"site", site_},
                   {"step", trainer.state().step},
                   {"version", version},
                   {"from_version", from},
                   {"proposer", update->record.proposer},
                   {"fragments", fragments},
                   {"params_hash", std::to_string(expected)}};
    json entries = json::array();
    for (const auto& e : update->record.entries)
      entries.push_back({{"site", e.site}, {"round", e.round}, {"base", e.base_version}, {"weight", e.weight}});
    fields["deltas"] = entries;
    log_.event(kind == kCommit ? "commit_applied" : "state_adopted", fields);
  }
  applied_s_ += clock_() - t0;
  return true;
}

std::int64_t SiteExchange::job_step(const std::map<std::string, std::int64_t>& merged) const {
  std::int64_t round = cross_->peers_newest_round();
  for (const auto& [site, r] : merged)
    if (site != site_) round = std::max(round, r);
  return (round + 1) * std::max(1, config_.outer.inner_steps / state_.fragments());
}

void SiteExchange::take_up_job(Communicator& group, bool leader, Trainer& trainer, std::int64_t job_step) {
  // A site that was away takes up the job where the others are (the newest round any other site
  // announced or merged): its schedule and data go on from there, and it ends with the others
  // rather than alone, long after them.
  broadcast_value(group, job_step);
  const auto from_step = trainer.state().step;
  trainer.fast_forward(std::min<std::int64_t>(job_step, config_.inner.steps - 1));
  if (leader && trainer.state().step != from_step)
    log_.event("fast_forward", {{"site", site_}, {"from_step", from_step}, {"step", trainer.state().step}});
}

void SiteExchange::pause_outer(bool paused) {
  outer_paused_ = paused;
  if (cross_) cross_->set_proposing(!paused);
}

nlohmann::json SiteExchange::drain(Communicator& group, bool leader, Trainer& trainer) {
  const double t0 = clock_();
  drain_backlog(group, leader, trainer, 0);
  nlohmann::json out = {{"version", state_.version()}, {"step", trainer.state().step}};
  if (leader) {
    cross_->leave();
    out["last_round"] = next_round_ - 1;
    out["ms"] = 1000 * (clock_() - t0);
  }
  return out;
}

void SiteExchange::rejoin(Communicator& group, bool leader, Trainer& trainer) {
  if (!active()) return;
  join(group, leader, trainer);
  if (synchronous()) return;
  take_up_job(group, leader, trainer, leader ? job_step({}) : 0);
}

bool SiteExchange::job_over() { return cross_ && cross_->job_over(); }

void SiteExchange::log_cross_site_events() {
  if (wan_control_) wan_control_->tick();
  for (const auto& e : cross_->take_events())
    log_.event(e.kind, {{"site", site_}, {"peer", e.site}, {"number", e.number}, {"detail", e.detail}});
}

void SiteExchange::leave() const {
  if (!cross_) return;
  const auto lease = cross_->lease();
  if (lease == 0) return;
  try {
    EtcdOptions etcd = etcd_options(config_, site_);
    etcd.timeout = std::chrono::milliseconds(1000);
    if (wan_) etcd.reachable = control_reachable(wan_, site_, wall_clock_s);
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
  ++rounds_;
}

}  // namespace meridian
