#pragma once
// The protocol simulator's invariants (docs/simulator.md), judged from what every site did and what the
// control plane holds when a run ends:
//   * one linear commit history: versions 1..N, one record each, every site applying the same one;
//   * the same weights hash on every site for each version;
//   * each delta merged at most once, and only with the digest of the bytes its site sent;
//   * every delta carries exactly its site's progress since its previous one (rebases lose none);
//   * no committed version lost: every site that finished holds version N;
//   * the final weights equal a replay of the commit log, computed here apart from CrossSite,
//     fragment by fragment.
// Liveness (every live site finishes in time) is the simulator's, which knows the clock.
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "crosssite/codec/codec.hpp"
#include "crosssite/outer/fragments.hpp"
#include "crosssite/outer/outer_optimizer.hpp"
#include "crosssite/round/commit_rule.hpp"
#include "crosssite/round/delta_screen.hpp"
#include "crosssite/round/records.hpp"

namespace meridian {

class OuterState;

class Checker {
 public:
  // `plan`: the job's fragments (Streaming DiLoCo); a commit changes the ones its deltas cover.
  // `screen`: the sites' delta screens, whose history each record carries.
  Checker(std::vector<float> initial, OuterOptions outer, CodecOptions codec, CommitRuleOptions rule, FragmentPlan plan,
          DeltaScreenOptions screen);

  // A site sent the delta of `round`: its bytes, and the progress its fragment trained since its
  // last delta of that fragment.
  void submitted(const std::string& site, std::int64_t round, std::span<const std::byte> bytes,
                 std::span<const float> progress);
  // A site made `record` its newest version, its weights hashing to `hash` (adopted: from a peer's state).
  void applied(const std::string& site, const CommitRecord& record, std::uint64_t hash, bool adopted);
  // A site (re)started holding `version`: its next version is the one after it.
  void restarted(const std::string& site, std::int64_t version);
  // A site finished on `version`: the log's last, or, `cut_off` (it ended without the control
  // plane, CrossSite::ended_cut_off), any version of the log, whose weights it must hold exactly.
  void finished(const std::string& site, std::int64_t version, std::span<const float> global, bool cut_off = false);
  void fail(std::string what) {
    if (on_fail_) on_fail_(what);
    violations_.push_back(std::move(what));
  }
  // Told of each violation as it is found (a trace shows where it happened).
  void on_fail(std::function<void(const std::string&)> told) { on_fail_ = std::move(told); }
  void dropped_round() { ++rounds_dropped_; }  // a site dropped a round no version could merge
  std::int64_t rounds_dropped() const { return rounds_dropped_; }
  // The end of a run: checks the control plane's commit log (every key under the job's commits).
  void check_log(const RoundKeys& keys, const std::vector<std::pair<std::string, std::string>>& store);

  const std::vector<std::string>& violations() const { return violations_; }
  std::int64_t newest_version() const { return newest_; }
  const std::map<std::int64_t, CommitRecord>& records() const { return records_; }

 private:
  // Per fragment the record's deltas cover (ascending), and their means one after the other; each
  // delta's norm goes into its fragment's screen, in the record's order.
  std::pair<std::vector<int>, std::vector<float>> mean_of(const CommitRecord& record, std::vector<DeltaScreen>& screens) const;
  void replay(const std::map<std::int64_t, CommitRecord>& log);
  // The sites that finished on `state`'s version hold its weights; at the log's end (`log_end`),
  // every site that did not end cut off finished there.
  void check_finals(const OuterState& state, bool log_end);

  std::function<void(const std::string&)> on_fail_;
  std::vector<float> initial_;
  OuterOptions outer_;
  CodecOptions codec_;
  CommitRuleOptions rule_;
  FragmentPlan plan_;
  DeltaScreenOptions screen_;
  std::map<std::int64_t, CommitRecord> records_;          // the first record any site applied, by version
  std::map<std::int64_t, std::uint64_t> hashes_;          // and its weights hash
  std::map<std::string, std::int64_t> holds_;             // per site, the version it holds
  // (site, round) -> every delta sent under it: a round whose announcement never reached the
  // control plane before its site crashed is sent again, with other bytes, by the next incarnation.
  std::multimap<std::pair<std::string, std::int64_t>, std::vector<std::byte>> sent_;
  const std::vector<std::byte>* sent(const CommitEntry& e) const;  // the bytes its digest names
  struct Final {
    std::int64_t version = 0;
    std::vector<float> global;
    bool cut_off = false;
  };
  std::map<std::string, Final> finals_;  // per site
  std::int64_t newest_ = 0;
  std::int64_t rounds_dropped_ = 0;
  std::vector<std::string> violations_;
};

}  // namespace meridian
