// The job's configuration as the cross-site exchange reads it.
#include <doctest/doctest.h>

#include "core/model/model_config.hpp"
#include "sites/replica/exchange_options.hpp"

using namespace meridian;

TEST_CASE("the outer optimizer and the staleness rule come from [outer]") {
  JobConfig c;
  c.outer.lr = 0.8;
  c.outer.momentum = 0.75;
  c.outer.nesterov = false;
  c.outer.delayed_nesterov = 4;
  c.outer.momentum_warmup = 5;
  const OuterOptions o = outer_options(c);
  CHECK(o.lr == doctest::Approx(0.8));
  CHECK(o.momentum == doctest::Approx(0.75));
  CHECK_FALSE(o.nesterov);
  CHECK(o.delay == 4);
  CHECK(o.momentum_warmup == 5);
  CHECK(staleness_decay(c) == StalenessDecay::Inverse);
  c.outer.staleness = JobConfig::Outer::Staleness::Constant;
  CHECK(staleness_decay(c) == StalenessDecay::Constant);
}

TEST_CASE("each codec of [outer] maps to its own kind, the sparse one with the entries it keeps") {
  JobConfig c;
  c.outer.block = 512;
  using C = JobConfig::Outer::Codec;
  const std::pair<C, CodecKind> kinds[] = {{C::Fp32, CodecKind::Fp32}, {C::Bf16, CodecKind::Bf16},
                                           {C::Int8, CodecKind::Int8}, {C::Int4, CodecKind::Int4},
                                           {C::Sparse, CodecKind::Sparse}};
  for (const auto& [codec, kind] : kinds) {
    c.outer.codec = codec;
    const CodecOptions o = codec_options(c);
    CHECK(o.kind == kind);
    CHECK(o.block == 512);
    CHECK(o.keep == (kind == CodecKind::Sparse ? c.outer.sparse_keep() : 0));
  }
}

TEST_CASE("DiLoCo exchanges the whole model, streaming its fragments of whole tensors") {
  JobConfig c;
  c.model = *find_model_preset("tiny");
  c.outer.fragments = 2;
  const std::size_t params = 1000;
  CHECK(fragment_plan(c, params) == whole_model(params));  // diloco: fragments is ignored
  c.outer.algorithm = JobConfig::Outer::Algorithm::Streaming;
  const FragmentPlan plan = fragment_plan(c, params);
  CHECK(plan.size() == 2);
  CHECK(plan[0].size > 0);
  CHECK(plan[1].size > 0);
}
