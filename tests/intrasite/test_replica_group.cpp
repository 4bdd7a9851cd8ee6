// ReplicaGroup: how a replica meets the members of a generation its site's agent published.
// Replicas are threads sharing a MemoryStore; the test plays the agent and publishes generations.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <optional>
#include <thread>
#include <vector>

#include "core/util/clock.hpp"
#include "core/util/error.hpp"
#include "intrasite/comm/store.hpp"
#include "intrasite/group/protocol.hpp"
#include "intrasite/group/replica_group.hpp"
#include "tests/support/error_of.hpp"
#include "tests/support/eventually.hpp"
#include "tests/support/ranks.hpp"

using namespace meridian;
using namespace std::chrono_literals;
using meridian::testing::error_of;
using meridian::testing::eventually;
using meridian::testing::own_loopback_address;

namespace {

// Short, so that a test shows a wait outlasting it; the join's own bound is far longer.
const GlooOptions kOptions{own_loopback_address(), 500ms};
constexpr auto kJoinTimeout = 60s;

void publish(Store& store, std::int64_t n, std::vector<int> members) {
  store.set(site_keys::generation(n), encode_generation(Generation{n, std::move(members)}));
}

bool present(Store& store, const std::vector<std::string>& keys) {
  for (const auto& k : keys)
    if (!store.check(k)) return false;
  return true;
}

// Who met: the generation a replica joined, and the sum over its members of (id + 1).
struct Met {
  std::int64_t generation = -1;
  float sum = 0;
};

// Replica `id` joining from generation `from` in a thread of its own; `met()` once it has.
class Joiner {
 public:
  Joiner(Store& store, int id, std::int64_t from, std::chrono::milliseconds timeout = kJoinTimeout)
      : thread_([this, &store, id, from, timeout] {
          try {
            ReplicaGroup group(store, id, kOptions, steady_seconds);
            group.join(from, timeout);
            float value = static_cast<float>(id + 1);
            group.comm().allreduce(std::span(&value, 1), ReduceOp::Sum);
            met_ = Met{group.generation().number, value};
          } catch (...) {
            error_ = std::current_exception();
          }
        }) {}

  Met met() {
    thread_.join();
    if (error_) std::rethrow_exception(error_);
    return met_;
  }

 private:
  Met met_;
  std::exception_ptr error_;
  std::thread thread_;
};

// `inner`, cut off while `cut` is set: every call fails as a store that does not answer does
// (after a pause, as the real client's takes its answer bound), and is counted.
class CutStore final : public Store {
 public:
  explicit CutStore(Store& inner) : inner_(inner) {}
  std::atomic<bool> cut{true};
  std::atomic<int> refused{0};

  void set(const std::string& key, std::span<const std::byte> value) override {
    refuse_while_cut();
    inner_.set(key, value);
  }
  std::vector<std::byte> get(const std::string& key, std::chrono::milliseconds timeout) override {
    refuse_while_cut();
    return inner_.get(key, timeout);
  }
  bool check(const std::string& key) override {
    refuse_while_cut();
    return inner_.check(key);
  }
  std::int64_t add(const std::string& key, std::int64_t delta) override {
    refuse_while_cut();
    return inner_.add(key, delta);
  }

 private:
  void refuse_while_cut() {
    if (!cut) return;
    ++refused;
    std::this_thread::sleep_for(5ms);
    throw make_error(ErrorKind::Timeout, "store server did not answer (cut off)");
  }
  Store& inner_;
};

}  // namespace

TEST_CASE("a member busy for longer than the collective timeout still finds the others waiting at the rendezvous") {
  MemoryStore store;
  publish(store, 0, {0, 1, 2});
  Joiner first(store, 0, 0), second(store, 1, 0);
  REQUIRE(eventually([&] { return present(store, {site_keys::arrived(0, 0), site_keys::arrived(0, 1)}); }));
  // Replica 2 still trains in the previous generation: it comes at its next step boundary.
  std::this_thread::sleep_for(3 * kOptions.timeout);
  Joiner late(store, 2, 0);
  for (Joiner* j : {&first, &second, &late}) {
    const Met met = j->met();
    CHECK(met.generation == 0);
    CHECK(met.sum == 6);
  }
  CHECK_FALSE(store.check(site_keys::failure(0, 0)));
}

TEST_CASE(
    "a generation superseded before its members met is left at once for the newer one, without a failure report") {
  MemoryStore store;
  publish(store, 0, {0, 1});
  Joiner stays(store, 0, 0);
  REQUIRE(eventually([&] { return store.check(site_keys::arrived(0, 0)); }));
  // Replica 1 never comes; the agent has already formed a group with replica 2 instead.
  publish(store, 1, {0, 2});
  Joiner joins(store, 2, 1);
  for (Joiner* j : {&stays, &joins}) {
    const Met met = j->met();
    CHECK(met.generation == 1);
    CHECK(met.sum == 4);
  }
  CHECK_FALSE(store.check(site_keys::failure(0, 0)));
}

TEST_CASE("a replica that comes to a generation already superseded skips it") {
  MemoryStore store;
  publish(store, 0, {0, 1});
  publish(store, 1, {0, 1, 2});
  Joiner a(store, 0, 0), b(store, 1, 0), c(store, 2, 1);
  for (Joiner* j : {&a, &b, &c}) {
    const Met met = j->met();
    CHECK(met.generation == 1);
    CHECK(met.sum == 6);
  }
  CHECK_FALSE(store.check(site_keys::arrived(0, 0)));
}

TEST_CASE(
    "a member lost after it came to the rendezvous: the others report the failed connect and meet in the agent's next "
    "generation") {
  MemoryStore store;
  publish(store, 0, {0, 1, 2});
  const std::byte here{1};
  store.set(site_keys::arrived(0, 2), std::span(&here, 1));  // replica 2 came, then died
  Joiner a(store, 0, 0), b(store, 1, 0);
  REQUIRE(eventually([&] { return present(store, {site_keys::failure(0, 0), site_keys::failure(0, 1)}); }, 30s));
  publish(store, 1, {0, 1});
  for (Joiner* j : {&a, &b}) {
    const Met met = j->met();
    CHECK(met.generation == 1);
    CHECK(met.sum == 3);
  }
}

TEST_CASE("a member that never comes: the join times out at its own bound, naming the member") {
  MemoryStore store;
  publish(store, 0, {0, 1});
  Joiner alone(store, 0, 0, 2 * kOptions.timeout);
  const auto message = error_of(ErrorKind::Timeout, [&] { alone.met(); });
  CHECK(message.find("replica 1 of generation 0 did not come to its rendezvous") != std::string::npos);
  CHECK_FALSE(store.check(site_keys::failure(0, 0)));
}

TEST_CASE("a replica waiting for a generation that lists it announces itself again every second") {
  // The agent takes no announcement it read while the slot counted as a member for a joiner's: a
  // cluster launcher's restart of a dead member announced itself too early, and says so again.
  MemoryStore store;
  publish(store, 0, {0, 1});
  const auto announced = [&] {
    const auto bytes = store.get(site_keys::ready(2), 0ms);
    std::int64_t count = 0;
    std::memcpy(&count, bytes.data(), sizeof count);
    return count;
  };
  Joiner late(store, 2, 1);
  REQUIRE(eventually([&] { return store.check(site_keys::ready(2)); }));
  CHECK(eventually([&] { return announced() >= 3; }));
  publish(store, 1, {2});  // alone: its group of one opens no socket
  CHECK(late.met().generation == 1);
}

TEST_CASE(
    "a replica cut off from its site's store rides the cut out: its failure report is dropped, and it joins once "
    "heard") {
  MemoryStore store;
  CutStore cut(store);
  ReplicaGroup reporter(cut, 0, kOptions, steady_seconds);
  CHECK_NOTHROW(reporter.report_failure());  // the agent learns of it from its silence
  CHECK(cut.refused == 1);
  // A process starting (or coming back) while its host is cut off: it scans, announces itself and
  // waits, asking again, until the store answers.
  std::optional<Met> met;
  std::thread back([&] {
    ReplicaGroup group(cut, 2, kOptions, steady_seconds);
    group.join(std::nullopt, kJoinTimeout);
    met = Met{group.generation().number, 0};
  });
  CHECK(eventually([&] { return cut.refused >= 5; }));
  CHECK_FALSE(store.check(site_keys::ready(2)));
  cut.cut = false;
  REQUIRE(eventually([&] { return store.check(site_keys::ready(2)); }));
  publish(store, 0, {2});  // alone: its group of one opens no socket
  back.join();
  REQUIRE(met);
  CHECK(met->generation == 0);
}

TEST_CASE("a store that never answers again ends the join at its own bound") {
  MemoryStore store;
  CutStore cut(store);
  ReplicaGroup group(cut, 0, kOptions, steady_seconds);
  error_of(ErrorKind::Timeout, [&] { group.join(std::nullopt, 200ms); });
  CHECK(cut.refused >= 2);
}
