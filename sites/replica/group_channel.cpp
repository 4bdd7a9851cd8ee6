#include "sites/replica/group_channel.hpp"

#include <cstdint>
#include <cstring>
#include <span>

#include "core/util/error.hpp"
#include "crosssite/codec/codec_parts.hpp"

namespace meridian {
namespace {

// Bytes, not a wire format: every member runs the same binary on the same machine type.
struct Header {
  std::uint8_t kind = 0, waits = 0, proposed_here = 0, gather_state = 0, merged = 0;
  std::int64_t version = 0;
  std::uint64_t params_hash = 0;
  std::int64_t job_step = 0, backlog = 0, aim = 0;
  // Fragment ids after the header; payload elements (a mean's values, or bytes: a state, packed deltas).
  std::uint64_t fragments = 0, payload = 0;
};

bool carries_mean(Update::Kind kind) { return kind == Update::Kind::Commit || kind == Update::Kind::Preview; }

// Header::merged: how a commit's deltas travel. kUnlessPreviewed: a commit this site proposed,
// whose preview the leader holds: none when every replica holds its preview too, else scattered.
enum Merged : std::uint8_t { kNone = 0, kBroadcast = 1, kScattered = 2, kUnlessPreviewed = 3 };

// Every member together: whether all hold a preview of `version`.
bool all_previewed(Communicator& group, std::int64_t previewed, std::int64_t version) {
  float lacking = previewed == version ? 0.0f : 1.0f;
  group.allreduce(std::span<float>(&lacking, 1), ReduceOp::Sum);
  return lacking == 0.0f;
}

}  // namespace

std::vector<std::vector<std::byte>> GroupChannel::cut_packs(const MergedDeltas& merged) const {
  std::vector<std::vector<std::byte>> packs(1);
  try {
    for (int r = 1; r < group_.size(); ++r) packs.push_back(merged.cut(held_(r)).pack());
  } catch (const Error&) {
    packs.clear();
  }
  return packs;
}

std::vector<std::vector<std::byte>> GroupChannel::scatter_packs(const MergedDeltas& merged) const {
  auto packs = held_ ? cut_packs(merged) : std::vector<std::vector<std::byte>>{};
  if (packs.empty()) {  // a delta that does not cut, or a channel without held ranges: whole to each
    packs.assign(static_cast<std::size_t>(group_.size()), merged.pack());
    packs.front().clear();
  }
  return packs;
}

std::uint8_t GroupChannel::merged_mode(const Update& update, std::int64_t previewed,
                                       std::vector<std::vector<std::byte>>& packs) const {
  if (!update.merged) return kNone;
  if (update.kind == Update::Kind::Commit && update.proposed_here && previewed == update.version)
    return kUnlessPreviewed;
  if (held_) packs = cut_packs(*update.merged);
  return packs.empty() ? kBroadcast : kScattered;
}

void GroupChannel::fill_parts(MergedDeltas& merged, bool commit) {
  MERIDIAN_CHECK(held_ && kept_, "deltas held in parts at a site whose group channel holds no ranges");
  const int rank = group_.rank(), next = (rank + 1) % group_.size();
  // Whole deltas (the leader's, or all of them when one did not cut): this member's cut of them.
  if (merged.held.empty()) merged = merged.cut(held_(rank));
  const ShardRange own = held_(rank).front(), mirror = held_(next).front();
  std::vector<const std::vector<std::byte>*> parts;
  float missing = 0;
  for (const auto& ref : merged.refs) {
    parts.push_back(ref.empty() ? nullptr : kept_->part(ref));
    if (!ref.empty() && parts.back() == nullptr) missing = 1;
  }
  // All give up together when one lacks a part: no member is left waiting in a shift.
  group_.allreduce(std::span<float>(&missing, 1), ReduceOp::Sum);
  if (missing > 0)
    throw PartsNotKept(make_error(ErrorKind::Peer, "a delta held in parts has a part no longer kept by ", missing,
                                  " replica(s): its leader asks for it whole")
                           .what());
  std::vector<std::string> filled;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (parts[i] == nullptr) continue;
    const std::vector<std::byte>& mine = *parts[i];
    if (journal_ && i < merged.sources.size()) journal_->write_part(merged.sources[i], rank, group_.size(), mine);
    const std::size_t theirs = encoded_size_as(mine, mirror.count);
    std::vector<float> out((mine.size() + 3) / 4), in((theirs + 3) / 4);
    std::memcpy(out.data(), mine.data(), mine.size());
    group_.ring_shift(out, in);
    std::vector<std::byte> mirrored(theirs);
    std::memcpy(mirrored.data(), in.data(), theirs);
    std::vector<std::vector<std::byte>> ranges;
    if (mirror.offset < own.offset)
      ranges = {std::move(mirrored), mine};
    else
      ranges = {mine, std::move(mirrored)};
    filled.push_back(merged.refs[i]);
    merged.fill(i, join_encoded(ranges));
  }
  // Merged: no version names them again. A preview's are let go by its commit.
  if (!commit) return kept_->previewed(std::move(filled));
  for (const auto& ref : filled) kept_->forget(ref);
}

void GroupChannel::share(Update& update, std::int64_t previewed) {
  header_.assign(sizeof(Header) + sizeof(int) * static_cast<std::size_t>(fragments_), std::byte{0});
  std::vector<std::byte> packed;
  std::vector<std::vector<std::byte>> packs;
  if (leader_) {
    MERIDIAN_CHECK(update.fragments.size() <= static_cast<std::size_t>(fragments_), "an update of ",
                   update.fragments.size(), " fragments, the job has ", fragments_);
    const std::uint8_t mode = merged_mode(update, previewed, packs);
    if (mode == kBroadcast) packed = update.merged->pack();
    const Header h{static_cast<std::uint8_t>(update.kind),
                   update.waits,
                   update.proposed_here,
                   update.gather_state,
                   mode,
                   update.version,
                   update.params_hash,
                   update.job_step,
                   update.backlog,
                   update.aim,
                   update.fragments.size(),
                   update.merged               ? packed.size()
                   : carries_mean(update.kind) ? update.mean.size()
                                               : update.snapshot.size()};
    std::memcpy(header_.data(), &h, sizeof h);
    if (!update.fragments.empty())
      std::memcpy(header_.data() + sizeof h, update.fragments.data(), sizeof(int) * update.fragments.size());
  }
  group_.broadcast(header_, 0);
  Header h;
  std::memcpy(&h, header_.data(), sizeof h);
  if (!leader_) {
    update = Update{static_cast<Update::Kind>(h.kind),
                    h.waits != 0,
                    h.version,
                    h.params_hash,
                    h.job_step,
                    h.backlog,
                    h.aim,
                    std::vector<int>(h.fragments),
                    {},
                    {},
                    h.proposed_here != 0,
                    h.gather_state != 0,
                    {}};
    if (h.fragments > 0) std::memcpy(update.fragments.data(), header_.data() + sizeof h, sizeof(int) * h.fragments);
    if (h.merged == kBroadcast) packed.resize(h.payload);
    if (h.merged == kNone && carries_mean(update.kind)) update.mean.resize(h.payload);
    if (update.kind == Update::Kind::Snapshot) update.snapshot.resize(h.payload);
  }
  if (h.merged == kUnlessPreviewed) {
    const bool all = all_previewed(group_, previewed, h.version);
    if (!all && leader_) packs = scatter_packs(*update.merged);
    h.merged = all ? kNone : kScattered;
    if (all && kept_) kept_->forget_previewed();  // the commit of what every replica previewed
  }
  if (h.merged == kScattered) {
    packed = group_.scatter(packs, 0);
  } else if (h.merged == kBroadcast) {
    group_.broadcast(packed, 0);
  } else if (carries_mean(update.kind)) {
    group_.broadcast(std::as_writable_bytes(std::span<float>(update.mean)), 0);
  }
  if (h.merged != kNone && !leader_) update.merged = MergedDeltas::unpack(packed);
  if (h.merged != kNone && !update.merged->filled()) fill_parts(*update.merged, update.kind == Update::Kind::Commit);
  if (update.kind == Update::Kind::Snapshot) group_.broadcast(update.snapshot, 0);
  if (!leader_) received_ += packed.size() + update.mean.size() * sizeof(float) + update.snapshot.size();
}

}  // namespace meridian
