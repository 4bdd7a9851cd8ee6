#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/checkpoint/checkpoint.hpp"
#include "core/checkpoint/store.hpp"
#include "core/io/env.hpp"
#include "core/model/shard_map.hpp"
#include "core/util/error.hpp"
#include "crosssite/codec/codec_parts.hpp"
#include "crosssite/outer/outer_parts.hpp"
#include "crosssite/outer/outer_state.hpp"
#include "kernels/cpu/chunk_hash.hpp"
#include "tests/support/temp_dir.hpp"

using namespace meridian;
using meridian::testing::TempDir;

namespace {

std::vector<float> ramp(std::size_t n, float scale) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>(static_cast<int>(i % 13) - 6);
  return v;
}

}  // namespace

TEST_CASE("the delta is global - local, with fp32 it decodes exactly") {
  const auto initial = ramp(1000, 0.1f);
  OuterState state(initial, {}, {CodecKind::Fp32, 0}, false);
  auto local = initial;
  for (auto& x : local) x -= 0.25f;
  const auto bytes = state.encode_delta(local);
  std::vector<float> delta(local.size());
  decode(bytes, delta);
  for (std::size_t i = 0; i < delta.size(); ++i) CHECK(delta[i] == initial[i] - local[i]);
}

TEST_CASE("preview leaves the state alone, commit makes it the next version, lr 1 without momentum is plain averaging") {
  const auto initial = ramp(512, 1.0f);
  OuterState state(initial, {1.0f, 0.0f, false}, {CodecKind::Fp32, 0}, false);
  const std::vector<float> mean(initial.size(), 0.5f);
  auto outcome = state.preview(mean);
  CHECK(state.version() == 0);
  CHECK(std::equal(initial.begin(), initial.end(), state.global().begin()));
  for (std::size_t i = 0; i < initial.size(); ++i) CHECK(outcome.global[i] == initial[i] - 0.5f);
  CHECK(outcome.hash == OuterState::weights_hash(outcome.global));
  const auto hash = outcome.hash;
  state.commit(1, std::move(outcome));
  CHECK(state.version() == 1);
  CHECK(OuterState::weights_hash(state.global()) == hash);
  CHECK_THROWS_AS(state.commit(3, state.preview(mean)), InvariantError);
}

TEST_CASE("the commit hash is put together from the chunk hashes of each replica's part, at any cut") {
  // 3 units and a short fourth: parts of one, two or no whole units, and a short last part.
  const std::size_t unit = 1024;
  const auto weights = ramp(3 * unit + 517, 0.01f);
  const std::uint64_t whole = OuterState::weights_hash(weights);
  for (int ranks = 1; ranks <= 5; ++ranks) {
    CAPTURE(ranks);
    const ShardMap map(weights.size(), ranks, unit);
    std::vector<std::uint64_t> chunks;
    for (int r = 0; r < ranks; ++r) {
      const ShardRange part = map.part(r);
      const auto mine = kernels::chunk_hashes(weights.data() + part.offset, part.count * sizeof(float));
      chunks.insert(chunks.end(), mine.begin(), mine.end());
    }
    CHECK(kernels::combine_chunk_hashes(chunks) == whole);
  }
  auto flipped = weights;
  flipped[2 * unit + 3] = std::nextafter(flipped[2 * unit + 3], 1.0f);
  CHECK(OuterState::weights_hash(flipped) != whole);
}

TEST_CASE("error feedback carries what int8 lost into the next delta") {
  const auto initial = ramp(4096, 0.01f);
  OuterState with(initial, {}, {CodecKind::Int8, 256}, true);
  OuterState without(initial, {}, {CodecKind::Int8, 256}, false);
  // Every round moves the weights by the same step; each round's delta measures only its own.
  std::vector<float> step(initial.size());
  for (std::size_t i = 0; i < step.size(); ++i) step[i] = 1e-3f * static_cast<float>(i % 7) + 1e-6f;
  auto local = initial;
  std::vector<float> sum_with(local.size()), sum_without(local.size()), once(local.size());
  for (int round = 0; round < 20; ++round) {
    for (std::size_t i = 0; i < local.size(); ++i) local[i] -= step[i];
    decode(with.encode_delta(local), once);
    for (std::size_t i = 0; i < once.size(); ++i) sum_with[i] += once[i];
    decode(without.encode_delta(local), once);
    for (std::size_t i = 0; i < once.size(); ++i) sum_without[i] += once[i];
  }
  double err_with = 0, err_without = 0;
  for (std::size_t i = 0; i < local.size(); ++i) {
    const double truth = static_cast<double>(initial[i]) - local[i];
    err_with = std::max(err_with, std::abs(sum_with[i] - truth));
    err_without = std::max(err_without, std::abs(sum_without[i] - truth));
  }
  CHECK(err_with < err_without / 5);
}

TEST_CASE("a round goes on from where the last one ended and is rebased onto each new version") {
  const auto initial = ramp(256, 0.1f);
  OuterState state(initial, {1.0f, 0.0f, false}, {CodecKind::Fp32, 0}, false);
  auto local = initial;
  for (auto& x : local) x -= 0.5f;
  state.encode_delta(local);  // round 0 sent; round 1 starts at `local`, not at the global weights
  CHECK(std::equal(local.begin(), local.end(), state.start().begin()));
  for (auto& x : local) x -= 0.25f;  // round 1's own progress, while round 0's commit is on its way
  state.commit(1, state.preview(std::vector<float>(initial.size(), 0.5f)));
  state.rebase(local);
  for (std::size_t i = 0; i < local.size(); ++i) {
    CHECK(state.start()[i] == state.global()[i]);
    CHECK(local[i] == doctest::Approx(initial[i] - 0.75f));  // version 1 (initial - 0.5) plus round 1's -0.25
  }
  // Without progress since the round began, rebasing lands exactly on the new version.
  auto idle = std::vector<float>(state.global().begin(), state.global().end());
  state.encode_delta(idle);
  state.commit(2, state.preview(std::vector<float>(initial.size(), 0.125f)));
  state.rebase(idle);
  CHECK(std::equal(idle.begin(), idle.end(), state.global().begin()));
}

TEST_CASE("sparse: the residual stays in the site's weights, each delta is sent once, the end drops it") {
  const auto initial = ramp(512, 0.1f);
  OuterState state(initial, {1.0f, 0.0f, false}, {CodecKind::Sparse, 64, 4}, true);
  const double decay = feedback_decay(CodecKind::Sparse);
  std::vector<float> step(initial.size()), sent(initial.size());
  std::vector<double> total_sent(initial.size()), trained(initial.size()), faded(initial.size());
  auto local = initial;
  for (int round = 1; round <= 3; ++round) {
    std::vector<double> unsent(local.size());  // the residual, which the weights hold: global - local
    for (std::size_t i = 0; i < local.size(); ++i) unsent[i] = static_cast<double>(state.global()[i]) - local[i];
    for (std::size_t i = 0; i < step.size(); ++i) step[i] = 1e-3f * static_cast<float>((i * 7 + round) % 61 + 1);
    for (std::size_t i = 0; i < local.size(); ++i) local[i] -= step[i], trained[i] += step[i];
    const auto before = local;
    decode(state.encode_delta(local), sent);
    for (std::size_t i = 0; i < sent.size(); ++i) total_sent[i] += sent[i];
    // One site: the commit moves the global weights by what it sent (lr 1, no momentum).
    state.commit(round, state.preview(sent));
    state.rebase(local);
    // global - residual: the weights it trained to, less the share of the old residual that faded.
    for (std::size_t i = 0; i < local.size(); ++i) {
      REQUIRE(local[i] == doctest::Approx(before[i] + (1 - decay) * unsent[i]).epsilon(1e-6));
      REQUIRE(state.start()[i] == local[i]);
      faded[i] += (1 - decay) * unsent[i];
    }
  }
  // Every round's progress went out once, faded, or waits in the residual: nothing was sent twice.
  for (std::size_t i = 0; i < local.size(); ++i)
    CHECK(total_sent[i] + faded[i] + (state.global()[i] - local[i]) == doctest::Approx(trained[i]).epsilon(1e-5));
  state.end_feedback();
  state.commit(4, state.preview(std::vector<float>(initial.size(), 0.0f)));
  state.rebase(local);
  CHECK(std::equal(local.begin(), local.end(), state.global().begin()));
  // int8's residual (under half a step) is not kept: its rebase lands on the version exactly.
  OuterState int8(initial, {1.0f, 0.0f, false}, {CodecKind::Int8, 64}, true);
  auto other = initial;
  for (std::size_t i = 0; i < other.size(); ++i) other[i] -= 1e-3f * static_cast<float>(i % 61 + 1);
  decode(int8.encode_delta(other), sent);
  int8.commit(1, int8.preview(sent));
  int8.rebase(other);
  CHECK(std::equal(other.begin(), other.end(), int8.global().begin()));
}

TEST_CASE("a snapshot carries a version to a peer, checked against the commit's hash") {
  const auto initial = ramp(512, 0.2f);
  OuterState ahead(initial, {}, {CodecKind::Int8, 64}, true);
  ahead.commit(1, ahead.preview(std::vector<float>(initial.size(), 0.01f)));
  ahead.commit(2, ahead.preview(std::vector<float>(initial.size(), -0.02f)));
  const auto snapshot = ahead.snapshot();
  const auto hash = OuterState::weights_hash(ahead.global());

  OuterState behind(initial, {}, {CodecKind::Int8, 64}, true);
  auto local = initial;
  for (auto& x : local) x += 0.125f;  // the in-flight round's progress survives the jump
  CHECK_THROWS_AS(behind.adopt(snapshot, hash ^ 1, local), Error);
  auto damaged = snapshot;
  damaged[damaged.size() / 2] ^= std::byte{0x10};
  CHECK_THROWS_AS(behind.adopt(damaged, hash, local), Error);
  CHECK(behind.version() == 0);
  behind.adopt(snapshot, hash, local);
  CHECK(behind.version() == 2);
  CHECK(OuterState::weights_hash(behind.global()) == hash);
  for (std::size_t i = 0; i < local.size(); ++i) CHECK(local[i] == doctest::Approx(behind.global()[i] + 0.125f));
  // The same momentum: the next outer step agrees bit for bit.
  const std::vector<float> mean(initial.size(), 0.003f);
  CHECK(behind.preview(mean).hash == ahead.preview(mean).hash);
  // The version it holds again: a damaged copy replaced, the in-flight round kept on it.
  const auto kept = local;
  behind.adopt(snapshot, hash, local);
  CHECK(behind.version() == 2);
  for (std::size_t i = 0; i < local.size(); ++i) CHECK(local[i] == doctest::Approx(kept[i]));
  // An older one never.
  OuterState older(initial, {}, {CodecKind::Int8, 64}, true);
  older.commit(1, older.preview(std::vector<float>(initial.size(), 0.01f)));
  CHECK_THROWS_AS(behind.adopt(older.snapshot(), OuterState::weights_hash(older.global()), local), Error);
  CHECK(behind.version() == 2);
}

TEST_CASE("the outer state round-trips through checkpoint records, bad records are refused, state unchanged") {
  const auto initial = ramp(300, 0.5f);
  OuterState state(initial, {}, {CodecKind::Int8, 64}, true);
  auto local = initial;
  for (auto& x : local) x += 0.01f;
  state.encode_delta(local);
  state.commit(1, state.preview(std::vector<float>(initial.size(), 0.02f)));
  Checkpoint saved;
  state.save(saved);

  OuterState back(initial, {}, {CodecKind::Int8, 64}, true);
  back.restore(saved);
  CHECK(back.version() == 1);
  CHECK(OuterState::weights_hash(back.global()) == OuterState::weights_hash(state.global()));
  // Same residual and momentum: the next delta and the next outer step agree bit for bit.
  CHECK(back.encode_delta(local) == state.encode_delta(local));
  const std::vector<float> mean(initial.size(), -0.01f);
  CHECK(back.preview(mean).hash == state.preview(mean).hash);

  OuterState other(ramp(299, 0.5f), {}, {CodecKind::Int8, 64}, true);
  CHECK_THROWS_AS(other.restore(saved), Error);
  CHECK(other.version() == 0);
  Checkpoint missing;
  missing.put_value("outer.version", std::int64_t{1});
  CHECK_THROWS_AS(back.restore(missing), Error);
  CHECK(back.version() == 1);
}

namespace {

// Three fragments of a 300-value model, interleaved as a layer-strided plan would be.
FragmentPlan three_fragments() {
  FragmentPlan plan(3);
  for (std::size_t t = 0; t < 6; ++t) {
    auto& f = plan[t % 3];
    f.ranges.push_back({t * 50, 50});
    f.size += 50;
  }
  return plan;
}

bool in_fragment(const Fragment& f, std::size_t j) {
  return std::any_of(f.ranges.begin(), f.ranges.end(), [&](const auto& r) { return j >= r.offset && j < r.offset + r.count; });
}

}  // namespace

TEST_CASE("streaming: a fragment's delta, commit and rebase touch that fragment only, the hash is the whole model's") {
  const auto initial = ramp(300, 0.1f);
  const auto plan = three_fragments();
  OuterState state(initial, {1.0f, 0.0f, false}, {CodecKind::Fp32, 0}, false, plan);
  REQUIRE(state.fragments() == 3);
  auto local = initial;
  for (auto& x : local) x -= 0.5f;
  // Fragment 1's round: its delta holds fragment 1's values only, in layout order.
  const auto bytes = state.encode_delta(local, 1);
  std::vector<float> delta(plan[1].size);
  decode(bytes, delta);
  for (const float d : delta) CHECK(d == doctest::Approx(0.5f));
  for (std::size_t j = 0; j < initial.size(); ++j) CHECK(state.start()[j] == (in_fragment(plan[1], j) ? local[j] : initial[j]));

  for (auto& x : local) x -= 0.25f;  // the next rounds' progress
  auto outcome = state.preview(std::vector<float>(plan[1].size, 0.5f), 1);
  CHECK(outcome.hash == OuterState::weights_hash(outcome.global));
  state.commit(1, std::move(outcome));
  state.rebase(local, 1);
  for (std::size_t j = 0; j < initial.size(); ++j) {
    if (in_fragment(plan[1], j)) {
      CHECK(state.global()[j] == doctest::Approx(initial[j] - 0.5f));
      CHECK(state.start()[j] == state.global()[j]);
      CHECK(local[j] == doctest::Approx(initial[j] - 0.75f));
    } else {  // neither the global weights, nor the start, nor the round's progress moved
      CHECK(state.global()[j] == initial[j]);
      CHECK(state.start()[j] == initial[j]);
      CHECK(local[j] == doctest::Approx(initial[j] - 0.75f));
    }
  }
  // Two fragments in one version (a late delta beside the others' next fragment): each its own step.
  std::vector<float> both(plan[0].size + plan[2].size, 0.25f);
  std::fill(both.begin() + static_cast<std::ptrdiff_t>(plan[0].size), both.end(), -0.125f);
  const auto two = state.preview({0, 2}, both);
  for (std::size_t j = 0; j < initial.size(); ++j)
    CHECK(two.global[j] == doctest::Approx(in_fragment(plan[0], j)   ? state.global()[j] - 0.25f
                                           : in_fragment(plan[2], j) ? state.global()[j] + 0.125f
                                                                     : state.global()[j]));
  CHECK(two.hash == OuterState::weights_hash(two.global));
  CHECK_THROWS_AS(state.preview({0, 0}, std::vector<float>(2 * plan[0].size)), InvariantError);
  CHECK_THROWS_AS(state.preview({0, 2}, std::vector<float>(plan[0].size)), InvariantError);
  CHECK_THROWS_AS(state.preview(std::vector<float>(plan[1].size), 3), InvariantError);
  CHECK_THROWS_AS(state.preview(std::vector<float>(plan[0].size + 1), 0), InvariantError);
}

TEST_CASE("streaming: each fragment has its own momentum, saved, restored and sent in snapshots") {
  const auto initial = ramp(300, 0.1f);
  OuterState state(initial, {0.7f, 0.9f, true}, {CodecKind::Int8, 64}, true, three_fragments());
  auto local = initial;
  for (int v = 1; v <= 4; ++v) {
    const int f = (v - 1) % 3;
    for (auto& x : local) x -= 0.01f * static_cast<float>(v);
    state.encode_delta(local, f);
    state.commit(v, state.preview(std::vector<float>(state.fragment(f).size, 0.01f * static_cast<float>(v)), f));
    state.rebase(local, f);
  }
  Checkpoint saved;
  state.save(saved);
  OuterState back(initial, {0.7f, 0.9f, true}, {CodecKind::Int8, 64}, true, three_fragments());
  back.restore(saved);
  CHECK(back.version() == 4);
  for (int f = 0; f < 3; ++f) {
    CHECK(back.encode_delta(local, f) == state.encode_delta(local, f));  // the same residual slice
    const std::vector<float> mean(state.fragment(f).size, -0.02f);
    CHECK(back.preview(mean, f).hash == state.preview(mean, f).hash);  // the same momentum slice
  }
  // A checkpoint of another fragment count is refused by name, the state unchanged.
  OuterState whole(initial, {0.7f, 0.9f, true}, {CodecKind::Int8, 64}, true);
  CHECK(whole.fragments() == 1);
  try {
    whole.restore(saved);
    FAIL("restored 3 fragments into 1");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("3 fragments") != std::string::npos);
  }
  CHECK(whole.version() == 0);

  OuterState behind(initial, {0.7f, 0.9f, true}, {CodecKind::Int8, 64}, true, three_fragments());
  auto theirs = initial;
  behind.adopt(state.snapshot(), OuterState::weights_hash(state.global()), theirs);
  const std::vector<float> mean(state.fragment(2).size, 0.004f);
  CHECK(behind.preview(mean, 2).hash == state.preview(mean, 2).hash);
}

TEST_CASE("a diverged site drops its in-flight rounds: local and start become the version it holds, its residual zero") {
  const auto initial = ramp(300, 0.1f);
  OuterState state(initial, {0.7f, 0.9f, true}, {CodecKind::Int8, 64}, true, three_fragments());
  auto local = initial;
  for (std::size_t j = 0; j < local.size(); ++j) local[j] -= 0.013f * static_cast<float>(j % 7);
  state.encode_delta(local, 1);  // fragment 1's round sent: int8 leaves a residual behind
  state.commit(1, state.preview(std::vector<float>(three_fragments()[1].size, 0.01f), 1));
  state.rebase(local, 1);
  for (auto& x : local) x += 5.0f;  // a diverging step's damage, in every fragment's in-flight round
  Checkpoint before;
  state.save(before);
  REQUIRE(before.get_pod<float>("outer.residual") != std::vector<float>(initial.size(), 0.0f));

  state.drop_in_flight(local);
  CHECK(state.version() == 1);
  CHECK(std::equal(local.begin(), local.end(), state.global().begin()));
  CHECK(std::equal(local.begin(), local.end(), state.start().begin()));
  Checkpoint after;
  state.save(after);
  CHECK(after.get_pod<float>("outer.residual") == std::vector<float>(initial.size(), 0.0f));
  CHECK(after.get_pod<float>("outer.momentum.f1") == before.get_pod<float>("outer.momentum.f1"));  // shared: kept
  // The next round measures only what follows: no progress, and no residual, is a zero delta.
  for (int f = 0; f < 3; ++f) {
    std::vector<float> delta(three_fragments()[static_cast<std::size_t>(f)].size);
    decode(state.encode_delta(local, f), delta);
    CHECK(std::all_of(delta.begin(), delta.end(), [](float d) { return d == 0.0f; }));
  }
}

TEST_CASE("eager: the round starts at the estimate's outer step, the true commit replaces it, nothing shared moves") {
  const auto initial = ramp(256, 0.1f);
  const OuterOptions outer{0.7f, 0.9f, true};
  OuterState state(initial, outer, {CodecKind::Fp32, 0}, false);
  auto local = initial;
  for (auto& x : local) x -= 0.5f;
  state.encode_delta(local);
  const std::vector<float> estimate(initial.size(), 0.4f);
  state.step_ahead(local, 0, estimate);
  // One Nesterov step from version 0 on the estimate, on a copy of the momentum: 0.7 * (0.4 + 0.9 * 0.4).
  for (std::size_t i = 0; i < local.size(); ++i) {
    CHECK(local[i] == doctest::Approx(initial[i] - 0.7f * (0.4f + 0.9f * 0.4f)));
    CHECK(state.start()[i] == local[i]);
  }
  CHECK(state.version() == 0);
  CHECK(std::equal(initial.begin(), initial.end(), state.global().begin()));
  const auto next = state.preview(estimate);  // the state's own momentum is still zero
  const auto m = next.optimizers[0].second.momentum_buffer();
  CHECK(std::all_of(m.begin(), m.end(), [](float v) { return v == 0.4f; }));
  // The round's progress from the estimate goes onto the true version when it comes.
  for (auto& x : local) x -= 0.25f;
  state.commit(1, state.preview(std::vector<float>(initial.size(), 0.5f)));
  state.rebase(local);
  for (std::size_t i = 0; i < local.size(); ++i) CHECK(local[i] == doctest::Approx(state.global()[i] - 0.25f));
  // Only right after the encode: a round that already moved is a caller's bug.
  CHECK_THROWS_AS(state.step_ahead(local, 0, estimate), InvariantError);
}

TEST_CASE("an OuterState of each replica's part does what the whole one does, round after round") {
  // 5 units and a short sixth: at 3 and 4 replicas the parts differ by a unit and the last is short.
  const std::size_t n = 5 * kShardUnit + 777;
  const auto initial = ramp(n, 0.01f);
  const OuterOptions outer{0.7f, 0.9f, true, 2, 0};  // delayed Nesterov: the buffer is per value too
  const CodecOptions codecs[] = {{CodecKind::Int8, 256}, {CodecKind::Sparse, 256, 32}, {CodecKind::Int4, 128}};
  for (const auto& codec : codecs)
    for (int ranks = 1; ranks <= 4; ++ranks) {
      CAPTURE(to_string(codec.kind));
      CAPTURE(ranks);
      const ShardMap map(n, ranks);
      OuterState whole(initial, outer, codec, true);
      std::vector<OuterState> parts;
      for (int r = 0; r < ranks; ++r) parts.emplace_back(initial, outer, codec, true, FragmentPlan{}, map.part(r));
      auto local = initial;
      for (int round = 1; round <= 3; ++round) {
        for (std::size_t i = 0; i < n; ++i) local[i] -= 1e-3f * static_cast<float>((i * 7 + round) % 11) - 4e-3f;
        // Each replica's weights: its own part is all it reads and writes.
        std::vector<std::vector<float>> replica(ranks, local);
        std::vector<std::vector<std::byte>> encoded;
        for (int r = 0; r < ranks; ++r) encoded.push_back(parts[r].encode_delta(replica[r]));
        const auto sent = whole.encode_delta(local);
        CHECK(join_encoded(encoded) == sent);
        // Another site's delta and this one's, averaged as a commit would; then its rebase.
        std::vector<float> mean(n);
        decode(sent, mean);
        for (std::size_t i = 0; i < n; ++i) mean[i] = 0.5f * mean[i] + 1e-4f * static_cast<float>(i % 5);
        auto outcome = whole.preview(mean);
        std::vector<std::uint64_t> chunks;
        for (int r = 0; r < ranks; ++r) {
          auto mine = parts[r].preview(mean);
          chunks.insert(chunks.end(), mine.chunks.begin(), mine.chunks.end());
          parts[r].commit(round, std::move(mine));
          parts[r].rebase(replica[r]);
        }
        CHECK(kernels::combine_chunk_hashes(chunks) == outcome.hash);
        whole.commit(round, std::move(outcome));
        whole.rebase(local);
        for (int r = 0; r < ranks; ++r) {
          const ShardRange p = map.part(r);
          CHECK(std::equal(local.begin() + p.offset, local.begin() + p.end(), replica[r].begin() + p.offset));
        }
      }
      // The parts' records join to the whole state's, and cut anew at any count.
      std::vector<Checkpoint> saved(ranks);
      for (int r = 0; r < ranks; ++r) parts[r].save(saved[r]);
      const Checkpoint joined = join_outer_parts(saved);
      Checkpoint expected;
      whole.save(expected);
      for (const auto& name : expected.names()) {
        CAPTURE(name);
        CHECK(std::ranges::equal(joined.get(name), expected.get(name)));
      }
      CHECK(outer_snapshot(joined) == whole.snapshot());
      // Written as a checkpoint in parts ([checkpoint] per_replica), each replica's records a slice
      // in its own part file and none in the leader's: read back, the whole state's records.
      TempDir dir("outer-slices");
      CheckpointStore store(posix_env(), dir.path(), 1);
      std::vector<std::uint64_t> manifest = {static_cast<std::uint64_t>(ranks)};
      for (int r = 0; r < ranks; ++r) {
        const ShardRange p = map.part(r);
        Checkpoint part;
        part.put_pod<float>("adamw.m", std::vector<float>(p.count));
        part.put_pod<float>("adamw.v", std::vector<float>(p.count));
        part.put_pod<std::uint64_t>("adamw.shard", std::vector<std::uint64_t>{p.offset, p.count});
        part.put_value<std::int64_t>("train.step", 12);
        put_outer_slice(part, saved[static_cast<std::size_t>(r)]);
        store.save_part(12, p.offset, part);
        manifest.insert(manifest.end(), {p.offset, p.count});
      }
      Checkpoint leader;
      leader.put_pod<float>("params", std::vector<float>(n));
      leader.put_value<std::int64_t>("train.step", 12);
      leader.put_pod<std::uint64_t>("adamw.parts", manifest);
      store.save(12, leader);
      const Checkpoint read = read_checkpoint(posix_env(), store.path_for(12));
      for (const auto& name : expected.names()) {
        CAPTURE(name);
        CHECK(std::ranges::equal(read.get(name), expected.get(name)));
      }
      const ShardMap other(n, 5 - ranks);
      for (int r = 0; r < other.ranks(); ++r) {
        OuterState cut(initial, outer, codec, true, FragmentPlan{}, map.part(0));
        cut.restore(joined, other.part(r));
        CHECK(cut.part() == other.part(r));
        CHECK(cut.version() == 3);
        CHECK(std::equal(cut.global().begin(), cut.global().end(), whole.global().begin() + other.part(r).offset));
        Checkpoint again;
        cut.save(again);
        CHECK(again.get_pod<float>("outer.residual") ==
              cut_outer_records(expected, other.part(r)).get_pod<float>("outer.residual"));
      }
    }
}

TEST_CASE("a sharded state adopts its part of a peer's whole snapshot, checked against the whole model's hash") {
  const std::size_t n = 3 * kShardUnit + 100;
  const auto initial = ramp(n, 0.02f);
  OuterState peer(initial, {}, {CodecKind::Int8, 256}, true);
  const std::vector<float> mean(n, 0.01f);
  auto outcome = peer.preview(mean);
  const auto hash = outcome.hash;
  peer.commit(1, std::move(outcome));
  const ShardMap map(n, 2);
  OuterState part(initial, {}, {CodecKind::Int8, 256}, true, FragmentPlan{}, map.part(1));
  auto local = initial;
  CHECK_THROWS_AS(part.adopt(peer.snapshot(), hash + 1, local), Error);
  CHECK(part.version() == 0);
  part.adopt(peer.snapshot(), hash, local);
  CHECK(part.version() == 1);
  const ShardRange p = map.part(1);
  CHECK(std::equal(part.global().begin(), part.global().end(), peer.global().begin() + p.offset));
  CHECK(std::equal(local.begin() + p.offset, local.begin() + p.end(), peer.global().begin() + p.offset));
  CHECK(std::equal(local.begin(), local.begin() + p.offset, initial.begin()));  // the other part is not this one's
  // A part with a mirror adopts both: the mirror's weights and part of `local` are the peer's too.
  Checkpoint records;
  OuterState(initial, {}, {CodecKind::Int8, 256}, true).save(records);
  OuterState mirrored(initial, {}, {CodecKind::Int8, 256}, true);
  mirrored.restore(records, map.part(0), map.part(1));
  auto mirrored_local = initial;
  mirrored.adopt(peer.snapshot(), hash, mirrored_local);
  Checkpoint mirror;
  mirrored.save_mirror(mirror);
  CHECK(mirror.get_pod<float>("outer.global") ==
        std::vector<float>(peer.global().begin() + p.offset, peer.global().begin() + p.end()));
  CHECK(mirror.get_value<std::int64_t>("outer.version") == 1);
  CHECK(mirrored_local == std::vector<float>(peer.global().begin(), peer.global().end()));
  CHECK_THROWS_AS(part.snapshot(), InvariantError);
  CHECK_THROWS_AS(OuterState(initial, {}, {CodecKind::Int8, 256}, true, FragmentPlan{}, ShardRange{n - 10, 11}),
                  InvariantError);
}

TEST_CASE("parts that do not make one state are refused") {
  const std::size_t n = 2 * kShardUnit;
  const auto initial = ramp(n, 0.02f);
  const ShardMap map(n, 2);
  std::vector<Checkpoint> saved(2);
  OuterState a(initial, {}, {CodecKind::Int8, 256}, true, FragmentPlan{}, map.part(0));
  OuterState b(initial, {}, {CodecKind::Int8, 256}, true, FragmentPlan{}, map.part(1));
  a.save(saved[0]);
  b.save(saved[1]);
  CHECK_NOTHROW(join_outer_parts(saved));
  CHECK_THROWS_AS(join_outer_parts(std::span(saved).first(1)), Error);
  auto newer = b;
  auto outcome = newer.preview(std::vector<float>(n, 0.1f));
  newer.commit(1, std::move(outcome));
  saved[1] = Checkpoint{};
  newer.save(saved[1]);
  try {
    join_outer_parts(saved);
    FAIL("joined two versions");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Peer);
    CHECK(std::string(e.what()).find("disagree on record \"outer.version\"") != std::string::npos);
  }
  const std::vector<Checkpoint> twice{saved[0], saved[0]};
  CHECK_THROWS_AS(join_outer_parts(twice), Error);
}

TEST_CASE("a part's mirror of the next replica's part does what that replica does, and its records stand in for them") {
  const std::size_t n = 4 * kShardUnit + 300;
  const auto initial = ramp(n, 0.01f);
  const CodecOptions codec{CodecKind::Int8, 256};
  OuterState whole(initial, {}, codec, true);
  Checkpoint start;
  whole.save(start);
  const int ranks = 3;
  const ShardMap map(n, ranks);
  std::vector<OuterState> parts;
  for (int r = 0; r < ranks; ++r) {
    parts.emplace_back(initial, OuterOptions{}, codec, true);
    parts.back().restore(start, map.part(r), map.part((r + 1) % ranks));
    CHECK(parts.back().mirror_part() == map.part((r + 1) % ranks));
  }
  auto local = initial;
  for (int round = 1; round <= 2; ++round) {
    for (std::size_t i = 0; i < n; ++i) local[i] += 1e-3f * static_cast<float>(i % 7) - 2e-3f;
    std::vector<float> mean(n, 0.0f);
    decode(whole.encode_delta(local), mean);
    for (auto& p : parts) {
      auto mine = local;
      p.encode_delta(mine);
      auto outcome = p.preview(mean);
      REQUIRE(outcome.mirror != nullptr);
      p.commit(round, std::move(outcome));
      p.rebase(mine);
    }
    whole.commit(round, whole.preview(mean));
    whole.rebase(local);
  }
  // Rank 1 dies: rank 0's mirror and rank 2's part stand in for it, and the whole comes back.
  std::vector<Checkpoint> held(3);
  parts[0].save(held[0]);
  parts[0].save_mirror(held[1]);
  parts[2].save(held[2]);
  const Checkpoint joined = join_outer_parts(held);
  Checkpoint expected;
  whole.save(expected);
  for (const auto& name : expected.names()) {
    CAPTURE(name);
    CHECK(std::ranges::equal(joined.get(name), expected.get(name)));
  }
  CHECK(parts[0].held_bytes() > 0);
  CHECK_THROWS_AS(whole.save_mirror(expected), InvariantError);
}

TEST_CASE("a re-formed group goes on from the newest version its parts and mirrors cover, else an older whole") {
  const std::size_t n = 300;
  const ShardRange a{0, 100}, b{100, 100}, c{200, 100}, all{0, n};
  auto held = [&](std::int64_t v, ShardRange part, std::optional<ShardRange> mirror) {
    return HeldOuter{v, part, mirror, n};
  };
  // The first join: every member whole at version 0; the first covers it.
  const std::vector<HeldOuter> fresh{held(0, all, {}), held(0, all, {})};
  auto sources = choose_outer_sources(fresh);
  REQUIRE(sources);
  CHECK(sources->sources == std::vector<OuterSource>{{0, false}});
  // Three parts with mirrors, the middle one dead: its mirror at the first stands in.
  const std::vector<HeldOuter> survivors{held(5, a, b), held(5, c, a)};
  sources = choose_outer_sources(survivors);
  REQUIRE(sources);
  CHECK(sources->version == 5);
  CHECK(sources->newest);
  CHECK(sources->sources == std::vector<OuterSource>{{0, false}, {0, true}, {1, false}});
  // ... and a restarted replica with its checkpoint's whole state of version 3 changes nothing.
  const std::vector<HeldOuter> restarted{held(5, a, b), held(3, all, {}), held(5, c, a)};
  sources = choose_outer_sources(restarted);
  REQUIRE(sources);
  CHECK(sources->sources == std::vector<OuterSource>{{0, false}, {0, true}, {2, false}});
  // Two neighbours dead: version 5 has a hole, the restarted replica's version 3 is what is whole.
  const std::vector<HeldOuter> hole{held(5, a, b), held(3, all, {})};
  sources = choose_outer_sources(hole);
  REQUIRE(sources);
  CHECK(sources->version == 3);
  CHECK_FALSE(sources->newest);
  CHECK(sources->sources == std::vector<OuterSource>{{1, false}});
  const std::vector<HeldOuter> lost{held(5, a, b)};
  CHECK_FALSE(choose_outer_sources(lost));
  // A replica restarted from a checkpoint of the version the others hold, written before their
  // round moved on: its whole state is older than their parts, however long.
  const auto moved = [&](std::int64_t moves, ShardRange part, std::optional<ShardRange> mirror) {
    return HeldOuter{5, part, mirror, n, moves};
  };
  const std::vector<HeldOuter> stale{moved(4, all, {}), moved(6, a, b), moved(6, c, a)};
  sources = choose_outer_sources(stale);
  REQUIRE(sources);
  CHECK(sources->newest);
  CHECK(sources->moves == 6);
  CHECK(sources->sources == std::vector<OuterSource>{{1, false}, {1, true}, {2, false}});
  // ... and where their parts have a hole, it is what is whole: an older state, their round dropped.
  const std::vector<HeldOuter> stale_hole{moved(4, all, {}), moved(6, a, b)};
  sources = choose_outer_sources(stale_hole);
  REQUIRE(sources);
  CHECK_FALSE(sources->newest);
  CHECK(sources->version == 5);
  CHECK(sources->moves == 4);
  CHECK(sources->sources == std::vector<OuterSource>{{0, false}});
}

TEST_CASE("a state counts its round's moves at a version, and keeps the count in its checkpoint records") {
  const auto initial = ramp(64, 0.01f);
  OuterState state(initial, {}, {CodecKind::Int8, 256}, true);
  auto local = initial;
  CHECK(state.moves() == 0);
  local[3] -= 0.5f;
  std::vector<float> mean(local.size());
  decode(state.encode_delta(local), mean);
  CHECK(state.moves() == 1);
  state.commit(1, state.preview(mean));  // a version is no move of the round
  state.rebase(local);
  CHECK(state.moves() == 1);
  state.end_feedback();
  state.drop_in_flight(local);
  CHECK(state.moves() == 3);
  Checkpoint records;
  state.save(records);
  OuterState restored(initial, {}, {CodecKind::Int8, 256}, true);
  restored.restore(records);
  CHECK(restored.moves() == 3);
  // A checkpoint from before the moves were counted: none.
  Checkpoint older;
  for (const auto& name : records.names())
    if (name != "outer.moves")
      older.put(name, std::vector<std::byte>(records.get(name).begin(), records.get(name).end()));
  restored.restore(older);
  CHECK(restored.moves() == 0);
  records.put_value<std::int64_t>("outer.moves", -1);
  CHECK_THROWS_AS(restored.restore(records), Error);
  CHECK(restored.moves() == 0);
}

namespace {

constexpr std::size_t kCutValues = 3 * kShardUnit + 77;

OuterOptions delayed() {
  OuterOptions outer;
  outer.delay = 2;  // a delay buffer too
  return outer;
}

// A whole state of kCutValues with error feedback, two versions committed (each round's progress
// `i % modulus` steps of 1e-3 on value i).
OuterState two_versions(std::size_t modulus) {
  const auto initial = ramp(kCutValues, 0.01f);
  OuterState whole(initial, delayed(), {CodecKind::Int8, 256}, true);
  auto local = initial;
  for (int round = 1; round <= 2; ++round) {
    for (std::size_t i = 0; i < kCutValues; ++i) local[i] -= 1e-3f * static_cast<float>(i % modulus);
    std::vector<float> mean(kCutValues);
    decode(whole.encode_delta(local), mean);
    whole.commit(round, whole.preview(mean));
    whole.rebase(local);
  }
  return whole;
}

}  // namespace

TEST_CASE("a whole state cut to a part and a mirror in place is the one its own records restore") {
  const std::size_t n = kCutValues;
  const OuterState whole = two_versions(5);
  const ShardMap map(n, 3);
  Checkpoint records;
  whole.save(records);
  OuterState restored = whole, cut = whole;
  restored.restore(records, map.part(1), map.part(2));
  cut.cut(map.part(1), map.part(2));
  CHECK(cut.fingerprint() == restored.fingerprint());
  CHECK(cut.mirror_part() == map.part(2));
  Checkpoint a, b;
  cut.save(a);
  restored.save(b);
  for (const auto& name : b.names()) {
    CAPTURE(name);
    CHECK(std::ranges::equal(a.get(name), b.get(name)));
  }
  CHECK_THROWS_AS(cut.cut(map.part(0), std::nullopt), InvariantError);
}

TEST_CASE(
    "a state restored from its part's and its mirror's records alone is the one the whole model's records restore") {
  const std::size_t n = kCutValues;
  const auto initial = ramp(n, 0.01f);
  const OuterOptions outer = delayed();
  const OuterState whole = two_versions(7);
  Checkpoint records;
  whole.save(records);
  for (const int ranks : {1, 2, 3}) {
    const ShardMap map(n, ranks);
    for (int r = 0; r < ranks; ++r) {
      CAPTURE(ranks);
      CAPTURE(r);
      const ShardRange part = map.part(r);
      const std::optional<ShardRange> mirror = ranks > 1 ? std::optional(map.part((r + 1) % ranks)) : std::nullopt;
      OuterState expected(initial, outer, {CodecKind::Int8, 256}, true);
      expected.restore(records, part, mirror);
      OuterState restored(initial, outer, {CodecKind::Int8, 256}, true);
      const Checkpoint own = cut_outer_records(records, part);
      const Checkpoint mirrored = mirror ? cut_outer_records(records, *mirror) : Checkpoint{};
      restored.restore_part(own, part, mirror ? &mirrored : nullptr, mirror);
      CHECK(restored.fingerprint() == expected.fingerprint());
      CHECK(restored.version() == 2);
      CHECK(restored.mirror_part() == mirror);
    }
  }
  // Records of another part's size are refused, the state unchanged.
  const ShardMap map(n, 3);
  OuterState state(initial, outer, {CodecKind::Int8, 256}, true);
  const auto before = state.fingerprint();
  CHECK_THROWS_WITH_AS(state.restore_part(cut_outer_records(records, map.part(0)), map.part(2)),
                       doctest::Contains("its part has"), Error);
  CHECK(state.fingerprint() == before);
}
