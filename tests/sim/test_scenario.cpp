// The cost models against hand-computed values, and a job file turned into a scenario.
#include <doctest/doctest.h>

#include <fstream>

#include "core/model/param_layout.hpp"
#include "sim/des/scenario.hpp"
#include "tests/support/temp_dir.hpp"

using namespace meridian;
using namespace meridian::sim;

TEST_CASE("compute: 6 x params x tokens at peak x MFU") {
  CHECK(step_compute_s(1e9, 1000, 100, 0.5) == doctest::Approx(6e12 / 5e13));
  // INTELLECT-1-like: 10B parameters, 8 x 8192 tokens per GPU step, H100 at 40% MFU.
  CHECK(step_compute_s(10e9, 65536, 989, 0.4) == doctest::Approx(9.94).epsilon(0.001));
}

TEST_CASE("ring all-reduce: 2(n-1)/n x bytes / bandwidth + 2(n-1) hops") {
  CHECK(ring_allreduce_s(1e9, 4, 1e9, 1e-5) == doctest::Approx(1.5 + 6e-5));
  CHECK(ring_allreduce_s(1e9, 1, 1e9, 1e-5) == 0);
  CHECK(ring_allreduce_s(4e10, 1024, 50e9, 0) == doctest::Approx(2 * 1023.0 / 1024 * 0.8));
}

TEST_CASE("codec bytes per parameter, block scales included") {
  using Codec = JobConfig::Outer::Codec;
  const auto bytes = [](Codec codec, int block) {
    JobConfig::Outer outer;
    outer.codec = codec;
    outer.block = block;
    return codec_bytes_per_param(outer);
  };
  CHECK(bytes(Codec::Fp32, 512) == 4);
  CHECK(bytes(Codec::Bf16, 512) == 2);
  CHECK(bytes(Codec::Int8, 512) == doctest::Approx(1 + 4.0 / 512));
  CHECK(bytes(Codec::Int4, 256) == doctest::Approx(0.5 + 4.0 / 256));
  // Sparse, 3% of 512 kept (15): two levels, 15 positions and 15 two-bit codes per block.
  CHECK(bytes(Codec::Sparse, 512) == doctest::Approx((8.0 + 30 + 4) / 512));
}

TEST_CASE("a job file without [sim] simulates itself: its sites, model, codec, H and steps") {
  const JobConfig job = load_job_config(meridian::testing::source_dir() / "configs/demo.toml");
  const Scenario sc = build_scenario(job);
  REQUIRE(sc.sites.size() == 3);
  CHECK(sc.sites[0].name == "us-east");
  CHECK(sc.sites[0].gpus == 1);
  const double params = static_cast<double>(ParamLayout::of(job.model).total());
  CHECK(sc.params == params);
  CHECK(sc.delta_bytes == doctest::Approx(params * (1 + 4.0 / 512)));
  CHECK(sc.grad_bytes == 4 * params);
  CHECK(sc.inner_steps == 50);
  CHECK(sc.steps == 2000);
  CHECK(sc.sites[0].tokens_per_step == 8 * 64);
  CHECK(sc.sites[0].step_s == doctest::Approx(step_compute_s(params, 8 * 64, 989, 0.4)));
}

TEST_CASE("[sim] overrides: measured step time, GPUs, parameters, budget, failures per node-day") {
  const JobConfig job = load_job_config(
      meridian::testing::source_dir() / "configs/demo.toml",
      {"sim.step_time_s=0.25", "sim.gpus_per_site=64", "sim.params=1e9", "sim.tokens_per_gpu_step=4096",
       "sim.token_budget=1e12", "sim.days=2", "sim.seed=9", "sim.startup_s=4"});
  const Scenario sc = build_scenario(job);
  CHECK(sc.sites[1].step_s == 0.25);
  CHECK(sc.sites[1].gpus == 64);
  CHECK(sc.sites[1].tokens_per_step == 64 * 4096);
  CHECK(sc.params == 1e9);
  CHECK(sc.token_budget == 1e12);
  CHECK(sc.horizon_s == 2 * 86400);
  CHECK(sc.seed == 9);
  CHECK(sc.startup_s == 4);
  // An evaluation: eval_windows forward windows against a step's batch, a third of the cost each.
  CHECK(sc.eval_s == doctest::Approx(0.25 * 128 / 8 / 3));
}

TEST_CASE("measured step times per site, and bookkeeping per step") {
  const JobConfig job = load_job_config(meridian::testing::source_dir() / "configs/demo.toml",
                                        {"sim.step_times_s=[0.1, 0.2, 0.3]", "sim.step_overhead_s=0.01"});
  const Scenario sc = build_scenario(job);
  CHECK(sc.sites[2].step_s == 0.3);
  CHECK(sc.sites[0].step_overhead_s == 0.01);
  CHECK(sc.eval_s == doctest::Approx(0.3 * 128 / 8 / 3));  // the slowest site's
}

TEST_CASE("the [wan] links of every pair and the fault schedule, on site indices") {
  const JobConfig job = load_job_config(
      meridian::testing::source_dir() / "configs/demo.toml",
      {"wan.latency_ms=50", "wan.bandwidth_mbps=100"});
  const Scenario sc = build_scenario(job);
  CHECK(sc.wan.link(0, 2).latency_ms == 50);
  CHECK(sc.wan.link(2, 1).bandwidth_mbps == 100);
  CHECK(sc.wan.nominal_s(0, 1, 1.25e6) == doctest::Approx(0.05 + 0.1));
  CHECK_FALSE(sc.split_exchange);
}

TEST_CASE("[wan] stream_mbps caps one flow, and [sim] exchange = \"split\" spreads a delta over the replicas' flows") {
  const JobConfig job = load_job_config(meridian::testing::source_dir() / "configs/demo.toml",
                                        {"wan.bandwidth_mbps=1000", "wan.stream_mbps=100", "sim.exchange=split"});
  const Scenario sc = build_scenario(job);
  CHECK(sc.split_exchange);
  CHECK(sc.wan.link(0, 1).stream_mbps == 100);
  CHECK(sc.wan.nominal_s(0, 1, 1.25e6) == doctest::Approx(0.1));  // the leader's one flow: 100 Mbit/s
}

TEST_CASE("[[wan.link]] pairs and [[wan.fault]] entries reach the WAN model") {
  const JobConfig od = load_job_config(meridian::testing::source_dir() / "configs/examples/sim-opendiloco.toml");
  const Scenario sc = build_scenario(od);
  REQUIRE(sc.sites.size() == 4);
  CHECK(sc.wan.link(1, 0).latency_ms == 40);  // fi <-> ca crosses the Atlantic
  CHECK(sc.wan.link(0, 2).latency_ms == 35);  // ca <-> us-1: the cross-country default
  CHECK(sc.delta_bytes == doctest::Approx(2 * 1.1e9));

  meridian::testing::TempDir dir("sim-scenario");
  std::ofstream(dir / "job.toml") << "[data]\npath = \"x\"\n[[site]]\nname = \"a\"\n[[site]]\nname = \"b\"\n"
                                     "[[site]]\nname = \"c\"\n[wan]\nlatency_ms = 10.0\nbandwidth_mbps = 80.0\n"
                                     "[[wan.fault]]\nkind = \"partition\"\nsites = [\"c\"]\nfrom_s = 5.0\nto_s = 9.0\n";
  Scenario faulty = build_scenario(load_job_config(dir / "job.toml"));
  const double burst = 65536 * 8 / 80e6;  // the emulator's bucket lets 64 KiB out at once
  CHECK(faulty.wan.transfer_s(0, 2, 1e6, 6) == doctest::Approx(3 + 0.1 - burst + 0.01));
  CHECK(faulty.wan.transfer_s(0, 1, 1e6, 6) == doctest::Approx(0.1 - burst + 0.01));
}
