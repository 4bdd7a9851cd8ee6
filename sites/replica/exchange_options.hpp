#pragma once
// What a job's configuration means to the cross-site exchange: the outer optimizer, the codec, the
// fragments of the model and the site's link, each read from the typed JobConfig.
#include <cstddef>
#include <memory>

#include "core/config/job_config.hpp"
#include "sync/codec/codec.hpp"
#include "sync/outer/delta_mean.hpp"
#include "sync/outer/outer_optimizer.hpp"
#include "sync/round/fragments.hpp"
#include "transport/link/link.hpp"

namespace meridian {

OuterOptions outer_options(const JobConfig& c);
StalenessDecay staleness_decay(const JobConfig& c);
// Streaming DiLoCo's fragments of the job's model; DiLoCo and sync: the whole model.
FragmentPlan fragment_plan(const JobConfig& c, std::size_t params);
CodecOptions codec_options(const JobConfig& c);
// The site's end of the WAN: ZeroMQ (over CURVE where the job has keys) or UCX, on its host and port.
std::unique_ptr<Link> make_link(const JobConfig& c, const JobConfig::Site& site);

}  // namespace meridian
