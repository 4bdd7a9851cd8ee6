// Each algorithm on cases small enough to compute by hand (tests/sim/sim_fixture.hpp: steps of
// 1 s, H = 10, 100 steps per site, 1 MB/s links without latency).
#include <doctest/doctest.h>

#include <vector>

#include "sim/des/engine.hpp"
#include "tests/sim/sim_fixture.hpp"

using namespace meridian;
using namespace meridian::sim;
using meridian::sim::testing::hand_scenario;

TEST_CASE("diloco without overlap: every round waits for the transfer, utilization H*t / (H*t + transfer)") {
  const Result r = simulate(hand_scenario(2, 1e6), Algorithm::Diloco);
  CHECK(r.wall_s == doctest::Approx(110));  // 10 rounds of 10 s compute + 1 s transfer
  CHECK(r.compute_utilization == doctest::Approx(100.0 / 110));
  CHECK(r.goodput == doctest::Approx(100.0 / 110));
  CHECK(r.versions == 10);
  CHECK(r.tokens == doctest::Approx(2 * 100 * 100));
  CHECK(r.wan_bytes == doctest::Approx(10 * 2 * 1e6));  // each round, each site to its one peer
  CHECK(r.mean_staleness == 0);
  for (const auto& s : r.sites) {
    CHECK(s.compute_s == doctest::Approx(100));
    CHECK(s.wait_s == doctest::Approx(10));
    CHECK(s.steps == 100);
    CHECK(s.rounds == 10);
  }
}

TEST_CASE("shorter early rounds: rounds of 5 steps until step 20, then of 10, each with its transfer") {
  Scenario sc = hand_scenario(2, 1e6);
  sc.early_inner_steps = 5;
  sc.early_steps = 20;
  const Result r = simulate(sc, Algorithm::Diloco);
  CHECK(r.versions == 12);                  // 4 rounds of 5 steps, 8 of 10
  CHECK(r.wall_s == doctest::Approx(112));  // 100 s of compute, 12 transfers of 1 s
  CHECK(r.wan_bytes == doctest::Approx(12 * 2 * 1e6));
  for (const auto& s : r.sites) CHECK((s.steps == 100 && s.rounds == 12));
  // Sync has no rounds to shorten.
  CHECK(simulate(sc, Algorithm::Sync).versions == simulate(hand_scenario(2, 1e6), Algorithm::Sync).versions);
}

TEST_CASE("a split exchange: one flow per replica, the round's transfer falls as replicas are added") {
  // 4 MB deltas over flows of 1 MB/s each on a 100 MB/s link: 4 s from a leader, 4/M s split.
  std::vector<double> waits;
  for (const int gpus : {1, 2, 4}) {
    CAPTURE(gpus);
    Scenario sc = hand_scenario(2, 4e6);
    sc.wan = WanModel(2, WanLink{.bandwidth_mbps = 800, .stream_mbps = 8}, 1, LinkModelOptions{.burst_bytes = 0});
    for (auto& s : sc.sites) s.gpus = gpus;
    const Result leader = simulate(sc, Algorithm::Diloco);
    sc.split_exchange = true;
    const Result split = simulate(sc, Algorithm::Diloco);
    CHECK(leader.wall_s == doctest::Approx(100 + 10 * 4.0));
    CHECK(split.wall_s == doctest::Approx(100 + 10 * 4.0 / gpus));
    CHECK(split.wan_bytes == leader.wan_bytes);  // the same bytes, over more flows
    waits.push_back(split.sites[0].wait_s);
  }
  CHECK(waits[1] == doctest::Approx(waits[0] / 2));
  CHECK(waits[2] == doctest::Approx(waits[0] / 4));
  // Without a flow ceiling the link is the limit: splitting gains nothing.
  Scenario bound = hand_scenario(2, 4e6);
  for (auto& s : bound.sites) s.gpus = 4;
  const double before = simulate(bound, Algorithm::Diloco).wall_s;
  bound.split_exchange = true;
  CHECK(simulate(bound, Algorithm::Diloco).wall_s == doctest::Approx(before));
}

TEST_CASE("overlapped diloco hides a transfer shorter than a round, only the last one shows") {
  const Result r = simulate(hand_scenario(3, 1e6), Algorithm::Overlap);
  CHECK(r.wall_s == doctest::Approx(101));
  CHECK(r.compute_utilization == doctest::Approx(100.0 / 101));
  CHECK(r.versions == 10);
}

TEST_CASE("overlapped diloco with a transfer longer than a round is bound by the link, not the compute") {
  // 15 s transfers queue one behind the other on each link direction: a site's ten deltas take
  // 150 s of link time from t = 10, so the last cannot arrive before 160 whatever the overlap.
  const Result r = simulate(hand_scenario(2, 15e6), Algorithm::Overlap);
  CHECK(r.wall_s >= 160);
  CHECK(r.compute_utilization <= 100.0 / 160);
  CHECK(r.versions == 10);
  for (const auto& s : r.sites) CHECK(s.compute_s == doctest::Approx(100));
  // Both sites end round 2 at 20 with round 1 unmerged (its bytes arrive at 25): they wait.
  for (const auto& s : r.sites) {
    REQUIRE(s.timeline.size() >= 2);
    CHECK(s.timeline[0].phase == Phase::Compute);
    CHECK(s.timeline[0].t1 == doctest::Approx(20));
    CHECK(s.timeline[1].phase == Phase::Wait);
    CHECK(s.timeline[1].t0 == doctest::Approx(20));
  }
  // The proposer (site 0 wins ties) merges its own newer round at once; site 1 waits for its bytes.
  CHECK(r.sites[0].timeline[1].t1 == doctest::Approx(25));
  CHECK(r.sites[1].timeline[1].t1 == doctest::Approx(40));
}

TEST_CASE("streaming: P fragments, rounds of H/P steps, each exchange moving 1/P of the delta") {
  const Result r = simulate(hand_scenario(2, 1e6), Algorithm::Streaming);  // P = 1: overlapped diloco
  Scenario sc = hand_scenario(2, 1e6);
  sc.fragments = 2;
  const Result s = simulate(sc, Algorithm::Streaming);
  CHECK(r.wall_s == doctest::Approx(101));
  CHECK(s.wall_s == doctest::Approx(100.5));  // the last half-delta takes half a second
  CHECK(s.sites[0].rounds == 20);
  CHECK(s.versions == 20);
  CHECK(s.wan_bytes == doctest::Approx(r.wan_bytes));  // the same bytes in twice the exchanges
}

TEST_CASE("sync: gradients cross the WAN every step") {
  const Result r = simulate(hand_scenario(2, 1e6), Algorithm::Sync);
  CHECK(r.wall_s == doctest::Approx(200));  // 100 steps of 1 s compute + 1 s exchange
  CHECK(r.compute_utilization == doctest::Approx(0.5));
  CHECK(r.versions == 100);
  CHECK(r.wan_bytes == doctest::Approx(100 * 2 * 1e6));
}

TEST_CASE("async: a quorum commits without the slow site") {
  Scenario sc = hand_scenario(3, 1e6);
  sc.sites[2].step_s = 2;  // half as fast
  sc.quorum = 2;
  const Result a = simulate(sc, Algorithm::Async);
  const Result d = simulate(sc, Algorithm::Diloco);
  // Without a quorum, every version waits for the slow site: the fast ones idle half the time.
  // The slow site proposes (it holds its own delta at once); the fast ones hold it a second later.
  CHECK(d.sites[0].utilization() == doctest::Approx(100.0 / 201));
  CHECK(d.sites[2].utilization() == doctest::Approx(1.0));
  CHECK(a.sites[0].utilization() > 0.95);
  CHECK(a.versions > 10);
  CHECK(a.deltas_merged == 3 * 10);
}

TEST_CASE("async: late deltas merge stale, and past max_staleness they are dropped, their work lost") {
  Scenario sc = hand_scenario(3, 1e6);
  sc.sites[2].step_s = 4;
  // The slow site's deltas take 10 s to arrive: a version or more of the fast pair's passes meanwhile.
  for (int p : {0, 1}) sc.wan.set_link(2, p, WanLink{.bandwidth_mbps = 0.8});
  sc.quorum = 2;
  const Result stale = simulate(sc, Algorithm::Async);
  CHECK(stale.mean_staleness > 0);
  CHECK(stale.deltas_dropped == 0);
  sc.max_staleness = 0;
  const Result r = simulate(sc, Algorithm::Async);
  CHECK(r.deltas_dropped > 0);
  CHECK(r.deltas_merged + r.deltas_dropped == 3 * 10);
  CHECK(r.sites[2].useful_s < r.sites[2].compute_s);
  CHECK(r.goodput < r.compute_utilization);
}

TEST_CASE("a site that fails is waited for until its lease lapses, then fetches a peer's state and rejoins") {
  Scenario sc = hand_scenario(2, 1e6);
  sc.lease_ttl_s = 5;
  sc.outages.push_back({.site = 1, .at_s = 8, .whole_site = true, .recovery_s = 20});
  const Result r = simulate(sc, Algorithm::Diloco);
  // Site 1 is down from 8 to 28, then fetches 2 MB of state (2 s) and starts its round at 30.
  const auto& down = r.sites[1].timeline;
  REQUIRE(down.size() >= 3);
  CHECK(down[0].t1 == doctest::Approx(8));
  CHECK(down[1].phase == Phase::Down);
  CHECK(down[1].t1 == doctest::Approx(30));
  CHECK(r.sites[1].site_failures == 1);
  // Site 0 ends round 1 at 10, waits for the lease to lapse at 13, runs rounds 2 and 3 alone
  // (13-33), then waits for site 1's first round (30-40), held at site 0 at 41.
  const auto& up = r.sites[0].timeline;
  REQUIRE(up.size() >= 4);
  CHECK(up[1].phase == Phase::Wait);
  CHECK(up[1].t0 == doctest::Approx(10));
  CHECK(up[1].t1 == doctest::Approx(13));
  CHECK(up[2].t1 == doctest::Approx(33));
  CHECK(up[3].phase == Phase::Wait);
  CHECK(up[3].t1 == doctest::Approx(41));
  // Site 0's rounds 1 and 2 go to no one (site 1 is down); 8 + 10 deltas of 1 MB and 2 MB of state.
  CHECK(r.wan_bytes == doctest::Approx(20e6));
}

TEST_CASE("a replica failure: the site regroups twice and runs 1/g slower until the replica is back") {
  Scenario sc = hand_scenario(1, 1e6);
  sc.sites[0].gpus = 4;
  sc.outages.push_back({.site = 0, .at_s = 5, .whole_site = false, .recovery_s = 40});
  const Result r = simulate(sc, Algorithm::Diloco);
  CHECK(r.sites[0].replica_failures == 1);
  CHECK(r.sites[0].down_s == doctest::Approx(2 * 3));
  CHECK(r.sites[0].compute_s == doctest::Approx(100 + 40.0 / 4));
  CHECK(r.wall_s == doctest::Approx(116));  // one site: a version at each round's end
}

TEST_CASE("the same scenario and seed give the same run, failures follow the seed") {
  Scenario sc = hand_scenario(4, 1e6);
  sc.steps = 0;
  sc.horizon_s = 86400;
  sc.failures.push_back({.name = "gpu", .whole_site = false, .per_gpu_s = 1.0 / 3600, .recovery_s = 60});
  sc.failures.push_back({.name = "site", .whole_site = true, .per_gpu_s = 1.0 / 36000, .recovery_s = 600});
  sc.wan.set_link(0, 1, WanLink{.latency_ms = 30, .jitter_ms = 10, .bandwidth_mbps = 8});
  const Result a = simulate(sc, Algorithm::Async), b = simulate(sc, Algorithm::Async);
  CHECK(a.wall_s == b.wall_s);
  CHECK(a.tokens == b.tokens);
  CHECK(a.events == b.events);
  CHECK(a.sites[0].timeline.size() == b.sites[0].timeline.size());
  sc.seed = 2;
  const Result c = simulate(sc, Algorithm::Async);
  CHECK(c.tokens != a.tokens);
  int failures = 0;
  for (const auto& s : a.sites) failures += s.replica_failures + s.site_failures;
  CHECK(failures > 50);  // ~24 + ~2.4 per site in a day
  CHECK(a.wall_s == doctest::Approx(86400));
}

TEST_CASE("a token budget ends the run at the version that reaches it") {
  Scenario sc = hand_scenario(2, 1e6);
  sc.steps = 0;
  sc.token_budget = 2 * 100 * 30;  // three rounds of both sites
  const Result r = simulate(sc, Algorithm::Diloco);
  CHECK(r.budget_reached);
  CHECK(r.tokens == doctest::Approx(6000));
  CHECK(r.wall_s == doctest::Approx(33));  // rounds end at 10, 21, 32 and commit on arrival (+1 s)
}

TEST_CASE("rounds that vary in length make the others wait: the cost of stragglers, by seed") {
  Scenario sc = hand_scenario(3, 1);  // a byte per delta: transfers cost nothing
  const Result even = simulate(sc, Algorithm::Diloco);
  CHECK(even.compute_utilization == doctest::Approx(1).epsilon(1e-5));
  sc.round_time_cv = 0.2;
  const Result uneven = simulate(sc, Algorithm::Diloco);
  // Each round waits for the slowest of three draws: E[max of 3 N(0,1)] = 0.85, so ~1 / 1.17.
  CHECK(uneven.compute_utilization < 0.95);
  CHECK(uneven.compute_utilization > 0.75);
  CHECK(simulate(sc, Algorithm::Overlap).compute_utilization > uneven.compute_utilization);
  CHECK(simulate(sc, Algorithm::Diloco).wall_s == uneven.wall_s);
}
