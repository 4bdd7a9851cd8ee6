#include <doctest/doctest.h>

#include <chrono>
#include <thread>

#include "sync/control/lease_keeper.hpp"
#include "tests/support/etcd_server.hpp"

using namespace meridian;
using namespace std::chrono_literals;

// Real leases expire in etcd's own time, so these cases wait (about two seconds each).
TEST_CASE("a kept lease outlives its TTL, a revoked one is reported lost") {
  testing::EtcdServer server;
  if (!server.ok()) {
    MESSAGE("skipped: no runnable etcd");
    return;
  }
  const EtcdOptions options{{server.endpoint()}, 2000ms};
  EtcdClient etcd(options);
  const auto kept = etcd.grant_lease(1);
  const auto unkept = etcd.grant_lease(1);
  etcd.put("kept", "x", kept);
  etcd.put("unkept", "x", unkept);
  {
    LeaseKeeper keeper(options, kept, 200ms);
    std::this_thread::sleep_for(2500ms);
    CHECK(etcd.get("kept").has_value());
    CHECK_FALSE(etcd.get("unkept").has_value());
    CHECK(keeper.renewals() >= 5);
    CHECK_FALSE(keeper.lost());
    etcd.revoke_lease(kept);
    const auto deadline = std::chrono::steady_clock::now() + 3s;
    while (!keeper.lost() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(20ms);
    CHECK(keeper.lost());
  }
  CHECK_FALSE(etcd.get("kept").has_value());
}
