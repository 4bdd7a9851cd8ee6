#include "crosssite/round/round_driver.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

#include "core/checkpoint/checkpoint.hpp"
#include "core/util/error.hpp"
#include "core/util/hash.hpp"
#include "crosssite/codec/codec.hpp"
#include "crosssite/codec/codec_parts.hpp"
#include "crosssite/codec/delta_digest.hpp"
#include "crosssite/outer/delta_mean.hpp"
#include "crosssite/outer/fragments.hpp"
#include "crosssite/outer/outer_parts.hpp"
#include "crosssite/round/mutant.hpp"
#include "kernels/cpu/chunk_hash.hpp"

namespace meridian {

RoundDriver::RoundDriver(RoundPlan plan, OuterState& state, RoundEvents& events, std::function<double()> clock)
    : plan_(std::move(plan)), state_(state), events_(events), clock_(std::move(clock)) {
  cursor_.started_at = clock_();
  MERIDIAN_CHECK(plan_.inner_steps >= 1 && plan_.job_round_steps >= 1 && plan_.total_steps >= 1,
                 "round plan: inner_steps ", plan_.inner_steps, ", job_round_steps ", plan_.job_round_steps,
                 ", total_steps ", plan_.total_steps);
  MERIDIAN_CHECK(
      plan_.early_steps == 0 || (plan_.early_inner_steps >= 1 && plan_.early_steps % plan_.early_inner_steps == 0),
      "round plan: early_steps ", plan_.early_steps, ", early_inner_steps ", plan_.early_inner_steps);
}

std::int64_t RoundPlan::steps_into_round(std::int64_t done) const {
  if (early(done)) return (done - 1) % early_inner_steps + 1;
  return (done - early_steps - 1) % inner_steps + 1;
}

bool RoundPlan::round_ends(std::int64_t done) const {
  return steps_into_round(done) == (early(done) ? early_inner_steps : inner_steps) || done == total_steps;
}

std::int64_t RoundPlan::round_start(std::int64_t round) const {
  const std::int64_t early_rounds = early_steps > 0 ? early_steps / early_inner_steps : 0;
  if (round < early_rounds) return round * early_inner_steps;
  return early_steps + (round - early_rounds) * job_round_steps;
}

void RoundDriver::wait_for(What what, Then then, std::int64_t keep) {
  wait_ = Wait{what, keep, then};
  cursor_.wait_began = clock_();
  cursor_.wait_from_version = state_.version();
}

void RoundDriver::after_step(Replica& r, std::int64_t done, bool last, bool hold) {
  wait_ = {};
  if (!round_ends(done)) return start_poll();
  const std::int64_t in_round = plan_.steps_into_round(done);
  if (!hold) return end_round(r, in_round, last);
  cursor_.carried_steps += in_round;
  ++cursor_.carried_rounds;
  start_poll();
}

void RoundDriver::start_poll() {
  // A paused site follows the versions others commit whether it overlaps its rounds or not.
  if (!plan_.overlap && !paused_) return;
  // The overlap's bound: past it the round's progress would build on too stale a base.
  if (cursor_.since_sent >= 0 && ++cursor_.since_sent >= plan_.overlap_steps && !paused_) {
    cursor_.since_sent = -1;
    return wait_for(What::Backlog);
  }
  wait_for(What::Poll);
}

void RoundDriver::end_round(Replica& r, std::int64_t steps_in_round, bool last) {
  // A round that spans a pause carries its tokens, and its rounds for the peers' norm screen.
  // Streaming: a fragment is due once in P exchanges, so k exchanges skipped are at most
  // ceil(k / P) rounds of the fragment sent now.
  steps_in_round += std::exchange(cursor_.carried_steps, 0);
  const int fragments = state_.fragments();
  const int rounds_spanned = 1 + (std::exchange(cursor_.carried_rounds, 0) + fragments - 1) / fragments;
  // A rollback in this round dropped the steps before it: the delta carries only those after.
  const std::int64_t done = r.training.step();
  if (cursor_.rolled_back_at > done - steps_in_round)
    steps_in_round = std::max<std::int64_t>(1, done - cursor_.rolled_back_at);
  // Streaming: an exchange sends the fragment whose turn is the version it aims at, the first
  // after the version held and this site's rounds in flight. The last exchange sends every
  // fragment, from that one on, one at a time, each once the one before it is (nearly) merged: all
  // progress is merged in the end, and the end keeps no more in flight than the run did.
  exchange_ = Exchange{steps_in_round * r.training.tokens_per_step(), rounds_spanned, last,
                       fragment_turn(aim(), fragments), {}};
  const int count = last ? fragments : 1;
  for (int i = 0; i < count; ++i) exchange_.left.push_back((exchange_.due + i) % fragments);
  send_next(r);
}

std::int64_t RoundDriver::aim() const { return std::max(cursor_.aim, state_.version() + 1); }

void RoundDriver::send_next(Replica& r) {
  // The one whose turn comes first: versions may have come while the last exchange sent the others.
  const std::int64_t from = aim();
  const auto next = std::min_element(exchange_.left.begin(), exchange_.left.end(), [&](int x, int y) {
    return turn_of(x, from, state_.fragments()) < turn_of(y, from, state_.fragments());
  });
  const int fragment = *next;
  exchange_.left.erase(next);
  cursor_.aim = turn_of(fragment, from, state_.fragments()) + 1;
  const bool final = exchange_.last && exchange_.left.empty();
  // Every replica encodes: only the leader sends the bytes, but the error-feedback residual they
  // leave must be the same everywhere.
  const std::span<float> held = held_weights(r);
  auto [encoded, digest] = joined(r, state_.encode_delta(held.empty() ? r.training.weights() : held, fragment));
  if (!held.empty()) r.training.held_written();
  if (plan_.eager && !exchange_.last) {
    fresh_.resize(state_.fragment(fragment).size);
    decode(encoded, fresh_);  // what the peers will merge, codec error included
  }
  if (!r.channel.leader()) {
    events_.encoded(std::move(encoded));
  } else if (leads(r)) {
    const std::int64_t round = std::max(peers_->next_round(), cursor_.next_round);
    cursor_.next_round = round + 1;
    figures_.last_round = round;
    sent_fragments_[round] = fragment;
    if (sent_fragments_.size() > static_cast<std::size_t>(2 * state_.fragments() + kMaxBacklog))
      sent_fragments_.erase(sent_fragments_.begin());
    const DeltaAnnouncement a{plan_.site, round, state_.version(), exchange_.tokens,        encoded.size(),
                              digest,     final, fragment,         exchange_.rounds_spanned};
    events_.submitted(a, encoded);
    // Hashed here, right after the encode, rather than by the link on the transfer's path.
    ChunkHashes hashes = chunk_hashes(encoded, peers_->chunk_bytes());
    peers_->submit(a, std::move(encoded), std::move(hashes));
  }
  ++figures_.rounds;
  if (!exchange_.left.empty()) return wait_for(What::Backlog, Then::SendNext, kMaxBacklog);
  sent_all(r);
}

void RoundDriver::sent_all(Replica&) {
  if (exchange_.last) state_.end_feedback();
  if (plan_.overlap && !exchange_.last) return wait_for(What::Backlog, Then::Overlap, kMaxBacklog);
  // Without overlap: the next version. In the last round: every version until all live sites'
  // last deltas are merged, so every site ends on the same one.
  wait_for(exchange_.last ? What::Finished : What::NextVersion);
}

void RoundDriver::catch_up() { wait_for(What::CatchUp, Then::CaughtUp); }

void RoundDriver::drain() {
  if (peers_ != nullptr) peers_->stop_announcing();  // or commits of another fragment wait for its next round
  wait_for(What::Backlog, Then::Leave);
}

void RoundDriver::take_up_job() { wait_for(What::TakeUp, Then::TakeUp); }

void RoundDriver::end_job() { wait_for(What::Finished); }

bool RoundDriver::attempt(Replica& r, std::chrono::milliseconds budget) {
  if (!waiting()) return false;
  Update u;
  Looked looked;
  if (leads(r)) u = look(polling() ? std::chrono::milliseconds(0) : budget, looked);
  if (leads(r)) u.aim = cursor_.aim;
  r.channel.share(u, previewed());
  cursor_.aim = u.aim;  // a replica that joined since takes the leader's
  apply(r, u, looked);
  if (!u.waits) ended(r, u);
  return waiting();
}

Update RoundDriver::look(std::chrono::milliseconds budget, Looked& looked) {
  Update u;
  u.waits = wait_.what != What::Poll;
  // What ends the wait without a version, checked first: a look costs nothing then.
  switch (wait_.what) {
    case What::Backlog:
      u.backlog = peers_->backlog(state_);
      if (u.backlog <= wait_.keep || (mutant(Mutant::UnboundedBacklog) && wait_.then != Then::Leave)) u.waits = false;
      break;
    case What::CatchUp:
      if (peers_->newest_commit() <= state_.version()) u.waits = false;
      break;
    case What::TakeUp:
      u.waits = false;
      u.job_step = job_step({});
      return u;
    default:
      break;
  }
  if (u.waits || wait_.what == What::Poll) {
    if (auto commit = peers_->poll_commit(state_, budget)) {
      u.kind = commit->snapshot.empty() ? Update::Kind::Commit : Update::Kind::Snapshot;
      u.version = commit->record.number;
      u.params_hash = commit->record.params_hash;
      u.fragments = std::move(commit->fragments);
      u.mean = std::move(commit->mean_delta);
      u.merged = std::move(commit->merged);
      u.snapshot = std::move(commit->snapshot);
      if (u.kind == Update::Kind::Snapshot) u.job_step = job_step(commit->record.merged);
      if (wait_.what == What::NextVersion) u.waits = false;
      u.proposed_here = commit->proposed_here;
      looked.record = std::move(commit->record);
      looked.outcome = std::move(commit->outcome);
      if (u.kind == Update::Kind::Commit && !state_.sharded()) check_whole(u, looked);
    } else if (wait_.what == What::NextVersion && peers_->disputed()) {
      u.waits = false;  // no version waits for this site's rounds: it does not wait for one either
    } else if (wait_.what == What::Finished && peers_->finished(state_)) {
      u.waits = false;
    }
  }
  if (state_.sharded()) {
    u.gather_state = peers_->state_wanted();
    if (u.kind == Update::Kind::Nothing)
      if (auto p = peers_->take_preview()) {
        u.kind = Update::Kind::Preview;
        u.version = p->version;
        u.fragments = std::move(p->fragments);
        u.mean = std::move(p->mean);
        u.merged = std::move(p->merged);
      }
  }
  // A site in lockstep waits for the version after its round: once no version can merge that
  // round, the version may need this site's next one, so it drops this one and trains on.
  if (u.kind == Update::Kind::Nothing)
    if (const auto lost = wait_.what == What::NextVersion ? own_unmergeable() : peers_->lost_round(state_, cursor_.dropped_round)) {
      u.kind = Update::Kind::DropRound;
      u.version = *lost;
      if (wait_.what == What::NextVersion) u.waits = false;
    }
  events_.looked();
  return u;
}

void RoundDriver::check_whole(Update& u, Looked& looked) {
  if (looked.outcome) return;  // its own proposal's: CrossSite checked the copy it was computed on
  looked.outcome = preview_of(u);
  if (looked.outcome->hash == u.params_hash) return;
  peers_->diverged(u.version, mismatch(u.version, looked.outcome->hash, u.params_hash, state_.version()));
  // As if no version had come: the replicas never see this one.
  const bool waits = u.waits || wait_.what == What::NextVersion;
  looked = {};
  u = Update{};
  u.waits = waits;
}

std::string RoundDriver::mismatch(std::int64_t version, std::uint64_t here, std::uint64_t said,
                                  std::int64_t from) const {
  return "site " + plan_.site + ": version " + std::to_string(version) + " computed here hashes to " +
         std::to_string(here) + ", the commit says " + std::to_string(said) + ": this site's copy of version " +
         std::to_string(from) + " differs from its peers'";
}

std::optional<std::int64_t> RoundDriver::own_unmergeable() const {
  const std::int64_t newest = cursor_.next_round - 1;
  if (newest <= cursor_.dropped_round) return std::nullopt;
  if (peers_->unmergeable(state_, newest)) return newest;
  // Streaming: a version that came after an older round, without it, let the site train on. When
  // that round, of the fragment whose turn the next version is, is refused since, that version
  // needs another round of the fragment from this site, which no newer one is: the site drops back.
  const int due = fragment_turn(state_.version() + 1, state_.fragments());
  for (auto it = sent_fragments_.rbegin(); it != sent_fragments_.rend() && it->first > cursor_.dropped_round; ++it)
    if (it->second == due)
      return it->first != newest && peers_->unmergeable(state_, it->first) ? std::optional(it->first) : std::nullopt;
  return std::nullopt;
}

void RoundDriver::apply(Replica& r, Update& u, Looked& looked) {
  if (u.gather_state) assemble_state(r);
  if (u.kind == Update::Kind::Nothing) return;
  if (u.kind == Update::Kind::DropRound) return drop_lost_round(r, u.version);
  if (u.kind == Update::Kind::Preview) return preview_proposal(r, u);
  cursor_.dropped_in_a_row = 0;  // a version came: the job makes progress
  const double t0 = clock_();
  const std::int64_t from = state_.version();
  const std::span<float> held = u.kind == Update::Kind::Commit ? held_weights(r) : std::span<float>();
  auto weights = held.empty() ? r.training.weights() : held;
  if (u.kind == Update::Kind::Commit) {
    // Each replica previews a version once: a leader whose proposal won did so already, and so
    // did every replica of a sharded site, unless its group was cut anew since (the commit
    // carries the deltas then, and only then).
    std::optional<OuterState::Outcome> kept = std::move(looked.outcome);
    if (u.proposed_here && previewed() == u.version) kept = std::move(proposal_->outcome);
    proposal_.reset();
    MERIDIAN_CHECK(kept || u.merged || !u.mean.empty() || u.fragments.empty(), "version ", u.version,
                   "'s commit came without its deltas, and this replica holds no preview of it");
    auto outcome = kept ? std::move(*kept) : preview_of(u);
    std::vector<int> stale_mirrors;
    if (state_.sharded()) {
      auto parts_hash = site_hash(parts(r), outcome.chunks, outcome.mirror.get());
      outcome.hash = parts_hash.hash;
      stale_mirrors = std::move(parts_hash.stale_mirrors);
    }
    if (outcome.hash != u.params_hash) {
      // A whole state's leader checked the version before sharing it: another replica's copy differs from its.
      if (!state_.sharded())
        throw make_error(ErrorKind::Data, "site ", plan_.site, ": version ", u.version, " computed here hashes to ",
                         outcome.hash, ", the commit says ", u.params_hash, ": this replica's copy of version ", from,
                         " differs from its leader's");
      // The parts' hash together: every replica finds it, applies nothing and goes on as if no
      // version had come; the leader's CrossSite asks a peer for its state.
      if (wait_.what == What::NextVersion) u.waits = true;
      if (leads(r)) peers_->diverged(u.version, mismatch(u.version, outcome.hash, u.params_hash, from));
      return;
    }
    state_.commit(u.version, std::move(outcome));
    if (!mutant(Mutant::SkipRebase))
      for (const int f : u.fragments) state_.rebase(weights, mutant(Mutant::RebaseWrongFragment) ? 0 : f);
    if (held.empty())
      share_weights(r);
    else
      r.training.held_written();
    if (!stale_mirrors.empty()) repair_mirrors(r, stale_mirrors);
  } else {
    // The leader checked it against the commit's hash: a failure here is a bug, not a peer's fault.
    state_.adopt(u.snapshot, u.params_hash, weights);
    share_weights(r);
    take_up(r, u.job_step);
    if (!figures_.rejoined_after_s) figures_.rejoined_after_s = clock_() - cursor_.started_at;
  }
  const double now = clock_();
  if (cursor_.last_version_at > 0)
    figures_.max_version_gap_s = std::max(figures_.max_version_gap_s, now - cursor_.last_version_at);
  cursor_.last_version_at = now;
  if (leads(r))
    events_.applied(AppliedVersion{u.kind == Update::Kind::Snapshot, r.training.step(), u.version, from, u.fragments,
                                   u.params_hash, looked.record ? &*looked.record : nullptr});
  figures_.applied_s += clock_() - t0;
}

void RoundDriver::ended(Replica& r, const Update& u) {
  const Then then = wait_.then;
  wait_ = {};
  switch (then) {
    case Then::Nothing:
      break;
    case Then::SendNext:
      return send_next(r);
    case Then::Overlap:
      // Merged already (a peer ahead committed it during the wait): the version holds the truth.
      if (u.backlog > 0 && plan_.eager) step_ahead(r.training.weights(), exchange_.due);
      cursor_.since_sent = u.backlog > 0 ? 0 : -1;
      break;
    case Then::Leave:
      if (leads(r)) peers_->leave();
      break;
    case Then::CaughtUp:
      if (leads(r) && state_.version() != cursor_.wait_from_version)
        events_.caught_up(cursor_.wait_from_version, state_.version(), clock_() - cursor_.wait_began);
      cursor_.last_version_at = clock_();
      break;
    case Then::TakeUp:
      take_up(r, u.job_step);
      break;
  }
}

void RoundDriver::drop_lost_round(Replica& r, std::int64_t round) {
  cursor_.dropped_round = round;
  const std::int64_t step = r.training.step();
  // Its progress would be on top of a version no commit made; as a commit without the round
  // would have, the site goes back to the version it holds. The error-feedback residual goes too.
  if (!mutant(Mutant::KeepDroppedRound)) state_.drop_in_flight(r.training.weights());
  share_weights(r);
  cursor_.rolled_back_at = step;
  cursor_.aim = state_.version() + 1;  // the version the dropped round aimed at still needs one
  ++cursor_.dropped_in_a_row;
  if (leads(r)) events_.dropped(round, step, state_.version(), cursor_.dropped_in_a_row);
  if (cursor_.dropped_in_a_row >= kMaxDroppedRounds)
    throw make_error(ErrorKind::Data, "site ", plan_.site, ": every live site's round was refused for its values ",
                     cursor_.dropped_in_a_row, " rounds in a row (the latest, round ", round, ", on version ",
                     state_.version(), "; delta_refused events say why): the job diverges, or its deltas grew far "
                     "past the merged ones (a raised learning rate), and no version can take its progress; resume "
                     "from a checkpoint before it with a lower [inner] lr or [outer] lr");
}

RoundDriver::Rollback RoundDriver::roll_back(Training& training, SiteParts* site_parts) {
  const std::int64_t step = training.step();
  // The round ends after this step when it is a multiple of the round's length: it is all dropped.
  const std::int64_t dropped =
      std::min(plan_.steps_into_round(step), step - std::max<std::int64_t>(cursor_.rolled_back_at, 0));
  state_.drop_in_flight(training.weights());
  cursor_.rolled_back_at = step;
  if (!state_.sharded()) return {state_.version(), dropped, OuterState::weights_hash(state_.global())};
  MERIDIAN_CHECK(site_parts != nullptr, "a sharded outer state rolled back without its site's parts");
  site_parts->all_gather(training.weights());
  const auto chunks = kernels::chunk_hashes(state_.global().data(), state_.global().size_bytes());
  return {state_.version(), dropped, site_hash(*site_parts, chunks, nullptr).hash};
}

SiteParts& RoundDriver::parts(const Replica& r) const {
  MERIDIAN_CHECK(r.parts != nullptr, "site ", plan_.site, ": a sharded outer state (part at ", state_.part().offset,
                 "+", state_.part().count, " of ", state_.size(), ") without its site's parts");
  return *r.parts;
}

RoundDriver::Encoded RoundDriver::joined(const Replica& r, std::vector<std::byte> encoded) const {
  if (!state_.sharded()) {
    const Digest digest = r.channel.leader() ? delta_digest(std::span<const std::byte>(encoded)) : Digest{};
    return {std::move(encoded), digest};
  }
  SiteParts& site = parts(r);
  const auto mine = unit_digests(encoded);
  const auto lists = site.gather(std::as_bytes(std::span(mine)));
  const bool everywhere = plan_.replicas_send || plan_.eager;
  const auto all = everywhere ? site.all_gather(encoded) : site.gather(encoded);
  Encoded out{all.empty() ? std::vector<std::byte>() : join_encoded(all), {}};
  if (lists.empty()) return out;
  std::vector<Digest> units;
  for (const auto& list : lists) {
    const auto at = units.size();
    units.resize(at + list.size() / sizeof(Digest));
    std::memcpy(units.data() + at, list.data(), list.size());
  }
  out.digest = delta_digest(std::span<const Digest>(units));
  return out;
}

std::span<float> RoundDriver::held_weights(Replica& r) const {
  return state_.sharded() ? r.training.held(state_.part(), state_.mirror_part()) : std::span<float>();
}

void RoundDriver::share_weights(Replica& r) const {
  if (state_.sharded()) parts(r).all_gather(r.training.weights());
}

RoundDriver::PartsHash RoundDriver::site_hash(SiteParts& site_parts, const std::vector<std::uint64_t>& chunks,
                                              const OuterState::Outcome* mirror) const {
  // Each replica's word: where its part and its mirror's begin, the mirror's chunks combined (a
  // mirror is one part: the whole list is not needed to compare it), then its own chunks.
  const auto mirror_part = state_.mirror_part();
  std::vector<std::uint64_t> mine{state_.part().offset, mirror ? mirror_part->offset : 0, mirror ? 1u : 0u,
                                  mirror ? kernels::combine_chunk_hashes(mirror->chunks) : 0};
  mine.insert(mine.end(), chunks.begin(), chunks.end());
  struct Said {
    std::uint64_t offset = 0, mirror_offset = 0, mirrors = 0, mirror_hash = 0;
    std::vector<std::uint64_t> chunks;
  };
  std::vector<Said> said;
  std::vector<std::uint64_t> all;
  for (const auto& bytes : site_parts.all_gather(std::as_bytes(std::span(mine)))) {
    std::vector<std::uint64_t> words(bytes.size() / sizeof(std::uint64_t));
    MERIDIAN_CHECK(words.size() >= 4 && bytes.size() % sizeof(std::uint64_t) == 0, "a replica's part hash of ",
                   bytes.size(), " bytes");
    std::memcpy(words.data(), bytes.data(), bytes.size());
    said.push_back({words[0], words[1], words[2], words[3], {words.begin() + 4, words.end()}});
    all.insert(all.end(), said.back().chunks.begin(), said.back().chunks.end());
  }
  PartsHash out{kernels::combine_chunk_hashes(all), {}};
  for (std::size_t r = 0; r < said.size(); ++r) {
    if (said[r].mirrors == 0) continue;
    const auto owner =
        std::find_if(said.begin(), said.end(), [&](const Said& s) { return s.offset == said[r].mirror_offset; });
    MERIDIAN_CHECK(owner != said.end(), "replica ", r, " mirrors a part at ", said[r].mirror_offset,
                   " that no replica owns");
    if (kernels::combine_chunk_hashes(owner->chunks) != said[r].mirror_hash)
      out.stale_mirrors.push_back(static_cast<int>(r));
  }
  return out;
}

void RoundDriver::repair_mirrors(Replica& r, const std::vector<int>& replicas) {
  const std::size_t bytes = parts(r).recut(state_, r.training.weights());
  if (leads(r)) events_.mirrors_repaired(replicas, state_.version(), bytes);
}

void RoundDriver::preview_proposal(Replica& r, const Update& u) {
  auto outcome = preview_of(u);
  const std::uint64_t hash = site_hash(parts(r), outcome.chunks, nullptr).hash;
  // The parts of the version held, hashed together as its record's hash was: a part damaged since
  // it was applied would carry the damage into the proposal, and from it to every site.
  const std::uint64_t held =
      site_hash(parts(r), kernels::chunk_hashes(state_.global().data(), state_.global().size_bytes()), nullptr).hash;
  proposal_ = Proposal{u.version, state_.part(), state_.mirror_part(), std::move(outcome)};
  if (!leads(r)) return;
  if (const auto want = peers_->held_hash(state_.version()); want && *want != held)
    return peers_->diverged(state_.version(), "site " + plan_.site + ": its parts of version " +
                                                  std::to_string(state_.version()) + " hash to " +
                                                  std::to_string(held) + ", its record says " + std::to_string(*want));
  peers_->previewed(hash);
}

std::int64_t RoundDriver::previewed() const {
  const bool good = proposal_ && proposal_->part == state_.part() && proposal_->mirror == state_.mirror_part();
  return good ? proposal_->version : -1;
}

OuterState::Outcome RoundDriver::preview_of(const Update& u) const {
  return u.merged ? state_.preview(*u.merged) : state_.preview(u.fragments, u.mean);
}

void RoundDriver::assemble_state(Replica& r) {
  Checkpoint records;
  state_.save(records);
  const auto parts_at_leader = parts(r).gather(encode_checkpoint(records));
  if (!leads(r)) return;
  std::vector<Checkpoint> held;
  for (const auto& bytes : parts_at_leader) held.push_back(decode_checkpoint(bytes, "a replica's outer part"));
  peers_->state_assembled(state_.version(), outer_snapshot(join_outer_parts(held)));
}

void RoundDriver::step_ahead(std::span<float> weights, int fragment) {
  std::vector<float> estimate(fresh_.size());
  eager_estimate(fresh_, plan_.eager_share, estimate);
  state_.step_ahead(weights, fragment, estimate);
  ++figures_.eager_steps;
}

void RoundDriver::take_up(Replica& r, std::int64_t job_step) {
  // A site that was away takes up the job where the others are (the newest round any other site
  // announced or merged): its schedule and data go on from there, and it ends with the others
  // rather than alone, long after them.
  const auto from = r.training.step();
  r.training.fast_forward(std::min<std::int64_t>(job_step, plan_.total_steps - 1));
  if (leads(r) && r.training.step() != from) events_.fast_forwarded(from, r.training.step());
}

std::int64_t RoundDriver::job_step(const std::map<std::string, std::int64_t>& merged) const {
  std::int64_t round = peers_->peers_newest_round();
  for (const auto& [site, r] : merged)
    if (site != plan_.site) round = std::max(round, r);
  return plan_.round_start(round + 1);
}

}  // namespace meridian
