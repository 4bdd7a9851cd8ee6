#include "sites/replica/site_exchange.hpp"

#include <chrono>
#include <cstring>

#include "core/runlog/run_log.hpp"
#include "core/train/trainer.hpp"
#include "core/util/error.hpp"
#include "core/util/hash.hpp"
#include "sync/control/etcd_client.hpp"
#include "sync/round/cross_site.hpp"
#include "transport/link/ucx_link.hpp"
#include "transport/link/zmq_link.hpp"

namespace meridian {
namespace {

using namespace std::chrono_literals;

// How long the leader pumps before the members hear from it again: short against any collective timeout.
constexpr auto kAttempt = 200ms;

OuterOptions outer_options(const JobConfig& c) {
  return {static_cast<float>(c.outer.lr), static_cast<float>(c.outer.momentum), c.outer.nesterov};
}

CodecOptions codec_options(const JobConfig& c) {
  using C = JobConfig::Outer::Codec;
  const CodecKind kind = c.outer.codec == C::Fp32   ? CodecKind::Fp32
                         : c.outer.codec == C::Bf16 ? CodecKind::Bf16
                         : c.outer.codec == C::Int8 ? CodecKind::Int8
                                                    : CodecKind::Int4;
  return {kind, c.outer.block};
}

std::unique_ptr<Link> make_link(const JobConfig& c, const JobConfig::Site& site) {
  const auto chunk = static_cast<std::size_t>(c.transport.chunk_bytes);
  switch (c.transport.kind) {
    case JobConfig::Transport::Kind::Zmq: return make_zmq_link(site.host, chunk, {}, site.port);
    case JobConfig::Transport::Kind::Ucx: return make_ucx_link(site.host, chunk, {}, site.port);
  }
  throw make_error(ErrorKind::Config, "transport.kind ", static_cast<int>(c.transport.kind), " is unknown");
}

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
      state_(initial, outer_options(config), codec_options(config), config.outer.error_feedback) {
  data_replicas_ = 0;
  bool found = false;
  for (const auto& s : config_.sites) {
    if (s.name == site_) {
      data_offset_ = data_replicas_;
      found = true;
    }
    data_replicas_ += s.replicas;
  }
  if (!found) throw make_error(ErrorKind::Config, "site '", site_, "' is not a [[site]] of the job");
  if (active() && config_.outer.algorithm == JobConfig::Outer::Algorithm::Streaming)
    throw make_error(ErrorKind::Config, "outer.algorithm = \"streaming\" is not available yet: use \"diloco\" or \"sync\"");
  if (active() && config_.control.endpoints.empty())
    throw make_error(ErrorKind::Config, "job '", config_.job.name, "' has ", sites_,
                     " sites but no [control] endpoints: start it with `meridian launch`, or name its etcd cluster");
}

SiteExchange::~SiteExchange() = default;

void SiteExchange::ensure_leader_side() {
  if (cross_) return;
  EtcdOptions etcd;
  etcd.endpoints = config_.control.endpoints;
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
  o.rule.quorum = config_.outer.quorum;
  o.rule.staleness.max_staleness = config_.outer.max_staleness;
  o.etcd = etcd;
  o.lease_ttl_s = config_.control.lease_ttl_s;
  o.keepalive = std::chrono::milliseconds(config_.control.keepalive_ms);
  cross_ = std::make_unique<CrossSite>(o, *etcd_, *link_, clock_);
  log_.event("link_open", {{"site", site_}, {"address", link_->address()}, {"transport", to_string(config_.transport.kind)}});
}

void SiteExchange::wait_together(Communicator& group, bool leader, const std::function<bool()>& attempt) {
  while (true) {
    std::uint8_t done = leader && attempt() ? 1 : 0;
    broadcast_value(group, done);
    if (done) return;
  }
}

void SiteExchange::join(Communicator& group, bool leader) {
  if (!active()) return;
  if (leader) ensure_leader_side();
  const double t0 = clock_();
  wait_together(group, leader, [&] { return cross_->poll_join(kAttempt); });
  if (leader) log_.event("sites_joined", {{"site", site_}, {"sites", sites_}, {"ms", 1000 * (clock_() - t0)}});
}

bool SiteExchange::round_ends(std::int64_t steps_done) const {
  return active() && !synchronous() &&
         (steps_done % config_.outer.inner_steps == 0 || steps_done == config_.inner.steps);
}

void SiteExchange::end_round(Communicator& group, bool leader, Trainer& trainer, std::int64_t steps_in_round) {
  const double t0 = clock_();
  auto params = trainer.model().params();
  // Every member encodes: the bytes are only sent by the leader, but the error-feedback residual
  // they leave behind must be the same on every member.
  auto encoded = state_.encode_delta(params);
  const std::int64_t base = state_.version();
  std::optional<CrossSite::Commit> commit;
  if (leader) {
    ensure_leader_side();
    const std::int64_t tokens = steps_in_round * trainer.grad_accum() * group.size() *
                                config_.inner.batch_per_replica * config_.model.seq_len;
    DeltaAnnouncement a{site_, rounds_, base, tokens, encoded.size(), hash64(std::span<const std::byte>(encoded))};
    cross_->submit(a, std::move(encoded));
  }
  wait_together(group, leader, [&] {
    commit = cross_->poll_commit(state_, kAttempt);
    return commit.has_value();
  });
  std::int64_t version = leader ? commit->record.number : 0;
  std::uint64_t expected = leader ? commit->record.params_hash : 0;
  std::size_t merged = leader ? commit->record.entries.size() : 0;
  scratch_.resize(state_.size());
  if (leader) scratch_ = std::move(commit->mean_delta);
  broadcast_value(group, version);
  broadcast_value(group, expected);
  broadcast_value(group, merged);
  group.broadcast(std::as_writable_bytes(std::span<float>(scratch_)), 0);
  auto outcome = state_.preview(scratch_);
  if (outcome.hash != expected)
    throw make_error(ErrorKind::Data, "site ", site_, ": version ", version, " computed here hashes to ", outcome.hash,
                     ", the commit says ", expected, ": this site's copy of version ", base, " differs from its peers'");
  state_.commit(version, std::move(outcome));
  std::copy(state_.global().begin(), state_.global().end(), params.begin());
  ++rounds_;
  if (leader)
    log_.event("commit_applied", {{"site", site_},
                                  {"version", version},
                                  {"round", rounds_ - 1},
                                  {"deltas", merged},
                                  {"proposer", commit->record.proposer},
                                  {"params_hash", std::to_string(expected)},
                                  {"wait_ms", 1000 * (clock_() - t0)}});
}

void SiteExchange::reduce_across_sites(Communicator& group, bool leader, std::int64_t step, std::span<float> grads,
                                       double& loss) {
  scratch_.resize(grads.size() + 1);
  std::copy(grads.begin(), grads.end(), scratch_.begin());
  scratch_.back() = static_cast<float>(loss);
  if (leader) {
    ensure_leader_side();
    cross_->send_gradients(step, scratch_);
  }
  wait_together(group, leader, [&] { return cross_->poll_gradients(step, scratch_, kAttempt); });
  group.broadcast(std::as_writable_bytes(std::span<float>(scratch_)), 0);
  std::copy(scratch_.begin(), scratch_.end() - 1, grads.begin());
  loss = scratch_.back();
  ++rounds_;
}

nlohmann::json SiteExchange::summary(std::size_t params) const {
  nlohmann::json out = {{"site", site_},
                        {"sites", sites_},
                        {"algorithm", to_string(config_.outer.algorithm)},
                        {"codec", synchronous() ? "fp32" : to_string(config_.outer.codec)},
                        {"params", params},
                        {"rounds", rounds_},
                        {"version", state_.version()}};
  if (!cross_) return out;
  const auto t = cross_->traffic();
  out["wan_bytes_sent"] = t.bytes_sent;
  out["wan_bytes_received"] = t.bytes_received;
  out["deltas_refused"] = t.deltas_refused;
  out["frames_refused"] = t.frames_refused;
  out["delta_requests"] = t.requests_sent;
  out["commits_proposed"] = t.commits_proposed;
  out["commits_won"] = t.commits_won;
  // What one round moves per parameter and per receiving peer: ~1 for int8, ~0.5 for int4.
  if (rounds_ > 0 && sites_ > 1)
    out["bytes_per_param_round"] =
        static_cast<double>(t.bytes_sent) / (static_cast<double>(params) * rounds_ * (sites_ - 1));
  return out;
}

}  // namespace meridian
