#pragma once
// A real 3-member etcd cluster on loopback for tests (sites/launch/etcd_member.hpp's
// LocalEtcdCluster: members m0, m1, m2, one per site in a multi-site test), in a fresh temporary
// directory, stopped and reaped at the end. member(i) is the EtcdMember to kill(), pause(),
// resume() or restart(). Where /usr/bin/etcd is missing or the cluster would not start, the test
// fails saying so: scripts/setup.sh installs etcd, and no test skips for it.
#include <doctest/doctest.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/util/error.hpp"
#include "sites/launch/etcd_member.hpp"
#include "tests/support/temp_dir.hpp"

namespace meridian::testing {

class EtcdCluster {
 public:
  static constexpr const char* kBinary = EtcdMember::kBinary;

  explicit EtcdCluster(int size = 3) {
    if (::access(kBinary, X_OK) != 0)
      FAIL("no etcd at ", std::string(kBinary), " (scripts/setup.sh installs etcd-server)");
    try {
      cluster_.emplace(dir_.path(), size);
    } catch (const Error& e) {
      FAIL("an etcd cluster at ", std::string(kBinary), " would not start: ", std::string(e.what()));
    }
  }

  int size() const { return cluster_->size(); }
  EtcdMember& member(int i) { return cluster_->member(i); }
  std::vector<std::string> endpoints() const { return cluster_->endpoints(); }
  const std::filesystem::path& dir() const { return dir_.path(); }

  // The member that leads now, by its own /metrics (etcd_server_is_leader); -1 when no running
  // member says it leads (between leaders, or no majority).
  int leader() {
    for (int i = 0; i < size(); ++i) {
      if (!member(i).running()) continue;
      std::istringstream metrics(loopback_http_get(member(i).client_port(), "/metrics", std::chrono::milliseconds(500)));
      for (std::string line; std::getline(metrics, line);)
        if (line.rfind("etcd_server_is_leader ", 0) == 0 && line.find(" 1") != std::string::npos) return i;
    }
    return -1;
  }

  // Waits (up to `limit`) until some member leads; -1 when none did.
  int wait_leader(std::chrono::milliseconds limit = std::chrono::seconds(5)) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;) {
      if (const int l = leader(); l >= 0) return l;
      if (std::chrono::steady_clock::now() > deadline) return -1;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

 private:
  TempDir dir_{"etcd-cluster"};
  std::optional<LocalEtcdCluster> cluster_;
};

}  // namespace meridian::testing
