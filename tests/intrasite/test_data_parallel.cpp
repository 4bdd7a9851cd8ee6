// Data parallelism inside a site: M replicas with per-replica batch B train exactly like one
// replica with batch M*B, and stay bit-identical among themselves.
#include <doctest/doctest.h>

#include <unistd.h>

#include <fstream>
#include <thread>
#include <vector>

#include "core/config/job_config.hpp"
#include "core/io/env.hpp"
#include "core/model/param_layout.hpp"
#include "core/runlog/run_log.hpp"
#include "core/train/divergence_guard.hpp"
#include "core/util/error.hpp"
#include "core/util/hash.hpp"
#include "intrasite/comm/gloo_communicator.hpp"
#include "intrasite/comm/store.hpp"
#include "intrasite/parallel/data_parallel.hpp"
#include "tests/support/temp_dir.hpp"

using namespace meridian;
using meridian::testing::TempDir;

namespace {

constexpr const char* kTiny = "preset = \"tiny\"\n";

JobConfig job(const TempDir& dir, const std::string& run, int batch, int steps = 8, const std::string& inner = "",
              const std::string& model = kTiny) {
  const auto file = dir / (run + ".toml");
  std::ofstream(file) << "[job]\nname = \"dp\"\nseed = 11\nrun_dir = \"" << (dir / run).string() << "\"\n"
                      << "[model]\n" << model
                      << "[data]\npath = \"" << (testing::source_dir() / "data/tinyshakespeare/input.txt").string()
                      << "\"\n[inner]\nlr = 3e-3\nbatch_per_replica = " << batch << "\nsteps = " << steps << "\n" << inner;
  return load_job_config(file);
}

double clock_stub() { return 0.0; }

// `size` replicas (threads) over Gloo train `steps` steps with per-replica batch B, each in the
// slot `make_slot(comm, params, reducer)` gives (reducer: a BucketReducer when `overlap`, else null);
// `extra`: TOML appended to every replica's job.
struct GroupRun {
  std::vector<std::vector<float>> params;
  std::vector<std::vector<double>> losses;
  std::vector<double> val;
  std::vector<std::size_t> moments;  // the length of each replica's AdamW first moment
  std::vector<std::size_t> state_bytes;  // Trainer::state_bytes after the last step
};

template <class MakeSlot>
GroupRun train_group(const TempDir& dir, const std::string& tag, int size, int steps, int B, bool overlap,
                     MakeSlot make_slot, const std::string& extra = "", const std::string& model = kTiny) {
  MemoryStore store;
  const auto n = static_cast<std::size_t>(size);
  GroupRun out{std::vector<std::vector<float>>(n), std::vector<std::vector<double>>(n), std::vector<double>(n),
               std::vector<std::size_t>(n), std::vector<std::size_t>(n)};
  std::vector<std::thread> replicas;
  for (int rank = 0; rank < size; ++rank) {
    replicas.emplace_back([&, rank] {
      auto comm = connect_gloo(store, "gen0/", rank, size, GlooOptions{});
      std::unique_ptr<BucketReducer> reducer;
      if (overlap) reducer = std::make_unique<BucketReducer>(*comm);
      const auto cfg = job(dir, tag + std::to_string(rank), B, steps, extra, model);
      RunLog log(cfg.job.run_dir);
      Trainer t(cfg, posix_env(), log, nullptr, clock_stub,
                make_slot(*comm, ParamLayout::of(cfg.model).total(), reducer.get()));
      const auto r = static_cast<std::size_t>(rank);
      for (int i = 0; i < steps; ++i) out.losses[r].push_back(t.step().loss);
      out.state_bytes[r] = t.state_bytes();  // before anything reads the whole weights (stage 3 gathers them)
      out.val[r] = t.validation_loss();
      out.params[r].assign(t.model().params().begin(), t.model().params().end());
      out.moments[r] = t.snapshot().get_pod<float>("adamw.m").size();
    });
  }
  for (auto& r : replicas) r.join();
  return out;
}

ReplicaSlot plain_slot(Communicator& comm, std::size_t, BucketReducer* reducer) {
  return data_parallel_slot(comm, reducer);
}

ReplicaSlot zero1_slot(Communicator& comm, std::size_t params, BucketReducer*) { return sharded_slot(comm, params); }
ReplicaSlot zero2_slot(Communicator& comm, std::size_t params, BucketReducer*) { return sharded_slot(comm, params, 2); }
ReplicaSlot zero3_slot(Communicator& comm, std::size_t params, BucketReducer*) { return sharded_slot(comm, params, 3); }

GroupRun train_pair(const TempDir& dir, const std::string& tag, int steps, int B, bool overlap) {
  return train_group(dir, tag, 2, steps, B, overlap, plain_slot);
}

}  // namespace

TEST_CASE("identity: 2 replicas with batch B equal 1 replica with batch 2B, and the replicas are bit-identical") {
  constexpr int kSteps = 8, kB = 4;
  TempDir dir("dp");
  const auto single_cfg = job(dir, "single", 2 * kB);
  RunLog single_log(single_cfg.job.run_dir);
  Trainer single(single_cfg, posix_env(), single_log, nullptr, clock_stub);
  std::vector<double> single_losses;
  for (int i = 0; i < kSteps; ++i) single_losses.push_back(single.step().loss);

  const auto pair = train_pair(dir, "replica", kSteps, kB, false);
  const auto& params = pair.params;
  const auto& losses = pair.losses;

  // Replicas: bit-identical, since every one applies the same all-reduced gradient.
  CHECK(hash64(std::span<const float>(params[0])) == hash64(std::span<const float>(params[1])));
  CHECK(losses[0] == losses[1]);
  // Against one replica with the whole batch: the same windows and the same mean gradient, but
  // summed in another order (two half-batch means averaged vs one mean), so fp32 rounding differs
  // by ~1e-7 relative per step; AdamW normalises updates, so after 8 steps weights may differ by a
  // few ulps of lr. 1e-5 absolute is ~100x that and far below a single step's update (~3e-3).
  const auto ref = single.model().params();
  double worst = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) worst = std::max(worst, static_cast<double>(std::abs(ref[i] - params[0][i])));
  CHECK(worst < 1e-5);
  for (int i = 0; i < kSteps; ++i) CHECK(losses[0][i] == doctest::Approx(single_losses[i]).epsilon(1e-5));
}

TEST_CASE("overlapped bucketed all-reduce gives the same bits as one all-reduce after backward") {
  TempDir dir("dp-overlap");
  const auto plain = train_pair(dir, "plain", 6, 4, false);
  const auto overlapped = train_pair(dir, "overlap", 6, 4, true);
  // With two ranks every element's sum is a + b whatever the bucketing, so the runs are bit-identical.
  CHECK(hash64(std::span<const float>(overlapped.params[0])) == hash64(std::span<const float>(plain.params[0])));
  CHECK(hash64(std::span<const float>(overlapped.params[1])) == hash64(std::span<const float>(overlapped.params[0])));
  CHECK(overlapped.losses[0] == plain.losses[0]);
}

TEST_CASE("ZeRO stages 1, 2 and 3: 4 replicas with the optimizer's state (the gradients, the weights) sharded train as unsharded ones do, bit for bit") {
  constexpr int kReplicas = 4, kSteps = 60;
  TempDir dir("dp-zero1");
  const auto plain = train_group(dir, "plain", kReplicas, kSteps, 2, false, plain_slot);
  const std::size_t params = plain.moments[0];
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  for (const int stage : {1, 2, 3}) {
    CAPTURE(stage);
    const auto sharded = train_group(dir, "zero" + std::to_string(stage), kReplicas, kSteps, 2, false,
                                     stage == 1 ? zero1_slot : stage == 2 ? zero2_slot : zero3_slot);
    std::size_t moments = 0;
    for (int r = 0; r < kReplicas; ++r) {
      CAPTURE(r);
      const auto i = static_cast<std::size_t>(r);
      CHECK(sharded.params[i] == sharded.params[0]);
      CHECK(sharded.moments[i] < params / 3);  // a quarter, within a unit
      moments += sharded.moments[i];
      // Weights and the part's moments, then the gradients: whole at stage 1, at 2 the part's pages
      // and the partial pages at the buffer's two ends (the buffer is not page-aligned). At 3 the
      // weights too, with a page at most where two of the ranges gathered for one layer meet.
      const std::size_t rest = sharded.state_bytes[i] - 4 * 2 * sharded.moments[i];
      if (stage == 1) CHECK(rest == 8 * params);
      else if (stage == 2) CHECK(rest - 4 * params <= 4 * sharded.moments[i] + 4 * page);
      else CHECK(rest <= 8 * sharded.moments[i] + 4 * page * (2 + 2 * (2 + 2)));  // tiny: 2 layers
      if (stage == 3) MESSAGE("stage 3: trainer's state ", sharded.state_bytes[i], " bytes for ", params,
                              " parameters (stage 0: ", 16 * params, ")");
    }
    CHECK(moments == params);  // every element's moments on exactly one replica
    // Gloo's all-reduce sums each element in rank order as its reduce-scatter does (whole or range
    // by range), and the norm is added from the same unit sums: the sharded run is the unsharded
    // one, bit for bit.
    for (int i = 0; i < kSteps; ++i) CHECK(sharded.losses[0][i] == plain.losses[0][i]);
    MESSAGE("validation loss after ", kSteps, " steps: unsharded ", plain.val[0], ", stage ", stage, " ", sharded.val[0]);
    CHECK(sharded.val[0] == plain.val[0]);
    CHECK(sharded.params[0] == plain.params[0]);
  }
}

TEST_CASE("ZeRO stage 1 at 2 replicas is stage 0 bit for bit, and so is each recompute mode and stage 2 with grad accumulation") {
  TempDir dir("dp-zero1-pair");
  const auto plain = train_group(dir, "plain", 2, 12, 2, false, plain_slot);
  const auto sharded = train_group(dir, "zero1", 2, 12, 2, false, zero1_slot);
  // One sum per element either way, and the norm added from the same unit sums.
  CHECK(sharded.params[0] == plain.params[0]);
  CHECK(sharded.params[1] == plain.params[0]);
  CHECK(sharded.losses[0] == plain.losses[0]);
  for (const char* mode : {"cheap", "full"}) {
    CAPTURE(mode);
    const auto recomputed =
        train_group(dir, mode, 2, 12, 2, false, zero1_slot, std::string("[parallel]\nrecompute = \"") + mode + "\"\n");
    CHECK(recomputed.params[0] == plain.params[0]);
    CHECK(recomputed.losses[0] == plain.losses[0]);
    CHECK(recomputed.val[0] == plain.val[0]);
  }
  // Stage 2 with two micro-batches a step: the first keeps whole gradients, the second's ranges are
  // reduced as backward finishes them.
  const std::string accum = "grad_accum = 2\n";
  const auto plain_accum = train_group(dir, "plain-accum", 2, 6, 2, false, plain_slot, accum);
  const auto zero2_accum = train_group(dir, "zero2-accum", 2, 6, 2, false, zero2_slot, accum);
  CHECK(zero2_accum.params[0] == plain_accum.params[0]);
  CHECK(zero2_accum.params[1] == plain_accum.params[0]);
  CHECK(zero2_accum.losses[0] == plain_accum.losses[0]);
}

TEST_CASE("ZeRO stage 3 gathers each layer's weights as forward and backward reach it: bit for bit with grad accumulation, full recompute and the Llama family") {
  TempDir dir("dp-zero3");
  // Two micro-batches a step: the first forward gathers the mirror's step, every later pass
  // gathers the same weights again. Full recompute runs each layer's forward again inside its
  // backward, between the same gather and release.
  const std::string accum = "grad_accum = 2\n[parallel]\nrecompute = \"full\"\n";
  const auto plain = train_group(dir, "plain", 3, 6, 2, false, plain_slot, accum);
  const auto zero3 = train_group(dir, "zero3", 3, 6, 2, false, zero3_slot, accum);
  for (int r = 0; r < 3; ++r) CHECK(zero3.params[static_cast<std::size_t>(r)] == plain.params[0]);
  CHECK(zero3.losses[0] == plain.losses[0]);
  CHECK(zero3.val[0] == plain.val[0]);
  // A Llama with grouped-query attention and an untied head: its head is the last range gathered.
  const std::string llama = "family = \"llama\"\nn_layer = 2\nn_head = 4\nn_kv_head = 2\nd_model = 64\n"
                            "ffn_hidden = 96\nseq_len = 32\nvocab = 256\ntied = false\n";
  const auto llama_plain = train_group(dir, "llama-plain", 2, 6, 2, false, plain_slot, "", llama);
  const auto llama_zero3 = train_group(dir, "llama-zero3", 2, 6, 2, false, zero3_slot, "", llama);
  CHECK(llama_zero3.params[0] == llama_plain.params[0]);
  CHECK(llama_zero3.params[1] == llama_plain.params[0]);
  CHECK(llama_zero3.losses[0] == llama_plain.losses[0]);
  CHECK(llama_zero3.val[0] == llama_plain.val[0]);
}

namespace {

// `size` replicas train `steps` steps with a divergence guard each (Recover), a learning-rate spike
// injected at step 24: the final weights (every replica's) and the rollbacks each guard made.
struct GuardedRun {
  std::vector<std::vector<float>> params;
  std::vector<std::int64_t> rollbacks;
  std::vector<std::size_t> held_bytes;
};

template <class MakeSlot>
GuardedRun train_guarded(const TempDir& dir, const std::string& tag, int size, MakeSlot make_slot) {
  const std::string guard = "warmup_steps = 5\n[guard]\nwindow = 10\nmin_history = 6\nsnapshot_every = 5\n"
                            "inject_lr_step = 24\ninject_lr_factor = 300\n";
  MemoryStore store;
  const auto n = static_cast<std::size_t>(size);
  GuardedRun out{std::vector<std::vector<float>>(n), std::vector<std::int64_t>(n), std::vector<std::size_t>(n)};
  std::vector<std::thread> replicas;
  for (int rank = 0; rank < size; ++rank)
    replicas.emplace_back([&, rank] {
      auto comm = connect_gloo(store, "gen0/", rank, size, GlooOptions{});
      const auto cfg = job(dir, tag + std::to_string(rank), 2, 40, guard);
      RunLog log(cfg.job.run_dir);
      Trainer t(cfg, posix_env(), log, nullptr, clock_stub, make_slot(*comm, ParamLayout::of(cfg.model).total(), nullptr));
      DivergenceGuard g(cfg.guard, DivergenceGuard::Mode::Recover, log, nlohmann::json::object());
      g.reset(t, rank == 0);
      while (t.state().step < 40) g.after_step(t, t.step());
      const auto r = static_cast<std::size_t>(rank);
      out.held_bytes[r] = g.held_bytes();
      out.rollbacks[r] = t.state().rollbacks;
      out.params[r].assign(t.model().params().begin(), t.model().params().end());
    });
  for (auto& r : replicas) r.join();
  return out;
}

}  // namespace

TEST_CASE("the divergence guard under ZeRO stage 3 keeps each replica's part, rolls the group back to them, and ends where an unsharded group does") {
  TempDir dir("dp-zero3-guard");
  const auto plain = train_guarded(dir, "plain", 3, plain_slot);
  const auto zero3 = train_guarded(dir, "zero3", 3, zero3_slot);
  REQUIRE(plain.rollbacks[0] == 1);  // the spike was seen and undone
  const std::size_t params = plain.params[0].size();
  for (std::size_t r = 0; r < 3; ++r) {
    CAPTURE(r);
    CHECK(zero3.rollbacks[r] == 1);
    CHECK(zero3.params[r] == plain.params[0]);
    // A kept state is the part's weights and moments (12/M bytes per parameter, plus the
    // records), where unsharded it is 12 bytes per parameter.
    CHECK(zero3.held_bytes[r] < plain.held_bytes[r] / 2.5);
    MESSAGE("guard's kept states: unsharded ", plain.held_bytes[r], " bytes, stage 3 ", zero3.held_bytes[r], " bytes for ",
            params, " parameters");
  }
}

TEST_CASE("an optimizer that cannot shard its state is refused at the trainer's start, naming it") {
  TempDir dir("dp-zero1-muon");
  const auto cfg = job(dir, "muon", 2, 8, "optimizer = \"muon\"\n");
  RunLog log(cfg.job.run_dir);
  ReplicaSlot slot;
  slot.shard = ShardRange{0, 1024};
  slot.gather = [](std::span<float>) {};
  slot.gather_unit_sums = [](std::span<double>) {};
  CHECK_THROWS_WITH_AS(Trainer(cfg, posix_env(), log, nullptr, clock_stub, slot),
                       doctest::Contains("inner.optimizer = \"muon\" cannot shard its state"), Error);
}
