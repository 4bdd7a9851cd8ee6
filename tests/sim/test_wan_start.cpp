#include <doctest/doctest.h>

#include "sim/emulator/wan_start.hpp"
#include "tests/support/error_of.hpp"
#include "tests/support/etcd_server.hpp"

using namespace meridian;

TEST_CASE("every site takes the job's start from etcd: the first to ask writes it, later ones read it") {
  testing::EtcdServer etcd;
  JobConfig c;
  c.sites = {{.name = "a"}, {.name = "b"}};
  EtcdClient client(EtcdOptions{{etcd.endpoint()}});
  WanSchedule first(c), later(c);
  agree_wan_start(first, client, "job", 1000.25);
  agree_wan_start(later, client, "job", 2000.5);  // a site that starts (or restarts) later
  CHECK(first.start() == 1000.25);
  CHECK(later.start() == 1000.25);
  WanSchedule other(c);
  agree_wan_start(other, client, "another-job", 3000);
  CHECK(other.start() == 3000);

  client.put(wan_start_key("garbled"), "yesterday");
  WanSchedule garbled(c);
  const auto what = testing::error_of(ErrorKind::Peer, [&] { agree_wan_start(garbled, client, "garbled", 1); });
  CHECK(what.find("holds no start time: yesterday") != std::string::npos);
  CHECK_FALSE(garbled.start().has_value());
}
