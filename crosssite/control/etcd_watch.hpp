#pragma once
// Follows the changes under one key prefix through a single long-lived etcd watch, from its own
// thread: the JSON gateway's POST /v3/watch answers with a stream of messages (one JSON object per
// line: "created", then one per batch of events). A reader that used to poll the prefix every few
// ms asks changes() instead and reads only when it moved, so an idle job costs etcd nothing and
// its reader no request.
//
// A hint, not the data: the caller still reads what changed with its EtcdClient (linearizable,
// and under the emulated WAN's `reachable` hook). changes() moves at every batch of events and
// whenever the watch is (re)established, since what happened while it was down is unknown; take
// its value *before* reading, so a change that lands during the read is seen next time. Areas
// (key prefixes under the watched one) have counts of their own, so a reader of several ranges
// reads only the ones that changed; an event outside every area moves only the total. While
// watching() is false (not connected yet, or the stream ended: its member died, lost its leader,
// cancelled the watch) the thread connects again, to the next endpoint, after a pause growing to
// one second; the caller polls meanwhile.
//
// A member that stops answering without closing the stream (SIGSTOP) would leave the watch
// established and silent. So every `probe_every` the thread also reads the prefix's size and
// newest revision (EtcdClient::prefix_state, one small request, on any member): when they moved
// and no event came since the last probe, changes() moves too, and after two such probes in a
// row the stream is dropped for the next member's. A probe that reaches no member says nothing.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "crosssite/control/change_feed.hpp"
#include "crosssite/control/etcd_client.hpp"

namespace meridian {

class EtcdWatch final : public ChangeFeed {
 public:
  // Uses options.endpoints and request_timeout (for connecting and until etcd confirms the watch),
  // and the whole of `options` for its probes. Throws Error(Config) for a malformed endpoint list.
  EtcdWatch(const EtcdOptions& options, std::string prefix,
            std::chrono::milliseconds probe_every = std::chrono::milliseconds(1000), std::vector<std::string> areas = {});
  ~EtcdWatch();  // ends the stream and the thread
  EtcdWatch(const EtcdWatch&) = delete;
  EtcdWatch& operator=(const EtcdWatch&) = delete;

  std::uint64_t changes() const { return changes_.load(); }
  std::uint64_t changes(std::size_t area) const override { return area_changes_[area].load(); }
  bool watching() const override { return watching_.load(); }
  std::uint64_t events() const { return events_.load(); }  // keys changed, as the stream said
  std::uint64_t missed() const { return missed_.load(); }  // probes that found a change the stream had not sent

 private:
  struct Stream;
  void run();
  // One watch on one endpoint, until its stream ends (false if it never got established) or stop.
  bool follow(const std::string& host, const std::string& port, bool renew_token);
  // One message of the stream; false when it ends the watch (cancelled, an error, not etcd's).
  bool handle(const std::string& line);
  // True when the stream should be dropped: twice in a row, a change it did not send.
  bool probe();
  void changed_everywhere();

  EtcdOptions options_;
  std::vector<std::pair<std::string, std::string>> endpoints_;
  std::string prefix_;
  std::chrono::milliseconds probe_every_;
  std::vector<std::string> areas_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> area_changes_;
  std::unique_ptr<EtcdClient> prober_;  // the watch thread's own client
  std::optional<EtcdClient::PrefixState> probed_;
  std::uint64_t events_at_probe_ = 0;
  int silent_probes_ = 0;
  std::atomic<std::uint64_t> changes_{0}, events_{0}, missed_{0};
  std::atomic<bool> watching_{false}, stop_{false};
  std::unique_ptr<Stream> stream_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::thread thread_;
};

}  // namespace meridian
