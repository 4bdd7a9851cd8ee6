// The Llama family's CPU kernels (RMSNorm, rotary embeddings, SwiGLU) against double-precision
// central finite differences, and each float kernel against the same kernel in double.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "kernels/cpu/rmsnorm.hpp"
#include "kernels/cpu/rope.hpp"
#include "kernels/cpu/swiglu.hpp"
#include "tests/kernels/gradcheck.hpp"

using namespace meridian;
using namespace meridian::kernels;
using meridian::testing::dot;
using meridian::testing::gradcheck;
using meridian::testing::random_vector;
using meridian::testing::rel_diff;
using meridian::testing::to_float;

namespace {
constexpr double kGradTol = 1e-7;   // double-precision finite differences
constexpr double kFloatTol = 1e-4;  // float kernel vs double kernel
}  // namespace

TEST_CASE("rmsnorm: forward is w * x / rms(x), backward matches finite differences, float matches double") {
  const int N = 5, C = 12;
  const double eps = 1e-5;
  auto inp = random_vector(N * C, 1), w = random_vector(C, 2), r = random_vector(N * C, 3);
  std::vector<double> out(N * C), rstd(N);
  auto loss = [&] {
    rmsnorm_forward(out.data(), rstd.data(), inp.data(), w.data(), N, C, eps);
    return dot(out, r);
  };
  loss();
  double ss = 0;
  for (int c = 0; c < C; ++c) ss += inp[c] * inp[c];
  CHECK(out[3] == doctest::Approx(w[3] * inp[3] / std::sqrt(ss / C + eps)).epsilon(1e-14));
  std::vector<double> dinp(N * C, 0), dw(C, 0);
  rmsnorm_backward(dinp.data(), dw.data(), r.data(), inp.data(), w.data(), rstd.data(), N, C);
  CHECK(gradcheck(inp, dinp, loss) < kGradTol);
  CHECK(gradcheck(w, dw, loss) < kGradTol);

  auto fi = to_float(inp), fw = to_float(w), fr = to_float(r);
  std::vector<float> fout(N * C), frstd(N), fdinp(N * C, 0), fdw(C, 0);
  rmsnorm_forward(fout.data(), frstd.data(), fi.data(), fw.data(), N, C, eps);
  rmsnorm_backward(fdinp.data(), fdw.data(), fr.data(), fi.data(), fw.data(), frstd.data(), N, C);
  loss();
  CHECK(rel_diff(fout, out) < kFloatTol);
  CHECK(rel_diff(fdinp, dinp) < kFloatTol);
  CHECK(rel_diff(fdw, dw) < kFloatTol);
}

TEST_CASE("rope: rotate-half pairs turned by t * inv_freq, backward matches finite differences") {
  const int B = 2, Tn = 5, heads = 3, hs = 6, ld = 20;  // heads at the front of a wider row
  const std::vector<double> inv_freq = {1.0, 0.1, 0.01};
  std::vector<double> cos(Tn * hs / 2), sin(cos.size());
  rope_table(cos.data(), sin.data(), inv_freq, Tn);
  CHECK(cos[0] == 1.0);
  CHECK(sin[(2 * 3) + 1] == doctest::Approx(std::sin(static_cast<double>(2.0f * 0.1f))).epsilon(1e-15));

  auto x = random_vector(B * Tn * ld, 4), r = random_vector(B * Tn * ld, 5);
  std::vector<double> y(x.size());
  auto loss = [&] {
    y = x;
    rope_forward(y.data(), cos.data(), sin.data(), B, Tn, heads, hs, ld);
    return dot(y, r);
  };
  loss();
  // Position 3 of batch 1, head 2, pair 1: channels 2*6+1 and 2*6+4.
  const std::size_t row = (1 * Tn + 3) * ld, a = row + 2 * hs + 1, b = a + hs / 2;
  const double angle = static_cast<double>(3.0f * 0.1f);
  CHECK(y[a] == doctest::Approx(x[a] * std::cos(angle) - x[b] * std::sin(angle)).epsilon(1e-12));
  CHECK(y[b] == doctest::Approx(x[b] * std::cos(angle) + x[a] * std::sin(angle)).epsilon(1e-12));
  CHECK(y[row + heads * hs] == x[row + heads * hs]);  // beyond the heads: untouched

  std::vector<double> dx = r;  // d(loss)/dy = r, so dx is r turned back
  rope_backward(dx.data(), cos.data(), sin.data(), B, Tn, heads, hs, ld);
  CHECK(gradcheck(x, dx, loss) < kGradTol);
}

TEST_CASE("swiglu: silu(g) * u, backward matches finite differences, float matches double") {
  const int N = 4, F = 7;
  auto gu = random_vector(N * 2 * F, 6, 3.0), r = random_vector(N * F, 7);
  std::vector<double> out(N * F);
  auto loss = [&] {
    swiglu_forward(out.data(), gu.data(), N, F);
    return dot(out, r);
  };
  loss();
  const double g = gu[2 * F + 3], u = gu[2 * F + F + 3];
  CHECK(out[F + 3] == doctest::Approx(g / (1 + std::exp(-g)) * u).epsilon(1e-14));
  std::vector<double> dgu(gu.size());
  swiglu_backward(dgu.data(), gu.data(), r.data(), N, F);
  CHECK(gradcheck(gu, dgu, loss) < kGradTol);

  auto fgu = to_float(gu), fr = to_float(r);
  std::vector<float> fout(out.size()), fdgu(gu.size());
  swiglu_forward(fout.data(), fgu.data(), N, F);
  swiglu_backward(fdgu.data(), fgu.data(), fr.data(), N, F);
  CHECK(rel_diff(fout, out) < kFloatTol);
  CHECK(rel_diff(fdgu, dgu) < kFloatTol);
}
