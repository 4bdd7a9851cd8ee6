// Every CPU kernel's backward against double-precision central finite differences, and every
// float kernel against the same kernel in double (the reference).
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/cross_entropy.hpp"
#include "kernels/cpu/elementwise.hpp"
#include "kernels/cpu/encoder.hpp"
#include "kernels/cpu/gelu.hpp"
#include "kernels/cpu/layernorm.hpp"
#include "kernels/cpu/matmul.hpp"
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

TEST_CASE("layernorm backward matches finite differences, float matches double") {
  const int N = 5, C = 12;
  auto inp = random_vector(N * C, 1), w = random_vector(C, 2), b = random_vector(C, 3), r = random_vector(N * C, 4);
  std::vector<double> out(N * C), mean(N), rstd(N);
  auto loss = [&] {
    layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), w.data(), b.data(), N, C);
    return dot(out, r);
  };
  loss();
  std::vector<double> dinp(N * C, 0), dw(C, 0), db(C, 0);
  layernorm_backward(dinp.data(), dw.data(), db.data(), r.data(), inp.data(), w.data(), mean.data(), rstd.data(), N, C);
  CHECK(gradcheck(inp, dinp, loss) < kGradTol);
  CHECK(gradcheck(w, dw, loss) < kGradTol);
  CHECK(gradcheck(b, db, loss) < kGradTol);

  auto fi = to_float(inp), fw = to_float(w), fb = to_float(b), fr = to_float(r);
  std::vector<float> fout(N * C), fmean(N), frstd(N), fdinp(N * C, 0), fdw(C, 0), fdb(C, 0);
  layernorm_forward(fout.data(), fmean.data(), frstd.data(), fi.data(), fw.data(), fb.data(), N, C);
  layernorm_backward(fdinp.data(), fdw.data(), fdb.data(), fr.data(), fi.data(), fw.data(), fmean.data(), frstd.data(),
                     N, C);
  loss();
  CHECK(rel_diff(fout, out) < kFloatTol);
  CHECK(rel_diff(fdinp, dinp) < kFloatTol);
  CHECK(rel_diff(fdw, dw) < kFloatTol);
}

TEST_CASE("matmul (Conv1D layout) backward matches finite differences, float matches double") {
  const int N = 6, IN = 7, OUT = 9;
  auto inp = random_vector(N * IN, 5), w = random_vector(IN * OUT, 6), bias = random_vector(OUT, 7),
       r = random_vector(N * OUT, 8);
  std::vector<double> out(N * OUT);
  auto loss = [&] {
    matmul_forward(out.data(), inp.data(), w.data(), bias.data(), N, IN, OUT);
    return dot(out, r);
  };
  loss();
  std::vector<double> dinp(N * IN, 0), dw(IN * OUT, 0), db(OUT, 0);
  matmul_backward(dinp.data(), dw.data(), db.data(), r.data(), inp.data(), w.data(), N, IN, OUT);
  CHECK(gradcheck(inp, dinp, loss) < kGradTol);
  CHECK(gradcheck(w, dw, loss) < kGradTol);
  CHECK(gradcheck(bias, db, loss) < kGradTol);

  auto fi = to_float(inp), fw = to_float(w), fb = to_float(bias), fr = to_float(r);
  std::vector<float> fout(N * OUT), fdinp(N * IN, 0), fdw(IN * OUT, 0), fdb(OUT, 0);
  matmul_forward(fout.data(), fi.data(), fw.data(), fb.data(), N, IN, OUT);
  matmul_backward(fdinp.data(), fdw.data(), fdb.data(), fr.data(), fi.data(), fw.data(), N, IN, OUT);
  CHECK(rel_diff(fout, out) < kFloatTol);
  CHECK(rel_diff(fdinp, dinp) < kFloatTol);
  CHECK(rel_diff(fdw, dw) < kFloatTol);
  CHECK(rel_diff(fdb, db) < kFloatTol);
}

TEST_CASE("matmul with (out,in) weights (Linear layout, the tied head) matches finite differences, with and without bias") {
  const int N = 4, IN = 5, OUT = 11;
  for (const bool with_bias : {false, true}) {
    CAPTURE(with_bias);
    auto inp = random_vector(N * IN, 9), w = random_vector(OUT * IN, 10), bias = random_vector(OUT, 20),
         r = random_vector(N * OUT, 11);
    std::vector<double> out(N * OUT);
    auto loss = [&] {
      matmul_nt_forward(out.data(), inp.data(), w.data(), with_bias ? bias.data() : nullptr, N, IN, OUT);
      return dot(out, r);
    };
    loss();
    std::vector<double> dinp(N * IN, 0), dw(OUT * IN, 0), db(OUT, 0);
    matmul_nt_backward(dinp.data(), dw.data(), with_bias ? db.data() : nullptr, r.data(), inp.data(), w.data(), N, IN,
                       OUT);
    CHECK(gradcheck(inp, dinp, loss) < kGradTol);
    CHECK(gradcheck(w, dw, loss) < kGradTol);
    if (with_bias) CHECK(gradcheck(bias, db, loss) < kGradTol);
  }
}

TEST_CASE("causal attention (multi-head and grouped-query) backward matches finite differences, float matches double") {
  const int B = 2, Tn = 5, hs = 4;
  for (const auto& [NH, KV] : {std::pair{2, 2}, std::pair{4, 2}, std::pair{4, 1}}) {
    CAPTURE(NH);
    CAPTURE(KV);
    const int width = (NH + 2 * KV) * hs;
    auto qkv = random_vector(B * Tn * width, 12), r = random_vector(B * Tn * NH * hs, 13);
    std::vector<double> out(B * Tn * NH * hs), att(B * NH * Tn * Tn);
    auto loss = [&] {
      attention_forward(out.data(), att.data(), qkv.data(), B, Tn, NH, KV, hs);
      return dot(out, r);
    };
    loss();
    // causality: the first position attends only to itself
    CHECK(att[0] == doctest::Approx(1.0));
    CHECK(att[1] == 0.0);
    std::vector<double> dqkv(qkv.size());
    attention_backward(dqkv.data(), r.data(), qkv.data(), att.data(), B, Tn, NH, KV, hs);
    CHECK(gradcheck(qkv, dqkv, loss) < kGradTol);

    auto fq = to_float(qkv), fr = to_float(r);
    std::vector<float> fout(out.size()), fatt(att.size()), fdqkv(qkv.size());
    attention_forward(fout.data(), fatt.data(), fq.data(), B, Tn, NH, KV, hs);
    attention_backward(fdqkv.data(), fr.data(), fq.data(), fatt.data(), B, Tn, NH, KV, hs);
    CHECK(rel_diff(fout, out) < kFloatTol);
    CHECK(rel_diff(fdqkv, dqkv) < kFloatTol);
  }
}

TEST_CASE("grouped-query attention equals multi-head attention with each key/value head repeated") {
  const int B = 2, Tn = 4, hs = 2, NH = 4, KV = 2;
  const auto gqa = random_vector(B * Tn * (NH + 2 * KV) * hs, 21);
  std::vector<double> mha(B * Tn * 3 * NH * hs);  // q | k | v with KV heads spread over NH
  for (int bt = 0; bt < B * Tn; ++bt)
    for (int h = 0; h < NH; ++h)
      for (int i = 0; i < hs; ++i) {
        const double* src = gqa.data() + bt * (NH + 2 * KV) * hs;
        double* dst = mha.data() + bt * 3 * NH * hs;
        dst[h * hs + i] = src[h * hs + i];
        dst[(NH + h) * hs + i] = src[(NH + h / (NH / KV)) * hs + i];
        dst[(2 * NH + h) * hs + i] = src[(NH + KV + h / (NH / KV)) * hs + i];
      }
  std::vector<double> out_gqa(B * Tn * NH * hs), out_mha(out_gqa.size()), att(B * NH * Tn * Tn);
  attention_forward(out_gqa.data(), att.data(), gqa.data(), B, Tn, NH, KV, hs);
  attention_forward(out_mha.data(), att.data(), mha.data(), B, Tn, NH, NH, hs);
  CHECK(rel_diff(out_gqa, out_mha) < 1e-14);
}

TEST_CASE("gelu backward matches finite differences, float matches double over a wide range") {
  const int n = 200;
  auto inp = random_vector(n, 14, 3.0), r = random_vector(n, 15);
  std::vector<double> out(n);
  auto loss = [&] {
    gelu_forward(out.data(), inp.data(), n);
    return dot(out, r);
  };
  loss();
  std::vector<double> dinp(n);
  gelu_backward(dinp.data(), inp.data(), r.data(), n);
  CHECK(gradcheck(inp, dinp, loss) < kGradTol);

  auto fi = to_float(inp), fr = to_float(r);
  std::vector<float> fout(n), fdinp(n);
  gelu_forward(fout.data(), fi.data(), n);
  gelu_backward(fdinp.data(), fi.data(), fr.data(), n);
  CHECK(rel_diff(fout, out) < kFloatTol);
  CHECK(rel_diff(fdinp, dinp) < kFloatTol);
  // saturation far out in the tails
  float big[2] = {-40.0f, 40.0f}, g[2];
  gelu_forward(g, big, 2);
  CHECK(g[0] == doctest::Approx(0.0f));
  CHECK(g[1] == doctest::Approx(40.0f));
}

TEST_CASE("fused softmax cross-entropy: gradient matches finite differences, float matches double") {
  const int N = 4, V = 13;
  auto logits = random_vector(N * V, 16, 2.0);
  const std::vector<std::int32_t> targets = {0, 12, 5, 5};
  std::vector<double> losses(N), dlogits(N * V);
  auto loss = [&] {
    cross_entropy_forward(losses.data(), logits.data(), targets.data(), N, V);
    double s = 0;
    for (double l : losses) s += l;
    return s;
  };
  const double total = loss();
  cross_entropy_forward_backward(dlogits.data(), losses.data(), logits.data(), targets.data(), N, V, 1.0);
  double fused_total = 0;
  for (double l : losses) fused_total += l;
  CHECK(fused_total == doctest::Approx(total).epsilon(1e-12));
  CHECK(gradcheck(logits, dlogits, loss) < kGradTol);

  auto fl = to_float(logits);
  std::vector<float> flosses(N);
  cross_entropy_forward_backward(fl.data(), flosses.data(), fl.data(), targets.data(), N, V, 1.0f);  // in place
  loss();
  CHECK(rel_diff(flosses, losses) < kFloatTol);
  CHECK(rel_diff(fl, dlogits) < kFloatTol);
}

TEST_CASE("encoder backward matches finite differences, including repeated tokens, with and without positions") {
  const int B = 2, Tn = 3, C = 4, V = 5;
  for (const bool positions : {true, false}) {
    CAPTURE(positions);
    auto wte = random_vector(V * C, 17), wpe = random_vector(Tn * C, 18), r = random_vector(B * Tn * C, 19);
    const std::vector<std::int32_t> tokens = {1, 3, 1, 4, 1, 0};
    std::vector<double> out(B * Tn * C);
    auto loss = [&] {
      encoder_forward(out.data(), tokens.data(), wte.data(), positions ? wpe.data() : nullptr, B, Tn, C);
      return dot(out, r);
    };
    loss();
    std::vector<double> dwte(V * C, 0), dwpe(Tn * C, 0);
    encoder_backward(dwte.data(), positions ? dwpe.data() : nullptr, r.data(), tokens.data(), B, Tn, C);
    CHECK(gradcheck(wte, dwte, loss) < kGradTol);
    if (positions) CHECK(gradcheck(wpe, dwpe, loss) < kGradTol);
    if (!positions) CHECK(out[0] == wte[C]);  // token 1's row, nothing added
  }
}

TEST_CASE("sum_squares is independent of the thread count and exact on a known vector") {
  std::vector<float> x(1000);
  for (int i = 0; i < 1000; ++i) x[i] = static_cast<float>(i % 7) - 3.0f;
  double expect = 0;
  for (float v : x) expect += static_cast<double>(v) * v;
  CHECK(sum_squares(x.data(), x.size()) == expect);
}
