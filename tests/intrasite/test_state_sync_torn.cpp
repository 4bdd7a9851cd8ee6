// A heal whose source dies midway: the member that was taking its state in place is left holding
// parts of two steps' states. It is never taken for a source again: a later group heals it from a
// member that holds a state, and a group of nothing but such members says its state is lost.
// Replicas are threads over Gloo, as in test_state_sync.
#include <doctest/doctest.h>

#include <memory>
#include <optional>
#include <vector>

#include "core/io/env.hpp"
#include "core/runlog/run_log.hpp"
#include "core/util/error.hpp"
#include "intrasite/comm/gloo_communicator.hpp"
#include "intrasite/comm/store.hpp"
#include "intrasite/group/state_sync.hpp"
#include "intrasite/parallel/data_parallel.hpp"
#include "tests/support/ranks.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/tiny_job.hpp"

using namespace meridian;
using meridian::testing::TempDir;

namespace {

double clock_stub() { return 0.0; }

GlooOptions loopback() {
  GlooOptions o;
  o.address = testing::own_loopback_address();
  return o;
}

// `inner`, lost right after a broadcast of `bytes` bytes: on the source, a death once the weights
// went out; on the member taking them, the source lost with its weights in and the rest not.
class LostAfterBroadcast final : public Communicator {
 public:
  LostAfterBroadcast(Communicator& inner, std::size_t bytes) : inner_(inner), bytes_(bytes) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  void allreduce(std::span<float> data, ReduceOp op) override { inner_.allreduce(data, op); }
  void broadcast(std::span<std::byte> data, int root) override {
    inner_.broadcast(data, root);
    if (data.size() == bytes_) throw make_error(ErrorKind::Peer, "injected: the heal's source is lost");
  }
  void barrier() override { inner_.barrier(); }
  void reduce_scatter(std::span<float> data, std::span<const std::size_t> counts, ReduceOp op) override {
    inner_.reduce_scatter(data, counts, op);
  }
  void all_gather(std::span<float> data, std::span<const std::size_t> counts) override {
    inner_.all_gather(data, counts);
  }
  void ring_shift(std::span<const float> out, std::span<float> in) override { inner_.ring_shift(out, in); }

 private:
  Communicator& inner_;
  std::size_t bytes_;
};

// A replica of the tiny job in its own log directory, joined to nothing yet.
struct Replica {
  Replica(const JobConfig& config, const TempDir& dir, const std::string& name)
      : log(dir / name), trainer(config, posix_env(), log, nullptr, clock_stub) {}
  RunLog log;
  Trainer trainer;
};

// Each of `replicas` heals as rank r of one group under `prefix`; what each reported or threw.
std::vector<std::optional<HealReport>> heal(MemoryStore& store, const std::string& prefix,
                                            const std::vector<Trainer*>& replicas) {
  const int size = static_cast<int>(replicas.size());
  std::vector<std::optional<HealReport>> reports(replicas.size());
  const auto errors = testing::run_ranks(size, [&](int rank) {
    const auto comm = connect_gloo(store, prefix, rank, size, loopback());
    reports[static_cast<std::size_t>(rank)] =
        sync_state(*comm, *replicas[static_cast<std::size_t>(rank)], GroupPlace{data_parallel_slot(*comm), 1});
  });
  for (std::size_t r = 0; r < errors.size(); ++r)
    if (errors[r]) {
      try {
        std::rethrow_exception(errors[r]);
      } catch (const StateLost& e) {
        reports[r].reset();  // the test reads it as no report
      }
    }
  return reports;
}

// Rank 1 (at step 0) heals from rank 0 (at step 2), and the source is lost once the weights
// went out: rank 1 holds step 2's weights with step 0's moments and records.
void tear(MemoryStore& store, Trainer& source, Trainer& taker) {
  const std::size_t weight_bytes = source.param_count() * sizeof(float);
  const auto errors = testing::run_ranks(2, [&](int rank) {
    const auto gloo = connect_gloo(store, "torn/", rank, 2, loopback());
    LostAfterBroadcast comm(*gloo, weight_bytes);
    sync_state(comm, rank == 0 ? source : taker, GroupPlace{data_parallel_slot(comm), 1});
  });
  for (const auto& e : errors) {
    REQUIRE(e);
    CHECK_THROWS_AS(std::rethrow_exception(e), Error);
  }
}

}  // namespace

TEST_CASE("a heal whose source dies once the weights went out: the member taking them is torn, never a source after") {
  TempDir dir("heal-torn");
  const JobConfig cfg = testing::tiny_job(dir, "run");
  Replica ahead(cfg, dir, "ahead"), behind(cfg, dir, "behind");
  for (int i = 0; i < 2; ++i) ahead.trainer.step();
  MemoryStore store;
  tear(store, ahead.trainer, behind.trainer);
  CHECK_FALSE(ahead.trainer.holds_torn_state());  // a source only sends
  CHECK(behind.trainer.holds_torn_state());
  CHECK(behind.trainer.state().step == 0);
  CHECK(behind.trainer.params_hash() == ahead.trainer.params_hash());  // step 2's weights, step 0's records

  SUBCASE("alone, its state is lost: it says so and changes nothing") {
    const std::uint64_t torn = behind.trainer.state_fingerprint();
    const auto reports = heal(store, "alone/", {&behind.trainer});
    CHECK_FALSE(reports[0].has_value());
    CHECK(behind.trainer.state_fingerprint() == torn);
    CHECK(behind.trainer.holds_torn_state());
  }
  SUBCASE(
      "beside a replica restarted at step 0, it takes that replica's state, though it comes first and is at step 0 "
      "too") {
    Replica restarted(cfg, dir, "restarted");
    const std::uint64_t fresh = restarted.trainer.state_fingerprint();
    const auto reports = heal(store, "again/", {&behind.trainer, &restarted.trainer});
    REQUIRE(reports[0].has_value());
    CHECK(reports[0]->source_rank == 1);
    CHECK(reports[0]->changed);
    CHECK_FALSE(behind.trainer.holds_torn_state());
    CHECK(behind.trainer.state_fingerprint() == fresh);
    CHECK(restarted.trainer.state_fingerprint() == fresh);
    // And it trains on exactly as the restarted one does (each alone now: the group is gone).
    for (Trainer* t : {&behind.trainer, &restarted.trainer}) {
      t->set_slot(ReplicaSlot{}, 1);
      t->step();
    }
    CHECK(behind.trainer.params_hash() == restarted.trainer.params_hash());
  }
  SUBCASE("beside its source, come back, it heals from it and holds step 2's state whole") {
    const std::uint64_t two = ahead.trainer.state_fingerprint();
    const auto reports = heal(store, "back/", {&ahead.trainer, &behind.trainer});
    REQUIRE(reports[1].has_value());
    CHECK(reports[1]->source_rank == 0);
    CHECK(reports[1]->changed);  // though its weights were the source's already
    CHECK(behind.trainer.state_fingerprint() == two);
    CHECK_FALSE(behind.trainer.holds_torn_state());
  }
}
