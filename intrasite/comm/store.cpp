#include "intrasite/comm/store.hpp"

#include <cstring>

#include "core/util/error.hpp"

namespace meridian {

void MemoryStore::set(const std::string& key, std::span<const std::byte> value) {
  {
    std::lock_guard lock(mu_);
    values_[key].assign(value.begin(), value.end());
  }
  changed_.notify_all();
}

std::vector<std::byte> MemoryStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  if (!changed_.wait_for(lock, timeout, [&] { return values_.count(key) > 0; }))
    throw make_error(ErrorKind::Timeout, "store key \"", key, "\" did not appear within ", timeout.count(), " ms");
  return values_[key];
}

bool MemoryStore::check(const std::string& key) {
  std::lock_guard lock(mu_);
  return values_.count(key) > 0;
}

std::int64_t MemoryStore::add(const std::string& key, std::int64_t delta) {
  std::int64_t value = 0;
  {
    std::lock_guard lock(mu_);
    auto& bytes = values_[key];
    if (bytes.size() == sizeof value) std::memcpy(&value, bytes.data(), sizeof value);
    value += delta;
    bytes.resize(sizeof value);
    std::memcpy(bytes.data(), &value, sizeof value);
  }
  changed_.notify_all();
  return value;
}

}  // namespace meridian
