#pragma once
// Refusal of bad deltas (DESIGN.md invariant: a corrupted or non-finite delta is never applied).
// A decoded delta is screened before a site lets it into a commit: the wrong number of values, a
// non-finite value, or an L2 norm far beyond the norms of recently committed deltas (a diverged
// site, a bug, or a malicious peer) is refused. The history is the norms of the deltas the commits
// merged, in their order, and each commit record carries it as it stands after that version
// (CommitRecord::screens): every site that holds a version screens alike, including one that
// restarted or adopted a peer's state, so their verdicts on a delta agree.
#include <cstddef>
#include <deque>
#include <span>
#include <string>
#include <vector>

namespace meridian {

struct DeltaScreenOptions {
  // Refuse a delta whose norm exceeds this multiple of the median norm of recent accepted deltas.
  // Deltas of healthy sites differ by a small factor; one that is 100x larger would wreck the model.
  double max_norm_ratio = 20;
  int window = 16;      // the latest accepted norms the median is taken over
  int min_history = 3;  // no norm check until this many norms are known (early rounds vary most)
  // A delta that spans k rounds (its site's outer exchange was paused) is a sum of k rounds' deltas:
  // its norm may be up to k times a round's, so its limit is k times as high, for k up to this.
  // Capped, so that an announcement claiming many rounds cannot switch the check off.
  int max_spanned_rounds = 64;
};

class DeltaScreen {
 public:
  // Error(Config) when max_norm_ratio is not finite and > 1, window < 1, min_history is not
  // in [1, window] (a larger one would never let the norm check start), or max_spanned_rounds < 1.
  explicit DeltaScreen(DeltaScreenOptions options = {});

  struct Verdict {
    bool ok = false;
    std::string reason;  // empty when ok: what is wrong, for the log and the refusal count
    double norm = 0;     // L2 norm (0 when the size is wrong or a value is not finite)
  };

  // Checks, in this order: decoded.size() == expected_size; every value finite (the first bad
  // one and its index are named); the L2 norm at most max_norm_ratio x the median of the accepted
  // norms x the rounds the delta spans (at most max_spanned_rounds) once min_history of them are
  // known (a zero median gives no scale and skips this check). The squares are summed in double
  // a unit (kShardUnit values) at a time, in index order, and the units' sums in unit order, so
  // holders of parts cut on units can tally theirs alone (Tally). Pure and bit-deterministic.
  Verdict check(std::span<const float> decoded, std::size_t expected_size, int rounds = 1) const;

  // A delta taken in pieces, in index order (decoded a range at a time, never whole), or a part
  // of it from `first` on (a multiple of kShardUnit): what check() reads of it, summed alike.
  // The tallies of a delta's parts, joined in order, give check()'s verdict on the whole, bit for
  // bit, wherever the parts were cut on units.
  class Tally {
   public:
    explicit Tally(std::size_t first = 0);
    // A tally as units() and bad() gave it (another replica's, sent over).
    Tally(std::size_t first, std::size_t values, std::vector<double> units, std::string bad);
    void add(std::span<const float> piece);
    // Appends the tally of the part that follows this one's; InvariantError unless it starts
    // where this one ends, on a unit.
    void join(const Tally& next);
    std::size_t first() const { return first_; }
    std::size_t values() const { return values_; }
    const std::vector<double>& units() const { return units_; }
    const std::string& bad() const { return bad_; }

   private:
    friend class DeltaScreen;
    std::size_t first_ = 0;
    std::size_t values_ = 0;
    std::vector<double> units_;  // each unit's sum of squares, the last one maybe still open
    std::string bad_;            // the first non-finite value, said
  };
  Verdict judge(const Tally& tally, std::size_t expected_size, int rounds = 1) const;

  // Records the norm of a delta a commit merged; the oldest beyond `window` is forgotten. Call it
  // for each merged delta in the commit's listed order, so every site holds the same history.
  // InvariantError when the norm is negative or not finite (no such delta passes check()).
  void accept(double norm);
  // Takes the history a commit record carries (its latest `window`). InvariantError on a negative
  // or non-finite norm: decode_commit refuses those.
  void follow(std::span<const double> norms);

  // The accepted norms, oldest first; the median (mean of the two middle ones for an even
  // count), 0 when empty.
  std::vector<double> history() const { return {norms_.begin(), norms_.end()}; }
  double median_norm() const;
  const DeltaScreenOptions& options() const { return options_; }

 private:
  DeltaScreenOptions options_;
  std::deque<double> norms_;
};

}  // namespace meridian
