#pragma once
// A site's replicas share each round attempt's Update over their group's Communicator: one
// broadcast of a header of known size (the kind, the figures, the fragments), and one of the
// payload when there is one (a commit's mean, or a sharded site's deltas still encoded; a peer's
// state). Two collectives per version. A sharded site's deltas are scattered, not broadcast:
// each replica gets the blocks of the ranges it holds (its part and its mirror's) alone. A commit
// this site proposed goes without them when every replica holds its preview (one small sum to
// know; otherwise each replica gets its cut as for any commit).
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/model/shard_map.hpp"
#include "core/util/error.hpp"
#include "crosssite/round/delta_journal.hpp"
#include "crosssite/round/replica_channel.hpp"
#include "intrasite/comm/communicator.hpp"
#include "sites/replica/kept_parts.hpp"

namespace meridian {

// A delta held in parts whose part some replica no longer keeps (its bound let the oldest go):
// every replica of the group meets it at the same point, before anything is applied, so the
// group need not re-form: its leader lets go of what it holds in parts (each asked for whole
// again) and the site catches up. To whoever does not know it, an Error(Peer): a regroup.
class PartsNotKept final : public Error {
 public:
  explicit PartsNotKept(const std::string& what) : Error(ErrorKind::Peer, what) {}
};

class GroupChannel final : public ReplicaChannel {
 public:
  // The ranges of the model's values a member's outer state holds (a sharded site's), by rank.
  using HeldRanges = std::function<std::vector<ShardRange>(int rank)>;
  // `fragments`: the job's (a commit names at most that many). Rank 0 leads. `held`: where merged
  // deltas are scattered (none: they are broadcast whole). `kept`: this replica's parts of the
  // deltas held in parts (a commit's are let go once it is applied). `journal`: where this replica
  // writes its part of each such delta as it fills it in, before the version is applied or, for
  // its site's proposal, claimed (the site's delta journal; none: not written).
  GroupChannel(Communicator& group, bool leader, int fragments, HeldRanges held = {}, KeptParts* kept = nullptr,
               DeltaJournal* journal = nullptr)
      : group_(group), leader_(leader), fragments_(fragments), held_(std::move(held)), kept_(kept), journal_(journal) {}
  bool leader() const override { return leader_; }
  void share(Update& update, std::int64_t previewed) override;
  // The payloads' bytes this member received (the leader's: none), as a ledger of the site's traffic.
  std::uint64_t received_bytes() const { return received_; }

 private:
  // Each member's cut of `merged` packed, the leader's none (it keeps the whole); none at all when
  // a delta does not cut (a malformed one goes whole, so that every replica meets its fault alike).
  std::vector<std::vector<std::byte>> cut_packs(const MergedDeltas& merged) const;
  // ... or, when a delta does not cut (or no ranges are held), the whole pack for each member.
  std::vector<std::vector<std::byte>> scatter_packs(const MergedDeltas& merged) const;
  // Leader: how `update`'s merged deltas travel (Header::merged), with the members' cuts in `packs`
  // when scattered.
  std::uint8_t merged_mode(const Update& update, std::int64_t previewed,
                           std::vector<std::vector<std::byte>>& packs) const;
  // Every member together: each delta held in parts filled in with this member's part and, from
  // the next rank, its mirror's. PartsNotKept on every member when one lacks its part.
  void fill_parts(MergedDeltas& merged, bool commit);

  Communicator& group_;
  bool leader_;
  int fragments_;
  HeldRanges held_;
  KeptParts* kept_;
  DeltaJournal* journal_;
  std::vector<std::byte> header_;
  std::uint64_t received_ = 0;
};

}  // namespace meridian
