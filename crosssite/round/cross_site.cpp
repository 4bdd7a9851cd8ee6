#include "crosssite/round/cross_site.hpp"

#include <algorithm>
#include <limits>

#include "core/util/clock.hpp"
#include "core/util/error.hpp"
#include "core/util/hash.hpp"
#include "crosssite/outer/fragments.hpp"

namespace meridian {
namespace {

std::span<const std::byte> as_bytes(const std::string& s) { return std::as_bytes(std::span(s.data(), s.size())); }

CrossSiteOptions with_sites_sorted(CrossSiteOptions options) {
  std::sort(options.sites.begin(), options.sites.end());
  return options;
}

std::unique_ptr<ChangeFeed> feed_for(const CrossSiteOptions& o) {
  if (!o.change_feed) return nullptr;
  const RoundKeys keys(o.job);
  return o.change_feed(keys.root(), {keys.members(), keys.deltas(), keys.commits()});
}

// Transfers held per peer and kind: an honest peer is at most a few rounds (steps) ahead of us;
// more would only make us hold its bytes. Streaming: P times as many rounds of 1/P the bytes.
constexpr std::size_t kMaxHeld = 16;

// Copies of one delta, whole through the link and not the bytes announced, before its sender is
// disputed: one may be damage the link's checks missed (a simulated link makes it), a second one
// asked for again is no accident.
constexpr int kEquivocationCopies = 2;

}  // namespace

CrossSite::CrossSite(CrossSiteOptions options, ControlPlane& etcd, Link& link, std::function<double()> clock)
    : options_(with_sites_sorted(std::move(options))),
      courier_(link, [this](const std::string& address) { return membership_.site_at(address); }),
      clock_(std::move(clock)),
      membership_(JobMembershipOptions{options_.job, options_.site, options_.sites, options_.lease_ttl_s,
                                       options_.keep_lease, options_.incarnation, options_.link_keys},
                  etcd, link.address()),
      gate_(etcd, clock_, options_.control_poll, options_.control_retry, options_.full_read, feed_for(options_)),
      log_(options_.job, options_.rule.fragments),
      outbox_(options_.site, options_.journal, options_.keep_own_rounds, options_.checkpoints),
      transfer_(clock_, options_.rerequest_after, options_.catch_up_after),
      book_(options_.site),
      store_(DeltaStoreOptions{options_.rule.fragments, options_.screen, outbox_.journal(), options_.keep_own_rounds},
             link),
      proposer_(ProposerOptions{options_.site, options_.rule, options_.deadline}, log_, store_, courier_.counts()),
      gradients_(link, kMaxHeld),
      copy_(options_.site, options_.origin_hash),
      vouches_(options_.site) {
  MERIDIAN_CHECK(options_.rule.fragments >= 1, "fragments=", options_.rule.fragments);
  MERIDIAN_CHECK(static_cast<bool>(options_.keep_lease), "site ", options_.site,
                 ": no keeper for its membership lease");
  if (options_.saved_state) log_.keep_held();
  read_journal();
}

CrossSite::~CrossSite() = default;

bool CrossSite::control(const std::function<void(ControlPlane&)>& call) {
  if (gate_.run(call, events_)) return true;
  if (gate_.down()) waiting_ = {Waiting::What::ControlPlane, 0, gate_.error()};
  return false;
}

bool CrossSite::poll_join(std::chrono::milliseconds budget) {
  const double deadline = clock_() + seconds_of(budget);
  membership_.set_announcing(true);  // back from a drain, or never drained
  // A restarted site continues after every round it announced before, and withdraws those whose
  // bytes it no longer has: the others would otherwise wait for them for good.
  const auto scan_own_rounds = [&](ControlPlane& plane) { outbox_.scan(plane, log_.keys(), events_); };
  if ((!outbox_.scanned() && !control(scan_own_rounds)) ||
      (!membership_.registered() && !control([&](ControlPlane&) { membership_.register_site(); }))) {
    pump(deadline);
    return false;
  }
  while (true) {
    if (!control([&](ControlPlane&) { refresh_members(); })) {
      pump(deadline);
      return false;
    }
    std::vector<std::string> missing;
    for (const auto& s : options_.sites)
      if (!membership_.member(s)) missing.push_back(s);
    // A site that comes back learns how far behind it is; a job under way does not wait for its
    // absent sites: this one (re)joins the live ones.
    control([&](ControlPlane& plane) { log_.read(plane, events_); });
    if (missing.empty() || log_.newest() > 0) {
      if (!committed_before_join_) committed_before_join_ = log_.newest();
      return true;
    }
    waiting_ = {Waiting::What::Join, 0, ""};
    for (const auto& s : missing) waiting_.detail += " " + s;
    pump(std::min(deadline, clock_() + seconds_of(options_.control_poll)));
    if (clock_() >= deadline) return false;
  }
}

void CrossSite::submit(const DeltaAnnouncement& a, std::vector<std::byte> encoded, ChunkHashes hashes) {
  // Its digest is taken where the bytes were made and trusted here: a second SHA-256 pass over a
  // large delta costs as much as the first. Every receiver checks it.
  MERIDIAN_CHECK(a.site == options_.site && a.bytes == encoded.size(), "announcement of site ", a.site, " round ",
                 a.round, " does not describe its bytes");
  MERIDIAN_CHECK(hashes.chunk_bytes == courier_.link().chunk_bytes(), "chunk hashes of ", hashes.chunk_bytes,
                 "-byte chunks for a link of ", courier_.link().chunk_bytes());
  proposer_.submitted(clock_());
  // Cut off from the control plane, the announcement waits (announce_pending) while the bytes go.
  outbox_.queue(a);
  announce_pending();
  book_.add(a);
  const Outbox::Delta& own = outbox_.keep(a, std::move(encoded), std::move(hashes));
  for (const auto& [site, member] : membership_.members()) {
    if (site == options_.site) continue;
    courier_.send(member.address, a.round, own);
    ++counts().deltas_sent;
    outbox_.sent(a.round, own.bytes->size());
  }
  store_.put_own({a.site, a.round}, *own.bytes, a.digest);  // a commit lists this site's own delta too
  counts().peak_bytes_in_flight = std::max(counts().peak_bytes_in_flight, outbox_.in_flight_bytes());
}

std::optional<CrossSite::Commit> CrossSite::poll_commit(const OuterState& state, std::chrono::milliseconds budget) {
  const double deadline = clock_() + seconds_of(budget);
  while (true) {
    if (gate_.look_due()) {
      std::optional<Commit> commit;
      if (announce_pending()) {
        const ControlGate::Reads reads = gate_.reads_due();
        control([&](ControlPlane& plane) {
          commit = check_control(plane, state, reads);
          // Vouched for before its replicas apply it: a site that reads a record written over
          // this one meanwhile finds the vouch already there (a lockstep site looks again only
          // at its next round's end).
          put_vouch(plane);
        });
      }
      if (commit) return commit;
    }
    // A sharded site's replicas hash its proposal and put its state together at the next attempt.
    if (proposer_.preview_pending()) return std::nullopt;
    pump(std::min(deadline, gate_.next_look()));  // at least once: peers' requests are answered here
    if (clock_() >= deadline || transfer_.assembly_wanted()) return std::nullopt;
  }
}

bool CrossSite::announce_pending() {
  return !outbox_.pending() || control([&](ControlPlane& plane) { outbox_.announce(plane, log_.keys()); });
}

std::optional<CrossSite::Commit> CrossSite::check_control(ControlPlane& plane, const OuterState& state,
                                                          ControlGate::Reads reads) {
  const std::int64_t next = state.version() + 1;
  // All that is due, before any path below returns: a range left unread would wait for its next change.
  if (reads.commits) log_.read(plane, events_);
  if (reads.members) refresh_members();
  if (reads.announcements) read_announcements(plane);
  log_.repair(plane, events_);
  put_vouch(plane);  // one a failed look left unwritten, before anything else is handed out
  if (const auto held = log_.forget_before(next)) {
    judge_held(*held);
    copy_.hold(held->number, held->params_hash);
    store_.follow_screens(*held);
    // A site that restarted from its checkpoint holds this version without having applied its
    // record here: what it merged must not be proposed again.
    forget_merged(*held);
  }
  // A copy that is not its version is rebuilt from the site's own disk, or takes a peer's state.
  if (copy_.diverged()) {
    rebuild_copy(state);
    return catch_up(plane, state, true);
  }
  // Two versions or more behind, a peer's state is the way: their deltas may be gone by now.
  // Streaming: versions come P times as often, so P + 1 versions, a whole turn of fragments. But a
  // site that holds the next commit's deltas (a paused one that follows, or one a burst of
  // commits overtook) applies them: a few deltas cost far less than the whole model.
  const CommitRecord* found = log_.find(next);
  bool far_behind = log_.newest() >= next + options_.rule.fragments;
  if (far_behind && found) {
    take_in_received();  // judged on every delta that has come, not on those pump() has not read yet
    far_behind = !holds_deltas_of(*found);
  }
  // A state nobody serves (the only site that held versions that new restarted from an older
  // checkpoint) must not stop the site for good: after catch_up_after it fetches the next
  // commit's deltas instead (journals keep them), one version at a time.
  if (transfer_.far_behind_long(far_behind && found)) far_behind = false;
  if (auto adopted = catch_up(plane, state, far_behind)) return adopted;
  if (far_behind) return std::nullopt;
  if (found) return hand_out(*found, state);
  // Committed, but its record forgotten here (a vouch contradicted it): no proposal can take the
  // version, the record put back or a state under a newer one is the way on. Nobody may put it
  // back (the sites that applied it restarted since, or left): after catch_up_after, a state.
  if (log_.newest() >= next) {
    if (waiting_.what != Waiting::What::Contradicted)
      waiting_ = {Waiting::What::Contradicted, next, "its record read here was refused on a vouch"};
    transfer_.note_stuck();
    return std::nullopt;
  }
  propose(plane, state);
  return std::nullopt;
}

std::optional<CrossSite::Commit> CrossSite::hand_out(const CommitRecord& record, const OuterState& state) {
  if (auto why = contradicted(record)) {
    waiting_ = {Waiting::What::Contradicted, record.number, std::move(*why)};
    transfer_.note_stuck();
    return std::nullopt;
  }
  const bool overdue = committed_before_join_ && record.number <= *committed_before_join_;
  bool complete = true;
  for (const auto& e : record.entries) complete = held({e.site, e.round}, e.digest, overdue) && complete;
  if (!complete) {
    waiting_ = {Waiting::What::CommitDeltas, record.number, ""};
    transfer_.note_stuck();
    return std::nullopt;
  }
  // On disk before it is applied: a restart from an older checkpoint can apply it again.
  store_.journal(record.entries);
  journal_record(record.number);
  Commit commit = proposer_.commit_of(record, state);
  const std::string damage = commit.outcome ? copy_.damage(state) : std::string();
  applied(record);
  if (damage.empty()) return commit;
  // Its own proposal's outcome, computed before the copy changed: the replicas would apply it to
  // a copy that no longer is the version it was computed on.
  diverged(record.number, damage);
  return std::nullopt;
}

void CrossSite::propose(ControlPlane& plane, const OuterState& state) {
  CommitView view = control_view(state);
  for (const auto& [key, a] : book_.announced())
    if (membership_.member(a.site) && usable(a, state)) proposer_.held(view, key);
  view.refused = book_.refusals();  // usable() may have refused more just now
  if (!membership_.proposing()) {
    waiting_ = {Waiting::What::PausedProposal, 0, ""};
    return;
  }
  if (auto why_not = proposer_.propose(std::move(view), state, book_.merged(), plane, events_, &copy_)) {
    if (why_not->what == Waiting::What::CopyDiverged) diverged(state.version(), why_not->detail);
    waiting_ = std::move(*why_not);
    return;
  }
  gate_.look_now();  // read back whichever proposal won, at once
}

void CrossSite::previewed(std::uint64_t hash) {
  if (control([&](ControlPlane& plane) { proposer_.claim_previewed(hash, plane, events_); })) gate_.look_now();
}

void CrossSite::applied(const CommitRecord& record) {
  copy_.hold(record.number, record.params_hash);
  if (const auto digest = log_.digest(record.number)) vouch_due_ = Vouch{options_.site, record.number, *digest};
  proposer_.forget();
  transfer_.applied();
  store_.follow_screens(record);
  forget_merged(record);
}

void CrossSite::forget_merged(const CommitRecord& record) {
  // Records from before `merged` existed list only their entries.
  auto merged = record.merged;
  for (const auto& e : record.entries) merged[e.site] = std::max(merged[e.site], e.round);
  outbox_.merged_in(record.number, merged);
  for (const auto& [site, round] : merged) {
    book_.merged(site, round);
    if (site == options_.site) outbox_.merged_through(round);
    store_.forget_through(site, round);
  }
}

std::optional<std::int64_t> CrossSite::lost_round(const OuterState& state, std::int64_t after) const {
  const auto refused = book_.newest_refused(options_.site);
  if (!refused || *refused <= after || !every_offer_refused(control_view(state), options_.rule)) return std::nullopt;
  return refused;
}

bool CrossSite::unmergeable(const OuterState& state, std::int64_t round) const {
  if (gate_.down()) return false;  // cut off: what it announced may still be merged
  if (book_.banned(options_.site)) return false;  // disputed(): refused, but nobody waits for it either
  const DeltaAnnouncement* a = book_.announcement({options_.site, round});
  if (a == nullptr) return false;  // merged, or not read back from the control plane yet
  return !mergeable(*a, own_view(state), options_.rule);
}

std::int64_t CrossSite::backlog(const OuterState& state) const {
  if (gate_.down()) return 0;
  const CommitView view = own_view(state);
  std::int64_t count = 0;
  for (const auto& [key, a] : own_announced()) count += mergeable(*a, view, options_.rule);
  return count;
}

std::vector<std::pair<DeltaKey, const DeltaAnnouncement*>> CrossSite::own_announced() const {
  std::vector<std::pair<DeltaKey, const DeltaAnnouncement*>> own;
  const auto& announced = book_.announced();
  for (auto it = announced.lower_bound({options_.site, std::numeric_limits<std::int64_t>::min()});
       it != announced.end() && it->first.first == options_.site; ++it)
    own.emplace_back(it->first, &it->second);
  return own;
}

CommitView CrossSite::own_view(const OuterState& state) const {
  // Called at every look of a wait: the view holds only what `mergeable` reads of this site's rounds.
  CommitView view;
  view.version = state.version();
  view.applied[options_.site] = book_.merged_round(options_.site);
  for (const auto& [key, a] : own_announced())
    if (book_.refused(key)) view.refused.insert(key);
  return view;
}

CommitView CrossSite::control_view(const OuterState& state) const {
  CommitView view;
  view.now = clock_();
  view.version = state.version();
  view.next_fragment = fragment_turn(state.version() + 1, options_.rule.fragments);
  for (const auto& [site, member] : membership_.members()) {
    view.live_sites.push_back(site);
    if (member.paused) view.paused.insert(site);
  }
  book_.fill(view);
  return view;
}

bool CrossSite::held(const DeltaKey& key, const Digest& digest, bool overdue) {
  if (store_.held(key, digest, events_, counts())) return true;
  const auto* wrong = store_.wrong_copies(key);
  if (wrong != nullptr && wrong->count >= kEquivocationCopies && !book_.banned(key.first)) {
    book_.dispute({key.first, key.second, options_.site, digest, wrong->seen});
    events_.push_back({"delta_equivocation", key.first, key.second,
                       "its bytes came whole through the link " + std::to_string(wrong->count) +
                           " times and were not those it announced: disputed, every site refuses its rounds"});
    return false;
  }
  // A commit merged it before the dispute: the right bytes are still what this site needs.
  request(key.first, key.second, overdue);
  return false;
}

bool CrossSite::holds_deltas_of(const CommitRecord& record) {
  // All of them present first: held() would ask the owner of each one missing, for nothing when
  // the site adopts a peer's state instead.
  for (const auto& e : record.entries)
    if (!store_.has({e.site, e.round})) return false;
  return std::all_of(record.entries.begin(), record.entries.end(), [&](const CommitEntry& e) {
    return held({e.site, e.round}, e.digest);
  });
}

bool CrossSite::usable(const DeltaAnnouncement& a, const OuterState& state) {
  const DeltaKey key{a.site, a.round};
  if (book_.refused(key) || a.fragment < 0 || a.fragment >= state.fragments()) return false;
  if (!held(key, a.digest)) return false;  // hashed once; a different copy that arrived since is checked anew
  if (store_.screened(key)) return true;
  const auto verdict = store_.screen(a, state.fragment(a.fragment).size);
  if (verdict.ok) return true;
  // Intact bytes, exactly as announced, but values no commit may apply: the sender is flagged.
  book_.refuse(key);
  ++counts().deltas_screened_out;
  events_.push_back({"delta_refused", a.site, a.round, verdict.reason});
  return false;
}

void CrossSite::request(const std::string& site, std::int64_t round, bool overdue) {
  const auto member = membership_.members().find(site);
  if (member == membership_.members().end() || site == options_.site) return;
  // The delta is usually on its way: ask only once it is overdue, and then not too often.
  if (!store_.ask_due({site, round}, clock_(), seconds_of(options_.rerequest_after), overdue)) return;
  const std::string req = encode(DeltaRequest{site, round});
  courier_.send(member->second.address, LinkTag::DeltaRequest, round, as_bytes(req));
  ++counts().requests_sent;
}

void CrossSite::send_gradients(std::int64_t step, std::span<const float> values) {
  const auto bytes = std::as_bytes(values);
  for (const auto& [site, member] : membership_.members()) {
    if (site == options_.site) continue;
    courier_.send(member.address, LinkTag::Gradients, step, bytes);
  }
}

bool CrossSite::poll_gradients(std::int64_t step, std::span<float> values, std::chrono::milliseconds budget) {
  const double deadline = clock_() + seconds_of(budget);
  while (true) {
    const auto missing = gradients_.missing(step, options_.sites, options_.site);
    if (!missing) {
      gradients_.mean(step, options_.sites, options_.site, values);
      return true;
    }
    waiting_ = {Waiting::What::Gradients, step, *missing};
    pump(deadline);
    if (clock_() >= deadline) return false;
  }
}

void CrossSite::read_journal() {
  // Checked against a commit's digest before any use, like every delta.
  for (auto& [key, bytes] : outbox_.load(courier_.link().chunk_bytes())) store_.put(key, std::move(bytes), true);
  if (const auto journal = outbox_.journal()) log_.recall(journal->records());
}

void CrossSite::pump(double until) {
  if (membership_.registered()) control([&](ControlPlane&) { membership_.maintain(); });
  do {
    const double left = until - clock_();
    const auto wait = std::chrono::milliseconds(static_cast<std::int64_t>(std::clamp(left * 1000.0, 0.0, 5.0)));
    if (auto r = courier_.receive(wait)) {
      handle(std::move(*r));
      return;  // what the caller waits for may have come: let it look
    }
    courier_.report_refusals(clock_(), events_);
  } while (clock_() < until);
}

void CrossSite::take_in_received() {
  // Bounded: a peer flooding the link must not hold this site's look at the control plane.
  for (std::size_t n = 0; n < kMaxHeld * membership_.members().size(); ++n) {
    auto r = courier_.receive(std::chrono::milliseconds(0));
    if (!r) return courier_.report_refusals(clock_(), events_);
    handle(std::move(*r));
  }
}

void CrossSite::arrive_in_parts(const std::string& address, std::uint64_t transfer_id, std::uint16_t tag,
                                std::vector<std::vector<std::byte>> reports) {
  const std::string* site = site_of(address);
  if (site == nullptr || static_cast<LinkTag>(tag) != LinkTag::Delta) {
    ++counts().refused.transfers_from_non_members;
    return;
  }
  const std::int64_t round = transfer_number(transfer_id);
  if (round <= book_.merged_round(*site)) return;  // merged already
  if (store_.held_from(*site) >= kMaxHeld * static_cast<std::size_t>(options_.rule.fragments) &&
      !store_.has({*site, round})) {
    ++counts().refused.deltas_over_hold_bound;
    return;
  }
  auto held = held_in_parts(reports, parts_ref(address, transfer_id));
  if (!held) {
    ++counts().refused.deltas_damaged;  // parts of different cuts: the group changed meanwhile
    return;
  }
  store_.arrive_in_parts({*site, round}, std::move(*held));
}

void CrossSite::handle(Received r) {
  const std::string* site = site_of(r.peer);
  if (site == nullptr) {
    ++counts().refused.transfers_from_non_members;  // not a member of this job (or not any more)
    return;
  }
  courier_.received(*site, r.bytes.size());
  const std::int64_t id = transfer_number(r.transfer_id);
  switch (static_cast<LinkTag>(r.tag)) {
    case LinkTag::Delta: {
      const std::int64_t merged = book_.merged_round(*site);
      if (id <= merged) return;  // merged already: a late copy
      if (store_.held_from(*site) >= kMaxHeld * static_cast<std::size_t>(options_.rule.fragments) &&
          !store_.has({*site, id})) {
        ++counts().refused.deltas_over_hold_bound;
        return;
      }
      store_.arrive({*site, id}, std::move(r.bytes));
      return;
    }
    case LinkTag::DeltaRequest: {
      try {
        const auto req = decode_delta_request({reinterpret_cast<const char*>(r.bytes.data()), r.bytes.size()});
        const Outbox::Delta* own = outbox_.find(req.round);
        if (req.site != options_.site || own == nullptr) return;
        courier_.send(r.peer, req.round, *own);
        ++counts().deltas_resent;
        counts().bytes_resent += own->bytes->size();
      } catch (const Error&) {
        ++counts().refused.requests_malformed;
      }
      return;
    }
    case LinkTag::Gradients:
      if (!gradients_.put(*site, id, std::move(r.bytes))) ++counts().refused.gradients_refused;
      return;
    case LinkTag::StateRequest:
      try {
        const auto req = decode_state_request({reinterpret_cast<const char*>(r.bytes.data()), r.bytes.size()});
        serve_state_to(r.peer, req.min_version);
      } catch (const Error&) {
        ++counts().refused.requests_malformed;
      }
      return;
    case LinkTag::State:
      // Kept until its commit is read and it is checked against it (catch_up); a newer one replaces it.
      transfer_.received(id, *site, std::move(r.bytes));
      return;
    case LinkTag::Stripe:
      break;  // a site that splits its exchange takes stripes in its StripedLink: this one does not
  }
  ++counts().refused.transfers_unknown_tag;  // a tag of no protocol version we speak, or too far ahead
}

void CrossSite::set_proposing(bool proposing) { membership_.set_proposing(proposing); }

void CrossSite::refresh_members() {
  const auto change = membership_.refresh(events_);
  if (change.new_addresses)
    courier_.list_peers(membership_.addresses(), [this](const std::string& address) {
      return courier_.vouch(address, clock_(), [this] { control([this](ControlPlane&) { refresh_members(); }); });
    });
  // A site that (re)joined missed what was sent before it came: it gets this site's deltas that
  // no commit merged yet now, rather than asking for each a second later.
  const auto merged = book_.merged_round(options_.site);
  for (const MemberRecord* m : change.joined)
    for (const auto& [round, own] : outbox_.announced_after(merged)) courier_.send(m->address, round, *own);
}

const std::string* CrossSite::site_of(const std::string& address) {
  if (!membership_.site_at(address)) control([&](ControlPlane&) { refresh_members(); });
  return membership_.site_at(address);
}

std::map<std::string, PeerLanes> CrossSite::peer_lanes() const {
  std::map<std::string, PeerLanes> lanes;
  for (const auto& [site, m] : membership_.members())
    if (site != options_.site) lanes[m.address] = {m.lanes, m.parts_unit};
  return lanes;
}

const std::string* CrossSite::known_site(const std::string& address) const { return membership_.site_at(address); }

void CrossSite::read_announcements(ControlPlane& plane) {
  counts().refused.announcements_unreadable += book_.read(plane, log_.keys());
  for (const auto& v : book_.take_vouches()) vouches_.read(v);
  for (const auto& d : book_.take_disputes())
    events_.push_back({"delta_disputed", d.site, d.round,
                       "site " + d.by + " received other bytes than " + d.site + " announced: every round of " +
                           d.site + " is refused from now on"});
  if (book_.disputes_pending()) book_.file_disputes(plane, log_.keys());
}

CrossSiteTraffic CrossSite::traffic() const { return courier_.traffic(); }

std::string CrossSite::describe_wait() const { return waiting_.describe(); }

}  // namespace meridian
