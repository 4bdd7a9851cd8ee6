// The optimizer's records of a training state when replicas keep parts of AdamW's moments (ZeRO):
// a replica takes its part from a whole-model state or from a shard that covers it, and refuses
// one that does not.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "core/model/param_layout.hpp"
#include "core/model/shard_map.hpp"
#include "core/optim/adamw.hpp"
#include "core/train/train_checkpoint.hpp"
#include "core/util/error.hpp"

using namespace meridian;

namespace {

const ModelConfig kTiny{2, 2, 8, 4, 16};

// An AdamW whose moments hold their own element index (m) and its negation (v).
AdamW numbered(const ParamLayout& layout, std::optional<ShardRange> shard) {
  AdamW opt = shard ? AdamW(layout, AdamWOptions{}, *shard) : AdamW(layout, AdamWOptions{});
  const ShardRange own = opt.shard();
  for (std::size_t i = 0; i < own.count; ++i) {
    opt.m()[i] = static_cast<float>(own.offset + i);
    opt.v()[i] = -static_cast<float>(own.offset + i);
  }
  opt.set_steps_taken(7);
  return opt;
}

Checkpoint state_of(const ParamLayout& layout, const AdamW& opt) {
  const std::vector<float> params(layout.total(), 0.5f);
  return encode_train_state(kTiny, params, opt, ResumeState{}, "");
}

bool holds_own_indices(const AdamW& opt) {
  for (std::size_t i = 0; i < opt.shard().count; ++i)
    if (opt.m()[i] != static_cast<float>(opt.shard().offset + i) || opt.v()[i] != -opt.m()[i]) return false;
  return opt.steps_taken() == 7;
}

}  // namespace

TEST_CASE("a replica takes its part of AdamW's moments from a whole state or from a shard covering it") {
  const ParamLayout layout = ParamLayout::of(kTiny);
  const ShardMap map(layout.total(), 3, 1024);
  const Checkpoint whole = state_of(layout, numbered(layout, std::nullopt));
  CHECK_FALSE(whole.has("adamw.shard"));
  for (int r = 0; r < 3; ++r) {
    CAPTURE(r);
    AdamW from_whole(layout, AdamWOptions{}, map.part(r));
    decode_optimizer_state(whole, "whole", from_whole);
    CHECK(holds_own_indices(from_whole));

    const Checkpoint own = state_of(layout, numbered(layout, map.part(r)));
    CHECK(own.get_pod<float>("adamw.m").size() == map.part(r).count);
    AdamW again(layout, AdamWOptions{}, map.part(r));
    decode_optimizer_state(own, "own", again);
    CHECK(holds_own_indices(again));
  }
  // A shard's state back into a whole AdamW, or another shard's: refused, naming both ranges.
  const Checkpoint first = state_of(layout, numbered(layout, map.part(0)));
  AdamW unsharded(layout, AdamWOptions{});
  CHECK_THROWS_WITH_AS(decode_optimizer_state(first, "rank 0's state", unsharded),
                       doctest::Contains("rank 0's state holds AdamW's moments of elements 0.."), Error);
  AdamW second(layout, AdamWOptions{}, map.part(1));
  CHECK_THROWS_AS(decode_optimizer_state(first, "rank 0's state", second), Error);
}

TEST_CASE("a shard record that is not a range of the model is refused") {
  const ParamLayout layout = ParamLayout::of(kTiny);
  const std::size_t half = layout.total() / 2;
  Checkpoint bad = state_of(layout, numbered(layout, ShardRange{0, half}));
  bad.put_pod<std::uint64_t>("adamw.shard", std::vector<std::uint64_t>{half, layout.total()});  // past the end
  AdamW opt(layout, AdamWOptions{}, ShardRange{half, layout.total() - half});
  CHECK_THROWS_WITH_AS(decode_optimizer_state(bad, "f.mrdn", opt),
                       doctest::Contains("f.mrdn: record \"adamw.shard\" is not a range"), Error);
}
