#include "crosssite/outer/outer_state.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "core/checkpoint/checkpoint.hpp"
#include "core/util/error.hpp"
#include "core/util/hash.hpp"
#include "crosssite/outer/outer_parts.hpp"
#include "kernels/cpu/chunk_hash.hpp"

namespace meridian {
namespace {

std::string optimizer_record(const char* name, int fragment, int fragments) {
  return fragments == 1 ? std::string(name) : std::string(name) + ".f" + std::to_string(fragment);
}

// Every value of [0, n) in exactly one fragment, or the plan is for another model (a caller bug).
void check_plan(const FragmentPlan& plan, std::size_t n) {
  std::vector<FragmentRange> ranges;
  for (const auto& f : plan) ranges.insert(ranges.end(), f.ranges.begin(), f.ranges.end());
  std::sort(ranges.begin(), ranges.end(), [](const auto& a, const auto& b) { return a.offset < b.offset; });
  std::size_t covered = 0;
  for (const auto& r : ranges) {
    MERIDIAN_CHECK(r.offset == covered, "fragment range at ", r.offset, " expected at ", covered);
    covered += r.count;
  }
  MERIDIAN_CHECK(covered == n, "fragments cover ", covered, " of ", n, " weights");
}

}  // namespace

OuterState::OuterState(std::span<const float> initial, OuterOptions outer, CodecOptions codec, bool error_feedback,
                       FragmentPlan plan, std::optional<ShardRange> part, std::optional<ShardRange> mirror)
    : plan_(plan.empty() ? whole_model(initial.size()) : std::move(plan)),
      size_(initial.size()),
      part_(part.value_or(ShardRange{0, initial.size()})),
      codec_(codec) {
  check_plan(plan_, initial.size());
  MERIDIAN_CHECK(part_.end() <= size_ && (!sharded() || plan_.size() == 1), "part ", part_.offset, "+", part_.count,
                 " of ", size_, " values in ", plan_.size(), " fragments");
  const auto held = initial.subspan(part_.offset, part_.count);
  global_.assign(held.begin(), held.end());
  start_ = global_;
  for (const auto& f : plan_) encoded_size(f.size, codec);  // Error(Config) now rather than at the first round
  make_buffers(outer, error_feedback);
  if (mirror) {
    MERIDIAN_CHECK(mirror->end() <= size_, "mirror ", mirror->offset, "+", mirror->count, " of ", size_, " values");
    mirror_.reset(new OuterState(*this, *mirror, initial.subspan(mirror->offset, mirror->count)));
  }
}

void OuterState::start_over(std::span<const float> initial, ShardRange part, std::optional<ShardRange> mirror) {
  MERIDIAN_CHECK(initial.size() == size_ && part.end() <= size_ && (!mirror || mirror->end() <= size_),
                 "start_over of ", initial.size(), " weights at ", part.offset, "+", part.count, " of ", size_);
  OuterState next(*this, part, initial.subspan(part.offset, part.count));
  if (mirror) next.mirror_.reset(new OuterState(*this, *mirror, initial.subspan(mirror->offset, mirror->count)));
  next.previews_ = previews_;
  *this = std::move(next);
}

OuterState::OuterState(const OuterState& kind, ShardRange part, std::span<const float> global)
    : plan_(kind.plan_), size_(kind.size_), part_(part), codec_(kind.codec_) {
  MERIDIAN_CHECK(part_.end() <= size_ && global.size() == part_.count && (!sharded() || plan_.size() == 1), "part ",
                 part_.offset, "+", part_.count, " of ", size_, " values in ", plan_.size(), " fragments, ",
                 global.size(), " weights");
  global_.assign(global.begin(), global.end());
  start_ = global_;
  make_buffers(kind.optimizers_.front().options(), !kind.feedback_.empty());
}

OuterState::OuterState(const OuterState& other)
    : plan_(other.plan_),
      size_(other.size_),
      part_(other.part_),
      global_(other.global_),
      start_(other.start_),
      optimizers_(other.optimizers_),
      codec_(other.codec_),
      feedback_(other.feedback_),
      delta_(other.delta_),
      version_(other.version_),
      moves_(other.moves_),
      previews_(other.previews_),
      mirror_(other.mirror_ ? std::make_unique<OuterState>(*other.mirror_) : nullptr) {}

OuterState& OuterState::operator=(const OuterState& other) {
  if (this != &other) *this = OuterState(other);
  return *this;
}

void OuterState::make_buffers(const OuterOptions& outer, bool error_feedback) {
  optimizers_.clear();
  feedback_.clear();
  for (int f = 0; f < fragments(); ++f) {
    optimizers_.emplace_back(held_size(f), outer);
    if (error_feedback) feedback_.emplace_back(held_size(f), feedback_decay(codec_.kind));
  }
}

std::vector<FragmentRange> OuterState::held(int fragment) const {
  if (sharded()) return {{part_.offset, part_.count}};
  return this->fragment(fragment).ranges;
}

const Fragment& OuterState::fragment(int f) const {
  MERIDIAN_CHECK(f >= 0 && f < fragments(), "fragment=", f, " fragments=", fragments());
  return plan_[static_cast<std::size_t>(f)];
}

std::vector<std::byte> OuterState::encode_delta(std::span<const float> local, int fragment) {
  MERIDIAN_CHECK(local.size() == size_, "local=", local.size(), " model=", size_);
  delta_.resize(held_size(fragment));
  std::size_t i = 0;
  for (const auto& r : held(fragment))
    for (std::size_t j = r.offset; j < r.offset + r.count; ++j, ++i) {
      delta_[i] = start_[at(j)] - local[j];
      start_[at(j)] = local[j];
    }
  ++moves_;
  if (mirror_) mirror_->encode_delta(local, fragment);  // its start and residual move as its owner's do
  if (!feedback_.empty()) return feedback_[static_cast<std::size_t>(fragment)].encode(delta_, codec_);
  std::vector<std::byte> out(encoded_size(delta_.size(), codec_));
  meridian::encode(delta_, codec_, out);
  return out;
}

void OuterState::rebase(std::span<float> local) {
  for (int f = 0; f < fragments(); ++f) rebase(local, f);
}

void OuterState::rebase(std::span<float> local, int fragment) {
  // The mirror writes its part of `local` as its owner does: the same values.
  if (mirror_) mirror_->rebase(local, fragment);
  MERIDIAN_CHECK(local.size() == size_, "local=", local.size(), " model=", size_);
  const std::span<const float> unsent = unsent_in_weights(fragment);
  std::size_t i = 0;
  for (const auto& r : held(fragment))
    for (std::size_t j = r.offset; j < r.offset + r.count; ++j, ++i) {
      // Subtracting 0 leaves every float as it was: without a kept residual this is the plain rebase.
      const float kept = unsent.empty() ? 0.0f : unsent[i];
      local[j] = global_[at(j)] + (local[j] - start_[at(j)]) - kept;
      start_[at(j)] = global_[at(j)] - kept;
    }
}

std::span<const float> OuterState::unsent_in_weights(int fragment) const {
  if (feedback_.empty() || codec_.kind != CodecKind::Sparse) return {};
  return feedback_[static_cast<std::size_t>(fragment)].residual();
}

void OuterState::end_feedback() {
  if (mirror_) mirror_->end_feedback();
  ++moves_;
  for (auto& f : feedback_) f.reset();
}

void OuterState::step_ahead(std::span<float> local, int fragment, std::span<const float> estimate) {
  const Fragment& f = this->fragment(fragment);
  MERIDIAN_CHECK(!sharded() && local.size() == size_ && estimate.size() == f.size, "local=", local.size(), " model=",
                 size_, " estimate=", estimate.size(), " fragment=", f.size, " part=", part_.count);
  for (const auto& r : f.ranges)
    MERIDIAN_CHECK(std::equal(local.begin() + static_cast<std::ptrdiff_t>(r.offset),
                              local.begin() + static_cast<std::ptrdiff_t>(r.offset + r.count),
                              start_.begin() + static_cast<std::ptrdiff_t>(r.offset)),
                   "step_ahead: fragment ", fragment, " moved since its delta was encoded");
  std::vector<float> ahead(f.size);
  gather(f, global_, ahead);
  OuterOptimizer optimizer = optimizers_[static_cast<std::size_t>(fragment)];
  optimizer.step(ahead, estimate);
  scatter(f, ahead, local);
  scatter(f, ahead, start_);
  ++moves_;
}

void OuterState::drop_in_flight(std::span<float> local) {
  MERIDIAN_CHECK(local.size() == size_, "local=", local.size(), " model=", size_);
  if (mirror_) mirror_->drop_in_flight(local);
  std::copy(global_.begin(), global_.end(), local.begin() + static_cast<std::ptrdiff_t>(part_.offset));
  start_ = global_;
  for (auto& f : feedback_) f.reset();
  ++moves_;
}

void OuterState::save_optimizers(Checkpoint& checkpoint) const {
  const int n = fragments();
  if (n > 1) checkpoint.put_value("outer.fragments", std::int64_t{n});
  for (int f = 0; f < n; ++f)
    optimizers_[static_cast<std::size_t>(f)].save(checkpoint, optimizer_record("outer.momentum", f, n),
                                                  optimizer_record("outer.steps", f, n));
}

std::vector<OuterOptimizer> OuterState::restored_optimizers(const Checkpoint& checkpoint) const {
  auto optimizers = optimizers_;
  restore_into(optimizers, checkpoint);
  return optimizers;
}

void OuterState::restore_into(std::vector<OuterOptimizer>& optimizers, const Checkpoint& checkpoint) const {
  const int n = fragments();
  const auto saved = checkpoint.has("outer.fragments") ? checkpoint.get_value<std::int64_t>("outer.fragments") : 1;
  if (saved != n)
    throw make_error(ErrorKind::Checkpoint, "the outer state was saved with ", saved,
                     " fragments (outer.fragments), this job has ", n);
  for (int f = 0; f < n; ++f)
    optimizers[static_cast<std::size_t>(f)].restore(checkpoint, optimizer_record("outer.momentum", f, n),
                                                    optimizer_record("outer.steps", f, n));
}

std::size_t OuterState::held_bytes() const {
  std::size_t floats = global_.size() + start_.size() + delta_.size();
  for (const auto& o : optimizers_) floats += o.momentum_buffer().size() + o.delay_buffer().size();
  std::size_t bytes = floats * sizeof(float);
  for (const auto& f : feedback_) bytes += f.held_bytes();
  if (mirror_) bytes += mirror_->held_bytes();
  return bytes;
}

std::vector<std::byte> OuterState::snapshot() const {
  MERIDIAN_CHECK(!sharded(), "the snapshot of a state that holds ", part_.count, " of ", size_, " values");
  Checkpoint c;
  c.put_pod("outer.global", std::span<const float>(global_));
  c.put_value("outer.version", version_);
  save_optimizers(c);
  return encode_checkpoint(c);
}

void OuterState::adopt(std::span<const std::byte> snapshot, std::uint64_t expected_hash, std::span<float> local) {
  const Checkpoint c = decode_checkpoint(snapshot, "a peer's state snapshot");
  std::span<const float> global;  // read where it lies in `c`
  std::int64_t version = 0;
  try {
    global = c.view_pod<float>("outer.global");
    version = c.get_value<std::int64_t>("outer.version");
  } catch (const Error& e) {
    throw make_error(ErrorKind::Peer, "a peer's state snapshot: ", e.what());
  }
  if (global.size() != size_)
    throw make_error(ErrorKind::Peer, "a peer's state snapshot holds ", global.size(), " weights, the model has ", size_);
  // The version held comes again only to replace a copy found damaged (crosssite/round/held_copy.hpp).
  if (version < version_)
    throw make_error(ErrorKind::Peer, "a peer's state snapshot is version ", version, ", this site already holds ",
                     version_);
  if (const auto h = weights_hash(global); h != expected_hash)
    throw make_error(ErrorKind::Peer, "a peer's state snapshot of version ", version, " hashes to ", h,
                     ", its commit says ", expected_hash);
  take_snapshot(c, global, version);
  rebase(local);  // the mirror's part too
}

void OuterState::take_snapshot(const Checkpoint& records, std::span<const float> global, std::int64_t version) {
  std::vector<OuterOptimizer> optimizers;
  try {
    // Not one conditional expression: its whole-state arm would copy every record.
    optimizers = sharded() ? restored_optimizers(cut_outer_records(records, part_)) : restored_optimizers(records);
  } catch (const Error& e) {
    throw make_error(ErrorKind::Peer, "a peer's state snapshot: ", e.what());
  }
  if (mirror_) mirror_->take_snapshot(records, global, version);
  const auto held = global.subspan(part_.offset, part_.count);
  global_.assign(held.begin(), held.end());
  optimizers_ = std::move(optimizers);
  version_ = version;
  for (auto& f : feedback_) f.restore({});
}

OuterState::Outcome OuterState::preview(const std::vector<int>& fragments, std::span<const float> means) const {
  ++previews_;
  if (sharded()) {
    // One fragment, the whole model: its mean's values of the part.
    MERIDIAN_CHECK(fragments == std::vector<int>{0} && means.size() == size_, "fragments=", fragments.size(),
                   " means=", means.size(), " model=", size_);
    Outcome out = stepped(means.subspan(part_.offset, part_.count));
    if (mirror_) out.mirror = std::make_shared<Outcome>(mirror_->preview(fragments, means));
    return out;
  }
  Outcome out{global_, {}, {}, 0, nullptr};
  std::size_t at = 0;
  std::vector<float> slice;
  for (const int index : fragments) {
    const Fragment& f = fragment(index);
    MERIDIAN_CHECK(at + f.size <= means.size(), "means=", means.size(), " fragment ", index, " ends at ", at + f.size);
    for (const auto& [done, optimizer] : out.optimizers) MERIDIAN_CHECK(done != index, "fragment ", index, " twice");
    out.optimizers.emplace_back(index, optimizers_[static_cast<std::size_t>(index)]);
    slice.resize(f.size);
    gather(f, out.global, slice);
    out.optimizers.back().second.step(slice, means.subspan(at, f.size));
    scatter(f, slice, out.global);
    at += f.size;
  }
  MERIDIAN_CHECK(at == means.size(), "means=", means.size(), " fragments hold ", at);
  out.chunks = kernels::chunk_hashes(out.global.data(), out.global.size() * sizeof(float));
  out.hash = kernels::combine_chunk_hashes(out.chunks);
  if (mirror_) out.mirror = std::make_shared<Outcome>(mirror_->preview(fragments, means));
  return out;
}

OuterState::Outcome OuterState::preview(const MergedDeltas& merged) const {
  MERIDIAN_CHECK(sharded() && merged.values == size_, "a preview of ", merged.values, " merged values on a ",
                 sharded() ? "sharded" : "whole", " state of ", size_);
  ++previews_;
  std::vector<float> mean(part_.count);
  merged.mean(part_.offset, mean);
  Outcome out = stepped(mean);
  if (mirror_) out.mirror = std::make_shared<Outcome>(mirror_->preview(merged));
  return out;
}

OuterState::Outcome OuterState::stepped(std::span<const float> part_mean) const {
  Outcome out{global_, {}, {}, 0, nullptr};
  out.optimizers.emplace_back(0, optimizers_[0]);
  out.optimizers.back().second.step(out.global, part_mean);
  out.chunks = kernels::chunk_hashes(out.global.data(), out.global.size() * sizeof(float));
  out.hash = kernels::combine_chunk_hashes(out.chunks);
  return out;
}

std::uint64_t OuterState::fingerprint() const {
  Hasher64 h;
  const auto value = [&](std::int64_t v) { h.update(&v, sizeof v); };
  value(version_);
  value(static_cast<std::int64_t>(part_.offset));
  value(static_cast<std::int64_t>(part_.count));
  h.update(global_.data(), global_.size() * sizeof(float));
  h.update(start_.data(), start_.size() * sizeof(float));
  for (const auto& o : optimizers_) {
    h.update(o.momentum_buffer().data(), o.momentum_buffer().size_bytes());
    h.update(o.delay_buffer().data(), o.delay_buffer().size_bytes());
    value(o.pending());
    value(o.steps_taken());
  }
  for (const auto& f : feedback_) h.update(f.residual().data(), f.residual().size_bytes());
  value(mirror_ ? static_cast<std::int64_t>(mirror_->fingerprint()) : 0);
  return h.digest();
}

void OuterState::commit(std::int64_t version, Outcome outcome) {
  MERIDIAN_CHECK(version == version_ + 1 && outcome.global.size() == global_.size(), "version=", version,
                 " current=", version_, " size=", outcome.global.size(), " expected=", global_.size());
  MERIDIAN_CHECK(!mirror_ == !outcome.mirror, "an outcome ", outcome.mirror ? "with" : "without", " a mirror's");
  if (mirror_) mirror_->commit(version, std::move(*outcome.mirror));
  global_ = std::move(outcome.global);
  for (auto& [index, optimizer] : outcome.optimizers) optimizers_[static_cast<std::size_t>(index)] = std::move(optimizer);
  version_ = version;
}

void OuterState::save(Checkpoint& checkpoint) const {
  checkpoint.put_pod("outer.global", std::span<const float>(global_));
  checkpoint.put_value("outer.version", version_);
  checkpoint.put_value("outer.moves", moves_);
  checkpoint.put_pod("outer.start", std::span<const float>(start_));
  save_optimizers(checkpoint);
  if (sharded()) checkpoint.put_pod<std::uint64_t>("outer.part", std::vector<std::uint64_t>{part_.offset, part_.count, size_});
  if (feedback_.empty()) return;
  // One flat record in parameter order, whatever the fragments: the same as DiLoCo's.
  std::vector<float> residual(global_.size());
  if (sharded())
    residual.assign(feedback_[0].residual().begin(), feedback_[0].residual().end());
  else
    for (std::size_t f = 0; f < plan_.size(); ++f) scatter(plan_[f], feedback_[f].residual(), residual);
  checkpoint.put_pod("outer.residual", std::span<const float>(residual));
}

void OuterState::restore(const Checkpoint& checkpoint) { restore(checkpoint, part_, mirror_part()); }

std::optional<ShardRange> OuterState::mirror_part() const {
  if (!mirror_) return std::nullopt;
  return mirror_->part();
}

void OuterState::save_mirror(Checkpoint& checkpoint) const {
  MERIDIAN_CHECK(mirror_ != nullptr, "save_mirror of a state without a mirror");
  mirror_->save(checkpoint);
}

OuterState::WholeRecords OuterState::records_of(const Checkpoint& checkpoint, ShardRange held) const {
  // Read where they lie: held_of copies what the state keeps of them.
  const auto global = checkpoint.view_pod<float>("outer.global");
  const auto version = checkpoint.get_value<std::int64_t>("outer.version");
  auto sized = [&](const char* name, std::size_t count) {
    if (count != held.count)
      throw make_error(ErrorKind::Checkpoint, "record \"", name, "\" holds ", count, " values, ",
                       held.count == size_ ? "the model has " : "its part has ", held.count);
  };
  sized("outer.global", global.size());
  if (version < 0) throw make_error(ErrorKind::Checkpoint, "record \"outer.version\" is negative: ", version);
  // Checkpoints from before the moves were counted: older than any round that ran on from them.
  const auto moves = checkpoint.has("outer.moves") ? checkpoint.get_value<std::int64_t>("outer.moves") : 0;
  if (moves < 0) throw make_error(ErrorKind::Checkpoint, "record \"outer.moves\" is negative: ", moves);
  std::optional<std::span<const float>> residual;
  if (!feedback_.empty() && checkpoint.has("outer.residual")) {
    residual = checkpoint.view_pod<float>("outer.residual");
    sized("outer.residual", residual->size());
  }
  // Checkpoints from before rounds overlapped have no start: their rounds began at the global weights.
  const auto start = checkpoint.has("outer.start") ? checkpoint.view_pod<float>("outer.start") : global;
  sized("outer.start", start.size());
  return {global, start, residual, version, moves, held.offset};
}

void OuterState::restore(const Checkpoint& checkpoint, ShardRange part, std::optional<ShardRange> mirror) {
  keep(checkpoint, records_of(checkpoint, {0, size_}), part, mirror);
}

void OuterState::restore_part(const Checkpoint& records, ShardRange part, const Checkpoint* mirror_records,
                              std::optional<ShardRange> mirror) {
  MERIDIAN_CHECK(part.end() <= size_ && (mirror_records != nullptr) == mirror.has_value() && fragments() == 1,
                 "restore_part of ", part.offset, "+", part.count, " of ", size_, ", a mirror's records ",
                 mirror_records != nullptr, ", its part ", mirror.has_value(), ", fragments ", fragments());
  OuterState next = held_of(records, records_of(records, part), part);
  if (mirror)
    next.mirror_ =
        std::make_unique<OuterState>(held_of(*mirror_records, records_of(*mirror_records, *mirror), *mirror));
  next.previews_ = previews_;
  *this = std::move(next);
}

void OuterState::cut(ShardRange part, std::optional<ShardRange> mirror) {
  MERIDIAN_CHECK(!sharded() && fragments() == 1, "a cut of a state ", sharded() ? "sharded already" : "of fragments");
  Checkpoint optimizers;
  save_optimizers(optimizers);
  const auto residual = feedback_.empty() ? std::nullopt : std::optional(feedback_[0].residual());
  keep(optimizers, {global_, start_, residual, version_, moves_}, part, mirror);
}

void OuterState::keep(const Checkpoint& checkpoint, const WholeRecords& whole, ShardRange part,
                      std::optional<ShardRange> mirror) {
  OuterState next = held_of(checkpoint, whole, part);
  if (mirror) next.mirror_ = std::make_unique<OuterState>(held_of(checkpoint, whole, *mirror));
  next.previews_ = previews_;
  *this = std::move(next);
}

OuterState OuterState::held_of(const Checkpoint& checkpoint, const WholeRecords& whole, ShardRange part) const {
  MERIDIAN_CHECK(part.offset >= whole.base && part.end() <= whole.base + whole.global.size(), "part ", part.offset, "+",
                 part.count, " of records of ", whole.base, "+", whole.global.size());
  const ShardRange within{part.offset - whole.base, part.count};
  OuterState next(*this, part, whole.global.subspan(within.offset, within.count));
  // Restored in place: a state of this one's kind is thrown away whole if a record is wrong. Not
  // one conditional expression: its other arm would copy the checkpoint.
  if (within.count != whole.global.size())
    next.restore_into(next.optimizers_, cut_outer_records(checkpoint, within, whole.global.size()));
  else
    next.restore_into(next.optimizers_, checkpoint);
  const auto start = whole.start.subspan(within.offset, within.count);
  next.start_.assign(start.begin(), start.end());
  next.version_ = whole.version;
  next.moves_ = whole.moves;
  for (int f = 0; whole.residual && f < next.fragments(); ++f) {
    auto& feedback = next.feedback_[static_cast<std::size_t>(f)];
    if (const auto ranges = next.held(f); ranges.size() == 1) {  // no gather: one range of the record
      feedback.restore(whole.residual->subspan(ranges.front().offset - whole.base, ranges.front().count));
      continue;
    }
    std::vector<float> held(next.held_size(f));
    gather(plan_[static_cast<std::size_t>(f)], *whole.residual, held);
    feedback.restore(held);
  }
  return next;
}

std::uint64_t OuterState::weights_hash(std::span<const float> weights) {
  return kernels::chunked_hash64(weights.data(), weights.size_bytes());
}

}  // namespace meridian
