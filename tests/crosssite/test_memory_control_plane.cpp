// The in-memory control plane the protocol simulator runs on: etcd's semantics as CrossSite uses
// them (revisions, prefix reads since a revision, create and compare-and-swap, leases that expire
// on the virtual clock) and the failures it injects.
#include <doctest/doctest.h>

#include "crosssite/control/memory_control_plane.hpp"

namespace meridian {

TEST_CASE("memory control plane: prefix reads since a revision see only what changed") {
  ManualClock clock;
  MemoryStore store(clock);
  MemoryControlPlane c(store, clock, 1);
  c.put("/j/a/1", "x");
  c.put("/j/a/2", "y");
  c.put("/j/b/1", "z");
  const auto all = c.get_prefix_since("/j/a/", 0);
  REQUIRE(all.kvs.size() == 2);
  CHECK(all.kvs[0] == std::pair<std::string, std::string>{"/j/a/1", "x"});
  c.put("/j/a/2", "y2");
  const auto since = c.get_prefix_since("/j/a/", all.revision + 1);
  REQUIRE(since.kvs.size() == 1);
  CHECK(since.kvs[0].second == "y2");
  CHECK(since.revision > all.revision);
  CHECK(c.get_prefix("/j/").size() == 3);
  CHECK(c.get("/j/c") == std::nullopt);
}

TEST_CASE("memory control plane: create and compare-and-swap write only when their condition holds") {
  ManualClock clock;
  MemoryStore store(clock);
  MemoryControlPlane c(store, clock, 1);
  CHECK(c.create_if_absent("/k", "one"));
  CHECK_FALSE(c.create_if_absent("/k", "two"));
  CHECK_FALSE(c.compare_and_swap("/k", "two", "three"));
  CHECK(c.compare_and_swap("/k", "one", "three"));
  CHECK(c.get("/k") == "three");
  CHECK_FALSE(c.compare_and_swap("/missing", "", "x"));
  CHECK(store.erase("/k"));
  CHECK(c.get("/k") == std::nullopt);
}

TEST_CASE("memory control plane: a lease's keys go when the virtual clock passes it unrenewed") {
  ManualClock clock;
  MemoryStore store(clock);
  MemoryControlPlane c(store, clock, 1);
  const auto lease = c.grant_lease(2);
  c.put("/m/a", "a", lease);
  clock.advance(1.5);
  c.keep_alive(lease);
  clock.advance(1.5);
  CHECK(c.get("/m/a") == "a");  // renewed at 1.5: good until 3.5
  const auto before = c.get_prefix_since("/", 0).revision;
  clock.advance(0.6);
  CHECK(c.get("/m/a") == std::nullopt);
  CHECK(c.get_prefix_since("/", 0).revision > before);  // the expiry is a change, as in etcd
  CHECK_THROWS_AS(c.keep_alive(lease), EtcdLeaseGone);
  CHECK_THROWS_AS(c.put("/m/a", "a", lease), EtcdLeaseGone);
  c.revoke_lease(lease);  // gone already: counts as revoked
}

TEST_CASE("memory control plane: revoking a lease drops its keys at once") {
  ManualClock clock;
  MemoryStore store(clock);
  MemoryControlPlane c(store, clock, 1);
  const auto lease = c.grant_lease(10);
  c.put("/m/a", "a", lease);
  c.put("/other", "b");
  c.revoke_lease(lease);
  CHECK(c.get("/m/a") == std::nullopt);
  CHECK(c.get("/other") == "b");
}

TEST_CASE("memory control plane: an outage refuses every call as no quorum, and a lost reply was applied") {
  ManualClock clock;
  MemoryStore store(clock);
  MemoryControlPlane c(store, clock, 7);
  c.faults().down = true;
  CHECK_THROWS_AS(c.put("/k", "v"), EtcdNoQuorum);
  CHECK_THROWS_AS(c.get_prefix("/"), EtcdNoQuorum);
  CHECK(store.get("/k") == std::nullopt);
  c.faults().down = false;
  c.faults().lost_reply = 1.0;
  try {
    c.create_if_absent("/k", "v");
    FAIL("a lost reply must throw");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Timeout);
  }
  CHECK(store.get("/k") == "v");  // applied all the same: the ambiguous case
  c.faults().lost_reply = 0;
  CHECK_FALSE(c.create_if_absent("/k", "v"));  // the retry's false negative CrossSite must read back
}

TEST_CASE("memory control plane: a client confined to a site's etcd grants is refused, and says so, outside them") {
  ManualClock clock;
  MemoryStore store(clock);
  MemoryControlPlane x(store, clock, 1);
  std::vector<std::string> denied;
  x.confine(etcd_site_permissions("j", "x"), [&](const std::string& what) { denied.push_back(what); });
  // Its own records, the shared ones, and reading the whole job.
  x.put("/meridian/j/members/x", "m");
  x.put("/meridian/j/deltas/x/000000000001", "d");
  CHECK(x.create_if_absent("/meridian/j/commits/000000000001", "c"));
  CHECK(x.create_if_absent("/meridian/j/wan/start", "0"));
  CHECK(x.get_prefix("/meridian/j/").size() == 4);
  CHECK(denied.empty());
  // Another site's records, a site whose name extends its own, another job, the whole key space.
  for (const std::string key : {"/meridian/j/members/y", "/meridian/j/deltas/y/000000000001",
                                "/meridian/j/deltas/xy/000000000001", "/meridian/k/members/x"})
    CHECK_THROWS_AS(x.put(key, "forged"), Error);
  CHECK_THROWS_AS(x.compare_and_swap("/meridian/j/members/y", "", "forged"), Error);
  CHECK_THROWS_AS(x.get_prefix("/meridian/"), Error);
  CHECK_THROWS_AS(x.get("/meridian/k/members/x"), Error);
  REQUIRE(denied.size() == 7);
  CHECK(denied[0] == "put of /meridian/j/members/y: permission denied (outside this site's etcd grants)");
  CHECK(store.get("/meridian/j/members/y") == std::nullopt);
}

TEST_CASE("etcd_permits: a permission covers a key, or every key under a prefix, and a range only by a prefix") {
  const std::vector<EtcdPermission> granted{{false, "/j/", true}, {true, "/j/m/x", false}, {true, "/j/d/x/", true}};
  CHECK(etcd_permits(granted, "/j/anything", false, false));
  CHECK(etcd_permits(granted, "/j/d/", false, true));
  CHECK_FALSE(etcd_permits(granted, "/j/anything", true, false));
  CHECK(etcd_permits(granted, "/j/m/x", true, false));
  CHECK_FALSE(etcd_permits(granted, "/j/m/x", true, true));  // a range from an exact key's grant
  CHECK_FALSE(etcd_permits(granted, "/j/m/xy", true, false));
  CHECK(etcd_permits(granted, "/j/d/x/7", true, false));
  CHECK_FALSE(etcd_permits(granted, "/k/", false, true));
}

TEST_CASE("memory control plane: slow replies take virtual time") {
  ManualClock clock;
  MemoryStore store(clock);
  MemoryControlPlane c(store, clock, 1);
  c.faults().slow_reply_s = 0.25;
  c.put("/k", "v");
  c.get("/k");
  CHECK(clock.now() == doctest::Approx(0.5));
}


TEST_CASE("memory change feed: counts writes, deletes and lease expiries under each area, and vouches only while its client is up") {
  ManualClock clock;
  MemoryStore store(clock);
  MemoryControlPlane c(store, clock, 1);
  c.put("/j/a/0", "before the feed");
  MemoryChangeFeed feed(store, c, {"/j/a/", "/j/b/"});
  CHECK(feed.watching());
  CHECK(feed.changes(0) == 0);
  c.put("/j/a/1", "x");
  c.put("/j/c/1", "elsewhere");
  CHECK(feed.changes(0) == 1);
  CHECK(feed.changes(1) == 0);
  const auto lease = c.grant_lease(2);
  c.put("/j/b/1", "y", lease);
  CHECK(c.create_if_absent("/j/b/2", "z"));
  CHECK(c.compare_and_swap("/j/b/2", "z", "w"));
  CHECK(feed.changes(1) == 3);
  clock.advance(2.5);  // the lease lapses: its key goes, and the feed says so without any call
  CHECK(feed.changes(1) == 4);
  CHECK(store.erase("/j/a/0"));
  CHECK(feed.changes(0) == 2);
  c.faults().down = true;
  CHECK_FALSE(feed.watching());
}

}  // namespace meridian
