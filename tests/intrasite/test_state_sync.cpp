// Healing a group whose replicas shard the optimizer's state (ZeRO stages 1 to 3): the survivors'
// parts carry over to the new cut, a dead replica's part restarts from zero, a step whose
// all-gather failed is taken forward or undone (in place, from the owners and a dead one's mirror), and a sharded group's checkpoint loads whole at
// any replica count. Replicas are threads over Gloo, as in test_data_parallel.
#include <doctest/doctest.h>
#include <unistd.h>

#include <barrier>
#include <fstream>
#include <thread>
#include <tuple>
#include <vector>

#include "core/checkpoint/store.hpp"
#include "core/config/job_config.hpp"
#include "core/io/env.hpp"
#include "core/model/param_layout.hpp"
#include "core/model/shard_map.hpp"
#include "core/runlog/run_log.hpp"
#include "core/util/error.hpp"
#include "core/util/hash.hpp"
#include "core/util/pages.hpp"
#include "intrasite/comm/gloo_communicator.hpp"
#include "intrasite/comm/store.hpp"
#include "intrasite/group/state_sync.hpp"
#include "intrasite/parallel/data_parallel.hpp"
#include "tests/support/temp_dir.hpp"

using namespace meridian;
using meridian::testing::TempDir;

namespace {

JobConfig job(const TempDir& dir, const std::string& run, const std::string& extra = "") {
  const auto file = dir / (run + ".toml");
  std::ofstream(file) << "[job]\nname = \"heal\"\nseed = 3\nrun_dir = \"" << (dir / run).string() << "\"\n"
                      << "[model]\npreset = \"tiny\"\n[data]\npath = \""
                      << (testing::source_dir() / "data/tinyshakespeare/input.txt").string()
                      << "\"\n[inner]\nlr = 3e-3\nbatch_per_replica = 2\nsteps = 100\n" << extra;
  return load_job_config(file);
}

double clock_stub() { return 0.0; }

std::size_t params_of(const JobConfig& c) { return ParamLayout::of(c.model).total(); }

// Runs `body(rank)` on `size` threads and waits for them all.
template <class Body>
void on_threads(int size, Body body) {
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank) threads.emplace_back([&body, rank] { body(rank); });
  for (auto& t : threads) t.join();
}

std::vector<float> held(const Trainer& t, bool second) {
  const auto m = second ? t.optimizer().v() : t.optimizer().m();
  return {m.begin(), m.end()};
}

// What one replica holds at the end of a run.
struct Held {
  std::vector<float> params, m, v;
  ShardRange part;
  std::int64_t step = 0, adam_steps = 0;
};

Held held_state(Trainer& t) {
  return {{t.model().params().begin(), t.model().params().end()}, held(t, false), held(t, true), t.moments_held(),
          t.state().step, t.optimizer().steps_taken()};
}

// Rank `rank` of a sharded group of `size` (Gloo under `prefix`), trained `steps` steps from a
// fresh start in its own run directory, <tag><rank>.
struct ShardedReplica {
  ShardedReplica(const TempDir& dir, const std::string& tag, MemoryStore& store, const std::string& prefix, int rank,
                 int size, int steps, int stage = 1)
      : ShardedReplica(job(dir, tag + std::to_string(rank)), {}, store, prefix, rank, size, steps, stage) {}
  // `config` shared by the group (its run directory too): each logs to `log_dir`.
  ShardedReplica(JobConfig config, const std::filesystem::path& log_dir, MemoryStore& store, const std::string& prefix,
                 int rank, int size, int steps, int stage = 1)
      : cfg(std::move(config)),
        log(log_dir.empty() ? cfg.job.run_dir : log_dir),
        comm(connect_gloo(store, prefix, rank, size, GlooOptions{})),
        trainer(cfg, posix_env(), log, nullptr, clock_stub, sharded_slot(*comm, params_of(cfg), stage)) {
    for (int i = 0; i < steps; ++i) trainer.step();
  }
  JobConfig cfg;
  RunLog log;
  std::unique_ptr<Communicator> comm;
  Trainer trainer;
};

// The trainer's group re-formed as `size` under `prefix`, healed into its sharded place there. The
// communicator must outlive the trainer's steps.
std::unique_ptr<Communicator> regroup(MemoryStore& store, const std::string& prefix, int rank, int size, Trainer& t,
                                      HealReport& report, int stage = 1, std::size_t window = kHealWindowUnits) {
  auto comm = connect_gloo(store, prefix, rank, size, GlooOptions{});
  report = sync_state(*comm, t, GroupPlace{sharded_slot(*comm, t.param_count(), stage), 1}, window);
  return comm;
}

// Rank 1 of 3 is dead: ranks 0 and 2 regroup as 0 and 1 of 2 under "b/", sharded at `stage`,
// and record what they hold after the heal, and with `replayed` after one more step.
void regroup_without_rank_1(MemoryStore& store, int rank, Trainer& t, int stage, std::vector<HealReport>& reports,
                            std::vector<Held>& after, std::vector<Held>* replayed = nullptr) {
  const int now = rank == 0 ? 0 : 1;
  const auto r = static_cast<std::size_t>(now);
  const auto pair = regroup(store, "b/", now, 2, t, reports[r], stage);
  after[r] = held_state(t);
  if (!replayed) return;
  t.step();
  (*replayed)[r] = held_state(t);
}

// `size` sharded replicas train `steps` steps from a fresh start.
std::vector<Held> reference(const TempDir& dir, int size, int steps) {
  MemoryStore store;
  std::vector<Held> out(static_cast<std::size_t>(size));
  on_threads(size, [&](int rank) {
    ShardedReplica replica(dir, "ref", store, "ref/", rank, size, steps);
    out[static_cast<std::size_t>(rank)] = held_state(replica.trainer);
  });
  return out;
}

}  // namespace

TEST_CASE("replicas that hold the same state move nothing when they join, and one that differs is healed whole") {
  TempDir dir("heal-same");
  const JobConfig cfg = job(dir, "same");  // one run directory: the records of their states are equal
  for (const bool differ : {false, true}) {
    CAPTURE(differ);
    MemoryStore store;
    std::vector<HealReport> reports(3);
    std::vector<std::uint64_t> after(3);
    on_threads(3, [&](int rank) {
      RunLog log(cfg.job.run_dir);
      auto comm = connect_gloo(store, "g/", rank, 3, GlooOptions{});
      Trainer t(cfg, posix_env(), log, nullptr, clock_stub, data_parallel_slot(*comm));
      if (differ && rank == 2) t.model().params()[5] += 1.0f;
      reports[static_cast<std::size_t>(rank)] = sync_state(*comm, t, GroupPlace{data_parallel_slot(*comm), 1});
      t.step();
      after[static_cast<std::size_t>(rank)] = hash64(std::span<const float>(t.model().params()));
    });
    for (std::size_t r = 0; r < 3; ++r) {
      CAPTURE(r);
      CHECK((reports[r].bytes > 0) == differ);  // a first join of replicas built alike moves no byte
      CHECK(reports[r].changed == (differ && r == 2));
      CHECK(reports[r].source_rank == 0);
      CHECK(after[r] == after[0]);
    }
  }
}

namespace {

void shrink_4_to_3(std::size_t window) {
  CAPTURE(window);
  TempDir dir("heal-shrink");
  MemoryStore store;
  std::vector<Held> before(4), after(3);
  std::vector<HealReport> reports(3);
  on_threads(4, [&](int rank) {
    const auto r = static_cast<std::size_t>(rank);
    ShardedReplica replica(dir, "r", store, "a/", rank, 4, 3);
    Trainer& t = replica.trainer;
    before[r] = held_state(t);
    if (rank == 3) return;  // it dies
    const auto three = regroup(store, "b/", rank, 3, t, reports[r], 1, window);
    after[r] = held_state(t);
    for (int i = 0; i < 3; ++i) t.step();
    after[r].params.assign(t.model().params().begin(), t.model().params().end());
  });
  const std::size_t total = before[0].params.size();
  std::vector<float> expected_m(total, 0.0f), expected_v(total, 0.0f);
  for (std::size_t r = 0; r < 3; ++r) {
    std::copy(before[r].m.begin(), before[r].m.end(), expected_m.begin() + static_cast<std::ptrdiff_t>(before[r].part.offset));
    std::copy(before[r].v.begin(), before[r].v.end(), expected_v.begin() + static_cast<std::ptrdiff_t>(before[r].part.offset));
  }
  const ShardMap three(total, 3);
  for (int r = 0; r < 3; ++r) {
    CAPTURE(r);
    const auto& a = after[static_cast<std::size_t>(r)];
    const auto& report = reports[static_cast<std::size_t>(r)];
    CHECK(report.step == 3);
    CHECK(report.moments_lost == before[3].part.count);
    const std::size_t window_elements = std::min(total, window * kShardUnit);
    CHECK(report.moments_scratch_bytes == (2 * window_elements + 1) * sizeof(float));
    CHECK(a.part == three.part(r));
    const auto from = expected_m.begin() + static_cast<std::ptrdiff_t>(a.part.offset);
    CHECK(a.m == std::vector<float>(from, from + static_cast<std::ptrdiff_t>(a.part.count)));
    const auto from_v = expected_v.begin() + static_cast<std::ptrdiff_t>(a.part.offset);
    CHECK(a.v == std::vector<float>(from_v, from_v + static_cast<std::ptrdiff_t>(a.part.count)));
    CHECK(a.adam_steps == 3);
    CHECK(a.params == after[0].params);  // and three more steps later they still agree
  }
}

// Replicas `ids` (their numbers among 3), each built with its first part (`whole`: built whole
// instead), join as one group at `stage` under `prefix` and train 2 steps. `inspect(t, built,
// joined)` looks at each as built (joined false) and after its first join.
template <class Built, class Inspect>
auto first_join(const TempDir& dir, const JobConfig& cfg, int stage, const std::vector<int>& ids, bool whole,
                const std::string& prefix, Inspect inspect) {
  const int size = static_cast<int>(ids.size());
  std::vector<HealReport> reports(ids.size());
  std::vector<Built> built(ids.size());
  std::vector<Held> after(ids.size());
  MemoryStore store;
  on_threads(size, [&](int rank) {
    const auto r = static_cast<std::size_t>(rank);
    RunLog log(dir / (prefix + std::to_string(rank)));
    auto comm = connect_gloo(store, prefix, rank, size, GlooOptions{});
    ReplicaSlot first;
    if (!whole) first.moments_first = ReplicaSlot::FirstPart{ids[r], 3, stage == 3};
    Trainer t(cfg, posix_env(), log, nullptr, clock_stub, std::move(first));
    inspect(t, built[r], false);
    reports[r] = sync_state(*comm, t, GroupPlace{sharded_slot(*comm, params_of(cfg), stage), 1});
    inspect(t, built[r], true);
    for (int i = 0; i < 2; ++i) t.step();
    after[r] = held_state(t);
  });
  return std::tuple{reports, built, after};
}

// Each replica's weights and moments after its steps are those of the replica built whole.
void check_trains_as_whole(const std::vector<Held>& after, const std::vector<Held>& whole) {
  REQUIRE(after.size() == whole.size());
  for (std::size_t r = 0; r < after.size(); ++r) {
    CAPTURE(r);
    CHECK(after[r].params == whole[r].params);
    CHECK(after[r].m == whole[r].m);
  }
}

}  // namespace

TEST_CASE(
    "replicas built with their first part of the moments: a whole group moves nothing at its first join, one short a "
    "replica re-cuts, and both train as replicas built whole") {
  TempDir dir("heal-first-part");
  const JobConfig cfg = job(dir, "first");
  const std::size_t total = params_of(cfg);
  const auto run = [&](const std::vector<int>& ids, bool whole, const std::string& prefix) {
    return first_join<Held>(dir, cfg, 1, ids, whole, prefix, [](Trainer& t, Held& built, bool joined) {
      if (!joined) built = held_state(t);
    });
  };
  const auto [whole_reports, whole_built, whole_after] = run({0, 1, 2}, true, "w/");
  const auto [reports, built, after] = run({0, 1, 2}, false, "p/");
  const ShardMap three(total, 3);
  for (std::size_t r = 0; r < 3; ++r) {
    CAPTURE(r);
    CHECK(whole_built[r].part.count == total);
    CHECK(built[r].part == three.part(static_cast<int>(r)));  // never the whole model's moments
    CHECK(reports[r].bytes == 0);                             // the first join moved nothing
    CHECK(reports[r].moments_scratch_bytes == 0);
  }
  check_trains_as_whole(after, whole_after);
  // Replica 1 never came: 0 and 2 form a group of 2 and re-cut their (zero) moments.
  const auto [short_reports, short_built, short_after] = run({0, 2}, false, "s/");
  const auto [pair_reports, pair_built, pair_after] = run({0, 1}, true, "v/");
  for (const auto& report : short_reports) CHECK(report.moments_scratch_bytes > 0);
  check_trains_as_whole(short_after, pair_after);
}

TEST_CASE(
    "ZeRO stage 3: replicas built with their first parts of the weights hold no more, a whole group moves nothing at "
    "its first join, one short a replica builds the initial weights anew, and both train as replicas built whole") {
  TempDir dir("heal-first-weights");
  const JobConfig cfg = job(dir, "first", "[parallel]\nzero_stage = 3\n");
  const std::size_t total = params_of(cfg), page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  struct Built {
    bool first_parts = false;
    std::size_t resident = 0, joined = 0;  // of the weights' buffer, built and after the first join
  };
  const auto run = [&](const std::vector<int>& ids, bool whole, const std::string& prefix) {
    return first_join<Built>(dir, cfg, 3, ids, whole, prefix, [](Trainer& t, Built& built, bool joined) {
      if (joined) {
        built.joined = resident_bytes(t.weights_as_held());
      } else {
        built.first_parts = t.holds_first_parts();
        built.resident = resident_bytes(t.weights_as_held());
      }
    });
  };
  const auto [whole_reports, whole_built, whole_after] = run({0, 1, 2}, true, "w/");
  const auto [reports, built, after] = run({0, 1, 2}, false, "p/");
  const ShardMap three(total, 3);
  for (std::size_t r = 0; r < 3; ++r) {
    CAPTURE(r);
    CHECK_FALSE(whole_built[r].first_parts);
    CHECK(whole_built[r].resident >= total * sizeof(float));
    CHECK(built[r].first_parts);
    // Its part's pages alone (the mirror is kept apart): never the whole model's weights.
    CHECK(built[r].resident <= three.part(static_cast<int>(r)).count * sizeof(float) + 2 * page);
    CHECK(reports[r].bytes == 0);  // the first join moved nothing, and built nothing whole
    CHECK(reports[r].first_parts_kept);
    CHECK_FALSE(whole_reports[r].first_parts_kept);
    CHECK(built[r].joined == built[r].resident);
  }
  check_trains_as_whole(after, whole_after);
  // Replica 1 never came: 0 and 2 form a group of 2, whose cut is another, and build anew.
  const auto [short_reports, short_built, short_after] = run({0, 2}, false, "s/");
  const auto [pair_reports, pair_built, pair_after] = run({0, 1}, true, "v/");
  for (const auto& b : short_built) {
    CHECK(b.first_parts);
    CHECK(b.joined >= total * sizeof(float));
  }
  for (const auto& report : short_reports) CHECK_FALSE(report.first_parts_kept);
  check_trains_as_whole(short_after, pair_after);
}

TEST_CASE("4 sharded replicas regroup as 3: survivors' parts carry over, the dead one's restart at zero") {
  // The moments are cut anew a window of units at a time (the tiny model has 9 units): the result
  // is the same at any window, and what a member holds beyond its parts is one window.
  for (const std::size_t window : {kHealWindowUnits, std::size_t{1}, std::size_t{4}}) shrink_4_to_3(window);
}

namespace {

// `in_parts`: the group shares a run directory and writes its checkpoint in parts, of which the
// source reads the dead part's moments alone (CheckpointParts::moments).
void from_checkpoint(std::size_t window, bool in_parts = false) {
  CAPTURE(window);
  CAPTURE(in_parts);
  TempDir dir("heal-from-checkpoint");
  MemoryStore store;
  std::vector<Held> before(4), after(3);
  std::vector<HealReport> reports(3);
  const JobConfig shared = job(dir, "site", "[checkpoint]\nper_replica = true\n[parallel]\nzero_stage = 1\n");
  on_threads(4, [&](int rank) {
    const auto r = static_cast<std::size_t>(rank);
    ShardedReplica replica = in_parts
                                 ? ShardedReplica(shared, dir / ("log" + std::to_string(rank)), store, "a/", rank, 4, 2)
                                 : ShardedReplica(dir, "r", store, "a/", rank, 4, 2);
    Trainer& t = replica.trainer;
    t.save_checkpoint(rank == 0);  // whole, in r0/, or in parts in site/: what the group's source reads
    before[r] = held_state(t);     // the moments at step 2, as the checkpoint has them
    t.step();
    if (rank == 3) return;
    const auto three = regroup(store, "b/", rank, 3, t, reports[r], 1, window);
    after[r] = held_state(t);
  });
  std::vector<float> expected(before[0].params.size());
  for (const auto& b : before)
    std::copy(b.m.begin(), b.m.end(), expected.begin() + static_cast<std::ptrdiff_t>(b.part.offset));
  const ShardRange dead = before[3].part;
  for (std::size_t r = 0; r < 3; ++r) {
    CAPTURE(r);
    CHECK(reports[r].moments_from_checkpoint == dead.count);
    CHECK(reports[r].checkpoint_step == 2);
    CHECK(reports[r].moments_lost == 0);
    CHECK(after[r].step == 3);
    // The dead part's elements this replica now keeps hold the checkpoint's step-2 moments; the
    // survivors' parts moved on to step 3.
    const ShardRange own = after[r].part;
    for (std::size_t i = std::max(own.offset, dead.offset); i < std::min(own.end(), dead.end()); ++i)
      REQUIRE(after[r].m[i - own.offset] == expected[i]);
  }
  CHECK(after[2].part.end() > dead.offset);  // the last replica of three took some of the dead part
}

}  // namespace

TEST_CASE("sharded replicas that regroup as the same group keep their parts: nothing is re-cut") {
  TempDir dir("heal-in-place");
  MemoryStore store;
  std::vector<Held> before(3), after(3), next(3);
  std::vector<HealReport> reports(3);
  on_threads(3, [&](int rank) {
    const auto r = static_cast<std::size_t>(rank);
    ShardedReplica replica(dir, "r", store, "a/", rank, 3, 2);
    Trainer& t = replica.trainer;
    before[r] = held_state(t);
    const auto again = regroup(store, "b/", rank, 3, t, reports[r]);  // a generation later, the same members
    after[r] = held_state(t);
    t.step();
    next[r] = held_state(t);
  });
  for (std::size_t r = 0; r < 3; ++r) {
    CAPTURE(r);
    CHECK(reports[r].moments_scratch_bytes == 0);
    CHECK(reports[r].moments_lost == 0);
    CHECK(after[r].part == before[r].part);
    CHECK(after[r].m == before[r].m);
    CHECK(after[r].v == before[r].v);
    CHECK(next[r].step == 3);
    CHECK(next[r].params == next[0].params);
  }
}

TEST_CASE(
    "a dead replica's part of the moments comes from the newest checkpoint when there is one, of one in parts from its "
    "own part file") {
  for (const std::size_t window : {kHealWindowUnits, std::size_t{2}}) from_checkpoint(window);
  from_checkpoint(kHealWindowUnits, true);
}

TEST_CASE("a step whose all-gather failed on every member is undone by the heal, and replays exactly") {
  TempDir dir("heal-undo");
  const auto ref = reference(dir, 2, 3);
  MemoryStore store;
  std::vector<Held> after(2), replayed(2);
  on_threads(2, [&](int rank) {
    const auto r = static_cast<std::size_t>(rank);
    ShardedReplica replica(dir, "r", store, "a/", rank, 2, 2);
    Trainer& t = replica.trainer;
    const Held two = held_state(t);
    auto failing = sharded_slot(*replica.comm, t.param_count());
    failing.gather = [](std::span<float>) { throw make_error(ErrorKind::Peer, "injected: the all-gather failed"); };
    t.set_slot(std::move(failing), 1);
    CHECK_THROWS_AS(t.step(), Error);
    CHECK(t.holds_ungathered_update());
    CHECK(held(t, false) != two.m);  // the part was updated before the gather
    HealReport report;
    const auto second = regroup(store, "b/", rank, 2, t, report);
    CHECK(report.step == 2);
    CHECK(report.moments_lost == 0);
    after[r] = held_state(t);
    CHECK(after[r].params == two.params);
    CHECK(after[r].m == two.m);
    CHECK(after[r].v == two.v);
    CHECK_FALSE(t.holds_ungathered_update());
    t.step();
    replayed[r] = held_state(t);
  });
  for (std::size_t r = 0; r < 2; ++r) {
    CAPTURE(r);
    CHECK(replayed[r].params == ref[r].params);
    CHECK(replayed[r].m == ref[r].m);
    CHECK(replayed[r].v == ref[r].v);
  }
}

TEST_CASE("one member completed the all-gather and the other failed in it: the heal takes the step forward") {
  TempDir dir("heal-forward");
  const auto ref = reference(dir, 2, 3);
  MemoryStore store;
  std::vector<Held> after(2);
  // The step's parts pass through shared memory, so that rank 1 can fail after sending its own and
  // rank 0 still completes: what a peer lost in the middle of an all-gather leaves.
  std::barrier sent(2);
  std::vector<float> parts;
  on_threads(2, [&](int rank) {
    const auto r = static_cast<std::size_t>(rank);
    ShardedReplica replica(dir, "r", store, "a/", rank, 2, 2);
    Trainer& t = replica.trainer;
    if (rank == 0) parts.assign(t.param_count(), 0.0f);
    auto half = sharded_slot(*replica.comm, t.param_count());
    const ShardRange own = *half.shard;
    half.gather = [&, own, rank](std::span<float> weights) {
      sent.arrive_and_wait();  // parts sized
      std::copy_n(weights.begin() + static_cast<std::ptrdiff_t>(own.offset), own.count,
                  parts.begin() + static_cast<std::ptrdiff_t>(own.offset));
      sent.arrive_and_wait();  // every part in
      if (rank == 1) throw make_error(ErrorKind::Peer, "injected: lost in the all-gather");
      std::copy(parts.begin(), parts.end(), weights.begin());
    };
    t.set_slot(std::move(half), 1);
    if (rank == 0) CHECK(t.step().step == 2);
    else CHECK_THROWS_AS(t.step(), Error);
    CHECK(t.holds_ungathered_update() == (rank == 1));
    HealReport report;
    const auto second = regroup(store, "b/", rank, 2, t, report);
    CHECK(report.source_rank == 0);
    CHECK(report.step == 3);
    CHECK(report.moments_lost == 0);
    after[r] = held_state(t);
  });
  for (std::size_t r = 0; r < 2; ++r) {
    CAPTURE(r);
    CHECK(after[r].step == 3);
    CHECK(after[r].params == ref[r].params);
    CHECK(after[r].m == ref[r].m);
    CHECK(after[r].v == ref[r].v);
  }
}

TEST_CASE("ZeRO stage 2: an in-place all-gather torn on every member, its middle rank dead: the heal puts every part back, the dead one's from its mirror") {
  TempDir dir("heal-torn");
  MemoryStore store;
  std::vector<Held> two(3), after(2), replayed(2);
  std::vector<HealReport> reports(2);
  on_threads(3, [&](int rank) {
    ShardedReplica replica(dir, "r", store, "a/", rank, 3, 2, 2);
    Trainer& t = replica.trainer;
    two[static_cast<std::size_t>(rank)] = held_state(t);
    auto tearing = sharded_slot(*replica.comm, t.param_count(), 2);
    const ShardRange own = *tearing.shard;
    // Half the other parts arrive, then the peer is lost: what a torn in-place gather leaves.
    tearing.gather = [own](std::span<float> weights) {
      for (std::size_t i = 0; i < weights.size(); i += 2)
        if (i < own.offset || i >= own.end()) weights[i] = 1e6f;
      throw make_error(ErrorKind::Peer, "injected: the all-gather failed midway");
    };
    t.set_slot(std::move(tearing), 1);
    CHECK_THROWS_AS(t.step(), Error);
    CHECK(t.holds_ungathered_update());
    CHECK(t.mirror_held() == ShardMap(t.param_count(), 3).part((rank + 1) % 3));
    if (rank == 1) return;  // it dies; rank 0 mirrored its part
    regroup_without_rank_1(store, rank, t, 2, reports, after, &replayed);
  });
  for (std::size_t r = 0; r < 2; ++r) {
    CAPTURE(r);
    CHECK(reports[r].step == 2);
    CHECK(reports[r].weights_lost == 0);
    CHECK(reports[r].moments_lost == two[1].part.count);  // the dead part's moments: no checkpoint
    CHECK(after[r].params == two[0].params);  // step 2's weights, whole, the dead part's too
  }
  // The survivors' own moments are step 2's again, and they go on in step.
  for (const std::size_t was : {0u, 2u}) {
    const ShardRange part = two[was].part;
    const Held& now = after[was == 0 ? 0 : 1];
    for (std::size_t i = std::max(part.offset, now.part.offset); i < std::min(part.end(), now.part.end()); ++i)
      REQUIRE(now.m[i - now.part.offset] == two[was].m[i - part.offset]);
  }
  CHECK(replayed[0].params == replayed[1].params);
  CHECK(replayed[0].step == 3);
}

// The whole weights of `size` unsharded replicas after `steps` steps: what any stage trains, bit for
// bit (test_data_parallel).
std::vector<float> plain_weights(const TempDir& dir, int size, int steps) {
  MemoryStore store;
  std::vector<float> out;
  on_threads(size, [&](int rank) {
    const auto cfg = job(dir, "plain" + std::to_string(steps) + "-" + std::to_string(rank));
    RunLog log(cfg.job.run_dir);
    auto comm = connect_gloo(store, "p/", rank, size, GlooOptions{});
    Trainer t(cfg, posix_env(), log, nullptr, clock_stub, data_parallel_slot(*comm));
    for (int i = 0; i < steps; ++i) t.step();
    if (rank == 0) out.assign(t.model().params().begin(), t.model().params().end());
  });
  return out;
}

TEST_CASE("ZeRO stage 3: the middle of 3 replicas dies between steps: the survivors lose no step, its part of the weights comes from its mirror") {
  TempDir dir("heal-zero3");
  const auto two = plain_weights(dir, 3, 2);
  MemoryStore store;
  std::vector<Held> after(2), replayed(2);
  std::vector<HealReport> reports(2);
  const ShardMap map(two.size(), 3);
  on_threads(3, [&](int rank) {
    ShardedReplica replica(dir, "r", store, "a/", rank, 3, 2, 3);
    Trainer& t = replica.trainer;
    // Only the part's weights are held, and the next rank's in the mirror, both of step 2.
    CHECK(t.weights_sharded());
    CHECK(t.own_part_step() == 2);
    CHECK(t.mirror_step() == 2);
    CHECK(t.mirror_held() == map.part((rank + 1) % 3));
    if (rank == 1) return;  // it dies; rank 0 mirrors its part
    regroup_without_rank_1(store, rank, t, 3, reports, after, &replayed);
  });
  for (std::size_t r = 0; r < 2; ++r) {
    CAPTURE(r);
    CHECK(reports[r].step == 2);
    CHECK(reports[r].weights_lost == 0);
    CHECK(reports[r].moments_lost == map.part(1).count);  // no checkpoint: the dead part's moments restart
    CHECK(after[r].params == two);  // step 2's weights, whole, the dead part from its mirror
    CHECK(after[r].adam_steps == 2);
  }
  CHECK(replayed[0].params == replayed[1].params);
  CHECK(replayed[0].step == 3);
}

TEST_CASE("ZeRO stage 3: a step whose shift completed but on the dead rank's mirror holder: the survivors go back to the step before, which they hold whole") {
  TempDir dir("heal-zero3-shift");
  const auto two = plain_weights(dir, 3, 2);
  MemoryStore store;
  std::vector<Held> after(2);
  std::vector<HealReport> reports(2);
  on_threads(3, [&](int rank) {
    ShardedReplica replica(dir, "r", store, "a/", rank, 3, 2, 3);
    Trainer& t = replica.trainer;
    // Step 3's shift runs on every rank, but rank 0 (which mirrors rank 1) fails before it takes
    // what it received: its step does not count, the others' does.
    auto slot = sharded_slot(*replica.comm, t.param_count(), 3);
    slot.shift = [&, rank, inner = slot.shift](std::span<const float> own, std::span<float> mirrored) {
      inner(own, mirrored);
      if (rank == 0) throw make_error(ErrorKind::Peer, "injected: the shift failed on rank 0");
    };
    t.set_slot(std::move(slot), 1);
    if (rank == 0) {
      CHECK_THROWS_AS(t.step(), Error);
      CHECK(t.state().step == 2);
      CHECK(t.own_part_step() == 3);
      CHECK(t.mirror_step() == 2);
    } else {
      t.step();
      CHECK(t.mirror_step() == 3);
    }
    if (rank == 1) return;  // it dies: its part of step 3 is nowhere else
    regroup_without_rank_1(store, rank, t, 3, reports, after);
  });
  for (std::size_t r = 0; r < 2; ++r) {
    CAPTURE(r);
    CHECK(reports[r].step == 2);
    CHECK(reports[r].weights_lost == 0);
    CHECK(after[r].params == two);
    CHECK(after[r].step == 2);
    CHECK(after[r].adam_steps == 2);
  }
  CHECK(reports[1].changed);  // rank 2 had counted step 3
}

namespace {

// `size` replicas resume from cfg's run directory, then take their sharded places: what each holds.
// `by_parts`: each reads the leader's file first and its own part of the moments once it knows it,
// as a sharded site's replicas do (sites/replica/replica_process.cpp).
std::vector<Held> resume_sharded(const TempDir& dir, MemoryStore& store, const JobConfig& cfg, int size,
                                 const std::string& group, bool by_parts = false) {
  std::vector<Held> loaded(static_cast<std::size_t>(size));
  on_threads(size, [&](int rank) {
    RunLog log(dir / (group + std::to_string(rank)));
    auto comm = connect_gloo(store, group + "/", rank, size, GlooOptions{});
    Trainer t(cfg, posix_env(), log, nullptr, clock_stub);
    auto slot = sharded_slot(*comm, params_of(cfg));
    if (by_parts) {
      const auto head = t.newest_checkpoint_head();
      REQUIRE(head);
      REQUIRE(head->checkpoint.parts);
      t.resume_from(*head);
      t.restore_moments(*head->checkpoint.parts, *slot.shard);
      CHECK(t.moments_held() == *slot.shard);
    } else {
      REQUIRE(t.try_resume());
    }
    t.set_slot(std::move(slot), 1);
    loaded[static_cast<std::size_t>(rank)] = held_state(t);
  });
  return loaded;
}

// What `loaded` holds is `wrote`'s state at step 3: its weights, and its parts' moments end to end.
void check_resharded(const std::vector<Held>& loaded, const std::vector<Held>& wrote) {
  std::vector<float> whole_m, m;
  for (const auto& w : wrote) whole_m.insert(whole_m.end(), w.m.begin(), w.m.end());
  for (const auto& l : loaded) {
    CHECK(l.params == wrote[0].params);
    CHECK(l.step == 3);
    CHECK(l.adam_steps == 3);
    m.insert(m.end(), l.m.begin(), l.m.end());
  }
  CHECK(m == whole_m);
}

}  // namespace

TEST_CASE("a checkpoint written by 4 sharded replicas loads exactly at 1, 2 and 3, at stage 1 and at stage 3 (whose weights are gathered to write it)") {
  for (const int stage : {1, 3}) {
    CAPTURE(stage);
    TempDir dir("heal-reshard");
    MemoryStore store;
    std::vector<Held> wrote(4);
    on_threads(4, [&](int rank) {
      ShardedReplica replica(dir, "r", store, "w/", rank, 4, 3, stage);
      replica.trainer.save_checkpoint(rank == 0);
      wrote[static_cast<std::size_t>(rank)] = held_state(replica.trainer);
    });
    const auto cfg = job(dir, "r0");  // every reader resumes from the writer's run directory
    for (int size = 1; size <= 3; ++size) {
      CAPTURE(size);
      check_resharded(resume_sharded(dir, store, cfg, size, std::to_string(size) + "-readers"), wrote);
    }
  }
}

TEST_CASE(
    "a checkpoint written in parts by 4 sharded replicas loads exactly at 1, 2 and 3, whole or each replica its part, "
    "and not without a part, and at stage 3 the parts hold the weights too") {
  for (const int stage : {1, 3}) {
    CAPTURE(stage);
    TempDir dir("parts-reshard");
    MemoryStore store;
    const auto cfg = job(dir, "site", "[checkpoint]\nper_replica = true\n[parallel]\nzero_stage = " + std::to_string(stage) + "\n");
    std::vector<Held> wrote(4);
    on_threads(4, [&](int rank) {
      RunLog log(dir / ("writer" + std::to_string(rank)));
      auto comm = connect_gloo(store, "w/", rank, 4, GlooOptions{});
      Trainer t(cfg, posix_env(), log, nullptr, clock_stub, sharded_slot(*comm, params_of(cfg), stage));
      for (int i = 0; i < 3; ++i) t.step();
      t.save_checkpoint(rank == 0);
      CHECK(t.weights_sharded() == (stage == 3));  // writing in parts gathered nothing
      wrote[static_cast<std::size_t>(rank)] = held_state(t);
    });
    // The leader's file has the parts' list, no moments, and the weights unless the parts have them.
    const CheckpointStore files(posix_env(), cfg.job.run_dir / "checkpoints", 3);
    const auto main = files.path_for(3);
    const Checkpoint leader = decode_checkpoint(posix_env().read_all(main), main.string());
    CHECK_FALSE(leader.has("adamw.m"));
    CHECK(leader.has("params") == (stage == 1));
    CHECK(leader.get_pod<std::uint64_t>("adamw.parts").front() == 4);
    for (const auto& w : wrote) CHECK(posix_env().exists(part_path(main, w.part.offset)));
    for (int size = 1; size <= 3; ++size) {
      CAPTURE(size);
      check_resharded(resume_sharded(dir, store, cfg, size, std::to_string(size) + "-readers"), wrote);
      check_resharded(resume_sharded(dir, store, cfg, size, std::to_string(size) + "-part-readers", true), wrote);
    }
    // Without one of its parts the checkpoint is no checkpoint: nothing to resume from here.
    posix_env().remove(part_path(main, wrote[2].part.offset));
    RunLog log(dir / "late");
    Trainer late(cfg, posix_env(), log, nullptr, clock_stub);
    CHECK_FALSE(late.try_resume());
    CHECK_FALSE(late.newest_checkpoint_head());
  }
}
