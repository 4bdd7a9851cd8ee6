#include <doctest/doctest.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "crosssite/control/lease_keeper.hpp"
#include "tests/support/etcd_cluster.hpp"
#include "tests/support/etcd_server.hpp"
#include "tests/support/eventually.hpp"

using namespace meridian;
using namespace std::chrono_literals;

// Real leases expire in etcd's own time, so these cases wait for it (about two seconds each).
TEST_CASE("a kept lease outlives its TTL, a revoked one is reported lost") {
  testing::EtcdServer server;
  const EtcdOptions options{{server.endpoint()}, 2000ms};
  EtcdClient etcd(options);
  const auto kept = etcd.grant_lease(1);
  const auto unkept = etcd.grant_lease(1);
  etcd.put("kept", "x", kept);
  etcd.put("unkept", "x", unkept);
  {
    const auto began = std::chrono::steady_clock::now();
    LeaseKeeper keeper(options, kept, 200ms);
    // Past the TTL, and renewed all along: the unkept key lapses in etcd's own time.
    CHECK(testing::eventually([&] { return !etcd.get("unkept").has_value(); }, 10s, 50ms));
    CHECK(testing::eventually([&] { return keeper.renewals() >= 5 && testing::elapsed(began, 1500ms); }, 10s));
    CHECK(etcd.get("kept").has_value());
    CHECK_FALSE(keeper.lost());
    etcd.revoke_lease(kept);
    CHECK(testing::eventually([&] { return keeper.lost(); }, 5s, 20ms));
  }
  CHECK_FALSE(etcd.get("kept").has_value());
}

// The keeper's client is given every member of a 3-member cluster; the member it talks to dies
// or stops, and renewals go on through the others. TTL 1 s, renewals every 200 ms, watched for
// 1.5 s after the fault: only renewals through another member keep the key.
namespace {

std::vector<std::string> starting_with(const std::vector<std::string>& endpoints, int first) {
  std::vector<std::string> out;
  for (std::size_t k = 0; k < endpoints.size(); ++k) out.push_back(endpoints[(first + k) % endpoints.size()]);
  return out;
}

void keeps_through(const std::function<void(testing::EtcdCluster&, int)>& fault, bool leader_first) {
  testing::EtcdCluster cluster;
  const int leader = cluster.wait_leader();
  REQUIRE(leader >= 0);
  const int first = leader_first ? leader : (leader + 1) % cluster.size();
  const EtcdOptions options{starting_with(cluster.endpoints(), first), 2000ms, 300ms};
  EtcdClient etcd(EtcdOptions{starting_with(cluster.endpoints(), (first + 1) % cluster.size()), 3000ms, 300ms});
  const auto lease = etcd.grant_lease(1);
  etcd.put("member", "x", lease);
  LeaseKeeper keeper(options, lease, 200ms);
  REQUIRE(testing::eventually([&] { return keeper.renewals() >= 1; }, 10s));
  const auto before = keeper.renewals();
  const auto faulted = std::chrono::steady_clock::now();
  fault(cluster, first);
  // Four renewals after the fault (about one per 200 ms; the first may have waited on it), and
  // longer than the TTL: only renewals through another member can have kept the key.
  CHECK(testing::eventually([&] { return keeper.renewals() - before >= 4 && testing::elapsed(faulted, 1500ms); }, 15s));
  CHECK(etcd.get("member") == "x");
  CHECK_FALSE(keeper.lost());
  MESSAGE("renewals after the fault: ", keeper.renewals() - before, ", failed: ", keeper.failures());
  CHECK(keeper.failures() == 0);
  cluster.member(first).resume();
}

}  // namespace

TEST_CASE("the keeper renews through a kill -9 of the leader it talks to") {
  keeps_through([](testing::EtcdCluster& c, int m) { c.member(m).kill(); }, true);
}

TEST_CASE("the keeper renews through a SIGSTOP of the member it talks to") {
  keeps_through([](testing::EtcdCluster& c, int m) { c.member(m).pause(); }, false);
}
