// Three sites in one thread, each with its own link (ZeroMQ on loopback) and etcd client against a
// real etcd: the round/commit protocol end to end, driven by polling each site in turn.
#include <doctest/doctest.h>

#include <chrono>
#include <memory>
#include <numeric>
#include <vector>

#include "core/util/hash.hpp"
#include "sync/round/cross_site.hpp"
#include "tests/support/etcd_server.hpp"
#include "transport/link/zmq_link.hpp"

using namespace meridian;
using namespace std::chrono_literals;

namespace {

constexpr std::size_t kParams = 50'000;

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::vector<float> initial_weights() {
  std::vector<float> w(kParams);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = 0.01f * static_cast<float>(static_cast<int>(i % 101) - 50);
  return w;
}

struct Site {
  Site(const std::string& job, const std::string& name, const std::string& endpoint, CodecOptions codec)
      : link(make_zmq_link("127.0.0.1", 16 << 10)),
        etcd(EtcdOptions{{endpoint}, 5000ms}),
        cross(options(job, name, endpoint), etcd, *link, seconds_now),
        state(initial_weights(), {}, codec, true),
        name(name) {}

  static CrossSiteOptions options(const std::string& job, const std::string& name, const std::string& endpoint) {
    CrossSiteOptions o;
    o.job = job;
    o.site = name;
    o.etcd = EtcdOptions{{endpoint}, 5000ms};
    o.sites = {"a", "b", "c"};
    o.control_poll = 5ms;
    o.rerequest_after = 50ms;
    return o;
  }

  // This site's round: its weights moved by a site-specific amount from the global ones.
  void submit(std::int64_t round) {
    auto local = std::vector<float>(state.global().begin(), state.global().end());
    const float shift = 1e-3f * static_cast<float>(name[0] - 'a' + 1);
    for (std::size_t i = 0; i < local.size(); ++i) local[i] -= shift * static_cast<float>(i % 7);
    auto bytes = state.encode_delta(local);
    const DeltaAnnouncement a{name, round, state.version(), 1000, bytes.size(), hash64(std::span<const std::byte>(bytes))};
    cross.submit(a, std::move(bytes));
  }

  std::unique_ptr<Link> link;
  EtcdClient etcd;
  CrossSite cross;
  OuterState state;
  std::string name;
  std::optional<CommitRecord> last;
};

#define SKIP_WITHOUT_ETCD(server)                                           \
  if (!(server).ok()) {                                                     \
    MESSAGE("skipped: no runnable etcd at ", testing::EtcdServer::kBinary); \
    return;                                                                 \
  }

void join_all(std::vector<std::unique_ptr<Site>>& sites) {
  std::vector<bool> joined(sites.size());
  const double deadline = seconds_now() + 15;
  while (std::find(joined.begin(), joined.end(), false) != joined.end()) {
    REQUIRE(seconds_now() < deadline);
    for (std::size_t i = 0; i < sites.size(); ++i) joined[i] = sites[i]->cross.poll_join(5ms) || joined[i];
  }
}

// Sites a, b and c of one job, each registered and seeing the other two.
std::vector<std::unique_ptr<Site>> joined_sites(const testing::EtcdServer& etcd, CodecOptions codec) {
  std::vector<std::unique_ptr<Site>> sites;
  for (const char* name : {"a", "b", "c"}) sites.push_back(std::make_unique<Site>("job", name, etcd.endpoint(), codec));
  join_all(sites);
  return sites;
}

// Polls every site in turn until each has applied the next version; checks its hash on the way.
// Sites already there keep being polled: they answer their peers' requests while they pump.
void commit_all(std::vector<std::unique_ptr<Site>>& sites) {
  const std::int64_t next = sites[0]->state.version() + 1;
  const double deadline = seconds_now() + 15;
  while (true) {
    bool all = true;
    for (auto& s : sites) {
      if (s->state.version() == next) {
        CHECK_FALSE(s->cross.poll_commit(s->state, 1ms).has_value());
        continue;
      }
      all = false;
      if (auto commit = s->cross.poll_commit(s->state, 5ms)) {
        auto outcome = s->state.preview(commit->mean_delta);
        REQUIRE(outcome.hash == commit->record.params_hash);
        s->state.commit(commit->record.number, std::move(outcome));
        s->last = commit->record;
      }
    }
    if (all) return;
    if (seconds_now() >= deadline) {
      for (auto& s : sites) {
        const auto t = s->cross.traffic();
        MESSAGE(s->name, " at version ", s->state.version(), " waits for ", s->cross.describe_wait(), "; refused ",
                t.deltas_refused, ", requests ", t.requests_sent);
      }
      FAIL("no commit of version ", next, " on every site in time");
    }
  }
}

}  // namespace

TEST_CASE("three sites: one commit per version, every site applies it to the same bits") {
  testing::EtcdServer etcd;
  SKIP_WITHOUT_ETCD(etcd);
  auto sites = joined_sites(etcd, {CodecKind::Int8, 256});
  for (std::int64_t round = 0; round < 3; ++round) {
    for (auto& s : sites) s->submit(round);
    commit_all(sites);
    for (auto& s : sites) {
      CHECK(s->state.version() == round + 1);
      CHECK(*s->last == *sites[0]->last);
      CHECK(s->last->entries.size() == 3);
      CHECK(OuterState::weights_hash(s->state.global()) == sites[0]->last->params_hash);
    }
  }
  std::uint64_t won = 0, proposed = 0;
  for (auto& s : sites) {
    won += s->cross.traffic().commits_won;
    proposed += s->cross.traffic().commits_proposed;
    CHECK(s->cross.traffic().deltas_refused == 0);
    // int8: one byte per parameter plus a scale per 256, to each of two peers, per round.
    CHECK(s->cross.traffic().bytes_sent >= 3 * 2 * kParams);
    CHECK(s->cross.traffic().bytes_sent <= 3 * 2 * kParams * 1.02 + 3 * 2 * 64);
  }
  CHECK(won == 3);  // exactly one proposal won each version
  CHECK(proposed >= 3);
  // The commit log in etcd holds exactly versions 1..3.
  const auto log = sites[0]->etcd.get_prefix(RoundKeys("job").commits());
  CHECK(log.size() == 3);
}

TEST_CASE("a delta that does not match its announcement is refused, fetched again and never applied") {
  testing::EtcdServer etcd;
  SKIP_WITHOUT_ETCD(etcd);
  auto sites = joined_sites(etcd, {CodecKind::Fp32, 0});
  Site& a = *sites[0];
  Site& b = *sites[1];
  a.submit(0);
  // b takes a's real delta in, then a forged one arrives under the same round from a's address
  // (a different transfer id, as a re-send would have): it replaces the real one at b.
  for (int i = 0; i < 20; ++i) CHECK_FALSE(b.cross.poll_commit(b.state, 5ms).has_value());
  std::vector<std::byte> forged(encoded_size(kParams, {CodecKind::Fp32, 0}));
  encode(std::vector<float>(kParams, 1.0f), {CodecKind::Fp32, 0}, forged);
  a.link->send(b.link->address(), (std::uint64_t{0} << 20) | (1 << 16) | 999, static_cast<std::uint16_t>(LinkTag::Delta), forged);
  for (int i = 0; i < 20; ++i) CHECK_FALSE(b.cross.poll_commit(b.state, 5ms).has_value());
  sites[2]->submit(0);
  b.submit(0);
  commit_all(sites);
  CHECK(b.cross.traffic().deltas_refused >= 1);
  CHECK(b.cross.traffic().requests_sent >= 1);
  for (auto& s : sites) CHECK(OuterState::weights_hash(s->state.global()) == a.last->params_hash);
}

TEST_CASE("transfers from a link that is no member of the job are refused") {
  testing::EtcdServer etcd;
  SKIP_WITHOUT_ETCD(etcd);
  auto sites = joined_sites(etcd, {CodecKind::Fp32, 0});
  auto stranger = make_zmq_link("127.0.0.1");
  const std::vector<std::byte> junk(64, std::byte{7});
  stranger->send(sites[0]->link->address(), 0, static_cast<std::uint16_t>(LinkTag::Delta), junk);
  const double deadline = seconds_now() + 5;
  while (sites[0]->cross.traffic().deltas_refused == 0 && seconds_now() < deadline)
    sites[0]->cross.poll_commit(sites[0]->state, 5ms);
  CHECK(sites[0]->cross.traffic().deltas_refused == 1);
  CHECK(sites[0]->state.version() == 0);
}

TEST_CASE("synchronous baseline: every site gets the same mean of all sites' gradients") {
  testing::EtcdServer etcd;
  SKIP_WITHOUT_ETCD(etcd);
  auto sites = joined_sites(etcd, {CodecKind::Fp32, 0});
  for (std::int64_t step = 0; step < 3; ++step) {
    std::vector<std::vector<float>> values(3, std::vector<float>(1000));
    for (int s = 0; s < 3; ++s)
      for (std::size_t i = 0; i < 1000; ++i) values[s][i] = static_cast<float>(s + 1) * 0.1f + static_cast<float>(i + step);
    for (int s = 0; s < 3; ++s) sites[s]->cross.send_gradients(step, values[s]);
    std::vector<bool> done(3);
    const double deadline = seconds_now() + 10;
    while (std::find(done.begin(), done.end(), false) != done.end()) {
      REQUIRE(seconds_now() < deadline);
      for (int s = 0; s < 3; ++s)
        if (!done[s]) done[s] = sites[s]->cross.poll_gradients(step, values[s], 5ms);
    }
    CHECK(values[0] == values[1]);
    CHECK(values[0] == values[2]);
    CHECK(values[0][10] == doctest::Approx(0.2 + 10 + step));
  }
}

TEST_CASE("a member flooding transfers for future rounds is held to a few, the rest refused") {
  testing::EtcdServer etcd;
  SKIP_WITHOUT_ETCD(etcd);
  auto sites = joined_sites(etcd, {CodecKind::Fp32, 0});
  const std::vector<std::byte> junk(128, std::byte{1});
  for (std::uint64_t round = 100; round < 140; ++round)
    sites[1]->link->send(sites[0]->link->address(), round << 20 | (1 << 16), static_cast<std::uint16_t>(LinkTag::Delta),
                         junk);
  const double deadline = seconds_now() + 5;
  while (sites[0]->cross.traffic().deltas_refused < 24 && seconds_now() < deadline)
    sites[0]->cross.poll_commit(sites[0]->state, 5ms);
  CHECK(sites[0]->cross.traffic().deltas_refused == 24);
  CHECK(sites[0]->state.version() == 0);
}
