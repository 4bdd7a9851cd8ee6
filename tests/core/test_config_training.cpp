// How a site trains: [replicas], [parallel], [inner]'s schedule, [log] samples and [launch].
#include <doctest/doctest.h>

#include <algorithm>

#include "tests/support/config_files.hpp"

using namespace meridian;
using namespace meridian::testing;
namespace fs = std::filesystem;

TEST_CASE("[replicas]: defaults, values, and errors with file:line") {
  meridian::testing::TempDir dir("cfg-replicas");
  std::ofstream(dir / "d.txt") << "data";
  std::ofstream(dir / "ok.toml") << "[data]\npath = \"d.txt\"\n[replicas]\ncount = 3\nrestart = false\n"
                                    "on_failure = \"scale\"\nsdc_every = 10\nstore_port = 29500\n";
  const auto c = load_job_config(dir / "ok.toml");
  CHECK(c.replicas.count == 3);
  CHECK_FALSE(c.replicas.restart);
  CHECK(c.replicas.on_failure == JobConfig::Replicas::OnFailure::Scale);
  CHECK(c.replicas.sdc_every == 10);
  CHECK(c.replicas.store_port == 29500);
  CHECK(load_job_config(dir / "ok.toml", {"replicas.count=1"}).replicas.count == 1);

  std::ofstream(dir / "bad.toml") << "[data]\npath = \"d.txt\"\n[replicas]\ncount = 0\nrestart = 1\n"
                                     "on_failure = \"retry\"\nstore_port = 70000\n";
  const auto r = try_load_job_config(dir / "bad.toml");
  REQUIRE(std::holds_alternative<std::vector<ConfigProblem>>(r));
  std::string all;
  for (const auto& p : std::get<std::vector<ConfigProblem>>(r)) all += p.to_string() + "\n";
  CHECK(all.find("bad.toml:4: replicas.count: expected an integer >= 1, found 0") != std::string::npos);
  CHECK(all.find("bad.toml:5: replicas.restart: expected true or false, found") != std::string::npos);
  CHECK(all.find("bad.toml:6: replicas.on_failure: expected one of \"keep_batch\", \"scale\"") != std::string::npos);
  CHECK(all.find("bad.toml:7: replicas.store_port: expected an integer <= 65535, found 70000") != std::string::npos);
}

TEST_CASE(
    "[parallel] zero_stage: 0 by default, 1 to 3 on CPU AdamW sites, refused beside what cannot work, naming both") {
  TempDir dir("cfg-parallel");
  CHECK(load_ok(write(dir / "job.toml", kData)).parallel.zero_stage == 0);
  CHECK(load_ok(write(dir / "job.toml", kData + "[parallel]\nzero_stage = 1\n")).parallel.zero_stage == 1);
  CHECK(load_ok(write(dir / "job.toml", kData + "[parallel]\nzero_stage = 2\n")).parallel.zero_stage == 2);
  CHECK(load_ok(write(dir / "job.toml", kData + "[checkpoint]\nper_replica = true\n[parallel]\nzero_stage = 1\n"))
            .checkpoint.per_replica);
  CHECK(only_problem(dir, kData + "[checkpoint]\nper_replica = true\n")
            .find("job.toml:4: checkpoint.per_replica: per_replica = true writes each replica's part of a sharded "
                  "optimizer "
                  "state, and parallel.zero_stage (its default) is 0") != std::string::npos);
  CHECK(load_ok(write(dir / "job.toml", kData + "[parallel]\nzero_stage = 3\n")).parallel.zero_stage == 3);
  CHECK(only_problem(dir, kData + "[parallel]\nzero_stage = 4\n")
            .find("job.toml:4: parallel.zero_stage: expected 0, 1, 2 or 3, found 4") != std::string::npos);
  CHECK(only_problem(dir, kData + "[inner]\noptimizer = \"muon\"\n[parallel]\nzero_stage = 2\n")
            .find("zero_stage = 2 shards AdamW's moments") != std::string::npos);
  CHECK(only_problem(dir, kData + "[parallel]\nzero_stage = -1\n")
            .find("parallel.zero_stage: expected an integer >= 0, found -1") != std::string::npos);
  const auto muon = only_problem(dir, kData + "[inner]\noptimizer = \"muon\"\n[parallel]\nzero_stage = 1\n");
  CHECK(muon.find("job.toml:6: parallel.zero_stage: zero_stage = 1 shards AdamW's moments, and inner.optimizer "
                  "(line 4) is \"muon\"") != std::string::npos);
  const auto overlap = only_problem(dir, kData + "[replicas]\noverlap_allreduce = true\n[parallel]\nzero_stage = 1\n");
  CHECK(overlap.find("parallel.zero_stage:") != std::string::npos);
  CHECK(overlap.find("replicas.overlap_allreduce (line 4)") != std::string::npos);
  const std::string two_sites = "[[site]]\nname = \"a\"\n[[site]]\nname = \"b\"\n";
  const auto sync =
      only_problem(dir, kData + "[outer]\nalgorithm = \"sync\"\n" + two_sites + "[parallel]\nzero_stage = 1\n");
  CHECK(sync.find("outer.algorithm (line 4) = \"sync\"") != std::string::npos);
  CHECK(load_ok(write(dir / "job.toml", kData + two_sites + "[parallel]\nzero_stage = 1\n")).parallel.zero_stage == 1);
  const auto cuda = only_problem(dir, kData + two_sites + "device = \"cuda\"\n[parallel]\nzero_stage = 1\n");
  CHECK(cuda.find("site[1] (\"b\") has device = \"cuda\"") != std::string::npos);
  CHECK(only_problem(dir, kData + "[parallel]\nzero_stage = 1\n", {"inner.optimizer=sgd"})
            .find("inner.optimizer (--set inner.optimizer=sgd) is \"sgd\"") != std::string::npos);
}

TEST_CASE(
    "[parallel] shard_outer: on by default where the weights are sharded (stage 3), DiLoCo's outer state of two sites "
    "or more, refused beside the rest naming both") {
  TempDir dir("cfg-shard-outer");
  const std::string two_sites = "[[site]]\nname = \"a\"\n[[site]]\nname = \"b\"\n";
  CHECK_FALSE(load_ok(write(dir / "job.toml", kData + two_sites)).parallel.shard_outer);
  CHECK_FALSE(
      load_ok(write(dir / "job.toml", kData + two_sites + "[parallel]\nzero_stage = 2\n")).parallel.shard_outer);
  // Stage 3 left out of it: the outer state is cut as the weights are, and validate says why.
  const auto stage3 = load_ok(write(dir / "job.toml", kData + two_sites + "[parallel]\nzero_stage = 3\n"));
  CHECK(stage3.parallel.shard_outer);
  CHECK(std::any_of(stage3.derived.begin(), stage3.derived.end(), [](const std::string& line) {
    return line.starts_with("parallel.shard_outer = true (zero_stage = 3");
  }));
  CHECK_FALSE(load_ok(write(dir / "job.toml", kData + two_sites + "[parallel]\nzero_stage = 3\nshard_outer = false\n"))
                  .parallel.shard_outer);
  // ... but only where a sharded one can work: elsewhere it stays whole, and nothing is refused.
  CHECK_FALSE(load_ok(write(dir / "job.toml", kData + "[parallel]\nzero_stage = 3\n")).parallel.shard_outer);
  CHECK_FALSE(load_ok(write(dir / "job.toml", kData + "[outer]\nalgorithm = \"streaming\"\nfragments = 2\n" +
                                                  two_sites + "[parallel]\nzero_stage = 3\n"))
                  .parallel.shard_outer);
  CHECK_FALSE(load_ok(write(dir / "job.toml", kData + "[outer]\noverlap_update = \"eager\"\n" + two_sites +
                                                  "[parallel]\nzero_stage = 3\n"))
                  .parallel.shard_outer);
  CHECK(load_ok(write(dir / "job.toml", kData + two_sites + "[parallel]\nshard_outer = true\n")).parallel.shard_outer);
  CHECK(
      only_problem(dir, kData + "[parallel]\nshard_outer = true\n")
          .find(
              "job.toml:4: parallel.shard_outer: shard_outer = true shards DiLoCo's outer state, and a job of one site "
              "keeps none") != std::string::npos);
  const auto sync =
      only_problem(dir, kData + "[outer]\nalgorithm = \"sync\"\n" + two_sites + "[parallel]\nshard_outer = true\n");
  CHECK(
      sync.find("parallel.shard_outer: shard_outer = true shards DiLoCo's outer state, and outer.algorithm (line 4) = "
                "\"sync\" keeps none") != std::string::npos);
  const auto streaming = only_problem(dir, kData + "[outer]\nalgorithm = \"streaming\"\nfragments = 2\n" + two_sites +
                                               "[parallel]\nshard_outer = true\n");
  CHECK(streaming.find("outer.algorithm (line 4) = \"streaming\" keeps it per fragment") != std::string::npos);
  const auto eager = only_problem(
      dir, kData + "[outer]\noverlap_update = \"eager\"\n" + two_sites + "[parallel]\nshard_outer = true\n");
  CHECK(eager.find("outer.overlap_update (line 4) = \"eager\" steps the whole model ahead") != std::string::npos);
  const auto cuda = only_problem(dir, kData + two_sites + "device = \"cuda\"\n[parallel]\nshard_outer = true\n");
  CHECK(cuda.find("shard_outer = true shards DiLoCo's outer state, and its parts go between a site's CPU replicas for "
                  "now, and site[1] (\"b\") has device = \"cuda\"") != std::string::npos);
}

TEST_CASE("[parallel] recompute: none by default, cheap and full, refused on a CUDA site naming both") {
  TempDir dir("cfg-recompute");
  CHECK(load_ok(write(dir / "job.toml", kData)).parallel.recompute == Recompute::None);
  CHECK(load_ok(write(dir / "job.toml", kData + "[parallel]\nrecompute = \"full\"\n")).parallel.recompute ==
        Recompute::Full);
  CHECK(load_ok(write(dir / "job.toml", kData), {"parallel.recompute=cheap"}).parallel.recompute == Recompute::Cheap);
  CHECK(only_problem(dir, kData + "[parallel]\nrecompute = \"all\"\n")
            .find("job.toml:4: parallel.recompute: expected one of \"none\", \"cheap\", \"full\", found \"all\"") !=
        std::string::npos);
  const std::string sites = "[[site]]\nname = \"a\"\ndevice = \"cuda\"\n[[site]]\nname = \"b\"\n";
  CHECK(only_problem(dir, kData + sites + "[parallel]\nrecompute = \"cheap\"\n")
            .find("parallel.recompute: recompute = \"cheap\" runs in the CPU trainer for now, and site[0] (\"a\") has "
                  "device = \"cuda\"") != std::string::npos);
}

TEST_CASE("[log] samples: none by default, read, and refused where no text or no whole weights come, naming why") {
  TempDir dir("cfg-samples");
  const auto d = load_ok(write(dir / "job.toml", kData));
  CHECK(d.log.sample_every == 0);
  CHECK(d.log.sample_tokens == 64);
  CHECK(d.log.sample_prompt.empty());
  const auto c = load_ok(
      write(dir / "job.toml", kData + "[log]\nsample_every = 50\nsample_tokens = 20\nsample_prompt = \"ROMEO:\"\n"));
  CHECK(c.log.sample_every == 50);
  CHECK(c.log.sample_tokens == 20);
  CHECK(c.log.sample_prompt == "ROMEO:");
  CHECK(only_problem(dir, kData + "[log]\nsample_tokens = 0\n")
            .find("job.toml:4: log.sample_tokens: expected an integer >= 1, found 0") != std::string::npos);
  CHECK(
      only_problem(dir, kData + "[model]\nvocab = 512\n[log]\nsample_every = 5\n")
          .find(
              "job.toml:6: log.sample_every: a sample is text, and the data names no [data] tokenizer for a vocabulary "
              "of 512") != std::string::npos);
  CHECK(only_problem(dir, kData + "[log]\nsample_every = 5\n[parallel]\nzero_stage = 3\n")
            .find("job.toml:4: log.sample_every: zero_stage = 3 keeps no replica's weights whole") !=
        std::string::npos);
}

TEST_CASE(
    "[inner] schedule = wsd: its cooldown's fraction and shape, refused under another schedule or over the warmup") {
  TempDir dir("cfg-wsd");
  const auto d = load_ok(write(dir / "job.toml", kData));
  CHECK(d.inner.decay_fraction == 0.2);
  CHECK(d.inner.decay_shape == DecayShape::OneMinusSqrt);
  const auto c = load_ok(write(dir / "job.toml", kData + "[inner]\nschedule = \"wsd\"\nsteps = 100\nwarmup_steps = 10\n"
                                                         "decay_fraction = 0.3\ndecay_shape = \"cosine\"\n"));
  CHECK(c.inner.schedule == ScheduleKind::Wsd);
  CHECK(c.inner.decay_fraction == 0.3);
  CHECK(c.inner.decay_shape == DecayShape::Cosine);
  JobConfig again = load_ok(write(dir / "resolved.toml", to_toml(c)));  // what validate prints reads back
  again.source = c.source;
  again.derived = c.derived;
  CHECK(again == c);
  CHECK(load_ok(write(dir / "job.toml", kData + "[inner]\nschedule = \"wsd\"\n"), {"inner.decay_shape=\"linear\""})
            .inner.decay_shape == DecayShape::Linear);

  CHECK(only_problem(dir, kData + "[inner]\nschedule = \"wsd\"\ndecay_shape = \"sqrt\"\n") ==
        (dir / "job.toml").string() +
            ":5: inner.decay_shape: expected one of \"linear\", \"1-sqrt\", \"cosine\", found \"sqrt\"");
  CHECK(only_problem(dir, kData + "[inner]\nschedule = \"wsd\"\ndecay_fraction = 1\n") ==
        (dir / "job.toml").string() + ":5: inner.decay_fraction: expected a number in (0, 1), found 1");
  CHECK(
      only_problem(dir, kData + "[inner]\ndecay_fraction = 0.1\n") ==
      (dir / "job.toml").string() +
          ":4: inner.decay_fraction: only shapes the cooldown of schedule = \"wsd\", and inner.schedule (its default) "
          "is \"cosine\"");
  CHECK(only_problem(dir, kData + "[inner]\nschedule = \"linear\"\ndecay_shape = \"linear\"\n") ==
        (dir / "job.toml").string() +
            ":5: inner.decay_shape: only shapes the cooldown of schedule = \"wsd\", and inner.schedule (line 4) is "
            "\"linear\"");
  // 100 steps: a warmup of 80 and a cooldown of 20 leave no step at the peak, reported where each was set.
  CHECK(
      only_problem(dir, kData + "[inner]\nschedule = \"wsd\"\nsteps = 100\nwarmup_steps = 80\n") ==
      (dir / "job.toml").string() +
          ":4: inner.schedule: a cooldown of 20 steps (decay_fraction 0.2) after a warmup of 80 leaves no step at the "
          "peak in 100 steps");
  CHECK(only_problem(dir, kData + "[inner]\nschedule = \"wsd\"\nsteps = 100\ndecay_fraction = 0.5\n",
                     {"inner.warmup_steps=50"}) ==
        (dir / "job.toml").string() +
            ":6: inner.decay_fraction: a cooldown of 50 steps (decay_fraction 0.5) after a warmup of 50 leaves no step "
            "at the peak in 100 steps");
  CHECK(load_ok(write(dir / "job.toml", kData + "[inner]\nschedule = \"wsd\"\nsteps = 100\nwarmup_steps = 79\n"))
            .inner.warmup_steps == 79);
}

TEST_CASE("[launch]: defaults, values, and errors with file:line") {
  meridian::testing::TempDir dir("cfg-launch");
  std::ofstream(dir / "d.txt") << "data";
  std::ofstream(dir / "ok.toml") << "[data]\npath = \"d.txt\"\n";
  const auto d = load_job_config(dir / "ok.toml");
  CHECK(d.launch.max_site_restarts == 3);
  CHECK(d.launch.restart_backoff_ms == 1000);
  const auto c = load_job_config(dir / "ok.toml", {"launch.max_site_restarts=0", "launch.restart_backoff_ms=20"});
  CHECK(c.launch.max_site_restarts == 0);
  CHECK(c.launch.restart_backoff_ms == 20);
  std::ofstream(dir / "bad.toml") << "[data]\npath = \"d.txt\"\n[launch]\nmax_site_restarts = -1\n";
  const auto lines = problems_of(dir / "bad.toml");
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].find("bad.toml:4: launch.max_site_restarts: expected an integer >= 0, found -1") != std::string::npos);
}
