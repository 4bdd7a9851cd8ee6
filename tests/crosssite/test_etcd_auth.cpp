// etcd's own auth for meridian's jobs (crosssite/control/etcd_auth), against a real member over mutual
// TLS: a site's user reads and writes its job's keys only; the client authenticates by itself and
// again when etcd no longer takes its token; the watch and the leases work as that user.
#include <doctest/doctest.h>

#include <chrono>
#include <thread>

#include "core/util/error.hpp"
#include "crosssite/control/etcd_auth.hpp"
#include "crosssite/control/etcd_client.hpp"
#include "crosssite/control/etcd_watch.hpp"
#include "crosssite/round/records.hpp"
#include "sim/emulator/operator_faults.hpp"
#include "sim/emulator/wan_start.hpp"
#include "tests/support/error_of.hpp"
#include "tests/support/etcd_server.hpp"
#include "tests/support/eventually.hpp"

using namespace meridian;
using namespace std::chrono_literals;

namespace {

EtcdOptions as(const testing::EtcdServer& server, std::optional<EtcdCredentials> who) {
  EtcdOptions o{{server.endpoint()}, 3000ms};
  o.tls = server.tls();
  o.credentials = std::move(who);
  return o;
}

// Jobs "a" (sites x, y) and "b" (site x) granted, then auth turned on.
void set_up(const testing::EtcdServer& server) {
  EtcdClient admin(as(server, std::nullopt));  // auth is off: anyone may administer
  grant_job(admin, "a", {{"x", "pw-ax"}, {"y", "pw-ay"}});
  grant_job(admin, "b", {{"x", "pw-bx"}});
  enable_auth(admin, "pw-root");
}

}  // namespace

TEST_CASE("a site's user reads and writes its own job's keys and no other's") {
  testing::EtcdServer server(/*tls=*/true);
  set_up(server);
  EtcdClient ax(as(server, EtcdCredentials{etcd_site_user("a", "x"), "pw-ax"}));
  ax.put("/meridian/a/members/x", "1");
  CHECK(ax.get("/meridian/a/members/x") == std::optional<std::string>("1"));
  CHECK(ax.create_if_absent("/meridian/a/commits/1", "c1"));
  CHECK(ax.get_prefix("/meridian/a/").size() == 2);
  // Job b's keys, and every key at once, are another job's.
  CHECK(testing::error_of(ErrorKind::Peer, [&] { ax.put("/meridian/b/members/x", "forged"); }).find("permission denied") !=
        std::string::npos);
  CHECK(testing::error_of(ErrorKind::Peer, [&] { ax.get("/meridian/b/commits/1"); }).find("permission denied") !=
        std::string::npos);
  CHECK(testing::error_of(ErrorKind::Peer, [&] { ax.get_prefix("/"); }).find("permission denied") != std::string::npos);
  // Job b's own site may.
  EtcdClient bx(as(server, EtcdCredentials{etcd_site_user("b", "x"), "pw-bx"}));
  bx.put("/meridian/b/members/x", "1");
  // A wrong password, or none: nothing.
  CHECK(testing::error_of(ErrorKind::Config, [&] {
          EtcdClient(as(server, EtcdCredentials{etcd_site_user("a", "y"), "wrong"})).get("/meridian/a/members/x");
        }).find("refused") != std::string::npos);
  CHECK(testing::error_of(ErrorKind::Config, [&] {
          EtcdClient(as(server, std::nullopt)).get("/meridian/a/members/x");
        }).find("password_file") != std::string::npos);
}

TEST_CASE("a site's user writes its own records and the shared ones, and reads but never writes another site's") {
  testing::EtcdServer server(/*tls=*/true);
  set_up(server);
  const RoundKeys keys("a");
  EtcdClient ax(as(server, EtcdCredentials{etcd_site_user("a", "x"), "pw-ax"}));
  EtcdClient ay(as(server, EtcdCredentials{etcd_site_user("a", "y"), "pw-ay"}));
  // Its own: its member record, its announcements, the disputes it files, its vouch.
  ax.put(keys.member("x"), "m");
  ax.put(keys.vouch("x"), "x applied version 1");
  ax.put(keys.delta("x", 1), "announced");
  ax.put(keys.dispute("y", 1, "x"), "y equivocated");
  // Shared: the commit log, the emulated WAN's start and the operator's faults.
  CHECK(ax.create_if_absent(keys.commit(1), "c1"));
  CHECK(ay.create_if_absent(wan_start_key("a"), "0"));
  ay.put(wan_faults_key("a"), "{}");
  // Another site's records: read, never written, its announcement not overwritten, no dispute in its name.
  ay.put(keys.delta("y", 1), "y's own");
  CHECK(ax.get(keys.delta("y", 1)) == std::optional<std::string>("y's own"));
  for (const std::string& key : {keys.member("y"), keys.delta("y", 1), keys.dispute("x", 1, "y"), keys.vouch("y")})
    CHECK(testing::error_of(ErrorKind::Peer, [&] { ax.put(key, "forged"); }).find("permission denied") !=
          std::string::npos);
  CHECK(ay.get(keys.delta("y", 1)) == std::optional<std::string>("y's own"));
  CHECK(ay.get_prefix(keys.root()).size() == 8);
  // The permissions themselves: read the job, write the site's own prefix, nothing of a site whose name extends it.
  const auto granted = etcd_site_permissions("a", "x");
  CHECK(granted.front() == EtcdPermission{false, "/meridian/a/", true});
  for (const auto& p : granted) CHECK_FALSE(p.key.starts_with("/meridian/a/deltas/y"));
}

TEST_CASE("leases, the watch and a token etcd stopped taking, as a site's user") {
  testing::EtcdServer server(/*tls=*/true);
  set_up(server);
  const auto options = as(server, EtcdCredentials{etcd_site_user("a", "y"), "pw-ay"});
  EtcdClient ay(options);
  const auto lease = ay.grant_lease(5);
  ay.put("/meridian/a/members/y", "1", lease);
  ay.keep_alive(lease);
  // The auth store changes (root adds a user): tokens given before no longer pass, and the client
  // takes a new one by itself.
  EtcdClient root(as(server, EtcdCredentials{"root", "pw-root"}));
  grant_job(root, "c", {{"z", "pw-cz"}});
  ay.put("/meridian/a/deltas/y/1", "d");
  ay.revoke_lease(lease);
  CHECK_FALSE(ay.get("/meridian/a/members/y").has_value());

  EtcdWatch watch(options, "/meridian/a/");
  REQUIRE(testing::eventually([&] { return watch.watching(); }, 10s));
  ay.put("/meridian/a/commits/2", "c2");
  CHECK(testing::eventually([&] { return watch.events() >= 1; }, 10s));
}
