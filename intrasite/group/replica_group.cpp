#include "intrasite/group/replica_group.hpp"

#include <algorithm>
#include <cmath>

#include "core/util/error.hpp"
#if MERIDIAN_HAVE_NCCL
#include "intrasite/comm/nccl_communicator.hpp"
#endif
#include "intrasite/group/protocol.hpp"

namespace meridian {
namespace {

using SteadyClock = std::chrono::steady_clock;

// How often a wait in a generation's rendezvous looks whether the agent has moved on.
constexpr std::chrono::milliseconds kSupersededPoll{100};

// The store as one generation's rendezvous sees it: a wait for a key ends early, with Error(Peer),
// once the agent publishes a newer generation, whose members meet there instead. (Store waits are
// in real time whatever the caller's clock, so this one is too.)
class GenerationStore final : public Store {
 public:
  GenerationStore(Store& store, std::int64_t number) : store_(store), number_(number) {}

  void set(const std::string& key, std::span<const std::byte> value) override { store_.set(key, value); }
  bool check(const std::string& key) override { return store_.check(key); }
  std::int64_t add(const std::string& key, std::int64_t delta) override { return store_.add(key, delta); }

  std::vector<std::byte> get(const std::string& key, std::chrono::milliseconds timeout) override {
    const auto deadline = SteadyClock::now() + timeout;
    for (;;) {
      const auto left = std::max(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now()),
                                 std::chrono::milliseconds(0));
      try {
        return store_.get(key, std::min(left, kSupersededPoll));
      } catch (const Error& e) {
        if (e.kind() != ErrorKind::Timeout) throw;
      }
      if (store_.check(site_keys::generation(number_ + 1)))
        throw make_error(ErrorKind::Peer, "generation ", number_, " was superseded by generation ", number_ + 1,
                         " while waiting for store key \"", key, "\"");
      if (left <= kSupersededPoll)
        throw make_error(ErrorKind::Timeout, "store key \"", key, "\" did not appear within ", timeout.count(), " ms");
    }
  }

 private:
  Store& store_;
  const std::int64_t number_;
};

}  // namespace

ReplicaGroup::ReplicaGroup(Store& store, int id, GlooOptions options, std::function<double()> clock,
                           std::optional<int> nccl_device)
    : store_(store), id_(id), options_(std::move(options)), clock_(std::move(clock)), nccl_device_(nccl_device) {}

template <class Call>
auto ReplicaGroup::patiently(double deadline, Call call) {
  for (;;) {
    try {
      return call();
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::Timeout || left(deadline).count() <= 0) throw;
    }
  }
}

void ReplicaGroup::join(std::optional<std::int64_t> first, std::chrono::milliseconds timeout) {
  comm_.reset();
  const double deadline = clock_() + static_cast<double>(timeout.count()) / 1000.0;
  std::int64_t from = 0;
  if (first) {
    from = *first;
  } else {
    // Scanned before announcing readiness: a generation that lists this process can only be
    // published after the announcement, so it is numbered past everything seen here.
    while (patiently(deadline, [&] { return store_.check(site_keys::generation(from)); })) ++from;
  }
  patiently(deadline, [&] { return store_.add(site_keys::ready(id_), 1); });
  for (std::int64_t n = from;; ++n) {
    if (left(deadline).count() <= 0)
      throw make_error(ErrorKind::Timeout, "replica ", id_, ": no generation from ", from,
                       " on that lists it was met within ", timeout.count(), " ms");
    Generation g = await_generation(n, deadline);
    const auto it = std::find(g.members.begin(), g.members.end(), id_);
    // Formed before this replica was ready, or already left by its members for a newer one.
    if (it == g.members.end() || patiently(deadline, [&] { return superseded(n); })) continue;
    generation_ = std::move(g);
    rank_ = static_cast<int>(it - generation_.members.begin());
    GenerationStore store(store_, n);
    try {
      meet(store, deadline);  // ends only when all came, when superseded, or at the join's deadline
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::Peer && superseded(n)) continue;
      throw;
    }
    try {
      comm_ = connect(store, site_keys::gloo_prefix(n));
      return;
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::Peer && e.kind() != ErrorKind::Timeout) throw;
      // A member failed while connecting: the agent regroups without it.
      if (!patiently(deadline, [&] { return superseded(n); })) report_failure();
    }
  }
}

Generation ReplicaGroup::await_generation(std::int64_t n, double deadline) {
  for (;;) {
    try {
      return decode_generation(store_.get(site_keys::generation(n), std::min(left(deadline), kAnnounceEvery)));
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::Timeout || left(deadline).count() <= 0) throw;
    }
    patiently(deadline, [&] { return store_.add(site_keys::ready(id_), 1); });
  }
}

bool ReplicaGroup::superseded(std::int64_t n) { return store_.check(site_keys::generation(n + 1)); }

void ReplicaGroup::meet(Store& store, double deadline) {
  const std::int64_t n = generation_.number;
  const std::byte here{1};
  store.set(site_keys::arrived(n, id_), std::span(&here, 1));
  for (int member : generation_.members) {
    try {
      store.get(site_keys::arrived(n, member), left(deadline));
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::Timeout) throw;
      throw make_error(ErrorKind::Timeout, "replica ", id_, ": replica ", member, " of generation ", n,
                       " did not come to its rendezvous in time: ", e.what());
    }
  }
}

// A build with CUDA but without NCCL (configure warns) all-reduces a GPU site's host-staged
// gradients over Gloo: slower, the same sums.
std::unique_ptr<Communicator> ReplicaGroup::connect(Store& store, const std::string& prefix) {
#if MERIDIAN_HAVE_NCCL
  if (nccl_device_) return connect_nccl(store, prefix, rank_, size(), NcclOptions{*nccl_device_, options_.timeout});
#endif
  return connect_gloo(store, prefix, rank_, size(), options_);
}

std::chrono::milliseconds ReplicaGroup::left(double deadline) const {
  return std::chrono::milliseconds(std::max<std::int64_t>(0, std::llround(1000.0 * (deadline - clock_()))));
}

void ReplicaGroup::report_failure() {
  comm_.reset();
  try {
    store_.add(site_keys::failure(generation_.number, id_), 1);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::Timeout) throw;
  }
}

bool ReplicaGroup::newer_generation_published() { return superseded(generation_.number); }

bool ReplicaGroup::site_group_formed() { return store_.check(site_keys::generation(0)); }

}  // namespace meridian
