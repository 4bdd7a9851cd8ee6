#pragma once
// The rendezvous key-value store of a site: replicas publish their addresses and agree on group
// generations through it. The site agent hosts one (intrasite/comm/tcp_store); tests and one-process
// runs use MemoryStore. Values are small (addresses, ids, counters), never tensors.
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <vector>

namespace meridian {

class Store {
 public:
  virtual ~Store() = default;
  virtual void set(const std::string& key, std::span<const std::byte> value) = 0;
  // Blocks until `key` exists; Error(Timeout) naming the key when it does not appear in time.
  virtual std::vector<std::byte> get(const std::string& key, std::chrono::milliseconds timeout) = 0;
  virtual bool check(const std::string& key) = 0;  // whether the key exists now, without waiting
  // Atomically adds delta to the integer at key (0 when absent) and returns the new value.
  virtual std::int64_t add(const std::string& key, std::int64_t delta) = 0;
};

// Thread-safe, in-process.
class MemoryStore final : public Store {
 public:
  void set(const std::string& key, std::span<const std::byte> value) override;
  std::vector<std::byte> get(const std::string& key, std::chrono::milliseconds timeout) override;
  bool check(const std::string& key) override;
  std::int64_t add(const std::string& key, std::int64_t delta) override;

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  std::map<std::string, std::vector<std::byte>> values_;
};

}  // namespace meridian
