// What mutual TLS and etcd's auth cost a site's control-plane calls: the time of one etcd request
// (a put, then a get, of a small key) through meridian's client against a local member in plain
// HTTP, over mutual TLS, and over mutual TLS with auth on (a site's user and its token), each
// member started here on loopback. The client opens a connection per request (EtcdHttp), so over
// TLS every request pays a full handshake. Rounds interleave the three so each median sees the same
// machine. Usage: bench_etcd [rounds] [calls per round]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>

#include "bench/stats.hpp"
#include "sites/launch/etcd_member.hpp"
#include "crosssite/control/etcd_auth.hpp"
#include "crosssite/control/etcd_client.hpp"

using namespace meridian;
using bench::Clock;
using bench::median;
using bench::seconds_since;

namespace {

struct Setup {
  std::string name;
  std::unique_ptr<EtcdMember> member;
  EtcdOptions client;
};

Setup plain(const std::filesystem::path& dir) {
  auto member = std::make_unique<EtcdMember>(dir / "plain");
  EtcdOptions o{{member->endpoint()}, std::chrono::seconds(5)};
  return {"plaintext", std::move(member), o};
}

Setup tls(const std::filesystem::path& dir, bool auth) {
  const auto files = write_loopback_tls(dir / (auth ? "auth-tls" : "tls"));
  auto member = std::make_unique<EtcdMember>(dir / (auth ? "auth" : "mtls"), files);
  EtcdOptions o{{member->endpoint()}, std::chrono::seconds(5)};
  o.tls = files;
  if (auth) {
    EtcdClient admin(o);
    grant_job(admin, "bench", {{"s", "site-password"}});
    enable_auth(admin, "root-password");
    o.credentials = EtcdCredentials{etcd_site_user("bench", "s"), "site-password"};
  }
  return {auth ? "mTLS + auth" : "mTLS", std::move(member), o};
}

// Milliseconds per request over `calls` put/get pairs.
double ms_per_request(EtcdClient& client, int calls) {
  const auto t0 = Clock::now();
  for (int i = 0; i < calls; ++i) {
    client.put("/meridian/bench/members/s", std::to_string(i));
    if (!client.get("/meridian/bench/members/s")) std::abort();
  }
  return seconds_since(t0) * 1e3 / (2.0 * calls);
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 7;
  const int calls = argc > 2 ? std::atoi(argv[2]) : 100;
  const auto dir = std::filesystem::temp_directory_path() / ("meridian-bench-etcd-" + std::to_string(::getpid()));
  std::vector<Setup> setups;
  setups.push_back(plain(dir));
  setups.push_back(tls(dir, false));
  setups.push_back(tls(dir, true));
  std::vector<std::unique_ptr<EtcdClient>> clients;
  for (auto& s : setups) clients.push_back(std::make_unique<EtcdClient>(s.client));
  std::vector<std::vector<double>> ms(setups.size());
  for (int r = 0; r < rounds; ++r)
    for (std::size_t i = 0; i < setups.size(); ++i) ms[i].push_back(ms_per_request(*clients[i], calls));
  std::printf("etcd request (put or get) through meridian's client, a local member, median of %d rounds of %d pairs:\n",
              rounds, calls);
  const double base = median(ms[0]);
  for (std::size_t i = 0; i < setups.size(); ++i)
    std::printf("  %-12s %7.2f ms  %5.2fx plaintext\n", setups[i].name.c_str(), median(ms[i]), median(ms[i]) / base);
  clients.clear();
  setups.clear();
  std::filesystem::remove_all(dir);
  return 0;
}
