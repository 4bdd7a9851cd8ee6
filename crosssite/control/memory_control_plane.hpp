#pragma once
// The control plane in memory, on a virtual clock: what the protocol simulator runs every site's
// real CrossSite against. MemoryStore is the cluster (one key space; every operation applies
// atomically, in the order called, so it is linearizable by construction); MemoryControlPlane is
// one site's client of it, with that client's injected failures:
//   down         every call fails at once with EtcdNoQuorum (an outage, or a partition from the majority)
//   lost_reply   the probability that a call is applied but its answer never comes (Error(Timeout)):
//                the ambiguous case a real client must survive
//   slow_reply_s how long each answer takes, on the virtual clock (the whole simulated world waits)
//   late_write   the probability that a write's answer never comes and the write is applied only
//                late_write_s later (a member that took it and stalled): its condition, if any,
//                is judged then, as etcd judges a transaction when it applies it
// Leases expire on virtual time: their keys go when the clock passes their deadline unrenewed.
// confine() holds a client to a site's etcd grants (etcd_auth.hpp), as etcd's auth holds its user.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/util/clock.hpp"
#include "core/util/rng.hpp"
#include "crosssite/control/change_feed.hpp"
#include "crosssite/control/control_plane.hpp"
#include "crosssite/control/etcd_auth.hpp"

namespace meridian {

class MemoryStore {
 public:
  explicit MemoryStore(ManualClock& clock) : clock_(clock) {}

  void put(const std::string& key, const std::string& value, std::int64_t lease);
  std::optional<std::string> get(const std::string& key);
  ControlPlane::PrefixRead get_prefix_since(const std::string& prefix, std::int64_t since);
  bool create_if_absent(const std::string& key, const std::string& value);
  bool compare_and_swap(const std::string& key, const std::string& expected, const std::string& value);
  // Damage and repair from outside the protocol (an operator's `etcdctl del`, the simulator's faults).
  bool erase(const std::string& key);
  std::int64_t grant_lease(std::int64_t ttl_seconds);
  void keep_alive(std::int64_t lease);
  void revoke_lease(std::int64_t lease);
  bool lease_alive(std::int64_t lease);
  // Applies `write` at virtual time `at` (before whatever the store does first from then on).
  void later(double at, std::function<void()> write);
  std::size_t late_writes() const { return late_.size(); }  // not applied yet
  std::int64_t revision() const { return revision_; }
  // How many writes, deletes and lease expiries of keys under `prefix` there were since the first
  // call for it: what an etcd watch on the prefix reports.
  std::uint64_t changes(const std::string& prefix);
  // Every key and value, sorted: what a checker reads after a run.
  std::vector<std::pair<std::string, std::string>> dump();

 private:
  struct Entry {
    std::string value;
    std::int64_t mod_revision = 0;
    std::int64_t lease = 0;
  };
  struct Lease {
    double ttl_s = 0;
    double expires_at = 0;
  };
  void expire();  // applies the late writes due, drops the leases the clock has passed and their keys
  void settle();  // the late writes due
  void write(const std::string& key, std::string value, std::int64_t lease);
  void drop_keys_of(std::int64_t lease);
  void touched(const std::string& key);  // counts a change for the watched prefixes it is under

  ManualClock& clock_;
  std::map<std::string, Entry> kv_;
  std::map<std::int64_t, Lease> leases_;
  std::int64_t revision_ = 1;
  std::int64_t next_lease_ = 0x1000;
  std::multimap<double, std::function<void()>> late_;
  std::map<std::string, std::uint64_t> watched_;  // by prefix, its changes since the first call
};

struct ControlFaults {
  bool down = false;
  double lost_reply = 0;
  double slow_reply_s = 0;
  double late_write = 0;
  double late_write_s = 0.5;
};

class MemoryControlPlane final : public ControlPlane {
 public:
  MemoryControlPlane(MemoryStore& store, ManualClock& clock, std::uint64_t seed)
      : store_(store), clock_(clock), rng_(seed) {}
  ControlFaults& faults() { return faults_; }
  const ControlFaults& faults() const { return faults_; }
  // From now on a call outside `grants` is refused as etcd refuses it (Error(Peer), "permission
  // denied") after `denied` hears what it was: the simulator calls that a violation.
  void confine(std::vector<EtcdPermission> grants, std::function<void(const std::string&)> denied) {
    grants_ = std::move(grants);
    denied_ = std::move(denied);
  }

  void put(const std::string& key, const std::string& value, std::int64_t lease = 0) override;
  std::optional<std::string> get(const std::string& key) override;
  std::vector<std::pair<std::string, std::string>> get_prefix(const std::string& prefix) override;
  PrefixRead get_prefix_since(const std::string& prefix, std::int64_t since) override;
  bool create_if_absent(const std::string& key, const std::string& value) override;
  bool compare_and_swap(const std::string& key, const std::string& expected, const std::string& value) override;
  std::int64_t grant_lease(std::int64_t ttl_seconds) override;
  void keep_alive(std::int64_t lease) override;
  void revoke_lease(std::int64_t lease) override;

 private:
  // Runs one call as the faults allow: refused while down, slowed, and its answer lost at random.
  template <class F>
  auto call(const char* what, F&& f) -> decltype(f());
  // A write: as call(), or applied late without an answer (ControlFaults::late_write).
  template <class F>
  auto write(const char* what, F&& f) -> decltype(f());
  // Throws where the grants (when confined) do not cover the call.
  void permit(const char* what, const std::string& key, bool write, bool range);

  MemoryStore& store_;
  ManualClock& clock_;
  Rng rng_;
  ControlFaults faults_;
  std::optional<std::vector<EtcdPermission>> grants_;
  std::function<void(const std::string&)> denied_;
};

// One client's watch of the store's areas (ChangeFeed), so a look reads only the areas that moved,
// as over etcd: cut off with the client (while it is down, the reader reads everything).
class MemoryChangeFeed final : public ChangeFeed {
 public:
  MemoryChangeFeed(MemoryStore& store, const MemoryControlPlane& client, std::vector<std::string> areas);
  bool watching() const override { return !client_.faults().down; }
  std::uint64_t changes(std::size_t area) const override { return store_.changes(areas_.at(area)); }

 private:
  MemoryStore& store_;
  const MemoryControlPlane& client_;
  std::vector<std::string> areas_;
};

}  // namespace meridian
