#pragma once
// What every replica of a site holds about the global model (DESIGN.md, steps 2 and 5): version
// v's weights, the outer optimizer's momentum, the error-feedback residual of this site's deltas,
// and `start`, the weights the site's in-flight round is measured from (a round's delta is start -
// local; when a commit arrives mid-round the round is rebased onto it). Every replica of a site runs the same deterministic code on the same inputs, so they all
// hold bit-identical copies and any of them can lead the site's cross-site exchange.
//
// A site may keep it sharded ([parallel] shard_outer): each replica holds the values of one
// ShardMap part of the model (weights, start, momentum, residual), encodes that part of each delta
// and previews that part of each version, and the site joins the parts (codec_parts.hpp, the
// chunk hashes of Outcome, outer_parts.hpp). Its spans of local weights stay the whole model's;
// only the part is read or written. A sharded state has one fragment. It may also keep a mirror of
// another replica's part (the next rank's), on which it does all it does on its own, so that the
// site still holds every part when one replica dies (sites/replica/outer_cut.hpp).
//
// Streaming DiLoCo (fragments.hpp): the model is P fragments, each with its own slice of the
// outer momentum and of the residual; a round is one fragment's, its delta that fragment's only,
// and a commit changes the fragments its deltas cover (usually one) and rebases only those of the
// in-flight round. With one fragment (the default) this is DiLoCo over the whole model.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "core/model/shard_map.hpp"
#include "crosssite/codec/codec.hpp"
#include "crosssite/codec/error_feedback.hpp"
#include "crosssite/outer/fragments.hpp"
#include "crosssite/outer/merged_deltas.hpp"
#include "crosssite/outer/outer_optimizer.hpp"

namespace meridian {

class Checkpoint;

class OuterState {
 public:
  // Version 0 is `initial`, the weights every site starts from. `plan`: the fragments (empty:
  // one, the whole model); InvariantError when they do not cover `initial` exactly.
  // `part`: the values this state holds (sharded), the whole model without one; InvariantError
  // for a part outside the model, or a part short of the model with more than one fragment.
  // `mirror`: the part of another replica it mirrors (sites/replica/outer_cut.hpp), if any.
  OuterState(std::span<const float> initial, OuterOptions outer, CodecOptions codec, bool error_feedback,
             FragmentPlan plan = {}, std::optional<ShardRange> part = std::nullopt,
             std::optional<ShardRange> mirror = std::nullopt);
  OuterState(const OuterState& other);
  OuterState& operator=(const OuterState& other);
  OuterState(OuterState&&) noexcept = default;
  OuterState& operator=(OuterState&&) noexcept = default;

  std::int64_t version() const { return version_; }
  // How often the in-flight round's start or residual moved other than by a version (a delta
  // encoded, a step ahead, the feedback ended, the round dropped), over the state's life: of two
  // states of one version, the one with more moves is the newer (a replica restarted from a
  // checkpoint holds an older round than those that ran on). Replicas in step hold the same count.
  std::int64_t moves() const { return moves_; }
  // The weights of the values held: the whole model's, or the part's.
  std::span<const float> global() const { return global_; }
  std::size_t size() const { return size_; }  // the model's values, held or not
  ShardRange part() const { return part_; }
  bool sharded() const { return part_.count != size_; }
  // The buffers this state holds (weights, round start, momentum, residuals, scratch), in bytes.
  std::size_t held_bytes() const;
  const CodecOptions& codec() const { return codec_; }

  std::span<const float> start() const { return start_; }
  int fragments() const { return static_cast<int>(plan_.size()); }
  const Fragment& fragment(int f) const;  // InvariantError when f is not in [0, fragments())

  // This round's pseudo-gradient of `fragment`, delta = start - local over its values, encoded;
  // with error feedback on, what the codec loses is carried into that fragment's next delta. The
  // fragment's next round starts from `local`: it goes on from there at once, and measures only
  // its own progress.
  std::vector<std::byte> encode_delta(std::span<const float> local, int fragment = 0);
  // After a commit: local <- global + (local - start), start <- global, so the in-flight round
  // keeps its own progress on top of the new version (DESIGN.md, step 5). With no progress since
  // the round began, local becomes exactly global. Over every fragment, or over one (the one a
  // commit changed: the others' global and start did not move).
  // The sparse codec with error feedback: local <- global - residual + (local - start), start <-
  // global - residual. Its residual is most of a round (a kept entry leaves once in 1/density
  // rounds); dropped from the weights, the next round would learn it again and error feedback
  // would send it twice, late (docs/quality.md, "The sparse codec at 0.1 byte a parameter"). The
  // next delta, start - local, is then the round's own progress, and error feedback adds the
  // residual once. The other codecs' residual is under half a quantization step: not kept.
  void rebase(std::span<float> local);
  void rebase(std::span<float> local, int fragment);
  // The job's last deltas are encoded: nothing will send the residual now, so it is dropped, and
  // with it from the weights at the next rebase, so that every site ends on the version's weights.
  void end_feedback();

  // Eager overlap: right after encode_delta(local, fragment), moves `fragment` of the working
  // weights ahead to what the next commit would make of the current version if its mean were
  // `estimate` (one outer step on a copy of the momentum), and starts the round there. Nothing
  // the sites share changes: when the true commit comes, rebase puts the round's progress on it.
  // InvariantError when the round has made progress since the encode (local != start there).
  void step_ahead(std::span<float> local, int fragment, std::span<const float> estimate);

  // A diverged site's way back (DESIGN.md: the divergence guard across sites): every in-flight
  // round is dropped, local <- global, start <- global, over every fragment. The error-feedback
  // residual restarts at zero too: it is what the codec left out of this site's latest deltas,
  // the last of which may carry the divergence, and it is nobody else's. The version, momentum
  // and everything the sites share stay as they are.
  void drop_in_flight(std::span<float> local);

  // The weights and momentum one commit produces from the current version, and their hash; the
  // state itself is untouched, so a proposer can hash its proposal before anyone agrees to it.
  struct Outcome {
    std::vector<float> global;                               // every weight this state holds
    std::vector<std::pair<int, OuterOptimizer>> optimizers;  // of the fragments it changed
    // kernels::chunk_hashes of `global`, and what they combine to. A state that holds one
    // replica's part of the model (its values from a ShardMap part on) has its part's chunks of
    // the whole model's list: the parts' lists end to end combine to the commit hash.
    std::vector<std::uint64_t> chunks;
    std::uint64_t hash = 0;
    std::shared_ptr<Outcome> mirror;  // the mirror's, when the state keeps one
  };
  // One outer step per fragment of `fragments` (distinct), each on its mean delta: `means` holds
  // their values one fragment after the other, in that order.
  Outcome preview(const std::vector<int>& fragments, std::span<const float> means) const;
  // `mean_delta` holds `fragment`'s values (fragment(f).size of them).
  Outcome preview(std::span<const float> mean_delta, int fragment = 0) const {
    return preview(std::vector<int>{fragment}, mean_delta);
  }
  // A sharded state's step on a commit's deltas, still encoded: the mean of the part it holds (and
  // its mirror's) alone, decoded from those values' blocks; the same outcome as preview() on the
  // whole mean. InvariantError on a whole state.
  Outcome preview(const MergedDeltas& merged) const;
  // How many previews this state computed: each a pass over the whole model, once per version on
  // every replica (a leader reuses its winning proposal's).
  std::uint64_t previews() const { return previews_; }
  // Makes `outcome` version `version`, which must be version() + 1 (InvariantError otherwise).
  void commit(std::int64_t version, Outcome outcome);

  // What a peer needs to join at this version without disk: the weights, the version and the
  // optimizer state (not this site's residual, which is nobody else's), as checkpoint bytes.
  // InvariantError when sharded: outer_parts.hpp puts a sharded site's snapshot together.
  std::vector<std::byte> snapshot() const;
  // Takes a peer's snapshot as the current version when its weights hash to `expected_hash` and it
  // is not older than this one (the version held: a damaged copy replaced); the residual restarts
  // from zero and `local` is rebased onto it.
  // Error(Peer) when the bytes are damaged, for another model, or do not match the hash: state unchanged.
  void adopt(std::span<const std::byte> snapshot, std::uint64_t expected_hash, std::span<float> local);

  // Records "outer.*" of a training checkpoint, and back. Error(Checkpoint) on missing or
  // mis-sized records, state unchanged then. A sharded state saves its part's values and the part
  // ("outer.part"; outer_parts.hpp joins the parts); restore reads the whole model's records, and
  // keeps `part` of them (the part held so far without one): a site's parts are cut anew so.
  void save(Checkpoint& checkpoint) const;
  void restore(const Checkpoint& checkpoint);
  void restore(const Checkpoint& checkpoint, ShardRange part, std::optional<ShardRange> mirror = std::nullopt);
  // The same from records that hold `part`'s values alone, and `mirror`'s from `mirror_records`
  // (what a replica reads of a checkpoint in parts, CheckpointParts::slice): no record of the
  // whole model is read. Error(Checkpoint) as restore's, the state unchanged.
  void restore_part(const Checkpoint& records, ShardRange part, const Checkpoint* mirror_records = nullptr,
                    std::optional<ShardRange> mirror = std::nullopt);
  // Version 0 from `initial` (the whole model's weights) as the constructor makes it, holding `part`
  // and a mirror of `mirror`, this state's kind kept: how a group whose members never began a round
  // cuts it, each from the initial weights it holds. InvariantError with several fragments.
  void start_over(std::span<const float> initial, ShardRange part, std::optional<ShardRange> mirror);
  // A whole state keeps `part` of itself, and a mirror of `mirror`: what restore() from its own
  // records would make, without writing them out (a group's first cut, every member whole).
  // InvariantError on a sharded state.
  void cut(ShardRange part, std::optional<ShardRange> mirror);
  // The mirror's part and its records (as save() writes them), when the state keeps one.
  std::optional<ShardRange> mirror_part() const;
  const OuterState* mirror() const { return mirror_.get(); }
  void save_mirror(Checkpoint& checkpoint) const;
  // A hash of everything this state holds (version, weights, start, optimizers, residuals, the
  // part and the mirror): states with equal fingerprints are the same state. Read in place.
  std::uint64_t fingerprint() const;
  // What a commit record carries: the chunked hash of the global weights (kernels/cpu/chunk_hash),
  // which the owners of parts of the weights can compute together, each over its own chunks.
  static std::uint64_t weights_hash(std::span<const float> weights);

 private:
  // Per fragment, the optimizer under the record names of DiLoCo's checkpoints when there is one
  // fragment ("outer.momentum"), "outer.momentum.f<p>" etc. otherwise.
  void save_optimizers(Checkpoint& checkpoint) const;
  std::vector<OuterOptimizer> restored_optimizers(const Checkpoint& checkpoint) const;
  // ... restored in place in `optimizers` (partly, when a record is wrong: for a state thrown away then).
  void restore_into(std::vector<OuterOptimizer>& optimizers, const Checkpoint& checkpoint) const;
  // The values of a checkpoint's records that hold the model's values from element `base` on
  // (the whole model's: base 0), read and checked once.
  struct WholeRecords {
    std::span<const float> global, start;
    std::optional<std::span<const float>> residual;
    std::int64_t version;
    std::int64_t moves = 0;
    std::size_t base = 0;
  };
  // `checkpoint`'s records holding the values of `held`; Error(Checkpoint) when one does not.
  WholeRecords records_of(const Checkpoint& checkpoint, ShardRange held) const;
  // A state of this one's kind holding `part`, with `global` (its values) as weights and round start.
  OuterState(const OuterState& kind, ShardRange part, std::span<const float> global);
  // A state of this one's kind holding `part` of them (restore: its own part, and its mirror's).
  OuterState held_of(const Checkpoint& checkpoint, const WholeRecords& whole, ShardRange part) const;
  // This state becomes held_of `part` (and its mirror's); `checkpoint`: the optimizers' records.
  void keep(const Checkpoint& checkpoint, const WholeRecords& whole, ShardRange part, std::optional<ShardRange> mirror);
  // A snapshot adopt() checked, whole: this state's part of it and its mirror's, as version
  // `version`. Error(Peer) before anything changes when its optimizer records do not fit.
  void take_snapshot(const Checkpoint& records, std::span<const float> global, std::int64_t version);
  // The residual that `fragment`'s local weights keep (rebase), or nothing.
  std::span<const float> unsent_in_weights(int fragment) const;
  // `fragment`'s ranges of the model that this state holds, and the buffers' index of value j.
  std::vector<FragmentRange> held(int fragment) const;
  std::size_t at(std::size_t j) const { return j - part_.offset; }
  std::size_t held_size(int fragment) const { return sharded() ? part_.count : this->fragment(fragment).size; }
  // A sharded state's outcome of one outer step on `part_mean`, its part's values of the mean.
  Outcome stepped(std::span<const float> part_mean) const;
  // Fresh optimizers and residuals for the values held.
  void make_buffers(const OuterOptions& outer, bool error_feedback);

  FragmentPlan plan_;
  std::size_t size_ = 0;
  ShardRange part_;
  std::vector<float> global_;
  std::vector<float> start_;
  std::vector<OuterOptimizer> optimizers_;   // by fragment
  CodecOptions codec_;
  std::vector<ErrorFeedback> feedback_;      // by fragment; empty without error feedback
  std::vector<float> delta_;                 // scratch
  std::int64_t version_ = 0;
  std::int64_t moves_ = 0;
  mutable std::uint64_t previews_ = 0;
  std::unique_ptr<OuterState> mirror_;
};

}  // namespace meridian
