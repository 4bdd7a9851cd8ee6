// Silent data corruption: a bit flipped in one replica's weights is found by the next hash
// comparison and repaired: from the majority with 3 replicas, by rollback with 2.
#include <doctest/doctest.h>

#include <cstring>
#include <fstream>
#include <functional>
#include <thread>
#include <vector>

#include "core/config/job_config.hpp"
#include "core/io/env.hpp"
#include "core/model/param_layout.hpp"
#include "core/runlog/run_log.hpp"
#include "core/util/hash.hpp"
#include "intrasite/comm/gloo_communicator.hpp"
#include "intrasite/comm/store.hpp"
#include "intrasite/group/sdc_guard.hpp"
#include "intrasite/parallel/data_parallel.hpp"
#include "tests/support/temp_dir.hpp"

using namespace meridian;
using meridian::testing::TempDir;

TEST_CASE("judge_hashes: agreement, an odd one out, no majority") {
  CHECK(judge_hashes({7, 7, 7}).agree);
  const auto odd = judge_hashes({7, 9, 7});
  CHECK_FALSE(odd.agree);
  CHECK(odd.odd_ranks == std::vector<int>{1});
  CHECK(odd.source_rank == 0);
  CHECK_FALSE(odd.rollback);
  const auto first_odd = judge_hashes({9, 7, 7, 7});
  CHECK(first_odd.odd_ranks == std::vector<int>{0});
  CHECK(first_odd.source_rank == 1);
  CHECK(judge_hashes({7, 9}).rollback);
  CHECK(judge_hashes({7, 7, 9, 9}).rollback);
}

namespace {

struct Replica {
  std::uint64_t final_hash = 0;
  std::vector<SdcOutcome> findings;  // checks that disagreed
};

// `members` replicas train `steps` steps with a check every `every` steps; replica `victim` gets a
// bit flipped in its weights right after step `flip_at` (none when victim < 0).
// `sharded`: ZeRO stage 1 (sharded_slot).
std::vector<Replica> train_group(const TempDir& dir, int members, int steps, int every, int victim, int flip_at,
                                 int stage = 0) {
  const auto file = dir / "job.toml";
  std::ofstream(file) << "[job]\nname = \"sdc\"\nseed = 5\nrun_dir = \"" << (dir / "run").string() << "\"\n"
                      << "[model]\npreset = \"tiny\"\n[data]\npath = \""
                      << (testing::source_dir() / "data/tinyshakespeare/input.txt").string()
                      << "\"\n[inner]\nlr = 3e-3\nbatch_per_replica = 2\nsteps = " << steps << "\n";
  const auto cfg = load_job_config(file);
  MemoryStore store;
  std::vector<Replica> out(members);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < members; ++rank) {
    threads.emplace_back([&, rank] {
      auto comm = connect_gloo(store, "g/", rank, members, GlooOptions{});
      RunLog log(cfg.job.run_dir);
      Trainer t(cfg, posix_env(), log, nullptr, [] { return 0.0; },
                stage > 0 ? sharded_slot(*comm, ParamLayout::of(cfg.model).total(), stage) : data_parallel_slot(*comm));
      SdcGuard guard;
      bool flipped = false;  // a transient fault: the replay after a rollback does not flip again
      while (t.state().step < steps) {
        t.step();
        if (rank == victim && t.state().step == flip_at && !flipped) {
          flipped = true;
          // At stage 3 in the victim's own part, read where it lies (no gather: bulk()).
          float* at = t.bulk().params.data() + (stage == 3 ? t.moments_held().offset : 0) + 100;
          std::uint32_t bits;
          std::memcpy(&bits, at, 4);
          bits ^= 1u << 22;
          std::memcpy(at, &bits, 4);
        }
        if (t.state().step % every == 0) {
          auto outcome = guard.check(*comm, t);
          if (!outcome.verdict.agree) out[rank].findings.push_back(outcome);
        }
      }
      out[rank].final_hash = hash64(std::span<const float>(t.model().params()));
    });
  }
  for (auto& th : threads) th.join();
  return out;
}

}  // namespace

TEST_CASE("3 replicas: the flipped replica is found at the next check and healed from the majority") {
  TempDir dir("sdc3");
  const auto r = train_group(dir, 3, 12, 4, /*victim=*/2, /*flip_at=*/5);
  for (const auto& rep : r) {
    REQUIRE(rep.findings.size() == 1);  // found at step 8, within K = 4 steps of the flip
    CHECK(rep.findings[0].step == 8);
    CHECK(rep.findings[0].verdict.odd_ranks == std::vector<int>{2});
  }
  CHECK(r[0].final_hash == r[1].final_hash);
  CHECK(r[0].final_hash == r[2].final_hash);
}

TEST_CASE("2 replicas: both roll back to the last agreed step and the run ends as if nothing happened") {
  TempDir clean_dir("sdc2-clean"), dir("sdc2");
  const auto clean = train_group(clean_dir, 2, 12, 4, -1, 0);
  CHECK(clean[0].findings.empty());
  const auto r = train_group(dir, 2, 12, 4, /*victim=*/1, /*flip_at=*/6);
  for (const auto& rep : r) {
    REQUIRE(rep.findings.size() == 1);
    CHECK(rep.findings[0].verdict.rollback);
    CHECK(rep.findings[0].step == 4);  // back to the check at step 4, then steps 5..12 again
  }
  CHECK(r[0].final_hash == r[1].final_hash);
  CHECK(r[0].final_hash == clean[0].final_hash);  // the replay is exact
}

// Under ZeRO stage 1 each step's all-gather rewrites every replica's copy from the parts' owners:
// the check compares the copies as they stand after it, so a fault is flipped in right before a
// check (element 100 is rank 0's part; the victim's copy of it goes wrong).
TEST_CASE("ZeRO stage 1, 3 replicas: the odd copy takes the majority's weights, keeps its part's moments, ends as a clean run") {
  TempDir clean_dir("sdc3z-clean"), dir("sdc3z");
  const auto clean = train_group(clean_dir, 3, 12, 4, -1, 0, 1);
  const auto r = train_group(dir, 3, 12, 4, /*victim=*/2, /*flip_at=*/8, 1);
  for (const auto& rep : r) {
    REQUIRE(rep.findings.size() == 1);
    CHECK(rep.findings[0].step == 8);
    CHECK(rep.findings[0].verdict.odd_ranks == std::vector<int>{2});
    CHECK(rep.final_hash == clean[0].final_hash);
  }
}

TEST_CASE("ZeRO stage 1, 2 replicas: both roll back to their own agreed parts and the replay is exact") {
  TempDir clean_dir("sdc2z-clean"), dir("sdc2z");
  const auto clean = train_group(clean_dir, 2, 12, 4, -1, 0, 1);
  const auto r = train_group(dir, 2, 12, 4, /*victim=*/1, /*flip_at=*/8, 1);
  for (const auto& rep : r) {
    REQUIRE(rep.findings.size() == 1);
    CHECK(rep.findings[0].verdict.rollback);
    CHECK(rep.findings[0].step == 4);
    CHECK(rep.final_hash == clean[0].final_hash);
  }
}

TEST_CASE("judge_part_copies: every part's two copies agree, or the group rolls back") {
  CHECK(judge_part_copies({1, 2, 3}, {2, 3, 1}).agree);
  const auto v = judge_part_copies({1, 2, 3}, {2, 9, 1});  // rank 1's mirror of rank 2's part
  CHECK_FALSE(v.agree);
  CHECK(v.rollback);
  CHECK(v.odd_ranks.empty());
  CHECK(judge_part_copies({4}, {4}).agree);  // alone, a rank mirrors itself
}

// Under stage 3 the fault is flipped into the victim's own part right before a check: its
// mirror, on the rank before it, still holds the part as the step's shift sent it.
TEST_CASE("ZeRO stage 3, 3 replicas: a part whose two copies differ rolls the group back, and the replay is exact") {
  TempDir clean_dir("sdc3z3-clean"), dir("sdc3z3");
  const auto clean = train_group(clean_dir, 3, 12, 4, -1, 0, 3);
  CHECK(clean[0].findings.empty());
  const auto r = train_group(dir, 3, 12, 4, /*victim=*/2, /*flip_at=*/8, 3);
  for (const auto& rep : r) {
    REQUIRE(rep.findings.size() == 1);
    CHECK(rep.findings[0].verdict.rollback);
    CHECK(rep.findings[0].step == 4);
    CHECK(rep.findings[0].mirror_hashes[1] != rep.findings[0].hashes[2]);
    CHECK(rep.final_hash == clean[0].final_hash);
  }
}
