// CrossSite's side of whole states (state_transfer.hpp): a peer's taken when this site is far
// behind, stuck, or holds a copy that is not its version; asked for, and served to the peers.
#include <algorithm>
#include <span>
#include <string>

#include "crosssite/round/cross_site.hpp"

namespace meridian {

std::optional<CrossSite::Commit> CrossSite::catch_up(ControlPlane& plane, const OuterState& state, bool far_behind) {
  // A copy that is not its version takes the version it holds, too.
  if (transfer_.has_newer_than(state.version() - (copy_.diverged() ? 1 : 0))) {
    const CommitRecord* record = log_.record(transfer_.received_version());
    if (!record) {
      // Its commit is not read yet: next time. One read and refused (or unreadable) never comes.
      if (log_.newest() >= transfer_.received_version()) transfer_.drop();
      return std::nullopt;
    }
    if (contradicted(*record)) {
      transfer_.drop();
      return std::nullopt;
    }
    const bool rebuilt = transfer_.received_from() == kRebuiltCopy;
    auto bytes = transfer_.take(state, *record, events_);
    if (!bytes) {
      ++counts().states_refused;
      return std::nullopt;
    }
    journal_record(record->number);
    ++(rebuilt ? counts().copies_rebuilt : counts().states_adopted);
    copy_.replaced();
    read_announcements(plane);  // how far the others have got: the site fast-forwards to there
    Commit commit{*record, {}, std::move(*bytes), {}};
    applied(*record);
    return commit;
  }
  if (far_behind || transfer_.stuck_long()) {
    const std::int64_t wanted = state_to_ask_for(state.version() + 1);
    waiting_ = {Waiting::What::PeerState, wanted, ""};
    refresh_members();
    request_state(wanted);
  }
  return std::nullopt;
}

std::int64_t CrossSite::state_to_ask_for(std::int64_t next) const {
  const std::int64_t newest = log_.newest();
  return newest >= next && log_.record(next) == nullptr ? std::max(newest, next + 1) : newest;
}

void CrossSite::request_state(std::int64_t min_version) {
  const MemberRecord* peer = transfer_.next_source(membership_.members(), options_.site);
  if (peer == nullptr) return;
  const std::string request = encode(StateRequest{min_version});
  courier_.send(peer->address, LinkTag::StateRequest, min_version,
                std::as_bytes(std::span(request.data(), request.size())));
  events_.push_back({"state_requested", peer->site, min_version, ""});
}

void CrossSite::serve_state_to(const std::string& address, std::int64_t min_version) {
  // A copy that is not its version is served to nobody: the peer would refuse it after the transfer.
  if (const OuterState* served = transfer_.serving(); served != nullptr && !copy_.diverged())
    if (std::string damage = copy_.damage(*served); !damage.empty()) diverged(served->version(), damage);
  if (copy_.diverged()) return;
  auto answer = transfer_.answer(address, min_version);
  if (!answer) return;
  courier_.send(address, LinkTag::State, answer->first, std::move(answer->second));
  ++counts().states_sent;
}

void CrossSite::state_assembled(std::int64_t version, std::vector<std::byte> snapshot) {
  for (auto& [address, bytes] : transfer_.assembled(version, std::move(snapshot))) {
    courier_.send(address, LinkTag::State, version, std::move(bytes));
    ++counts().states_sent;
  }
}

}  // namespace meridian
