// crosssite/outer: the weighted mean of site deltas and the outer optimizer, against values computed
// by hand, and the bit-reproducibility every site relies on when it applies the same commit.
#include <doctest/doctest.h>

#include "tests/support/error_of.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "core/checkpoint/checkpoint.hpp"
#include "core/util/error.hpp"
#include "crosssite/outer/delta_mean.hpp"
#include "crosssite/outer/outer_optimizer.hpp"

using namespace meridian;

namespace {

using Vec = std::vector<float>;

using meridian::testing::error_of;

Vec mean_of(const std::vector<Vec>& deltas, const std::vector<double>& weights) {
  std::vector<std::span<const float>> views(deltas.begin(), deltas.end());
  Vec out(deltas.empty() ? 0 : deltas[0].size());
  weighted_mean(views, weights, out);
  return out;
}

Vec random_vec(std::size_t n, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  Vec v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

bool bit_equal(const Vec& a, const Vec& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("weighted mean with unequal weights matches a hand value") {
  // weights 1, 2, 1: (1*1 + 2*3 + 1*5) / 4 = 3 and (1*2 + 2*4 - 1*6) / 4 = 1.
  const Vec out = mean_of({{1, 2}, {3, 4}, {5, -6}}, {1, 2, 1});
  CHECK(out == Vec{3, 1});
  // A zero weight leaves its delta out entirely.
  CHECK(mean_of({{1, 2}, {100, 100}}, {3, 0}) == Vec{1, 2});
}

TEST_CASE("weighted mean is bit-identical across calls and independent of blocking") {
  std::mt19937 rng(7);
  const std::size_t n = 2500;  // spans several blocks and a partial one
  const std::vector<Vec> deltas{random_vec(n, rng), random_vec(n, rng), random_vec(n, rng)};
  const std::vector<double> weights{1.5, 0.25, 3.0};
  const Vec first = mean_of(deltas, weights);
  CHECK(bit_equal(first, mean_of(deltas, weights)));

  // The same sum, element by element, in the listed order.
  const double total = 1.5 + 0.25 + 3.0;
  Vec expected(n);
  for (std::size_t j = 0; j < n; ++j) {
    double acc = 0;
    for (std::size_t i = 0; i < deltas.size(); ++i) acc += weights[i] / total * deltas[i][j];
    expected[j] = static_cast<float>(acc);
  }
  CHECK(bit_equal(first, expected));
}

TEST_CASE("weighted mean rejects bad input and leaves out untouched") {
  const Vec a{1, 2, 3}, b{4, 5, 6};
  Vec out{7, 7, 7};
  const auto mean = [&](std::vector<std::span<const float>> deltas, std::vector<double> weights) {
    return error_of(ErrorKind::Data, [&] { weighted_mean(deltas, weights, out); });
  };
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();

  CHECK(mean({a, b}, {1}).find("2 deltas but 1 weights") != std::string::npos);
  const Vec short_delta{1, 2};
  CHECK(mean({a, short_delta}, {1, 1}).find("delta 1 has 2 values, expected 3") != std::string::npos);
  CHECK(mean({a, b}, {1, -1}).find("weight 1") != std::string::npos);
  CHECK(mean({a, b}, {nan, 1}).find("weight 0") != std::string::npos);
  CHECK(mean({a, b}, {inf, 1}).find("weight 0") != std::string::npos);
  CHECK(mean({a, b}, {0, 0}).find("sum to 0") != std::string::npos);
  CHECK(mean({}, {}).find("sum to 0") != std::string::npos);
  const double big = std::numeric_limits<double>::max();
  CHECK(mean({a, b}, {big, big}).find("sum to inf") != std::string::npos);

  Vec bad = b;
  bad[2] = std::numeric_limits<float>::quiet_NaN();
  CHECK(mean({a, bad}, {1, 1}).find("delta 1 has non-finite value nan at index 2") != std::string::npos);
  bad[2] = -std::numeric_limits<float>::infinity();
  CHECK(mean({bad, a}, {1, 1}).find("delta 0 has non-finite value -inf at index 2") != std::string::npos);
  // Even a delta whose weight is zero must be sound: it is corrupt data, not a dropped site.
  CHECK(mean({a, bad}, {1, 0}).find("delta 1") != std::string::npos);

  CHECK(out == Vec{7, 7, 7});
}

TEST_CASE("staleness weights") {
  CHECK(staleness_weight(100, 0) == 100.0);
  CHECK(staleness_weight(100, 1) == 50.0);
  CHECK(staleness_weight(100, 3) == 25.0);
  CHECK(staleness_weight(100, 4) == 20.0);  // the default max_staleness: still counted
  CHECK(staleness_weight(100, 5) == 0.0);   // beyond it: dropped
  CHECK(staleness_weight(0, 0) == 0.0);

  const StalenessOptions constant{StalenessDecay::Constant, 2};
  CHECK(staleness_weight(100, 0, constant) == 100.0);
  CHECK(staleness_weight(100, 2, constant) == 100.0);
  CHECK(staleness_weight(100, 3, constant) == 0.0);

  const StalenessOptions fresh_only{StalenessDecay::Inverse, 0};
  CHECK(staleness_weight(100, 0, fresh_only) == 100.0);
  CHECK(staleness_weight(100, 1, fresh_only) == 0.0);

  error_of(ErrorKind::Data, [] { staleness_weight(-1, 0); });
  error_of(ErrorKind::Data, [] { staleness_weight(1, -1); });
}

TEST_CASE("Nesterov outer steps match a hand computation") {
  // lr 0.5, momentum 0.5, so every value is exact in float.
  // Element 0, d = 1, 0.5, -1:  m = 1, 1, -0.5;  update = 1.5, 1, -1.25;  p = 1 -> 0.25, -0.25, 0.375
  // Element 1, d = 2, 0, 0:     m = 2, 1, 0.5;   update = 3, 0.5, 0.25;   p = 0 -> -1.5, -1.75, -1.875
  OuterOptimizer opt(2, {0.5f, 0.5f, true});
  Vec p{1, 0};
  opt.step(p, Vec{1, 2});
  CHECK(p == Vec{0.25f, -1.5f});
  opt.step(p, Vec{0.5f, 0});
  CHECK(p == Vec{-0.25f, -1.75f});
  opt.step(p, Vec{-1, 0});
  CHECK(p == Vec{0.375f, -1.875f});
  CHECK(Vec(opt.momentum_buffer().begin(), opt.momentum_buffer().end()) == Vec{-0.5f, 0.5f});
  CHECK(opt.steps_taken() == 3);
}

TEST_CASE("default outer options: Nesterov, lr 0.7, momentum 0.9") {
  // d = 1 each step, p0 = 0: m = 1, 1.9, 2.71; update = 1.9, 2.71, 3.439;
  // p = -1.33, -3.227, -5.6343.
  OuterOptimizer opt(1);
  CHECK(opt.options().lr == 0.7f);
  CHECK(opt.options().momentum == 0.9f);
  CHECK(opt.options().nesterov);
  Vec p{0};
  const Vec d{1};
  opt.step(p, d);
  CHECK(p[0] == doctest::Approx(-1.33).epsilon(1e-6));
  opt.step(p, d);
  CHECK(p[0] == doctest::Approx(-3.227).epsilon(1e-6));
  opt.step(p, d);
  CHECK(p[0] == doctest::Approx(-5.6343).epsilon(1e-6));
}

TEST_CASE("heavy-ball momentum without Nesterov") {
  // lr 0.5, momentum 0.5, d = 1, 0.5, -1: m = 1, 1, -0.5; p = 1 -> 0.5, 0, 0.25.
  OuterOptimizer opt(1, {0.5f, 0.5f, false});
  Vec p{1};
  opt.step(p, Vec{1});
  CHECK(p[0] == 0.5f);
  opt.step(p, Vec{0.5f});
  CHECK(p[0] == 0.0f);
  opt.step(p, Vec{-1});
  CHECK(p[0] == 0.25f);
}

TEST_CASE("plain SGD with lr 1 subtracts the mean delta, i.e. averages the sites' weights") {
  // Hand sequence: p = 3 -> 3 - 1 = 2 -> 2 + 0.5 = 2.5 -> 2.5 - 4 = -1.5.
  OuterOptimizer sgd(1, {1.0f, 0.0f, true});
  Vec p{3};
  sgd.step(p, Vec{1});
  CHECK(p[0] == 2.0f);
  sgd.step(p, Vec{-0.5f});
  CHECK(p[0] == 2.5f);
  sgd.step(p, Vec{4});
  CHECK(p[0] == -1.5f);
  CHECK(sgd.momentum_buffer()[0] == 4.0f);  // momentum 0 keeps only the last delta

  // With H = 1 the outer step is plain averaging: base - mean(base - local_i) == mean(local_i).
  std::mt19937 rng(11);
  const std::size_t n = 1000;
  const Vec base = random_vec(n, rng);
  std::vector<Vec> locals, deltas;
  for (int site = 0; site < 3; ++site) {
    Vec local = random_vec(n, rng), delta(n);
    for (std::size_t j = 0; j < n; ++j) delta[j] = base[j] - local[j];
    locals.push_back(local);
    deltas.push_back(delta);
  }
  const std::vector<double> weights{1, 1, 1};
  Vec global = base;
  OuterOptimizer averaging(n, {1.0f, 0.0f, true});
  averaging.step(global, mean_of(deltas, weights));
  const Vec average = mean_of(locals, weights);
  for (std::size_t j = 0; j < n; ++j) CHECK(global[j] == doctest::Approx(average[j]).epsilon(1e-5).scale(1));
}

TEST_CASE("momentum warmup ramps the momentum from 0 over its steps, then holds it") {
  // lr 1, momentum 0.5 over 2 steps: mu = 0, 0.25, 0.5, 0.5. d = 1 every step, p0 = 0:
  // m = 1, 1.25, 1.625, 1.8125; update = d + mu * m = 1, 1.3125, 1.8125, 1.90625;
  // p = -1, -2.3125, -4.125, -6.03125 (every value exact in float).
  OuterOptions o{1.0f, 0.5f, true};
  o.momentum_warmup = 2;
  OuterOptimizer opt(1, o);
  Vec p{0};
  const Vec expected{-1.0f, -2.3125f, -4.125f, -6.03125f};
  for (const float e : expected) {
    opt.step(p, Vec{1});
    CHECK(p[0] == e);
  }
  CHECK(opt.momentum_buffer()[0] == 1.8125f);

  // The ramp follows the step count, so a resumed run ramps on where it stopped.
  OuterOptimizer first(1, o);
  Vec q{0};
  first.step(q, Vec{1});
  Checkpoint saved;
  first.save(saved, "outer.m", "outer.steps");
  OuterOptimizer resumed(1, o);
  resumed.restore(decode_checkpoint(encode_checkpoint(saved), "test"), "outer.m", "outer.steps");
  for (int k = 1; k < 4; ++k) resumed.step(q, Vec{1});
  CHECK(q[0] == expected.back());

  // Delayed Nesterov takes the ramped momentum too: with delay 2 and warmup 2 the first update of
  // the momentum (step 2, mu 0.25) is m = 0.25 * 0 + (1 + 1) / 2 = 1, p = -0.5 - (0.5 + 0.25) = -1.25.
  OuterOptions delayed = o;
  delayed.delay = 2;
  OuterOptimizer dn(1, delayed);
  Vec r{0};
  dn.step(r, Vec{1});
  CHECK(r[0] == -0.5f);
  dn.step(r, Vec{1});
  CHECK(r[0] == -1.25f);
}

TEST_CASE("outer options are validated") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  error_of(ErrorKind::Config, [] { OuterOptimizer(1, {0.0f, 0.9f, true}); });
  error_of(ErrorKind::Config, [&] { OuterOptimizer(1, {nan, 0.9f, true}); });
  error_of(ErrorKind::Config, [] { OuterOptimizer(1, {0.7f, 1.0f, true}); });
  error_of(ErrorKind::Config, [] { OuterOptimizer(1, {0.7f, -0.1f, true}); });
  error_of(ErrorKind::Config, [&] { OuterOptimizer(1, {0.7f, nan, true}); });
  OuterOptions warmup{0.7f, 0.6f, true};
  warmup.momentum_warmup = -1;
  CHECK(error_of(ErrorKind::Config, [&] { OuterOptimizer(1, warmup); }).find("momentum_warmup -1") != std::string::npos);
}

TEST_CASE("checkpoint round trip: a resumed run equals an uninterrupted one bit for bit") {
  std::mt19937 rng(3);
  const std::size_t n = 300;
  std::vector<Vec> deltas;
  for (int k = 0; k < 5; ++k) deltas.push_back(random_vec(n, rng));
  const Vec start = random_vec(n, rng);

  OuterOptimizer straight(n);
  Vec p_straight = start;
  for (const auto& d : deltas) straight.step(p_straight, d);

  OuterOptimizer first(n);
  Vec p_resumed = start;
  for (int k = 0; k < 2; ++k) first.step(p_resumed, deltas[k]);
  Checkpoint saved;
  first.save(saved, "outer.m", "outer.steps");
  saved.put_pod("params", std::span<const float>(p_resumed));
  const Checkpoint loaded = decode_checkpoint(encode_checkpoint(saved), "test");

  OuterOptimizer resumed(n);
  resumed.restore(loaded, "outer.m", "outer.steps");
  CHECK(resumed.steps_taken() == 2);
  CHECK(bit_equal(Vec(resumed.momentum_buffer().begin(), resumed.momentum_buffer().end()),
                  Vec(first.momentum_buffer().begin(), first.momentum_buffer().end())));
  p_resumed = loaded.get_pod<float>("params");
  for (std::size_t k = 2; k < deltas.size(); ++k) resumed.step(p_resumed, deltas[k]);

  CHECK(bit_equal(p_resumed, p_straight));
  CHECK(bit_equal(Vec(resumed.momentum_buffer().begin(), resumed.momentum_buffer().end()),
                  Vec(straight.momentum_buffer().begin(), straight.momentum_buffer().end())));
  CHECK(resumed.steps_taken() == straight.steps_taken());
}

TEST_CASE("restore rejects mismatched records and keeps its state") {
  OuterOptimizer opt(2, {0.5f, 0.5f, true});
  Vec p{0, 0};
  opt.step(p, Vec{1, 2});
  const auto state_kept = [&] {
    CHECK(opt.steps_taken() == 1);
    CHECK(opt.momentum_buffer()[0] == 1.0f);
    CHECK(opt.momentum_buffer()[1] == 2.0f);
  };

  Checkpoint wrong_size;
  OuterOptimizer(3).save(wrong_size, "outer.m", "outer.steps");
  CHECK(error_of(ErrorKind::Checkpoint, [&] { opt.restore(wrong_size, "outer.m", "outer.steps"); })
            .find("holds 3 values, the model has 2") != std::string::npos);
  state_kept();

  Checkpoint missing;
  error_of(ErrorKind::Checkpoint, [&] { opt.restore(missing, "outer.m", "outer.steps"); });
  state_kept();

  Checkpoint narrow_steps;
  narrow_steps.put_pod("outer.m", std::span<const float>(Vec{0, 0}));
  narrow_steps.put_value("outer.steps", std::int32_t{5});
  error_of(ErrorKind::Checkpoint, [&] { opt.restore(narrow_steps, "outer.m", "outer.steps"); });
  state_kept();

  Checkpoint negative;
  negative.put_pod("outer.m", std::span<const float>(Vec{0, 0}));
  negative.put_value("outer.steps", std::int64_t{-1});
  error_of(ErrorKind::Checkpoint, [&] { opt.restore(negative, "outer.m", "outer.steps"); });
  state_kept();
}

TEST_CASE("delay 0 and 1 are the plain Nesterov step bit for bit") {
  std::mt19937 rng(5);
  const std::size_t n = 500;
  std::vector<Vec> deltas;
  for (int k = 0; k < 7; ++k) deltas.push_back(random_vec(n, rng));
  const Vec start = random_vec(n, rng);
  OuterOptimizer plain(n), delay0(n, {.delay = 0}), delay1(n, {.delay = 1});
  Vec p_plain = start, p0 = start, p1 = start;
  for (const auto& d : deltas) {
    plain.step(p_plain, d);
    delay0.step(p0, d);
    delay1.step(p1, d);
  }
  CHECK(bit_equal(p0, p_plain));
  CHECK(bit_equal(p1, p_plain));
  CHECK(delay1.delay_buffer().empty());
  CHECK(delay1.pending() == 0);
  // No extra records: a plain optimizer's checkpoint is what it always was.
  Checkpoint saved;
  delay1.save(saved, "outer.m", "outer.steps");
  CHECK(saved.names() == std::vector<std::string>{"outer.m", "outer.steps"});
}

TEST_CASE("delayed Nesterov matches a hand computation") {
  // lr 0.5, momentum 0.5, N = 2, one element, p0 = 1; every value is exact in float.
  // t=1, d=1:  b = 1, p -= 0.5 * (1/2) = 0.75, m stays 0.
  // t=2, d=3:  m = 0.5*0 + (1+3)/2 = 2;  p -= 0.5 * (3/2 + 0.5*2) = 1.25 -> -0.5;  b = 0.
  // t=3, d=2:  b = 2, p -= 0.5 * 1 -> -1.
  // t=4, d=-2: m = 0.5*2 + (2-2)/2 = 1;  p -= 0.5 * (-1 + 0.5) -> -0.75.
  OuterOptimizer opt(1, {.lr = 0.5f, .momentum = 0.5f, .nesterov = true, .delay = 2});
  Vec p{1};
  opt.step(p, Vec{1});
  CHECK(p[0] == 0.75f);
  CHECK(opt.momentum_buffer()[0] == 0.0f);
  CHECK(opt.delay_buffer()[0] == 1.0f);
  CHECK(opt.pending() == 1);
  opt.step(p, Vec{3});
  CHECK(p[0] == -0.5f);
  CHECK(opt.momentum_buffer()[0] == 2.0f);
  CHECK(opt.delay_buffer()[0] == 0.0f);
  CHECK(opt.pending() == 0);
  opt.step(p, Vec{2});
  CHECK(p[0] == -1.0f);
  opt.step(p, Vec{-2});
  CHECK(p[0] == -0.75f);
  CHECK(opt.momentum_buffer()[0] == 1.0f);
  CHECK(opt.steps_taken() == 4);
}

TEST_CASE("delayed Nesterov changes the momentum only every N-th step") {
  std::mt19937 rng(9);
  const std::size_t n = 64;
  const int N = 4;
  OuterOptimizer opt(n, {.delay = N});
  Vec p = random_vec(n, rng);
  Vec m_before(n, 0.0f);
  for (int t = 1; t <= 3 * N; ++t) {
    opt.step(p, random_vec(n, rng));
    const Vec m_now(opt.momentum_buffer().begin(), opt.momentum_buffer().end());
    if (t % N == 0) {
      CHECK_FALSE(bit_equal(m_now, m_before));
      CHECK(opt.pending() == 0);
    } else {
      CHECK(bit_equal(m_now, m_before));
      CHECK(opt.pending() == t % N);
    }
    m_before = m_now;
  }
}

TEST_CASE("delayed Nesterov over one cycle applies lr times the average delta plus the momentum term") {
  // With the same delta d every step, m after the first cycle is d, and p moves by
  // lr * (N * d/N + mu * d) = lr * (1 + mu) * d: one Nesterov step of the average.
  OuterOptimizer opt(1, {.lr = 0.5f, .momentum = 0.5f, .nesterov = true, .delay = 4});
  Vec p{0};
  for (int t = 0; t < 4; ++t) opt.step(p, Vec{2});
  CHECK(p[0] == -0.5f * 1.5f * 2.0f);
}

TEST_CASE("delay options are validated") {
  CHECK(error_of(ErrorKind::Config, [] { OuterOptimizer(1, {.delay = -1}); }).find("delay -1") != std::string::npos);
  CHECK(error_of(ErrorKind::Config, [] { OuterOptimizer(1, {.nesterov = false, .delay = 2}); })
            .find("needs nesterov") != std::string::npos);
  OuterOptimizer(1, {.nesterov = false, .delay = 1});  // delay 1 is plain: heavy ball is fine
}

TEST_CASE("delayed Nesterov resumed mid-cycle equals an uninterrupted run bit for bit") {
  std::mt19937 rng(13);
  const std::size_t n = 300;
  const OuterOptions options{.delay = 3};
  std::vector<Vec> deltas;
  for (int k = 0; k < 8; ++k) deltas.push_back(random_vec(n, rng));
  const Vec start = random_vec(n, rng);

  OuterOptimizer straight(n, options);
  Vec p_straight = start;
  for (const auto& d : deltas) straight.step(p_straight, d);

  OuterOptimizer first(n, options);
  Vec p_resumed = start;
  for (int k = 0; k < 4; ++k) first.step(p_resumed, deltas[k]);  // one into the second cycle
  REQUIRE(first.pending() == 1);
  Checkpoint saved;
  first.save(saved, "outer.momentum", "outer.steps");
  CHECK(saved.has("outer.momentum.buffer"));
  CHECK(saved.has("outer.momentum.pending"));
  saved.put_pod("params", std::span<const float>(p_resumed));
  const Checkpoint loaded = decode_checkpoint(encode_checkpoint(saved), "test");

  OuterOptimizer resumed(n, options);
  resumed.restore(loaded, "outer.momentum", "outer.steps");
  CHECK(resumed.pending() == 1);
  p_resumed = loaded.get_pod<float>("params");
  for (std::size_t k = 4; k < deltas.size(); ++k) resumed.step(p_resumed, deltas[k]);

  CHECK(bit_equal(p_resumed, p_straight));
  CHECK(bit_equal(Vec(resumed.momentum_buffer().begin(), resumed.momentum_buffer().end()),
                  Vec(straight.momentum_buffer().begin(), straight.momentum_buffer().end())));
  CHECK(bit_equal(Vec(resumed.delay_buffer().begin(), resumed.delay_buffer().end()),
                  Vec(straight.delay_buffer().begin(), straight.delay_buffer().end())));
  CHECK(resumed.pending() == straight.pending());
  CHECK(resumed.steps_taken() == straight.steps_taken());
}

TEST_CASE("delayed Nesterov restores old checkpoints and refuses bad delay records") {
  const OuterOptions options{.lr = 0.5f, .momentum = 0.5f, .nesterov = true, .delay = 2};
  // A checkpoint of plain Nesterov has no delay records: the buffer starts empty.
  Checkpoint old;
  OuterOptimizer(2, {0.5f, 0.5f, true}).save(old, "outer.m", "outer.steps");
  OuterOptimizer opt(2, options);
  Vec p{0, 0};
  opt.step(p, Vec{1, 1});
  opt.restore(old, "outer.m", "outer.steps");
  CHECK(opt.pending() == 0);
  CHECK(opt.delay_buffer()[0] == 0.0f);
  CHECK(opt.steps_taken() == 0);

  opt.step(p, Vec{1, 2});
  const auto state_kept = [&] {
    CHECK(opt.pending() == 1);
    CHECK(opt.delay_buffer()[1] == 2.0f);
  };
  Checkpoint wrong_size;
  OuterOptimizer(2, options).save(wrong_size, "outer.m", "outer.steps");
  wrong_size.put_pod("outer.m.buffer", std::span<const float>(Vec{1, 2, 3}));
  CHECK(error_of(ErrorKind::Checkpoint, [&] { opt.restore(wrong_size, "outer.m", "outer.steps"); })
            .find("\"outer.m.buffer\" holds 3 values") != std::string::npos);
  state_kept();
  Checkpoint negative;
  OuterOptimizer(2, options).save(negative, "outer.m", "outer.steps");
  negative.put_value("outer.m.pending", std::int64_t{-1});
  error_of(ErrorKind::Checkpoint, [&] { opt.restore(negative, "outer.m", "outer.steps"); });
  state_kept();
  Checkpoint no_pending;
  no_pending.put_pod("outer.m", std::span<const float>(Vec{0, 0}));
  no_pending.put_value("outer.steps", std::int64_t{0});
  no_pending.put_pod("outer.m.buffer", std::span<const float>(Vec{0, 0}));
  error_of(ErrorKind::Checkpoint, [&] { opt.restore(no_pending, "outer.m", "outer.steps"); });
  state_kept();
}

TEST_CASE("a smaller delay after a restore updates the momentum at once") {
  // Saved with N = 4 after 3 contributions, resumed with N = 2: the next step is a momentum step
  // over everything pending (divided by the new N).
  OuterOptimizer four(1, {.lr = 0.5f, .momentum = 0.5f, .nesterov = true, .delay = 4});
  Vec p{0};
  for (int t = 0; t < 3; ++t) four.step(p, Vec{1});
  Checkpoint saved;
  four.save(saved, "outer.m", "outer.steps");
  OuterOptimizer two(1, {.lr = 0.5f, .momentum = 0.5f, .nesterov = true, .delay = 2});
  two.restore(saved, "outer.m", "outer.steps");
  CHECK(two.pending() == 3);
  two.step(p, Vec{1});
  CHECK(two.pending() == 0);
  CHECK(two.momentum_buffer()[0] == 2.0f);  // 0.5 * 0 + (3 + 1) / 2
}

TEST_CASE("eager estimate: the site's fresh delta by its share, the others' counted when their deltas come") {
  const std::vector<float> fresh{3.0f, -3.0f, 0.0f};
  std::vector<float> out(3);
  eager_estimate(fresh, 1.0 / 3.0, out);
  CHECK(out[0] == doctest::Approx(1.0f));
  CHECK(out[1] == doctest::Approx(-1.0f));
  CHECK(out[2] == 0.0f);
  eager_estimate(fresh, 1.0, out);  // a job of one site: its delta is the mean
  CHECK(out == fresh);
  CHECK_THROWS_AS(eager_estimate(fresh, 0.5, std::span<float>(out).first(2)), InvariantError);
  CHECK_THROWS_AS(eager_estimate(fresh, 0.0, out), InvariantError);
  CHECK_THROWS_AS(eager_estimate(fresh, 1.5, out), InvariantError);
}
