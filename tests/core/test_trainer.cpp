// The training loop end to end: golden losses of a tiny model, exact resume, a wsd schedule (and a
// run extended past its plan), fallback past a corrupted checkpoint, a checkpoint from another
// model shape refused, and samples of text.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "core/checkpoint/store.hpp"
#include "core/config/job_config.hpp"
#include "core/generate/generator.hpp"
#include "core/io/env.hpp"
#include "core/runlog/run_log.hpp"
#include "core/train/train_checkpoint.hpp"
#include "core/train/trainer.hpp"
#include "core/util/error.hpp"
#include "core/util/hash.hpp"
#include "tests/support/jsonl.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/tiny_job.hpp"
#include "tests/support/trainer_runs.hpp"

using namespace meridian;
using meridian::testing::logged_losses;
using meridian::testing::ResumedRun;
using meridian::testing::TempDir;
using meridian::testing::TrainerRun;
using meridian::testing::fake_clock;
using meridian::testing::tiny_job;

namespace {

std::uint64_t params_hash(Trainer& t) { return hash64(std::span<const float>(t.model().params())); }

}  // namespace

TEST_CASE("golden: a tiny model with a fixed seed gives known losses for 10 steps") {
  TempDir dir("golden");
  const auto config = tiny_job(dir, "run", {"inner.steps=10"});
  RunLog log(config.job.run_dir);
  Trainer trainer(config, posix_env(), log, nullptr, fake_clock);
  std::vector<double> losses;
  for (int i = 0; i < 10; ++i) losses.push_back(trainer.step().loss);
  // Recorded from this implementation; a change to the model, the data order, the optimizer or
  // the kernels that moves them is a change in results and must be deliberate.
  const std::vector<double> golden = {5.531912, 5.449537, 5.291548, 5.146682, 5.095805,
                                      4.942346, 4.872265, 4.819913, 4.792775, 4.813665};
  for (int i = 0; i < 10; ++i) CHECK_MESSAGE(losses[i] == doctest::Approx(golden[i]).epsilon(1e-5), "step ", i);
}

TEST_CASE("resume is exact: interrupted and resumed equals uninterrupted, bit for bit (AdamW, Muon)") {
  for (const std::string optimizer : {"adamw", "muon"}) {
    CAPTURE(optimizer);
    TempDir dir("resume-" + optimizer);
    const std::vector<std::string> sets{"inner.optimizer=\"" + optimizer + "\""};
    const auto straight_cfg = tiny_job(dir, "straight", sets);
    TrainerRun straight(straight_cfg);
    const auto straight_losses = logged_losses(straight_cfg.job.run_dir);
    REQUIRE(straight_losses.size() == 20);

    const auto cfg = tiny_job(dir, "resumed", sets);
    ResumedRun resumed(cfg, 9);
    CHECK(resumed.first_steps == 9);  // stops after 9 steps and checkpoints
    CHECK(resumed.summary.resumed_from_step == 9);
    CHECK(resumed.summary.steps == 20);
    const auto losses = logged_losses(cfg.job.run_dir);
    REQUIRE(losses.size() == 20);
    for (int i = 0; i < 20; ++i) CHECK_MESSAGE(losses[i] == straight_losses[i], "step ", i);  // exact
    CHECK(params_hash(resumed.trainer) == params_hash(straight.trainer));
  }
}

TEST_CASE("32-bit token ids end to end: a Llama of 70,000 tokens trains on a version-7 shard and resumes exactly") {
  TempDir dir("ids32");
  // An llm.c 32-bit shard (magic 20240801, version 7) whose ids run past 65,535.
  const auto shard = dir / "train.bin";
  {
    std::ofstream out(shard, std::ios::binary);
    const std::int32_t header[3] = {20240801, 7, 6000};
    out.write(reinterpret_cast<const char*>(header), sizeof header);
    const std::vector<std::int32_t> zeros(253, 0);
    out.write(reinterpret_cast<const char*>(zeros.data()), 253 * 4);
    for (std::uint32_t i = 0; i < 6000; ++i) {
      const std::uint32_t id = (i * 7919u) % 70000u;
      out.write(reinterpret_cast<const char*>(&id), 4);
    }
  }
  const std::vector<std::string> sets{"data.path=\"" + shard.string() + "\"", "data.format=\"llmc-bin\"",
                                      "model.preset=\"llama-small\"", "model.vocab=70000", "model.n_layer=1",
                                      "model.d_model=16", "model.n_head=2", "model.n_kv_head=1",
                                      "model.ffn_hidden=32", "model.seq_len=16", "model.context=16"};
  const auto straight_cfg = tiny_job(dir, "straight", sets);
  TrainerRun straight(straight_cfg);
  const auto straight_losses = logged_losses(straight_cfg.job.run_dir);
  REQUIRE(straight_losses.size() == 20);
  CHECK(straight_losses.front() == doctest::Approx(std::log(70000.0)).epsilon(0.02));  // ids over the whole vocabulary
  // It learns: the last five steps' mean loss below the first five's.
  const auto mean5 = [](auto begin) { return std::accumulate(begin, begin + 5, 0.0) / 5; };
  CHECK_MESSAGE(mean5(straight_losses.end() - 5) < mean5(straight_losses.begin()), straight_losses);

  const auto cfg = tiny_job(dir, "resumed", sets);
  ResumedRun resumed(cfg, 9);
  CHECK(resumed.summary.resumed_from_step == 9);
  const auto losses = logged_losses(cfg.job.run_dir);
  REQUIRE(losses.size() == 20);
  for (int i = 0; i < 20; ++i) CHECK_MESSAGE(losses[i] == straight_losses[i], "step ", i);
  CHECK(params_hash(resumed.trainer) == params_hash(straight.trainer));
}

TEST_CASE("a corrupted newest checkpoint is refused with a message and the previous one is used") {
  TempDir dir("corrupt");
  const auto ref_cfg = tiny_job(dir, "ref");
  RunLog ref_log(ref_cfg.job.run_dir);
  Trainer ref(ref_cfg, posix_env(), ref_log, nullptr, fake_clock);
  ref.run();

  const auto cfg = tiny_job(dir, "run", {"checkpoint.every=5"});
  {
    RunLog log(cfg.job.run_dir);
    Trainer first(cfg, posix_env(), log, nullptr, fake_clock);
    first.run(12);  // checkpoints at 5, 10 and 12
  }
  const auto ckpt_dir = cfg.job.run_dir / "checkpoints";
  const auto newest = ckpt_dir / "ckpt-0000000012.mrdn";
  REQUIRE(std::filesystem::exists(newest));
  {
    std::fstream f(newest, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(4000);
    f.put('\x5a');
  }
  RunLog log(cfg.job.run_dir);
  Trainer second(cfg, posix_env(), log, nullptr, fake_clock);
  const auto summary = second.run();
  CHECK(summary.resumed_from_step == 10);
  CHECK(params_hash(second) == params_hash(ref));
  std::ifstream events(cfg.job.run_dir / "events.jsonl");
  std::stringstream all;
  all << events.rdbuf();
  CHECK(all.str().find("checkpoint_rejected") != std::string::npos);
  CHECK(all.str().find("ckpt-0000000012.mrdn") != std::string::npos);
}

TEST_CASE("a checkpoint of another model shape is refused with both shapes named") {
  TempDir dir("shape");
  const auto cfg = tiny_job(dir, "run", {"inner.steps=2"});
  {
    RunLog log(cfg.job.run_dir);
    Trainer t(cfg, posix_env(), log, nullptr, fake_clock);
    t.run();
  }
  const auto other = tiny_job(dir, "run", {"inner.steps=4", "model.d_model=64"});
  RunLog log(other.job.run_dir);
  Trainer t(other, posix_env(), log, nullptr, fake_clock);
  try {
    t.run();
    FAIL("resume into another shape did not throw");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Checkpoint);
    const std::string msg = e.what();
    CHECK(msg.find("32 channels") != std::string::npos);
    CHECK(msg.find("64 channels") != std::string::npos);
  }
}

TEST_CASE("gradient accumulation: 2 micro-batches of 2 take the same first step as 1 batch of 4 would in loss") {
  TempDir dir("accum");
  const auto one = tiny_job(dir, "one", {"inner.batch_per_replica=4"});
  const auto two = tiny_job(dir, "two", {"inner.batch_per_replica=2", "inner.grad_accum=2"});
  RunLog l1(one.job.run_dir), l2(two.job.run_dir);
  Trainer a(one, posix_env(), l1, nullptr, fake_clock), b(two, posix_env(), l2, nullptr, fake_clock);
  // Same 4 windows either way (the sampler hands them out in the same order), so the first loss
  // and the first update agree up to float summation order.
  CHECK(a.step().loss == doctest::Approx(b.step().loss).epsilon(1e-5));
  const auto pa = a.model().params(), pb = b.model().params();
  double worst = 0;
  for (std::size_t i = 0; i < pa.size(); ++i) worst = std::max(worst, static_cast<double>(std::abs(pa[i] - pb[i])));
  CHECK(worst < 1e-5);
}

TEST_CASE("wsd: the steps take the peak lr as a constant schedule does, bit for bit, until the cooldown") {
  TempDir dir("wsd");
  // 20 steps, warmup 2: a quarter in the cooldown is steps 15 to 19 below the peak, 19 at the floor.
  const auto wsd = tiny_job(dir, "wsd",
                            {"inner.schedule=\"wsd\"", "inner.decay_fraction=0.25", "inner.decay_shape=\"linear\"",
                             "inner.min_lr_ratio=0.1"});
  const auto constant = tiny_job(dir, "constant", {"inner.schedule=\"constant\""});
  RunLog l1(wsd.job.run_dir), l2(constant.job.run_dir);
  Trainer a(wsd, posix_env(), l1, nullptr, fake_clock), b(constant, posix_env(), l2, nullptr, fake_clock);
  std::vector<double> lrs;
  for (int i = 0; i < 20; ++i) {
    const StepResult x = a.step(), y = b.step();
    lrs.push_back(x.lr);
    if (i <= 14) {
      CHECK_MESSAGE(x.lr == y.lr, "step ", i);
      CHECK_MESSAGE(x.loss == y.loss, "step ", i);
    }
  }
  CHECK(lrs[1] == 3e-3);
  CHECK(lrs[14] == 3e-3);
  for (int i = 15; i < 20; ++i) CHECK_MESSAGE(lrs[i] < lrs[i - 1], "step ", i);
  CHECK(lrs[17] == doctest::Approx(3e-4 + 2.7e-3 * 0.4));
  CHECK(lrs[19] == doctest::Approx(3e-4));
  CHECK(params_hash(a) != params_hash(b));  // the cooldown's smaller steps moved the weights elsewhere
}

TEST_CASE("wsd: a run stopped in its stable phase and resumed with more steps trains as if planned that long") {
  TempDir dir("wsd-longer");
  // The guard off: one batch's gradient spike in the cooldown would roll this tiny model back and
  // test the guard instead of the schedule.
  const std::vector<std::string> wsd{"inner.schedule=\"wsd\"", "inner.decay_fraction=0.25", "guard.enabled=false"};
  const auto with_steps = [&](const std::string& run, int steps) {
    auto sets = wsd;
    sets.push_back("inner.steps=" + std::to_string(steps));
    return tiny_job(dir, run, sets);
  };
  const auto planned_cfg = with_steps("planned", 40);
  TrainerRun planned(planned_cfg);
  const auto planned_losses = logged_losses(planned_cfg.job.run_dir);
  REQUIRE(planned_losses.size() == 40);

  {  // 20 steps planned (cooldown from step 15), stopped at 10 with a checkpoint
    const auto short_cfg = with_steps("extended", 20);
    RunLog log(short_cfg.job.run_dir);
    Trainer first(short_cfg, posix_env(), log, nullptr, fake_clock);
    REQUIRE(first.run(10).steps == 10);
  }
  TrainerRun extended(with_steps("extended", 40));
  CHECK(extended.summary.resumed_from_step == 10);
  const auto losses = logged_losses(dir / "extended");
  REQUIRE(losses.size() == 40);
  for (int i = 0; i < 40; ++i) CHECK_MESSAGE(losses[i] == planned_losses[i], "step ", i);
  CHECK(params_hash(extended.trainer) == params_hash(planned.trainer));
}

TEST_CASE("Muon trains the tiny model: the loss falls as AdamW's does") {
  TempDir dir("muon");
  double last[2] = {0, 0};
  int i = 0;
  for (const char* optimizer : {"adamw", "muon"}) {
    const auto config = tiny_job(dir, optimizer, {"inner.steps=30", std::string("inner.optimizer=\"") + optimizer + "\""});
    RunLog log(config.job.run_dir);
    Trainer trainer(config, posix_env(), log, nullptr, fake_clock);
    const double first = trainer.step().loss;
    for (int s = 1; s < 30; ++s) last[i] = trainer.step().loss;
    CHECK(last[i] < first - 0.5);
    ++i;
  }
  MESSAGE("tiny model, 30 steps: AdamW ", last[0], ", Muon ", last[1]);
}

TEST_CASE("a checkpoint its extras call unsound is not written, and said: the last one stays") {
  TempDir dir("unsound");
  const auto cfg = tiny_job(dir, "run", {"checkpoint.every=5"});
  RunLog log(cfg.job.run_dir);
  Trainer t(cfg, posix_env(), log, nullptr, fake_clock);
  Trainer::Extras extras;
  extras.save = [](Checkpoint& out) { out.put_value<std::int64_t>("extra.value", 1); };
  extras.fingerprint = [] { return std::uint64_t{1}; };
  extras.unsound = [&t] {
    return t.state().step == 10 ? std::string("its copy of version 3 is not that version") : "";
  };
  t.set_extras(extras);
  t.run(12);  // checkpoints due at 5, 10 and 12
  const auto dir_of = cfg.job.run_dir / "checkpoints";
  CHECK(std::filesystem::exists(dir_of / "ckpt-0000000005.mrdn"));
  CHECK_FALSE(std::filesystem::exists(dir_of / "ckpt-0000000010.mrdn"));
  CHECK(std::filesystem::exists(dir_of / "ckpt-0000000012.mrdn"));
  std::ifstream events(cfg.job.run_dir / "events.jsonl");
  int skipped = 0;
  for (std::string line; std::getline(events, line);) {
    const auto e = nlohmann::json::parse(line);
    if (e["event"] != "checkpoint_skipped") continue;
    ++skipped;
    CHECK(e["step"] == 10);
    CHECK(e["why"] == "its copy of version 3 is not that version");
  }
  CHECK(skipped == 1);
}

TEST_CASE(
    "[log] sample_every: a sample event at each multiple, the text generate() gives that step's weights and seed") {
  TempDir dir("samples");
  const auto config =
      tiny_job(dir, "run",
               {"log.sample_every=10", "log.sample_tokens=24", "log.sample_prompt=\"ROMEO:\"", "checkpoint.every=10"});
  TrainerRun run(config);
  const auto samples = testing::events_of(testing::read_jsonl(config.job.run_dir / "events.jsonl"), "sample");
  REQUIRE(samples.size() == 2);
  const std::string prompt = "ROMEO:";
  for (const auto& s : samples) {
    const std::int64_t step = s.at("step");
    CAPTURE(step);
    CHECK(s.at("prompt_tokens") == 6);
    CHECK(s.at("tokens") == 24);  // bytes: no end-of-text token to stop at
    // Replayed from the checkpoint of that step with the recorded seed, as `meridian generate` would.
    const auto snap = load_model_snapshot(
        posix_env(), CheckpointStore(posix_env(), config.job.run_dir / "checkpoints", 3).path_for(step),
        [](const std::string&) {});
    GenerateOptions o;
    o.max_new_tokens = 24;
    o.seed = s.at("seed").get<std::uint64_t>();
    const auto ids =
        generate(snap.shape, snap.params, std::vector<std::int32_t>(prompt.begin(), prompt.end()), o).tokens;
    const nlohmann::json text = std::string(ids.begin(), ids.end());
    CHECK(s.at("text").dump() == text.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  }
  CHECK(samples[0].at("step") == 10);
  CHECK(samples[1].at("step") == 20);
  CHECK(samples[0].at("seed") != samples[1].at("seed"));

  // Sampling only reads the weights: the same job without samples trains the same, bit for bit.
  const auto plain_cfg = tiny_job(dir, "plain", {"checkpoint.every=10"});
  TrainerRun plain(plain_cfg);
  CHECK(logged_losses(plain_cfg.job.run_dir) == logged_losses(config.job.run_dir));
  CHECK(params_hash(plain.trainer) == params_hash(run.trainer));
}
