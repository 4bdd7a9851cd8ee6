#include "sync/group/replica_group.hpp"

#include <algorithm>

#include "core/util/error.hpp"
#include "sync/group/protocol.hpp"

namespace meridian {

ReplicaGroup::ReplicaGroup(Store& store, int id, GlooOptions options)
    : store_(store), id_(id), options_(std::move(options)) {}

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
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (std::int64_t n = from;; ++n) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      throw make_error(ErrorKind::Timeout, "replica ", id_, ": no generation from ", from, " on lists it within ",
                       timeout.count(), " ms");
    Generation g = decode_generation(store_.get(site_keys::generation(n), left));
    const auto it = std::find(g.members.begin(), g.members.end(), id_);
    if (it == g.members.end()) continue;  // formed before this replica was ready: wait for the next
    generation_ = std::move(g);
    rank_ = static_cast<int>(it - generation_.members.begin());
    comm_ = connect_gloo(store_, site_keys::gloo_prefix(n), rank_, size(), options_);
    return;
  }
}

void ReplicaGroup::report_failure() {
  comm_.reset();
  store_.add(site_keys::failure(generation_.number, id_), 1);
}

bool ReplicaGroup::newer_generation_published() { return store_.check(site_keys::generation(generation_.number + 1)); }

}  // namespace meridian
