#include "intrasite/group/replica_group.hpp"

#include <algorithm>

#include "core/util/error.hpp"
#if MERIDIAN_HAVE_NCCL
#include "intrasite/comm/nccl_communicator.hpp"
#endif
#include "intrasite/group/protocol.hpp"

namespace meridian {

ReplicaGroup::ReplicaGroup(Store& store, int id, GlooOptions options, std::function<double()> clock,
                           std::optional<int> nccl_device)
    : store_(store), id_(id), options_(std::move(options)), clock_(std::move(clock)), nccl_device_(nccl_device) {}

void ReplicaGroup::join(std::optional<std::int64_t> first, std::chrono::milliseconds timeout) {
  comm_.reset();
  std::int64_t from = 0;
  if (first) {
    from = *first;
  } else {
    // Scanned before announcing readiness: a generation that lists this process can only be
    // published after the announcement, so it is numbered past everything seen here.
    while (store_.check(site_keys::generation(from))) ++from;
  }
  store_.add(site_keys::ready(id_), 1);
  const double deadline = clock_() + static_cast<double>(timeout.count()) / 1000.0;
  for (std::int64_t n = from;; ++n) {
    const auto left = std::chrono::milliseconds(static_cast<std::int64_t>(1000.0 * (deadline - clock_())));
    if (left.count() <= 0)
      throw make_error(ErrorKind::Timeout, "replica ", id_, ": no generation from ", from, " on lists it within ",
                       timeout.count(), " ms");
    Generation g = decode_generation(store_.get(site_keys::generation(n), left));
    const auto it = std::find(g.members.begin(), g.members.end(), id_);
    if (it == g.members.end()) continue;  // formed before this replica was ready: wait for the next
    generation_ = std::move(g);
    rank_ = static_cast<int>(it - generation_.members.begin());
    comm_ = connect(site_keys::gloo_prefix(n));
    return;
  }
}

// A build with CUDA but without NCCL (configure warns) all-reduces a GPU site's host-staged
// gradients over Gloo: slower, the same sums.
std::unique_ptr<Communicator> ReplicaGroup::connect(const std::string& prefix) {
#if MERIDIAN_HAVE_NCCL
  if (nccl_device_) return connect_nccl(store_, prefix, rank_, size(), NcclOptions{*nccl_device_, options_.timeout});
#endif
  return connect_gloo(store_, prefix, rank_, size(), options_);
}

void ReplicaGroup::report_failure() {
  comm_.reset();
  store_.add(site_keys::failure(generation_.number, id_), 1);
}

bool ReplicaGroup::newer_generation_published() { return store_.check(site_keys::generation(generation_.number + 1)); }

bool ReplicaGroup::site_group_formed() { return store_.check(site_keys::generation(0)); }

}  // namespace meridian
