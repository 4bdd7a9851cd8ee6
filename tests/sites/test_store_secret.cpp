// The site's store secret as a replica finds it: the agent's file, and the store that takes it.
#include <doctest/doctest.h>

#include <chrono>
#include <thread>

#include "core/io/secret_file.hpp"
#include "sites/site/store_secret.hpp"
#include "intrasite/comm/tcp_store.hpp"
#include "tests/support/error_of.hpp"
#include "tests/support/temp_dir.hpp"

using namespace meridian;
using namespace std::chrono_literals;

TEST_CASE("a secret file a dead agent left is read again until the running agent's replaces it") {
  // A cluster launcher restarting a whole job: the replica may read the file before the new agent
  // has written its own, and the new store refuses the old secret.
  testing::TempDir dir("store-secret");
  write_secret_file(store_secret_file(dir.path()), "the-dead-agents-secret");
  TcpStoreServer store("127.0.0.1", 0, "the-running-agents-secret");
  std::thread agent([&] {
    std::this_thread::sleep_for(300ms);
    write_secret_file(store_secret_file(dir.path()), "the-running-agents-secret");
  });
  const std::string secret = accepted_store_secret(dir.path(), store.endpoint(), 10s);
  agent.join();
  CHECK(secret == "the-running-agents-secret");
  TcpStoreClient replica(store.endpoint(), secret, 5s);
  CHECK(replica.secret_accepted());
}

TEST_CASE("a store that never takes the file's secret is Error(Peer) once the wait is over, naming the file") {
  testing::TempDir dir("store-secret");
  write_secret_file(store_secret_file(dir.path()), "another-runs-secret");
  TcpStoreServer store("127.0.0.1", 0, "this-runs-secret");
  const std::string message =
      testing::error_of(ErrorKind::Peer, [&] { accepted_store_secret(dir.path(), store.endpoint(), 400ms); });
  CHECK(message.find("store.secret") != std::string::npos);
  TcpStoreClient outsider(store.endpoint(), "another-runs-secret", 5s);
  CHECK_FALSE(outsider.secret_accepted());
}
