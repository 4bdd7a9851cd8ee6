// Healing a group whose replicas shard the optimizer's state (ZeRO stage 1): the survivors'
// parts carry over to the new cut, a dead replica's part restarts from zero, a step whose
// all-gather failed is taken forward or undone, and a sharded group's checkpoint loads whole at
// any replica count. Replicas are threads over Gloo, as in test_data_parallel.
#include <doctest/doctest.h>

#include <barrier>
#include <fstream>
#include <thread>
#include <vector>

#include "core/config/job_config.hpp"
#include "core/io/env.hpp"
#include "core/model/param_layout.hpp"
#include "core/runlog/run_log.hpp"
#include "core/util/error.hpp"
#include "core/util/hash.hpp"
#include "intrasite/comm/gloo_communicator.hpp"
#include "intrasite/comm/store.hpp"
#include "intrasite/group/state_sync.hpp"
#include "intrasite/parallel/data_parallel.hpp"
#include "tests/support/temp_dir.hpp"

using namespace meridian;
using meridian::testing::TempDir;

namespace {

JobConfig job(const TempDir& dir, const std::string& run) {
  const auto file = dir / (run + ".toml");
  std::ofstream(file) << "[job]\nname = \"heal\"\nseed = 3\nrun_dir = \"" << (dir / run).string() << "\"\n"
                      << "[model]\npreset = \"tiny\"\n[data]\npath = \""
                      << (testing::source_dir() / "data/tinyshakespeare/input.txt").string()
                      << "\"\n[inner]\nlr = 3e-3\nbatch_per_replica = 2\nsteps = 100\n";
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

// `size` sharded replicas train `steps` steps from a fresh start.
std::vector<Held> reference(const TempDir& dir, const std::string& tag, int size, int steps) {
  MemoryStore store;
  std::vector<Held> out(static_cast<std::size_t>(size));
  on_threads(size, [&](int rank) {
    auto comm = connect_gloo(store, "ref/", rank, size, GlooOptions{});
    const auto cfg = job(dir, tag + std::to_string(rank));
    RunLog log(cfg.job.run_dir);
    Trainer t(cfg, posix_env(), log, nullptr, clock_stub, sharded_slot(*comm, params_of(cfg)));
    for (int i = 0; i < steps; ++i) t.step();
    out[static_cast<std::size_t>(rank)] = held_state(t);
  });
  return out;
}

}  // namespace

TEST_CASE("4 sharded replicas regroup as 3: survivors' parts carry over, the dead one's restart at zero") {
  TempDir dir("heal-shrink");
  MemoryStore store;
  std::vector<Held> before(4), after(3);
  std::vector<HealReport> reports(3);
  on_threads(4, [&](int rank) {
    const auto cfg = job(dir, "r" + std::to_string(rank));
    RunLog log(cfg.job.run_dir);
    const auto r = static_cast<std::size_t>(rank);
    auto four = connect_gloo(store, "a/", rank, 4, GlooOptions{});
    Trainer t(cfg, posix_env(), log, nullptr, clock_stub, sharded_slot(*four, params_of(cfg)));
    for (int i = 0; i < 3; ++i) t.step();
    before[r] = held_state(t);
    if (rank == 3) return;  // it dies
    auto three = connect_gloo(store, "b/", rank, 3, GlooOptions{});
    reports[r] = sync_state(*three, t, GroupPlace{sharded_slot(*three, params_of(cfg)), 1});
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
    CHECK(a.part == three.part(r));
    const auto from = expected_m.begin() + static_cast<std::ptrdiff_t>(a.part.offset);
    CHECK(a.m == std::vector<float>(from, from + static_cast<std::ptrdiff_t>(a.part.count)));
    const auto from_v = expected_v.begin() + static_cast<std::ptrdiff_t>(a.part.offset);
    CHECK(a.v == std::vector<float>(from_v, from_v + static_cast<std::ptrdiff_t>(a.part.count)));
    CHECK(a.adam_steps == 3);
    CHECK(a.params == after[0].params);  // and three more steps later they still agree
  }
}

TEST_CASE("a step whose all-gather failed on every member is undone by the heal, and replays exactly") {
  TempDir dir("heal-undo");
  const auto ref = reference(dir, "ref", 2, 3);
  MemoryStore store;
  std::vector<Held> after(2), replayed(2);
  std::vector<std::uint64_t> before_hash(2);
  on_threads(2, [&](int rank) {
    const auto cfg = job(dir, "r" + std::to_string(rank));
    RunLog log(cfg.job.run_dir);
    const auto r = static_cast<std::size_t>(rank);
    auto first = connect_gloo(store, "a/", rank, 2, GlooOptions{});
    Trainer t(cfg, posix_env(), log, nullptr, clock_stub, sharded_slot(*first, params_of(cfg)));
    for (int i = 0; i < 2; ++i) t.step();
    const Held two = held_state(t);
    auto failing = sharded_slot(*first, params_of(cfg));
    failing.gather = [](std::span<float>) { throw make_error(ErrorKind::Peer, "injected: the all-gather failed"); };
    t.set_slot(std::move(failing), 1);
    CHECK_THROWS_AS(t.step(), Error);
    CHECK(t.holds_ungathered_update());
    CHECK(held(t, false) != two.m);  // the part was updated before the gather
    auto second = connect_gloo(store, "b/", rank, 2, GlooOptions{});
    const auto report = sync_state(*second, t, GroupPlace{sharded_slot(*second, params_of(cfg)), 1});
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
  const auto ref = reference(dir, "ref", 2, 3);
  MemoryStore store;
  std::vector<Held> after(2);
  // The step's parts pass through shared memory, so that rank 1 can fail after sending its own and
  // rank 0 still completes: what a peer lost in the middle of an all-gather leaves.
  std::barrier sent(2);
  std::vector<float> parts;
  on_threads(2, [&](int rank) {
    const auto cfg = job(dir, "r" + std::to_string(rank));
    RunLog log(cfg.job.run_dir);
    const auto r = static_cast<std::size_t>(rank);
    auto first = connect_gloo(store, "a/", rank, 2, GlooOptions{});
    Trainer t(cfg, posix_env(), log, nullptr, clock_stub, sharded_slot(*first, params_of(cfg)));
    for (int i = 0; i < 2; ++i) t.step();
    if (rank == 0) parts.assign(params_of(cfg), 0.0f);
    auto half = sharded_slot(*first, params_of(cfg));
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
    auto second = connect_gloo(store, "b/", rank, 2, GlooOptions{});
    const auto report = sync_state(*second, t, GroupPlace{sharded_slot(*second, params_of(cfg)), 1});
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

TEST_CASE("a checkpoint written by 4 sharded replicas loads exactly at 1, 2 and 3") {
  TempDir dir("heal-reshard");
  MemoryStore store;
  std::vector<Held> wrote(4);
  on_threads(4, [&](int rank) {
    const auto cfg = job(dir, "r" + std::to_string(rank));
    RunLog log(cfg.job.run_dir);
    auto comm = connect_gloo(store, "w/", rank, 4, GlooOptions{});
    Trainer t(cfg, posix_env(), log, nullptr, clock_stub, sharded_slot(*comm, params_of(cfg)));
    for (int i = 0; i < 3; ++i) t.step();
    t.save_checkpoint(rank == 0);
    wrote[static_cast<std::size_t>(rank)] = held_state(t);
  });
  std::vector<float> whole_m;
  for (const auto& w : wrote) whole_m.insert(whole_m.end(), w.m.begin(), w.m.end());
  for (int size = 1; size <= 3; ++size) {
    CAPTURE(size);
    std::vector<Held> loaded(static_cast<std::size_t>(size));
    on_threads(size, [&](int rank) {
      const auto cfg = job(dir, "r0");  // every reader resumes from the writer's run directory
      RunLog log(dir / ("reader" + std::to_string(size) + "-" + std::to_string(rank)));
      auto comm = connect_gloo(store, "l" + std::to_string(size) + "/", rank, size, GlooOptions{});
      Trainer t(cfg, posix_env(), log, nullptr, clock_stub);
      REQUIRE(t.try_resume());
      auto slot = sharded_slot(*comm, params_of(cfg));
      t.set_slot(std::move(slot), 1);
      loaded[static_cast<std::size_t>(rank)] = held_state(t);
    });
    std::vector<float> m;
    for (const auto& l : loaded) {
      CHECK(l.params == wrote[0].params);
      CHECK(l.step == 3);
      CHECK(l.adam_steps == 3);
      m.insert(m.end(), l.m.begin(), l.m.end());
    }
    CHECK(m == whole_m);
  }
}
