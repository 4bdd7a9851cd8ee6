// What `meridianctl status` shows of the control plane, read from a real 3-member etcd cluster:
// every member with its client URL and the one leader, a lease with its TTL granted and left, a
// revoked lease, and a dead or stopped member shown as unreachable within the bounded time
// rather than hanging or failing the whole reading.
#include <doctest/doctest.h>

#include <chrono>
#include <set>
#include <string>

#include "crosssite/control/control_health.hpp"
#include "crosssite/control/etcd_client.hpp"
#include "tests/support/etcd_cluster.hpp"

using namespace meridian;
using namespace std::chrono_literals;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

const ControlHealth::Member* named(const ControlHealth& h, const std::string& name) {
  for (const auto& m : h.members)
    if (m.name == name) return &m;
  return nullptr;
}

}  // namespace

TEST_CASE("control health: members, leader and a lease of a live cluster, dead and stopped members unreachable") {
  testing::EtcdCluster cluster;
  const int leader = cluster.wait_leader();
  REQUIRE(leader >= 0);
  EtcdClient etcd(EtcdOptions{cluster.endpoints(), 5000ms});
  const auto lease = etcd.grant_lease(30);
  const ControlHealthOptions options{EtcdOptions{cluster.endpoints()}, 500ms};

  auto h = read_control_health(options, lease);
  CHECK(h.error.empty());
  REQUIRE(h.members.size() == 3);
  std::set<std::string> ids;
  int leaders = 0;
  for (int i = 0; i < 3; ++i) {
    const auto* m = named(h, cluster.member(i).name());
    REQUIRE(m != nullptr);
    CHECK(m->reachable);
    CHECK(m->error.empty());
    CHECK(m->client_urls == std::vector<std::string>{cluster.member(i).endpoint()});
    CHECK_FALSE(m->version.empty());
    CHECK(m->leader == (i == leader));
    leaders += m->leader;
    ids.insert(m->id);
  }
  CHECK(leaders == 1);
  CHECK(ids.size() == 3);
  CHECK(h.leader == cluster.member(leader).name());
  REQUIRE(h.lease.has_value());
  CHECK(h.lease->alive);
  CHECK(h.lease->granted_s == 30);
  CHECK(h.lease->remaining_s > 20);
  CHECK(h.lease->remaining_s <= 30);
  const auto json = to_json(h);
  CHECK(json["etcd"] == true);
  CHECK(json["members"].size() == 3);
  CHECK(json["lease"]["ttl_s"].get<int>() > 20);

  etcd.revoke_lease(lease);
  h = read_control_health(options, lease);
  REQUIRE(h.lease.has_value());
  CHECK_FALSE(h.lease->alive);
  CHECK(h.lease->error.empty());
  CHECK_FALSE(read_control_health(options, 0).lease.has_value());

  // A member that is not the leader dies, another is stopped (accepts connections, answers
  // nothing): both show as unreachable, the reading stays bounded and the leader stays known.
  const int dead = (leader + 1) % 3, stopped = (leader + 2) % 3;
  cluster.member(dead).kill();
  cluster.member(stopped).pause();
  auto t0 = std::chrono::steady_clock::now();
  h = read_control_health(options, 0);
  const double took = seconds_since(t0);
  MESSAGE("control health with one member dead and one stopped: ", took, " s");
  CHECK(took < 4.0);  // (members + 2) x 500 ms, and slack for a loaded machine
  const auto* d = named(h, cluster.member(dead).name());
  const auto* s = named(h, cluster.member(stopped).name());
  const auto* l = named(h, cluster.member(leader).name());
  if (h.error.empty()) {  // the member list came from the member still up
    REQUIRE(d != nullptr);
    REQUIRE(s != nullptr);
    REQUIRE(l != nullptr);
    CHECK_FALSE(d->reachable);
    CHECK_FALSE(s->reachable);
    CHECK_FALSE(d->error.empty());
    CHECK(l->reachable);  // it answers, though without a majority it no longer has a leader
  } else {
    // The lone member lost its majority and refuses the list: every endpoint is still probed.
    CHECK(h.members.size() == 3);
    int reachable = 0;
    for (const auto& m : h.members) reachable += m.reachable;
    CHECK(reachable == 1);
  }
  cluster.member(stopped).resume();

  // Nothing answers at all: a sentence, every endpoint unreachable, no exception.
  for (int i = 0; i < 3; ++i) cluster.member(i).kill();
  t0 = std::chrono::steady_clock::now();
  h = read_control_health(options, 5);
  CHECK(seconds_since(t0) < 4.0);
  CHECK_FALSE(h.error.empty());
  CHECK(h.members.size() == 3);
  for (const auto& m : h.members) CHECK_FALSE(m.reachable);
  CHECK_FALSE(h.leader.has_value());
  REQUIRE(h.lease.has_value());
  CHECK_FALSE(h.lease->alive);
  CHECK_FALSE(h.lease->error.empty());
}
