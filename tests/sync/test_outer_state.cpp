#include <doctest/doctest.h>

#include <vector>

#include "core/checkpoint/checkpoint.hpp"
#include "core/util/error.hpp"
#include "sync/round/outer_state.hpp"

using namespace meridian;

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
  CHECK_THROWS_AS(behind.adopt(snapshot, hash, local), Error);  // not newer than what it holds
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
