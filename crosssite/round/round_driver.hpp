#pragma once
// A site's cross-site round, in one place, run alike by every replica of a real site and by the
// protocol simulator's sites: round ends (with the steps carried over paused rounds and dropped
// by rollbacks), which fragment each exchange sends, the backlog and overlap bounds, eager
// step-ahead, lost-round drops, fast-forward, and the whole apply of a version (one shared Update,
// then OuterState's preview, hash check, commit and rebase of the commit's fragments).
//
// Pumped, not looped: after_step() and the other entries set what the site waits for; each
// attempt() makes one look at the other sites (leader), shares the Update (every replica) and
// applies it, and says whether the site still waits. A real site loops on attempt() with a short
// budget; the simulator makes one attempt per tick of its virtual clock. Time comes only from the
// injected clock, the other sites only through RoundPeers (the leader's CrossSite).
//
// Walk of one committed round (DiLoCo, overlapped): after_step() at the round's end encodes the
// delta on every replica (the error-feedback residual stays identical) and the leader submits it;
// the site waits while more than one of its rounds is unmerged (backlog); later attempts find the
// next version's commit (poll_commit), share it (two collectives), and apply() previews, checks
// the record's hash, commits and rebases the in-flight round onto it.
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "crosssite/outer/outer_state.hpp"
#include "crosssite/round/replica_channel.hpp"
#include "crosssite/round/round_events.hpp"
#include "crosssite/round/round_peers.hpp"
#include "crosssite/round/site_parts.hpp"
#include "crosssite/round/training.hpp"

namespace meridian {

struct RoundPlan {
  std::string site;
  int inner_steps = 1;            // this site's steps between exchanges: H (or fewer, dynamic) / P
  int job_round_steps = 1;        // the job's steps between exchanges, H / P: where a round starts
  // Shorter rounds first ([outer] early_inner_steps, early_steps): every site ends its rounds every
  // early_inner_steps steps until step early_steps, then every inner_steps. 0: none.
  int early_inner_steps = 0;
  std::int64_t early_steps = 0;
  std::int64_t total_steps = 1;   // the job's inner steps
  bool overlap = true;            // train on while a round is merged ([outer] overlap)
  bool eager = false;             // ... from an estimate of the coming version (overlap_update = "eager")
  int overlap_steps = 1;          // past this many steps after a round's end, wait for it to merge
  double eager_share = 1;         // this site's share of a commit's tokens: its replicas / the job's
  // Every replica sends stripes of the site's deltas from its own copy (a split exchange): a
  // sharded state's replicas all hold each delta whole then; otherwise only the leader does.
  bool replicas_send = false;

  // The steps of the round that step `done` (counted from 1) falls in, up to and including it.
  std::int64_t steps_into_round(std::int64_t done) const;
  // True when the step just finished ends a round (every inner_steps, and the last step).
  bool round_ends(std::int64_t done) const;
  // The job's step where its round `round` (from 0) starts.
  std::int64_t round_start(std::int64_t round) const;
  bool early(std::int64_t done) const { return early_steps > 0 && done <= early_steps; }
};

// One replica's side of a call: how it shares with the others, its training, and, when the
// site's outer state is sharded (OuterState::sharded), how the replicas put their parts together.
struct Replica {
  ReplicaChannel& channel;
  Training& training;
  SiteParts* parts = nullptr;
};

class RoundDriver {
 public:
  // Rounds in a row of which every site's was refused before a site gives up: one is a spike, this
  // many a job whose progress no version can take any more.
  static constexpr int kMaxDroppedRounds = 3;
  // Rounds of a site announced but not merged yet that it may train on with (overlap).
  static constexpr std::int64_t kMaxBacklog = 1;

  RoundDriver(RoundPlan plan, OuterState& state, RoundEvents& events, std::function<double()> clock);

  // The leader's way to the other sites (null: this replica does not lead).
  void lead(RoundPeers* peers) { peers_ = peers; }
  const RoundPlan& plan() const { return plan_; }

  bool round_ends(std::int64_t steps_done) const { return plan_.round_ends(steps_done); }
  // After inner step `done`: ends the round if one ends there (`hold`: paused, its steps carried
  // into the next round sent), else looks for the next version once (overlap or paused). Then
  // attempt() until it returns false.
  void after_step(Replica& r, std::int64_t done, bool last, bool hold);
  // After joining a job under way: the versions committed meanwhile, before training on.
  void catch_up();
  // Every round this site announced merged (or lost); the leader then leaves the job.
  void drain();
  // After a rejoin: the site takes up the job's step.
  void take_up_job();
  // A site whose last round is out (sent before a restart): it waits for the job's last version.
  void end_job();
  bool waiting() const { return wait_.what != What::None; }
  bool polling() const { return wait_.what == What::Poll; }
  // One look, share and apply; true while the site still waits. `budget`: how long the leader
  // may pump the other sites (a poll takes none).
  bool attempt(Replica& r, std::chrono::milliseconds budget);

  // The divergence guard's way back: the in-flight round dropped onto the version held.
  struct Rollback {
    std::int64_t to_version = 0, discarded_steps = 0;
    std::uint64_t params_hash = 0;
  };
  Rollback roll_back(Training& training, SiteParts* parts = nullptr);
  void pause(bool paused) { paused_ = paused; }
  bool paused() const { return paused_; }

  struct Figures {
    std::int64_t rounds = 0;        // rounds this site ended, over every launch of the job
    std::int64_t eager_steps = 0;   // rounds this process started at an eager estimate
    std::int64_t last_round = -1;   // leader: the newest round number it used
    double applied_s = 0;           // applying versions and adopting states
    double max_version_gap_s = 0;   // the longest this site went without a new version
    std::optional<double> rejoined_after_s;  // from the start to the first peer state adopted
  };
  const Figures& figures() const { return figures_; }
  void set_rounds(std::int64_t rounds) { figures_.rounds = rounds; }
  void count_round() { ++figures_.rounds; }  // the synchronous baseline's, one per step

 private:
  enum class What { None, Poll, Backlog, NextVersion, Finished, CatchUp, TakeUp };
  enum class Then { Nothing, SendNext, Overlap, Leave, CaughtUp, TakeUp };
  struct Wait {
    What what = What::None;
    std::int64_t keep = 0;  // Backlog: how many unmerged rounds end the wait
    Then then = Then::Nothing;
  };
  // The exchange under way: the fragments it still has to send (the last one sends every fragment).
  struct Exchange {
    std::int64_t tokens = 0;
    int rounds_spanned = 1;
    bool last = false;
    int due = 0;
    std::vector<int> left;
  };
  // What carries from round to round.
  struct Cursor {
    std::int64_t next_round = 0;     // leader: the number of its next round
    std::int64_t aim = 1;            // no round sent yet aims at a version before this one
    std::int64_t carried_steps = 0;  // of rounds that ended paused, not sent yet
    int carried_rounds = 0;
    std::int64_t rolled_back_at = -1;   // a round counts its steps from the latest rollback
    int since_sent = -1;                // overlap: steps since a round was sent; -1: none waited for
    std::int64_t dropped_round = -1;    // the newest of this site's rounds dropped as lost
    int dropped_in_a_row = 0;           // with no version between them
    double started_at = 0;
    double last_version_at = 0;
    double wait_began = 0;
    std::int64_t wait_from_version = 0;
  };

  void end_round(Replica& r, std::int64_t steps_in_round, bool last);
  // The version this site's next round aims at (streaming: its turn is the fragment sent).
  std::int64_t aim() const;
  void send_next(Replica& r);
  void sent_all(Replica& r);
  void start_poll();
  void wait_for(What what, Then then = Then::Nothing, std::int64_t keep = 0);
  // What only the leader knows of an attempt's version: its record (for the log), and the outcome
  // its own winning proposal previewed already.
  struct Looked {
    std::optional<CommitRecord> record;
    std::optional<OuterState::Outcome> outcome;
  };
  Update look(std::chrono::milliseconds budget, Looked& looked);
  void apply(Replica& r, Update& u, Looked& looked);
  // A whole state's leader previews another site's commit before sharing it: one whose hash its
  // copy does not give becomes a wait for a peer's state, the same on every replica (a sharded
  // state's parts are hashed together in apply, where every replica sees the same; CrossSite
  // checks the copy under this site's own proposal).
  void check_whole(Update& u, Looked& looked);
  std::string mismatch(std::int64_t version, std::uint64_t here, std::uint64_t said, std::int64_t from) const;
  // Leader: this site's newest round when no version can merge it (and it was not dropped yet);
  // streaming, also its newest round of the next version's fragment.
  std::optional<std::int64_t> own_unmergeable() const;
  void drop_lost_round(Replica& r, std::int64_t round);
  void ended(Replica& r, const Update& u);
  void take_up(Replica& r, std::int64_t job_step);
  std::int64_t job_step(const std::map<std::string, std::int64_t>& merged) const;
  void step_ahead(std::span<float> weights, int fragment);
  bool leads(const Replica& r) const { return r.channel.leader() && peers_ != nullptr; }
  // A sharded state's parts, together: of an encoded delta, of the weights a change of the state
  // wrote (each replica wrote its part), a preview's hash, and the state for a peer.
  SiteParts& parts(const Replica& r) const;
  // The site's encoded delta (a sharded state's parts joined: on the leader, and on every replica
  // where they all send or step ahead from it), and at the leader its digest: each replica hashes
  // its own part alone, the units of the digest being whole parts'.
  struct Encoded {
    std::vector<std::byte> bytes;
    Digest digest{};  // the leader's only
  };
  Encoded joined(const Replica& r, std::vector<std::byte> encoded) const;
  void share_weights(Replica& r) const;
  // A sharded state's part and mirror of the weights where the training holds just those
  // (Training::held): read and written there, nothing gathered or shared. Empty otherwise.
  std::span<float> held_weights(Replica& r) const;
  // The commit hash of the replicas' chunk lists together; with their mirrors' outcomes (every
  // replica passes one, or none does), the replicas whose mirror's weights are not its owner's
  // part's: corrupted since the cut, as the owner's part is checked by the hash.
  struct PartsHash {
    std::uint64_t hash = 0;
    std::vector<int> stale_mirrors;
  };
  PartsHash site_hash(SiteParts& parts, const std::vector<std::uint64_t>& chunks,
                      const OuterState::Outcome* mirror) const;
  // The site's parts cut anew from their owners (SiteParts::recut), the stale mirrors with them.
  void repair_mirrors(Replica& r, const std::vector<int>& replicas);
  void preview_proposal(Replica& r, const Update& u);
  // The version of this replica's kept preview when good on the part and mirror it holds now; -1.
  std::int64_t previewed() const;
  // The outcome of `u`'s mean (a sharded site's: of the parts held, from the deltas still encoded).
  OuterState::Outcome preview_of(const Update& u) const;
  void assemble_state(Replica& r);

  RoundPlan plan_;
  OuterState& state_;
  RoundEvents& events_;
  std::function<double()> clock_;
  RoundPeers* peers_ = nullptr;
  bool paused_ = false;
  Wait wait_;
  Exchange exchange_;
  Cursor cursor_;
  std::map<std::int64_t, int> sent_fragments_;  // leader: its newest rounds' fragments
  std::vector<float> fresh_;  // eager: the decoded delta just sent
  // A sharded site's preview of its own proposal, kept for when that proposal wins: good only for
  // the part and mirror it was taken on (a group re-formed since previews the commit anew).
  struct Proposal {
    std::int64_t version = 0;
    ShardRange part;
    std::optional<ShardRange> mirror;
    OuterState::Outcome outcome;
  };
  std::optional<Proposal> proposal_;
  Figures figures_;
};

}  // namespace meridian
