// core/optim: learning-rate schedules, global gradient-norm clipping and AdamW, against values
// computed by hand.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/model/param_layout.hpp"
#include "core/optim/adamw.hpp"
#include "core/optim/grad_clip.hpp"
#include "core/optim/muon.hpp"
#include "kernels/cpu/elementwise.hpp"
#include "kernels/cpu/newton_schulz.hpp"
#include "core/optim/sgd.hpp"
#include "core/optim/schedule.hpp"
#include "core/util/error.hpp"

using namespace meridian;

namespace {

double l2(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += static_cast<double>(x) * x;
  return std::sqrt(s);
}

const ModelConfig kTiny{2, 2, 8, 4, 16};

}  // namespace

TEST_CASE("lr_at: linear warmup to the peak, then decay to the floor at the last step") {
  for (const auto kind : {ScheduleKind::Cosine, ScheduleKind::Linear}) {
    CAPTURE(static_cast<int>(kind));
    const LrSchedule s{kind, 1.0, 0.1, 4, 20};
    // Warmup: lr * (step + 1) / warmup, reaching the peak on the last warmup step.
    CHECK(lr_at(s, 0) == doctest::Approx(0.25));
    CHECK(lr_at(s, 1) == doctest::Approx(0.5));
    CHECK(lr_at(s, 2) == doctest::Approx(0.75));
    CHECK(lr_at(s, 3) == doctest::Approx(1.0));
    CHECK(lr_at(s, 4) == doctest::Approx(1.0));  // decay starts from the peak
    CHECK(lr_at(s, 19) == doctest::Approx(0.1));  // the floor, exactly at the last step
    CHECK(lr_at(s, 25) == doctest::Approx(0.1));  // and after it
    for (int i = 4; i < 19; ++i) {
      CAPTURE(i);
      CHECK(lr_at(s, i + 1) < lr_at(s, i));  // strictly decreasing
      CHECK(lr_at(s, i) > 0.1);
    }
  }
  // Decay over 15 steps (4..19); a third of the way, at step 9:
  CHECK(lr_at({ScheduleKind::Cosine, 1.0, 0.1, 4, 20}, 9) == doctest::Approx(0.1 + 0.9 * 0.5 * (1 + std::cos(M_PI / 3))));
  CHECK(lr_at({ScheduleKind::Linear, 1.0, 0.1, 4, 20}, 9) == doctest::Approx(0.1 + 0.9 * 2.0 / 3.0));
  // Cosine is symmetric about the midpoint: half way from peak to floor.
  CHECK(lr_at({ScheduleKind::Cosine, 2.0, 0.0, 0, 11}, 5) == doctest::Approx(1.0));
}

TEST_CASE("lr_at: constant after warmup, no warmup starts at the peak, scale with lr") {
  const LrSchedule c{ScheduleKind::Constant, 3e-3, 0.1, 2, 10};
  CHECK(lr_at(c, 0) == doctest::Approx(1.5e-3));
  for (int i = 1; i < 12; ++i) CHECK(lr_at(c, i) == doctest::Approx(3e-3));
  const LrSchedule cos{ScheduleKind::Cosine, 3e-3, 0.25, 0, 10};
  CHECK(lr_at(cos, 0) == doctest::Approx(3e-3));
  CHECK(lr_at(cos, 9) == doctest::Approx(3e-3 * 0.25));
  // A one-step run never divides by zero.
  CHECK(std::isfinite(lr_at({ScheduleKind::Cosine, 1.0, 0.1, 0, 1}, 0)));
  CHECK(lr_at({ScheduleKind::Linear, 1.0, 0.1, 0, 1}, 0) == doctest::Approx(1.0));
}

TEST_CASE("lr_at wsd: warmup, the peak held, then the cooldown's last fraction of the steps down to the floor") {
  // 100 steps, warmup 10, a fifth in the cooldown: steps 80 to 99 below the peak, 99 at the floor.
  for (const auto shape : {DecayShape::Linear, DecayShape::OneMinusSqrt, DecayShape::Cosine}) {
    CAPTURE(static_cast<int>(shape));
    const LrSchedule s{ScheduleKind::Wsd, 2.0, 0.1, 10, 100, 0.2, shape};
    CHECK(cooldown_steps(s) == 20);
    CHECK(lr_at(s, 0) == doctest::Approx(0.2));
    CHECK(lr_at(s, 9) == doctest::Approx(2.0));
    for (int i = 10; i <= 79; ++i) CHECK(lr_at(s, i) == 2.0);  // stable: exactly the peak
    for (int i = 79; i < 99; ++i) CHECK(lr_at(s, i + 1) < lr_at(s, i));
    CHECK(lr_at(s, 99) == doctest::Approx(0.2));
    CHECK(lr_at(s, 120) == doctest::Approx(0.2));
  }
  // Halfway through the cooldown (step 89 of 79..99), each shape's own value.
  const auto half = [](DecayShape shape) { return lr_at({ScheduleKind::Wsd, 2.0, 0.1, 10, 100, 0.2, shape}, 89); };
  CHECK(half(DecayShape::Linear) == doctest::Approx(0.2 + 1.8 * 0.5));
  CHECK(half(DecayShape::Cosine) == doctest::Approx(0.2 + 1.8 * 0.5));
  CHECK(half(DecayShape::OneMinusSqrt) == doctest::Approx(0.2 + 1.8 * (1 - std::sqrt(0.5))));
  CHECK(lr_at({ScheduleKind::Wsd, 2.0, 0.1, 10, 100, 0.2, DecayShape::Cosine}, 84) ==
        doctest::Approx(0.2 + 1.8 * 0.5 * (1 + std::cos(M_PI / 4))));
  // The cooldown rounds to whole steps and is at least one: its only step is the floor.
  const LrSchedule tiny{ScheduleKind::Wsd, 1.0, 0.0, 0, 10, 0.01, DecayShape::Linear};
  CHECK(cooldown_steps(tiny) == 1);
  CHECK(lr_at(tiny, 8) == 1.0);
  CHECK(lr_at(tiny, 9) == 0.0);
  CHECK(cooldown_steps({ScheduleKind::Wsd, 1.0, 0.0, 0, 10, 0.25, DecayShape::Linear}) == 3);  // 2.5 rounds up
}

TEST_CASE("clip_grad_norm: scales down to the max norm and returns the norm before clipping") {
  std::vector<float> g{3, 4};
  CHECK(clip_grad_norm(g, 1.0) == doctest::Approx(5.0));
  CHECK(l2(g) == doctest::Approx(1.0).epsilon(1e-5));
  CHECK(g[0] == doctest::Approx(0.6).epsilon(1e-5));  // direction kept
  CHECK(g[1] == doctest::Approx(0.8).epsilon(1e-5));

  // Many elements (the kernels' vector paths and tails): the norm is global, not per element.
  std::vector<float> big(10001);
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<float>((i % 7) - 3) * 0.5f;
  const double before = l2(big);
  const auto copy = big;
  CHECK(clip_grad_norm(big, 2.0) == doctest::Approx(before).epsilon(1e-6));
  CHECK(l2(big) == doctest::Approx(2.0).epsilon(1e-5));
  for (std::size_t i = 0; i < big.size(); i += 997) CHECK(big[i] == doctest::Approx(copy[i] * 2.0 / before).epsilon(1e-5));
}

TEST_CASE("clip_grad_norm: small gradients, max_norm 0 and non-finite gradients are left alone") {
  std::vector<float> small{0.3f, 0.4f};
  CHECK(clip_grad_norm(small, 1.0) == doctest::Approx(0.5));
  CHECK(small == std::vector<float>{0.3f, 0.4f});

  std::vector<float> off{30, 40};
  CHECK(clip_grad_norm(off, 0.0) == doctest::Approx(50.0));
  CHECK(off == std::vector<float>{30, 40});

  std::vector<float> bad{std::numeric_limits<float>::infinity(), 1};
  CHECK(!std::isfinite(clip_grad_norm(bad, 1.0)));
  CHECK(bad[1] == 1.0f);

  std::vector<float> zero(5, 0.0f);
  CHECK(clip_grad_norm(zero, 1.0) == 0.0);
  CHECK(zero == std::vector<float>(5, 0.0f));
}

TEST_CASE("clip_grad_norm over parts cut on units gives the whole gradient's norm and clipping, bit for bit") {
  std::vector<float> grads(3 * kShardUnit + 100);
  for (std::size_t i = 0; i < grads.size(); ++i) grads[i] = std::sin(0.37f * static_cast<float>(i)) * 0.01f;
  std::vector<double> every(4);  // each unit's sum of squares, as the other replicas would send them
  kernels::sum_squares_by_unit(grads.data(), grads.size(), kShardUnit, every.data());
  auto whole = grads;
  const double norm = clip_grad_norm(whole, 0.5);
  REQUIRE(norm > 0.5);  // it clips
  for (int ranks = 1; ranks <= 4; ++ranks) {
    const ShardMap map(grads.size(), ranks);
    for (int r = 0; r < ranks; ++r) {
      CAPTURE(ranks);
      CAPTURE(r);
      auto mine = grads;
      const ShardRange part = map.part(r);
      const double got = clip_grad_norm(mine, part, 0.5, [&](std::span<double> sums) {
        for (std::size_t u = 0; u < sums.size(); ++u)
          if (u < part.offset / kShardUnit || u >= (part.end() + kShardUnit - 1) / kShardUnit) sums[u] = every[u];
          else CHECK(sums[u] == every[u]);  // this replica's own, computed on its part alone
      });
      CHECK(got == norm);
      CHECK(std::equal(mine.begin() + static_cast<std::ptrdiff_t>(part.offset),
                       mine.begin() + static_cast<std::ptrdiff_t>(part.end()), whole.begin() + static_cast<std::ptrdiff_t>(part.offset)));
    }
  }
  std::vector<float> g(100);
  CHECK_THROWS_AS(clip_grad_norm(g, ShardRange{10, 20}, 1.0, [](std::span<double>) {}), InvariantError);
}

TEST_CASE("AdamW: the first step on a known gradient matches the hand-computed update") {
  const ParamLayout layout = ParamLayout::of(kTiny);
  const float lr = 0.01f, wd = 0.1f;
  AdamW opt(layout, AdamWOptions{0.9f, 0.95f, 1e-8f, wd});
  std::vector<float> p(layout.total(), 0.5f), g(layout.total(), 0.2f);
  for (std::size_t i = 0; i < g.size(); i += 3) g[i] = -0.4f;
  CHECK(opt.steps_taken() == 0);
  opt.step(p, g, lr);
  CHECK(opt.steps_taken() == 1);
  // Step 1: m = 0.1 g, v = 0.05 g^2; bias-corrected m^ = g, v^ = g^2, so the update is lr * (g / (|g| + eps)
  // + wd * p) on decayed views and lr * g / (|g| + eps) on the others.
  for (const auto& v : layout.views()) {
    for (std::size_t i = v.offset; i < v.offset + v.numel; ++i) {
      const double gi = g[i];
      const double expected = 0.5 - lr * (gi / (std::abs(gi) + 1e-8) + (v.decay ? wd * 0.5 : 0.0));
      if (std::abs(p[i] - expected) > 1e-6 || std::abs(opt.m()[i] - 0.1 * gi) > 1e-7 ||
          std::abs(opt.v()[i] - 0.05 * gi * gi) > 1e-8) {
        FAIL_CHECK(v.name, "[", i - v.offset, "]: param ", p[i], " (expected ", expected, "), m ", opt.m()[i],
                   ", v ", opt.v()[i]);
        break;
      }
    }
  }
  CHECK(p[0] == doctest::Approx(0.5 + 0.01 * (1 - 0.05)));  // wte, g = -0.4: moves up, decay pulls back
}

TEST_CASE("AdamW: the second step uses bias correction with t = 2") {
  const ParamLayout layout = ParamLayout::of(kTiny);
  const float b1 = 0.9f, b2 = 0.95f, lr = 0.05f;
  AdamW opt(layout, AdamWOptions{b1, b2, 1e-8f, 0.0f});
  std::vector<float> p(layout.total(), 0.0f);
  const std::vector<float> g1(layout.total(), 1.0f), g2(layout.total(), -0.5f);
  opt.step(p, g1, lr);
  opt.step(p, g2, lr);
  CHECK(opt.steps_taken() == 2);
  const double m = b1 * (1 - b1) * 1.0 + (1 - b1) * -0.5;
  const double v = b2 * (1 - b2) * 1.0 + (1 - b2) * 0.25;
  const double m_hat = m / (1 - double(b1) * b1), v_hat = v / (1 - double(b2) * b2);
  const double expected = -lr * 1.0 - lr * m_hat / (std::sqrt(v_hat) + 1e-8);
  CHECK(opt.m()[7] == doctest::Approx(m).epsilon(1e-5));
  CHECK(opt.v()[7] == doctest::Approx(v).epsilon(1e-5));
  for (std::size_t i = 0; i < p.size(); i += 101) CHECK(p[i] == doctest::Approx(expected).epsilon(1e-5));
}

TEST_CASE("AdamW: weight decay only on decay views, biases and LayerNorm are untouched by a zero gradient") {
  const ParamLayout layout = ParamLayout::of(kTiny);
  AdamW opt(layout, AdamWOptions{0.9f, 0.95f, 1e-8f, 0.1f});
  std::vector<float> p(layout.total(), 1.0f), g(layout.total(), 0.0f);
  opt.step(p, g, 0.01f);
  int decayed = 0, kept = 0;
  for (const auto& v : layout.views()) {
    const bool is_matrix_or_embedding = v.shape.size() == 2;
    CHECK_MESSAGE(v.decay == is_matrix_or_embedding, v.name);
    const float expected = v.decay ? 1.0f - 0.01f * 0.1f : 1.0f;
    for (std::size_t i = v.offset; i < v.offset + v.numel; ++i)
      if (p[i] != doctest::Approx(expected).epsilon(1e-7)) {
        FAIL_CHECK(v.name, "[", i - v.offset, "] = ", p[i], ", expected ", expected);
        break;
      }
    (v.decay ? decayed : kept) += 1;
  }
  CHECK(decayed > 0);
  CHECK(kept > 0);
  // Spot checks by name.
  CHECK(p[layout.at("h.0.ln_1.weight").offset] == 1.0f);
  CHECK(p[layout.at("h.1.attn.c_attn.bias").offset] == 1.0f);
  CHECK(p[layout.at("ln_f.bias").offset + 7] == 1.0f);
  CHECK(p[layout.at("wte.weight").offset] == doctest::Approx(0.999f));
  CHECK(p[layout.at("h.1.mlp.c_proj.weight").offset + 5] == doctest::Approx(0.999f));
}

TEST_CASE("AdamW: steps_taken drives bias correction and can be restored (resume)") {
  const ParamLayout layout = ParamLayout::of(kTiny);
  AdamW opt(layout, AdamWOptions{0.9f, 0.95f, 1e-8f, 0.0f});
  opt.set_steps_taken(1000);
  std::vector<float> p(layout.total(), 0.0f), g(layout.total(), 0.3f);
  opt.step(p, g, 1.0f);
  CHECK(opt.steps_taken() == 1001);
  // At t = 1001 the bias corrections are ~1: update = 0.1 g / sqrt(0.05 g^2) = 0.1 / sqrt(0.05) (not 1, as at t = 1).
  CHECK(p[3] == doctest::Approx(-0.1 / std::sqrt(0.05)).epsilon(1e-4));

  std::vector<float> wrong(layout.total() - 1);
  CHECK_THROWS_AS(opt.step(wrong, g, 1.0f), InvariantError);
  CHECK(opt.steps_taken() == 1001);
}

TEST_CASE("AdamW sharded: each rank's part, stepped with moments of its own, equals the unsharded update bit for bit") {
  const ParamLayout layout = ParamLayout::of(kTiny);
  const std::size_t n = layout.total();
  std::vector<float> whole(n), grads(n);
  for (std::size_t i = 0; i < n; ++i) {
    whole[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i)));
    grads[i] = static_cast<float>(std::cos(0.11 * static_cast<double>(i)) * 1e-2);
  }
  for (int ranks = 1; ranks <= 4; ++ranks) {
    CAPTURE(ranks);
    // A unit of one hash chunk, so that even the tiny model is cut at every rank count.
    const ShardMap map(n, ranks, 1024);
    AdamW reference(layout, AdamWOptions{});
    std::vector<AdamW> shards;
    for (int r = 0; r < ranks; ++r) shards.emplace_back(layout, AdamWOptions{}, map.part(r));
    std::vector<float> expected = whole, sharded = whole;
    for (int step = 0; step < 3; ++step) {
      reference.step(expected, grads, 1e-2f);
      // Each rank updates its part of its own copy; the all-gather would then assemble them.
      for (int r = 0; r < ranks; ++r) {
        std::vector<float> copy = sharded;
        shards[static_cast<std::size_t>(r)].step(copy, grads, 1e-2f);
        const ShardRange part = map.part(r);
        std::copy_n(copy.begin() + static_cast<std::ptrdiff_t>(part.offset), part.count,
                    sharded.begin() + static_cast<std::ptrdiff_t>(part.offset));
      }
    }
    CHECK(std::memcmp(sharded.data(), expected.data(), n * sizeof(float)) == 0);
    for (int r = 0; r < ranks; ++r) {
      const ShardRange part = map.part(r);
      const auto& shard = shards[static_cast<std::size_t>(r)];
      REQUIRE(shard.m().size() == part.count);  // moments for its part alone
      CHECK(std::memcmp(shard.m().data(), reference.m().data() + part.offset, part.count * sizeof(float)) == 0);
      CHECK(std::memcmp(shard.v().data(), reference.v().data() + part.offset, part.count * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("sgd_step: p -= lr * (g + wd * p), decay only on the views marked for it") {
  const ParamLayout layout = ParamLayout::of(kTiny);
  std::vector<float> params(layout.total()), grads(layout.total());
  for (std::size_t i = 0; i < params.size(); ++i) {
    params[i] = 0.5f + 0.001f * static_cast<float>(i % 97);
    grads[i] = -0.25f + 0.002f * static_cast<float>(i % 31);
  }
  auto after = params;
  sgd_step(layout, after, grads, 0.1f, 0.01f);
  for (const auto& view : layout.views()) {
    const std::size_t i = view.offset + view.numel / 2;
    CAPTURE(view.name);
    const float decay = view.decay ? 0.01f : 0.0f;
    CHECK(after[i] == params[i] - 0.1f * (grads[i] + decay * params[i]));
  }
}

namespace {

std::vector<double> random_matrix(int rows, int cols, unsigned seed) {
  std::vector<double> g(static_cast<std::size_t>(rows) * cols);
  unsigned x = seed;
  for (auto& v : g) {
    x = x * 1664525u + 1013904223u;
    v = static_cast<double>(x >> 8) / static_cast<double>(1u << 24) - 0.5;
  }
  return g;
}

// X X^T of a rows x cols row-major matrix (rows <= cols).
std::vector<double> gram(const std::vector<double>& x, int rows, int cols) {
  std::vector<double> a(static_cast<std::size_t>(rows) * rows);
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < rows; ++j)
      for (int k = 0; k < cols; ++k) a[i * rows + j] += x[i * cols + k] * x[j * cols + k];
  return a;
}

}  // namespace

TEST_CASE("Newton-Schulz: singular values pulled to about 1, transposition commutes, float follows double") {
  const int rows = 24, cols = 40;
  auto g = random_matrix(rows, cols, 3);
  for (int r = 0; r < rows; ++r)  // rows of very different norms: an ill-conditioned input
    for (int c = 0; c < cols; ++c) g[r * cols + c] *= 1.0 + 4.0 * r / rows;
  std::vector<double> out(g.size()), work(kernels::newton_schulz_work(rows, cols));
  kernels::newton_schulz(g.data(), out.data(), rows, cols, kernels::kNewtonSchulzSteps, work.data());
  // The quintic leaves every singular value in about [0.7, 1.2]: each Rayleigh quotient v^T O O^T v
  // of a unit vector lies in [0.49, 1.44]. The input's (at the same Frobenius norm) spread far wider.
  const auto a = gram(out, rows, cols), a_in = gram(g, rows, cols);
  double in_trace = 0;
  for (int i = 0; i < rows; ++i) in_trace += a_in[i * rows + i];
  const auto quotient = [rows](const std::vector<double>& m, const std::vector<double>& v) {
    double q = 0;
    for (int i = 0; i < rows; ++i)
      for (int j = 0; j < rows; ++j) q += v[i] * m[i * rows + j] * v[j];
    return q;
  };
  double lo = 1e9, hi = 0, in_lo = 1e9, in_hi = 0;
  for (unsigned trial = 0; trial < 200; ++trial) {
    auto v = random_matrix(1, rows, 100 + trial);
    // Half the trials along a basis vector: the extremes of the diagonal too.
    if (trial % 2) std::fill(v.begin(), v.end(), 0.0), v[trial % rows] = 1.0;
    double norm = 0;
    for (double x : v) norm += x * x;
    for (double& x : v) x /= std::sqrt(norm);
    const double q = quotient(a, v), q_in = quotient(a_in, v) * rows / in_trace;
    lo = std::min(lo, q), hi = std::max(hi, q), in_lo = std::min(in_lo, q_in), in_hi = std::max(in_hi, q_in);
  }
  CHECK(lo > 0.45);
  CHECK(hi < 1.5);
  CHECK(in_hi / in_lo > 2 * hi / lo);
  // The tall shape is done on its transpose: NS(G^T) = NS(G)^T.
  std::vector<double> gt(g.size()), outt(g.size());
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) gt[c * rows + r] = g[r * cols + c];
  kernels::newton_schulz(gt.data(), outt.data(), cols, rows, kernels::kNewtonSchulzSteps, work.data());
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) CHECK(outt[c * rows + r] == doctest::Approx(out[r * cols + c]).epsilon(1e-9));
  // The production float path against the double reference.
  std::vector<float> gf(g.begin(), g.end()), outf(g.size()), workf(work.size());
  kernels::newton_schulz(gf.data(), outf.data(), rows, cols, kernels::kNewtonSchulzSteps, workf.data());
  double worst = 0;
  for (std::size_t i = 0; i < out.size(); ++i) worst = std::max(worst, std::abs(outf[i] - out[i]));
  CHECK(worst < 1e-4);
}

TEST_CASE("Muon: the layers' matrices take the orthogonalized momentum, AdamW keeps the rest, nothing overlaps") {
  const auto layout = ParamLayout::of(kTiny);
  const auto ranges = ranges_without_muon(layout);
  std::vector<int> owner(layout.total(), 0);
  for (const auto& r : ranges)
    for (std::size_t i = r.offset; i < r.offset + r.count; ++i) ++owner[i];
  std::size_t muon_values = 0;
  for (const auto& v : layout.views()) {
    CAPTURE(v.name);
    const bool muon = muon_takes(v);
    CHECK(muon == (v.name.find("weight") != std::string::npos && v.shape.size() == 2 && v.name.rfind("h.", 0) == 0));
    if (muon) muon_values += v.numel;
    for (std::size_t i = v.offset; i < v.offset + v.numel; ++i) CHECK(owner[i] == (muon ? 0 : 1));
  }
  CHECK(muon_values > 0);

  // One step from zero momentum with Nesterov: u = g + mu * g; the matrix moves by
  // lr * (0.2 sqrt(max(r, c)) NS(u) + wd W).
  std::vector<float> params(layout.total(), 0.5f), grads(layout.total()), momentum(layout.total(), 0.0f);
  for (std::size_t i = 0; i < grads.size(); ++i) grads[i] = std::sin(0.37f * static_cast<float>(i));
  const auto before = params;
  Muon muon(layout, {0.95f, true, kernels::kNewtonSchulzSteps, 0.1f});
  muon.step(params, grads, momentum, 0.01f);
  const auto& w = layout.at("h.0.mlp.c_fc.weight");
  const int rows = static_cast<int>(w.shape[0]), cols = static_cast<int>(w.shape[1]);
  std::vector<float> u(w.numel), o(w.numel), work(kernels::newton_schulz_work(rows, cols));
  for (std::size_t i = 0; i < w.numel; ++i) u[i] = 1.95f * grads[w.offset + i];
  kernels::newton_schulz(u.data(), o.data(), rows, cols, kernels::kNewtonSchulzSteps, work.data());
  const float scale = 0.2f * std::sqrt(static_cast<float>(std::max(rows, cols)));
  for (std::size_t i = 0; i < w.numel; ++i) {
    CHECK(params[w.offset + i] == doctest::Approx(0.5f - 0.01f * (scale * o[i] + 0.1f * 0.5f)).epsilon(1e-5));
    CHECK(momentum[w.offset + i] == grads[w.offset + i]);
  }
  const auto& wte = layout.at("wte.weight");
  for (std::size_t i = wte.offset; i < wte.offset + wte.numel; ++i) CHECK(params[i] == before[i]);
}
