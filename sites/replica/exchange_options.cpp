#include "sites/replica/exchange_options.hpp"

#include <algorithm>

#include "core/model/param_layout.hpp"
#include "core/util/error.hpp"
#include "crosssite/codec/codec_parts.hpp"
#include "crosssite/round/local_steps.hpp"
#include "intrasite/comm/route_address.hpp"
#include "sites/keys/link_keys.hpp"
#include "transport/link/ucx_link.hpp"
#include "transport/link/zmq_link.hpp"

namespace meridian {

OuterOptions outer_options(const JobConfig& c) {
  OuterOptions o{static_cast<float>(c.outer.lr), static_cast<float>(c.outer.momentum), c.outer.nesterov};
  o.delay = c.outer.delayed_nesterov;
  o.momentum_warmup = c.outer.momentum_warmup;
  return o;
}

StalenessDecay staleness_decay(const JobConfig& c) {
  return c.outer.staleness == JobConfig::Outer::Staleness::Constant ? StalenessDecay::Constant
                                                                    : StalenessDecay::Inverse;
}

FragmentPlan fragment_plan(const JobConfig& c, std::size_t params) {
  if (c.outer.algorithm != JobConfig::Outer::Algorithm::Streaming) return whole_model(params);
  return plan_fragments(ParamLayout::of(c.model), c.outer.fragments);
}

CodecOptions codec_options(const JobConfig& c) {
  using C = JobConfig::Outer::Codec;
  const CodecKind kind = c.outer.codec == C::Fp32   ? CodecKind::Fp32
                         : c.outer.codec == C::Bf16 ? CodecKind::Bf16
                         : c.outer.codec == C::Int8 ? CodecKind::Int8
                         : c.outer.codec == C::Int4 ? CodecKind::Int4
                                                    : CodecKind::Sparse;
  return {kind, c.outer.block, kind == CodecKind::Sparse ? c.outer.sparse_keep() : 0};
}

std::size_t outer_shard_unit(const JobConfig& c) { return part_unit(codec_options(c)); }

std::unique_ptr<Link> make_link(const JobConfig& c, const JobConfig::Site& site) {
  const auto chunk = static_cast<std::size_t>(c.transport.chunk_bytes);
  // A replica on another of the site's hosts than `host` listens on its own address there.
  const std::string address = listen_address_for(site.host);
  switch (c.transport.kind) {
    case JobConfig::Transport::Kind::Zmq:
      return make_zmq_link(address, chunk, {}, site.port, kLinkQueueBytes, link_curve(c, site.name));
    case JobConfig::Transport::Kind::Ucx:
      return make_ucx_link(address, chunk, {}, site.port);
  }
  throw make_error(ErrorKind::Config, "transport.kind ", static_cast<int>(c.transport.kind), " is unknown");
}

RoundPlan round_plan(const JobConfig& c, const std::string& site, int fragments) {
  const auto me = std::find_if(c.sites.begin(), c.sites.end(), [&](const auto& s) { return s.name == site; });
  if (me == c.sites.end()) throw make_error(ErrorKind::Config, "site '", site, "' is not a [[site]] of the job");
  int replicas = 0;
  double fastest = 0;
  for (const auto& s : c.sites) {
    replicas += s.replicas;
    fastest = std::max(fastest, s.speed);
  }
  RoundPlan plan;
  plan.site = site;
  // Dynamic local updates: a slower site ends its rounds after fewer steps, so its deltas come as
  // often as the fastest site's and nobody's round is held back by it.
  const int h = c.outer.dynamic_inner_steps ? local_steps(me->speed, fastest, c.outer.inner_steps) : c.outer.inner_steps;
  // Streaming: an exchange every H / P steps, each one fragment's (H of that fragment's steps).
  plan.inner_steps = std::max(1, h / fragments);
  plan.job_round_steps = std::max(1, c.outer.inner_steps / fragments);
  plan.early_inner_steps = c.outer.early_inner_steps;
  plan.early_steps = c.outer.early_steps;
  plan.total_steps = c.inner.steps;
  plan.overlap = c.outer.overlap;
  plan.eager = c.outer.overlap && c.outer.overlap_update == JobConfig::Outer::OverlapUpdate::Eager;
  plan.overlap_steps = c.outer.overlap_steps;
  plan.eager_share = static_cast<double>(me->replicas) / static_cast<double>(replicas);
  plan.replicas_send = c.transport.exchange == JobConfig::Transport::Exchange::Split;
  return plan;
}

}  // namespace meridian
