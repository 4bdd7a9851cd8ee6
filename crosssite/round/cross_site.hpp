#pragma once
// A site's side of the cross-site protocol (DESIGN.md, steps 2-5), run by the replica that leads
// the site: its membership key on a lease, announcing and sending its deltas, receiving the
// others', screening them, proposing commits by compare-and-swap when they are due (every live
// site's delta here, or the quorum, or the adaptive deadline passed), and handing out each commit
// once every delta it lists is here and verified. A site that fell behind (it was away, or
// restarted without its disk) catches up by adopting a live peer's state instead. The bulk bytes
// go over the Link; etcd holds only the small records of records.hpp.
//
// CrossSite coordinates parts with one job each (docs/ARCHITECTURE.md has the list): Courier,
// JobMembership, ControlGate, CommitLog, DeltaBook, DeltaStore, Proposer, Outbox, StateTransfer,
// EndWaits and GradientInbox. It runs on any ControlPlane, Link and clock: etcd, ZeroMQ or UCX
// and the steady clock in a real site; in-memory ones on virtual time in the protocol simulator.
//
// Nothing here sleeps or owns a thread: the caller pumps it (poll_* with a time budget), so the
// replicas of the site can stay in step between pumps. Peers' mistakes (a damaged or unannounced
// delta, a malformed request) are refused and counted, never applied and never fatal.
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "crosssite/control/change_feed.hpp"
#include "crosssite/control/control_plane.hpp"
#include "crosssite/outer/outer_state.hpp"
#include "crosssite/round/commit_deadline.hpp"
#include "crosssite/round/commit_log.hpp"
#include "crosssite/round/commit_rule.hpp"
#include "crosssite/round/control_gate.hpp"
#include "crosssite/round/courier.hpp"
#include "crosssite/round/cross_site_types.hpp"
#include "crosssite/round/delta_book.hpp"
#include "crosssite/round/delta_journal.hpp"
#include "crosssite/round/delta_screen.hpp"
#include "crosssite/round/delta_store.hpp"
#include "crosssite/round/end_waits.hpp"
#include "crosssite/round/gradient_inbox.hpp"
#include "crosssite/round/held_copy.hpp"
#include "crosssite/round/job_membership.hpp"
#include "crosssite/round/outbox.hpp"
#include "crosssite/round/proposer.hpp"
#include "crosssite/round/records.hpp"
#include "crosssite/round/round_peers.hpp"
#include "crosssite/round/state_transfer.hpp"
#include "crosssite/round/vouches.hpp"
#include "crosssite/round/waiting.hpp"
#include "transport/link/link.hpp"
#include "transport/link/striped_link.hpp"

namespace meridian {

// Where a copy rebuilt from the site's own disk comes from, as a peer's state comes from its address.
inline const std::string kRebuiltCopy = "this site's checkpoint and journal";

struct CrossSiteOptions {
  std::string job;
  std::string site;
  std::vector<std::string> sites;  // every site of the job, as configured
  CommitRuleOptions rule;
  std::int64_t lease_ttl_s = 10;
  std::chrono::milliseconds control_poll{20};  // between looks at the control plane
  // Follows the job's keys under `root` in `areas` (its members', deltas' and commits' prefixes,
  // in that order; EtcdWatch in a real site), so a look reads an area only when it changed. Empty,
  // or while the feed is down: every look reads everything.
  std::function<std::unique_ptr<ChangeFeed>(const std::string& root, std::vector<std::string> areas)> change_feed;
  // A look reads every range at least this often, and right after the control plane comes back,
  // whatever the watch says: a stream that stalled through a partition may have missed changes
  // its probe has not yet caught, and a site must not train on behind commits it never read.
  std::chrono::milliseconds full_read{2000};
  std::chrono::milliseconds rerequest_after{1000};  // before asking a peer again for a missing delta
  std::chrono::milliseconds control_retry{1000};    // after etcd failed, before trying it again
  std::size_t keep_own_rounds = 8;                  // own deltas kept to answer requests
  // Stuck this long on a commit whose deltas do not come (their owner died, or dropped them), a
  // site adopts a peer's state instead; behind by two versions or more it does so at once, unless
  // it holds the deltas of the next one.
  std::chrono::milliseconds catch_up_after{3000};
  // Its steps done, a site that has found the control plane out of reach for this long (seconds,
  // from the first look that did) ends on the version it holds (EndWaits::cut_off); 0: it waits
  // as long as the control plane stays away.
  double end_unreachable_s = 0;
  DeadlineOptions deadline;
  DeltaScreenOptions screen;
  // Who renews this site's membership lease from its grant on (required): a LeaseKeeper thread
  // with its own etcd client in a real site; the protocol simulator renews on virtual time.
  std::function<std::unique_ptr<KeptLease>(std::int64_t lease)> keep_lease;
  // This incarnation's id in the membership record: 0, drawn at random (the simulator sets it, so
  // a seed replays exactly).
  std::uint64_t incarnation = 0;
  // The hash of version 0, the weights every site of the job starts from, as this process built
  // them (never read from a checkpoint, which may hold a damaged copy): a whole state's copy of
  // version 0 is held to it, as a later version's is to its record's. Unset: version 0 unchecked.
  std::optional<std::uint64_t> origin_hash;
  // Each site's CURVE public key as the job lists it (empty: the links speak no CURVE): a member
  // record whose address names another key is not believed (JobMembership).
  std::map<std::string, std::string> link_keys;
  // Where this site keeps its own deltas until they are merged (delta_journal.hpp); read back
  // when the site starts. Null: memory only (a restart loses them).
  std::shared_ptr<DeltaJournal> journal;
  // The site writes checkpoints and reports each through durable(): the journal keeps what the
  // versions since the last one merged (durable_journal.hpp). False: it keeps a window of rounds.
  bool checkpoints = true;
  // The whole outer state as the site's newest checkpoint holds it, read from its disk (nullopt:
  // none yet; Error when it cannot be read): a copy found not to be its version is rebuilt from it
  // and the journal first (rebuilt_copy.hpp), and taken from a peer only when that falls short.
  // Unset (a sharded state's parts, or no checkpoints): only a peer's state replaces the copy.
  std::function<std::optional<OuterState>()> saved_state;
};

class CrossSite final : public RoundPeers {
 public:
  // `clock`: seconds on a monotonic clock.
  CrossSite(CrossSiteOptions options, ControlPlane& etcd, Link& link, std::function<double()> clock);
  ~CrossSite() override;  // revokes the lease, so peers see this site leave at once
  CrossSite(const CrossSite&) = delete;
  CrossSite& operator=(const CrossSite&) = delete;

  // Registers this site (once) and pumps for up to `budget`; true once every configured site is a member.
  bool poll_join(std::chrono::milliseconds budget);

  // The state this site serves to peers that catch up (its leader's OuterState), from now on.
  void serve_state(const OuterState* state) { transfer_.serve(state); }
  // The site's checkpoint now holds `version` (written whole): its journal may let go of the
  // deltas merged through it.
  void durable(std::int64_t version);
  // Whether `state` may go into a checkpoint now: not while its copy is not its version (found
  // here, by hashing a whole state, or before), so that the checkpoint it would replace, and the
  // journal's deltas since, can still rebuild the version.
  bool may_checkpoint(const OuterState& state);
  // After poll_join: the first round number this incarnation may use. A restarted site continues
  // after every round it ever announced, so no announcement key is reused.
  std::int64_t next_round() const override { return outbox_.next_round(); }

  // DiLoCo: announces this site's delta for `a.round` and sends it to every other member.
  // `hashes`: the chunk hashes of `encoded` for this site's link (chunk_hashes with chunk_bytes()),
  // taken right after encoding, so that the link sends the delta without reading it again. Wrong
  // ones get the delta refused by every peer's link, never applied.
  void submit(const DeltaAnnouncement& a, std::vector<std::byte> encoded, ChunkHashes hashes) override;
  // The chunk size of this site's link, which submit's hashes are taken with.
  std::size_t chunk_bytes() const override { return courier_.link().chunk_bytes(); }

  using Commit = VersionCommit;
  // Pumps for up to `budget`; the commit of version state.version() + 1 once it exists and every
  // delta it lists is here and verified, or a verified peer snapshot of a newer version when this
  // site is behind. Proposes that commit first when it is due and this site holds everything it
  // needs (whoever proposes, the swap lets one proposal win).
  std::optional<Commit> poll_commit(const OuterState& state, std::chrono::milliseconds budget) override;
  // True once every live site announced its final round, this site holds the newest version, no
  // delta is left that any site could still merge (the job's last version, the same everywhere),
  // and every live site has ended too (EndWaits): a site still behind needs one to catch up from.
  // Or, its steps done, once the control plane has been out of reach for end_unreachable_s: then
  // it ends on the version it holds (ended_cut_off).
  bool finished(const OuterState& state) override;
  bool ended_cut_off() const { return ends_.ended_cut_off(); }

  // This site's newest round, if after `after`, when its values were refused (every site screens
  // alike) and so was every other live site's round on the current version: no version can merge
  // any of them, and no site announces again until it trains on. Nothing otherwise, and while a
  // version that leaves this site's round out can still come (a peer's delta is open or on its
  // way). Cheap when nothing of this site's is refused after `after`: called every step.
  std::optional<std::int64_t> lost_round(const OuterState& state, std::int64_t after) const override;
  bool unmergeable(const OuterState& state, std::int64_t round) const override;
  bool disputed() const override { return book_.banned(options_.site); }
  void diverged(std::int64_t version, const std::string& why) override;
  std::optional<std::uint64_t> held_hash(std::int64_t version) const override { return copy_.hash_of(version); }
  std::vector<CrossSiteEvent> take_events() { return std::exchange(events_, {}); }
  // The newest round any other site announced (merged or not), -1 before any: how far the job
  // has got, for a site that comes back.
  std::int64_t peers_newest_round() const override { return book_.peers_newest_round(); }
  // This site's rounds announced and still mergeable (commit_rule's `mergeable`, the predicate the
  // commits use) while the control plane is reachable; 0 when it is not: a cut-off site trains
  // on, whatever it has queued.
  std::int64_t backlog(const OuterState& state) const override;
  // Sites whose membership key this site last read: the live ones.
  std::size_t live_sites() const { return membership_.members().size(); }
  const std::map<std::string, MemberRecord>& members() const { return membership_.members(); }
  // A split exchange: this site's lanes (its replicas' link addresses, replica 1 first), which its
  // membership record lists from the next look at the control plane on.
  // `parts_unit`: not 0 when its replicas take deltas in parts (MemberRecord::parts_unit).
  void set_lanes(std::vector<std::string> lanes, std::uint64_t parts_unit = 0) {
    membership_.set_lanes(std::move(lanes), parts_unit);
  }
  // A peer's transfer (from its link `address`) that this site's replicas hold in parts
  // (StripedLink::take_held), judged by `held`; ignored unless it is a delta of a member.
  void arrive_in_parts(const std::string& address, std::uint64_t transfer_id, std::uint16_t tag,
                       std::vector<std::vector<std::byte>> reports);
  // The group re-formed: the parts its replicas held are gone.
  void drop_held_in_parts() { store_.drop_in_parts(); }
  // A sharded state was cut anew: a proposal under way was made on the old cut (its means for a
  // sharded or a whole state, its preview), so the site proposes anew, and a commit of the one
  // claimed is computed anew.
  void forget_proposal() { proposer_.forget(); }
  // Every other member's lanes, by its own link address, as last read (StripedLink::set_peer_lanes).
  std::map<std::string, PeerLanes> peer_lanes() const;
  // The newest version any site committed, as far as this site has read.
  std::int64_t newest_commit() const override { return log_.newest(); }
  // This site's membership lease: safe to read from another thread, e.g. to revoke it on SIGTERM.
  std::int64_t lease() const { return membership_.lease(); }
  // The operator drained the site: revokes its lease (peers stop counting it at once) and stops
  // renewing it; nothing registers it again until the next poll_join.
  void leave() override;
  void stop_announcing() override { membership_.set_announcing(false); }
  std::optional<ProposalPreview> take_preview() override { return proposer_.take_preview(); }
  void previewed(std::uint64_t hash) override;
  bool state_wanted() const override { return transfer_.assembly_wanted(); }
  void state_assembled(std::int64_t version, std::vector<std::byte> snapshot) override;
  // False while the operator paused the site's outer exchange: poll_commit proposes nothing (it
  // still hands out the commits others make), and the membership record says so (from the next
  // look at the control plane on), so the others' commits do not wait for this site's rounds.
  void set_proposing(bool proposing);
  // Every other configured site announced its final round and is no member any more: the job
  // ended (for a site that sat it out). False while the control plane cannot be read.
  bool job_over();

  // The synchronous baseline: every site sends its step's values (gradients and loss) to every
  // other; once all are here, poll_gradients replaces `values` by their mean over sites, summed in
  // site order so every site gets the same bits.
  void send_gradients(std::int64_t step, std::span<const float> values);
  bool poll_gradients(std::int64_t step, std::span<float> values, std::chrono::milliseconds budget);

  CrossSiteTraffic traffic() const;
  const Waiting& waiting() const { return waiting_; }  // what the latest poll is waiting for
  std::string describe_wait() const;                   // the same, for logs and people
  // The member site at a link address as last read from etcd (null if none), without reading
  // etcd: safe to call from inside this site's own link (the WAN emulator's does).
  const std::string* known_site(const std::string& address) const;

 private:
  // Receives and handles transfers until one was handled or `until`; at least one look at the link.
  void pump(double until);
  void take_in_received();  // handles every transfer the link has ready now, without waiting
  void handle(Received r);
  // Reads the members, and sends the sites that (re)joined this site's unmerged deltas.
  void refresh_members();
  const std::string* site_of(const std::string& address);
  // Runs control-plane calls through the gate (control_gate.hpp), the site's only way to the
  // control plane; false when they failed or wait.
  bool control(const std::function<void(ControlPlane&)>& call);
  // Puts this site's announcements that etcd did not take yet; true when none is left.
  bool announce_pending();
  // What the control plane shows, as the commit rule sees it (no deltas held yet).
  CommitView control_view(const OuterState& state) const;
  // What `mergeable` needs to judge this site's own rounds, and no more.
  CommitView own_view(const OuterState& state) const;
  std::vector<std::pair<DeltaKey, const DeltaAnnouncement*>> own_announced() const;  // not merged yet
  // One look: reads what `reads` says (the rest of it decides on what was read before, and the
  // deltas and time since), then hands out, catches up or proposes.
  std::optional<Commit> check_control(ControlPlane& plane, const OuterState& state, ControlGate::Reads reads);
  // The next version's commit, once every delta it lists is here (journaled first).
  std::optional<Commit> hand_out(const CommitRecord& record, const OuterState& state);
  // Has the proposer propose the next version when it is due and this site holds all it needs.
  void propose(ControlPlane& plane, const OuterState& state);
  std::optional<Commit> catch_up(ControlPlane& plane, const OuterState& state, bool far_behind);
  // Once per divergence, with saved_state: the copy rebuilt from the checkpoint and the journal,
  // received as a peer's state would be (catch_up takes it), or an event saying why not.
  void rebuild_copy(const OuterState& state);
  // This site's vouch for the newest version it handed out, if not written yet.
  void put_vouch(ControlPlane& plane);
  // Why `record` is not to be applied (vouches.hpp), its read forgotten; nothing if it may be.
  std::optional<std::string> contradicted(const CommitRecord& record);
  // The record of `version` as read, into the journal, before the site applies it (recalled at a restart).
  void journal_record(std::int64_t version);
  // `read`, the record of the version this site holds (CommitLog::forget_before), against its own
  // earlier vouch: a site restarted from its disk applied the record that names, and chains its
  // proposals onto it; another read there is an event, kept only for what it merged.
  void judge_held(const CommitRecord& read);
  // Makes `record` the newest version this site holds: merged rounds, their bytes and the screen.
  void applied(const CommitRecord& record);
  // Drops what `record` merged (up to its `merged` rounds per site) from what may still be proposed.
  void forget_merged(const CommitRecord& record);
  // Whether a delta matching `digest` is here, whole or in parts; if not, its owner is asked again
  // (rate-limited; `overdue`: the first time at once), or it is disputed: its owner sent other
  // bytes than it announced, twice.
  bool held(const DeltaKey& key, const Digest& digest, bool overdue = false);
  // Reads the announcements (and disputes: each logged once) since the last read.
  void read_announcements(ControlPlane& plane);
  bool holds_deltas_of(const CommitRecord& record);  // intact, every one: the commit can be applied
  // Held and screened fine: may go into a proposal. A delta that fails the screen is refused for good.
  bool usable(const DeltaAnnouncement& a, const OuterState& state);
  // The oldest version worth asking a peer's state of: the newest committed, and past `next` when
  // its record is not here to apply (refused on a vouch, or unreadable) though newer ones are.
  std::int64_t state_to_ask_for(std::int64_t next) const;
  void request_state(std::int64_t min_version);
  void serve_state_to(const std::string& address, std::int64_t min_version);
  void request(const std::string& site, std::int64_t round, bool overdue);
  void read_journal();
  bool merged_all(const OuterState& state);   // finished()'s first half: this site holds the job's last version
  bool peers_ended(const OuterState& state);  // its second: says so, and waits for the others to
  CrossSiteTraffic& counts() { return courier_.counts(); }

  CrossSiteOptions options_;
  Courier courier_;
  std::function<double()> clock_;
  JobMembership membership_;
  ControlGate gate_;
  CommitLog log_;
  Outbox outbox_;
  StateTransfer transfer_;
  DeltaBook book_;
  DeltaStore store_;
  Proposer proposer_;
  std::vector<CrossSiteEvent> events_;
  GradientInbox gradients_;
  Waiting waiting_;
  EndWaits ends_;
  // The newest version committed when this incarnation first joined. Peers push a (re)joining
  // site only the deltas no commit has merged, so those these versions merged are on their way
  // to nobody here: a site that holds an older version asks for them at once.
  std::optional<std::int64_t> committed_before_join_;
  // Whether its copy is the version it holds; once found otherwise, until a peer's state replaces
  // it, no commit is handed out or proposed, no state served, and a peer's state is asked for.
  HeldCopy copy_;
  bool rebuild_due_ = false;  // diverged since the last rebuild_copy
  Vouches vouches_;           // what the others vouch for: no record they contradict is applied
  std::optional<Vouch> vouch_due_;  // this site's, for the newest version it applied, not written yet
};

}  // namespace meridian
