#pragma once
// A real single-member etcd on loopback for tests: the one `meridian launch` starts
// (sites/launch/etcd_member.hpp), in a fresh temporary directory, stopped and reaped at the end;
// with mutual TLS and throwaway certificates when asked. Where /usr/bin/etcd is missing or would
// not start, the test fails saying so: scripts/setup.sh installs etcd, and no test skips for it.
#include <doctest/doctest.h>
#include <unistd.h>

#include <optional>
#include <string>

#include "core/util/error.hpp"
#include "sites/launch/etcd_member.hpp"
#include "tests/support/temp_dir.hpp"

namespace meridian::testing {

using meridian::free_loopback_port;

class EtcdServer {
 public:
  static constexpr const char* kBinary = EtcdMember::kBinary;

  explicit EtcdServer(bool tls = false) {
    if (::access(kBinary, X_OK) != 0)
      FAIL("no etcd at ", std::string(kBinary), " (scripts/setup.sh installs etcd-server)");
    try {
      member_.emplace(dir_.path(), tls ? std::optional(write_loopback_tls(dir_.path() / "tls")) : std::nullopt);
    } catch (const Error& e) {
      FAIL("etcd at ", std::string(kBinary), " would not start: ", std::string(e.what()));
    }
  }

  std::string endpoint() const { return member_->endpoint(); }
  // The member's TLS files, which its local clients show too; nullopt without TLS.
  const std::optional<EtcdTls>& tls() const { return member_->tls(); }
  const std::filesystem::path& log_path() const { return member_->log_path(); }
  // Stops the member for good, as a control plane lost: its clients find nobody at the endpoint.
  void stop() { member_.reset(); }

 private:
  TempDir dir_{"etcd"};
  std::optional<EtcdMember> member_;
};

}  // namespace meridian::testing
