#pragma once
// Sites of one job in one thread, each with its own link (ZeroMQ on loopback) and etcd client
// against a real etcd, driven by polling each in turn: shared by the cross-site protocol tests.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <vector>

#include "core/util/hash.hpp"
#include "crosssite/codec/delta_digest.hpp"
#include "crosssite/control/etcd_client.hpp"
#include "crosssite/control/etcd_watch.hpp"
#include "crosssite/control/lease_keeper.hpp"
#include "crosssite/round/cross_site.hpp"
#include "tests/support/etcd_server.hpp"
#include "transport/link/zmq_link.hpp"

namespace meridian::testing {

using namespace std::chrono_literals;


inline constexpr std::size_t kParams = 50'000;

inline double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

inline std::vector<float> initial_weights() {
  std::vector<float> w(kParams);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = 0.01f * static_cast<float>(static_cast<int>(i % 101) - 50);
  return w;
}

// What a test puts around a site's link (a decorator that misbehaves), or nothing.
using LinkWrapper = std::function<std::unique_ptr<Link>(std::unique_ptr<Link>)>;

struct Site {
  Site(const std::string& job, const std::string& name, const std::string& endpoint, CodecOptions codec,
       const LinkFaults& faults = {}, std::size_t chunk_bytes = 16 << 10, CommitRuleOptions rule = {},
       FragmentPlan plan = {}, std::optional<LinkCurve> curve = std::nullopt,
       std::map<std::string, std::string> link_keys = {}, const LinkWrapper& wrap = {},
       const std::function<void(CrossSiteOptions&)>& tune = {})
      : link(wrapped(make_zmq_link("127.0.0.1", chunk_bytes, faults, 0, kLinkQueueBytes, std::move(curve)), wrap)),
        etcd(EtcdOptions{{endpoint}, 5000ms}),
        cross(tuned(options(job, name, endpoint, rule, std::move(link_keys)), tune), etcd, *link, seconds_now),
        state(initial_weights(), {}, codec, true, std::move(plan)),
        name(name) {
    cross.serve_state(&state);
  }

  static std::unique_ptr<Link> wrapped(std::unique_ptr<Link> link, const LinkWrapper& wrap) {
    return wrap ? wrap(std::move(link)) : std::move(link);
  }

  static CrossSiteOptions tuned(CrossSiteOptions o, const std::function<void(CrossSiteOptions&)>& tune) {
    if (tune) tune(o);
    return o;
  }

  static CrossSiteOptions options(const std::string& job, const std::string& name, const std::string& endpoint,
                                  CommitRuleOptions rule, std::map<std::string, std::string> link_keys = {}) {
    CrossSiteOptions o;
    o.link_keys = std::move(link_keys);
    o.rule = rule;
    o.job = job;
    o.site = name;
    const EtcdOptions etcd{{endpoint}, 5000ms};
    o.keep_lease = [etcd](std::int64_t lease) { return std::make_unique<LeaseKeeper>(etcd, lease, 2000ms); };
    o.change_feed = [etcd](const std::string& root, std::vector<std::string> areas) {
      return std::make_unique<EtcdWatch>(etcd, root, 1000ms, std::move(areas));
    };
    o.sites = {"a", "b", "c"};
    o.control_poll = 5ms;
    o.rerequest_after = 50ms;
    return o;
  }

  // This site's round: its weights moved by a site-specific amount from where the round began;
  // `tamper` may change them further (a diverged or malicious site).
  // `forge` may change the encoded bytes (values no honest encoder would write), `mishash` the
  // chunk hashes they are submitted with. Streaming: the delta of `fragment` only. `rounds`: the
  // rounds the delta says it spans (a site whose outer exchange was paused).
  void submit(std::int64_t round, const std::function<void(std::vector<float>&)>& tamper = {},
              const std::function<void(std::vector<std::byte>&)>& forge = {}, int fragment = 0,
              const std::function<void(ChunkHashes&)>& mishash = {}, int rounds = 1) {
    auto local = std::vector<float>(state.start().begin(), state.start().end());
    const float shift = 1e-3f * static_cast<float>(name[0] - 'a' + 1);
    for (std::size_t i = 0; i < local.size(); ++i) local[i] -= shift * static_cast<float>(i % 7);
    if (tamper) tamper(local);
    auto bytes = state.encode_delta(local, fragment);
    if (forge) forge(bytes);
    const DeltaAnnouncement a{name,  round,        state.version(),
                              1000,  bytes.size(), delta_digest(std::span<const std::byte>(bytes)),
                              false, fragment,     rounds};
    ChunkHashes hashes = chunk_hashes(bytes, cross.chunk_bytes());
    if (mishash) mishash(hashes);
    cross.submit(a, std::move(bytes), std::move(hashes));
  }

  // What a site's replicas do with a commit (or a peer's state): the next version, the round rebased onto it.
  void apply(CrossSite::Commit& commit) {
    auto local = std::vector<float>(state.start().begin(), state.start().end());
    if (!commit.snapshot.empty()) {
      state.adopt(commit.snapshot, commit.record.params_hash, local);
    } else {
      auto outcome = state.preview(commit.fragments, commit.mean_delta);
      REQUIRE(outcome.hash == commit.record.params_hash);
      state.commit(commit.record.number, std::move(outcome));
      for (const int f : commit.fragments) state.rebase(local, f);
    }
    last = commit.record;
  }

  std::unique_ptr<Link> link;
  EtcdClient etcd;
  CrossSite cross;
  OuterState state;
  std::string name;
  std::optional<CommitRecord> last;
};

inline void join_all(std::vector<std::unique_ptr<Site>>& sites) {
  std::vector<bool> joined(sites.size());
  const double deadline = seconds_now() + 15;
  while (std::find(joined.begin(), joined.end(), false) != joined.end()) {
    REQUIRE(seconds_now() < deadline);
    for (std::size_t i = 0; i < sites.size(); ++i) joined[i] = sites[i]->cross.poll_join(5ms) || joined[i];
  }
}

// Sites a, b and c of one job, each registered and seeing the other two.
inline std::vector<std::unique_ptr<Site>> joined_sites(const EtcdServer& etcd, CodecOptions codec,
                                                       const LinkFaults& faults = {}, std::size_t chunk_bytes = 16 << 10,
                                                       CommitRuleOptions rule = {}, const FragmentPlan& plan = {}) {
  std::vector<std::unique_ptr<Site>> sites;
  std::uint64_t seed = faults.seed;
  for (const char* name : {"a", "b", "c"}) {
    LinkFaults f = faults;
    f.seed = seed++;
    sites.push_back(std::make_unique<Site>("job", name, etcd.endpoint(), codec, f, chunk_bytes, rule, plan));
  }
  join_all(sites);
  return sites;
}

// Polls every site in turn until each has applied the next version; checks its hash on the way.
// Sites already there keep being polled: they answer their peers' requests while they pump.
inline void commit_all(std::vector<std::unique_ptr<Site>>& sites) {
  const std::int64_t next = sites[0]->state.version() + 1;
  const double deadline = seconds_now() + 15;
  while (true) {
    bool all = true;
    for (auto& s : sites) {
      if (s->state.version() == next) {
        CHECK_FALSE(s->cross.poll_commit(s->state, 1ms).has_value());
        continue;
      }
      all = false;
      if (auto commit = s->cross.poll_commit(s->state, 5ms)) s->apply(*commit);
    }
    if (all) return;
    if (seconds_now() >= deadline) {
      for (auto& s : sites) {
        const auto t = s->cross.traffic();
        MESSAGE(s->name, " at version ", s->state.version(), " waits for ", s->cross.describe_wait(), "; refused ",
                t.refused.total(), ", requests ", t.requests_sent);
      }
      FAIL("no commit of version ", next, " on every site in time");
    }
  }
}


}  // namespace meridian::testing
