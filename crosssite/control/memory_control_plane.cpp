#include "crosssite/control/memory_control_plane.hpp"

#include <type_traits>
#include <utility>

namespace meridian {

void MemoryStore::later(double at, std::function<void()> write) { late_.emplace(at, std::move(write)); }

void MemoryStore::settle() {
  while (!late_.empty() && late_.begin()->first <= clock_.now()) {
    auto write = std::move(late_.begin()->second);
    late_.erase(late_.begin());
    try {
      write();
    } catch (const Error&) {
      // Refused when it was applied (its lease gone): as etcd would have answered, had anyone listened.
    }
  }
}

void MemoryStore::expire() {
  settle();
  bool any = false;
  for (auto it = leases_.begin(); it != leases_.end();) {
    if (it->second.expires_at > clock_.now()) {
      ++it;
      continue;
    }
    drop_keys_of(it->first);
    it = leases_.erase(it);
    any = true;
  }
  if (any) ++revision_;  // etcd deletes an expired lease's keys in one revision
}

void MemoryStore::write(const std::string& key, std::string value, std::int64_t lease) {
  kv_[key] = Entry{std::move(value), ++revision_, lease};
  touched(key);
}

void MemoryStore::drop_keys_of(std::int64_t lease) {
  std::erase_if(kv_, [&](const auto& kv) {
    if (kv.second.lease != lease) return false;
    touched(kv.first);
    return true;
  });
}

void MemoryStore::touched(const std::string& key) {
  for (auto& [prefix, count] : watched_)
    if (key.starts_with(prefix)) ++count;
}

std::uint64_t MemoryStore::changes(const std::string& prefix) {
  expire();  // a lease that lapsed deletes its keys now, as etcd's would have at its deadline
  return watched_.try_emplace(prefix, 0).first->second;
}

void MemoryStore::put(const std::string& key, const std::string& value, std::int64_t lease) {
  expire();
  if (lease != 0 && !leases_.contains(lease)) throw EtcdLeaseGone("lease " + std::to_string(lease) + " not found");
  write(key, value, lease);
}

std::optional<std::string> MemoryStore::get(const std::string& key) {
  expire();
  const auto it = kv_.find(key);
  if (it == kv_.end()) return std::nullopt;
  return it->second.value;
}

ControlPlane::PrefixRead MemoryStore::get_prefix_since(const std::string& prefix, std::int64_t since) {
  expire();
  ControlPlane::PrefixRead out;
  for (auto it = kv_.lower_bound(prefix); it != kv_.end() && it->first.starts_with(prefix); ++it)
    if (it->second.mod_revision >= since) out.kvs.emplace_back(it->first, it->second.value);
  out.revision = revision_;
  return out;
}

bool MemoryStore::create_if_absent(const std::string& key, const std::string& value) {
  expire();
  if (kv_.contains(key)) return false;
  write(key, value, 0);
  return true;
}

bool MemoryStore::compare_and_swap(const std::string& key, const std::string& expected, const std::string& value) {
  expire();
  const auto it = kv_.find(key);
  if (it == kv_.end() || it->second.value != expected) return false;
  write(key, value, it->second.lease);
  return true;
}

bool MemoryStore::erase(const std::string& key) {
  expire();
  if (kv_.erase(key) == 0) return false;
  ++revision_;
  touched(key);
  return true;
}

std::int64_t MemoryStore::grant_lease(std::int64_t ttl_seconds) {
  expire();
  const std::int64_t id = next_lease_++;
  leases_[id] = Lease{static_cast<double>(ttl_seconds), clock_.now() + static_cast<double>(ttl_seconds)};
  return id;
}

void MemoryStore::keep_alive(std::int64_t lease) {
  expire();
  const auto it = leases_.find(lease);
  if (it == leases_.end()) throw EtcdLeaseGone("lease " + std::to_string(lease) + " not found");
  it->second.expires_at = clock_.now() + it->second.ttl_s;
}

void MemoryStore::revoke_lease(std::int64_t lease) {
  expire();
  if (leases_.erase(lease) == 0) return;
  drop_keys_of(lease);
  ++revision_;
}

bool MemoryStore::lease_alive(std::int64_t lease) {
  expire();
  return leases_.contains(lease);
}

std::vector<std::pair<std::string, std::string>> MemoryStore::dump() {
  expire();
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [key, entry] : kv_) out.emplace_back(key, entry.value);
  return out;
}

template <class F>
auto MemoryControlPlane::call(const char* what, F&& f) -> decltype(f()) {
  if (faults_.down) throw EtcdNoQuorum(std::string(what) + ": no leader reachable (simulated outage)");
  clock_.advance(faults_.slow_reply_s);
  const bool lost = faults_.lost_reply > 0 && rng_.uniform() < faults_.lost_reply;
  if constexpr (std::is_void_v<decltype(f())>) {
    f();
    if (lost) throw make_error(ErrorKind::Timeout, what, ": applied, but the reply was lost (simulated)");
  } else {
    auto result = f();
    if (lost) throw make_error(ErrorKind::Timeout, what, ": applied, but the reply was lost (simulated)");
    return result;
  }
}

template <class F>
auto MemoryControlPlane::write(const char* what, F&& f) -> decltype(f()) {
  // The write outlives this client (a crashed site's last request): it holds the store, not the client.
  if (!faults_.down && faults_.late_write > 0 && rng_.uniform() < faults_.late_write) {
    store_.later(clock_.now() + faults_.late_write_s, [f] { f(); });
    throw make_error(ErrorKind::Timeout, what, ": no answer; the member may still apply it (simulated)");
  }
  return call(what, std::forward<F>(f));
}

void MemoryControlPlane::permit(const char* what, const std::string& key, bool write, bool range) {
  if (!grants_ || etcd_permits(*grants_, key, write, range)) return;
  const std::string denial = std::string(what) + (range ? " of every key under " : " of ") + key +
                             ": permission denied (outside this site's etcd grants)";
  if (denied_) denied_(denial);
  throw make_error(ErrorKind::Peer, denial);
}

void MemoryControlPlane::put(const std::string& key, const std::string& value, std::int64_t lease) {
  permit("put", key, true, false);
  write("put", [store = &store_, key, value, lease] { store->put(key, value, lease); });
}
std::optional<std::string> MemoryControlPlane::get(const std::string& key) {
  permit("get", key, false, false);
  return call("get", [&] { return store_.get(key); });
}
std::vector<std::pair<std::string, std::string>> MemoryControlPlane::get_prefix(const std::string& prefix) {
  permit("range", prefix, false, true);
  return call("range", [&] { return store_.get_prefix_since(prefix, 0).kvs; });
}
ControlPlane::PrefixRead MemoryControlPlane::get_prefix_since(const std::string& prefix, std::int64_t since) {
  permit("range", prefix, false, true);
  return call("range", [&] { return store_.get_prefix_since(prefix, since); });
}
bool MemoryControlPlane::create_if_absent(const std::string& key, const std::string& value) {
  permit("txn", key, true, false);
  return write("txn", [store = &store_, key, value] { return store->create_if_absent(key, value); });
}
bool MemoryControlPlane::compare_and_swap(const std::string& key, const std::string& expected, const std::string& value) {
  permit("txn", key, true, false);
  return write("txn", [store = &store_, key, expected, value] { return store->compare_and_swap(key, expected, value); });
}
std::int64_t MemoryControlPlane::grant_lease(std::int64_t ttl_seconds) {
  return call("lease grant", [&] { return store_.grant_lease(ttl_seconds); });
}
void MemoryControlPlane::keep_alive(std::int64_t lease) {
  call("lease keepalive", [&] { store_.keep_alive(lease); });
}
void MemoryControlPlane::revoke_lease(std::int64_t lease) {
  call("lease revoke", [&] { store_.revoke_lease(lease); });
}

MemoryChangeFeed::MemoryChangeFeed(MemoryStore& store, const MemoryControlPlane& client, std::vector<std::string> areas)
    : store_(store), client_(client), areas_(std::move(areas)) {
  for (const auto& area : areas_) store_.changes(area);  // watched from now on
}

}  // namespace meridian
