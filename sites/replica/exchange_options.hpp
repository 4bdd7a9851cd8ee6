#pragma once
// What a job's configuration means to the cross-site exchange: the outer optimizer, the codec, the
// fragments of the model and the site's link, each read from the typed JobConfig.
#include <cstddef>
#include <memory>

#include "core/config/job_config.hpp"
#include "crosssite/codec/codec.hpp"
#include "crosssite/outer/delta_mean.hpp"
#include "crosssite/outer/outer_optimizer.hpp"
#include "crosssite/outer/fragments.hpp"
#include "crosssite/round/round_driver.hpp"
#include "transport/link/link.hpp"

namespace meridian {

OuterOptions outer_options(const JobConfig& c);
StalenessDecay staleness_decay(const JobConfig& c);
// Streaming DiLoCo's fragments of the job's model; DiLoCo and sync: the whole model.
FragmentPlan fragment_plan(const JobConfig& c, std::size_t params);
CodecOptions codec_options(const JobConfig& c);
// The unit a sharded outer state is cut in ([parallel] shard_outer): whole shard units and whole
// codec blocks, so that each part encodes and hashes alone (crosssite/codec/codec_parts.hpp).
std::size_t outer_shard_unit(const JobConfig& c);
// The round as site `site` runs it: its steps between exchanges (H, or fewer on a slower site with
// [outer] dynamic_inner_steps, divided by `fragments`), the overlap and its bounds, its share of
// the job's replicas. Error(Config) when the site is not one of the job's.
RoundPlan round_plan(const JobConfig& c, const std::string& site, int fragments);
// The site's end of the WAN: ZeroMQ (over CURVE where the job has keys) or UCX, on its host and port.
std::unique_ptr<Link> make_link(const JobConfig& c, const JobConfig::Site& site);

}  // namespace meridian
