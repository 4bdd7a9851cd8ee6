// Parity suite: every CUDA kernel against its CPU twin on the same random inputs.
// Tolerances (worst |gpu - cpu| over max |cpu|):
//   fp32 (T = float): 1e-5; the codecs, the hash and the encoder backward: bit-identical.
//   bf16 (T = __nv_bfloat16): inputs are bf16 values (the CPU twin gets the same values in fp32);
//     bf16 outputs 3e-2 (a few bf16 roundings of 2^-9 each, chained), fp32 outputs (weight
//     gradients, losses, statistics) 1e-4.
// Every case starts by looking for a device and skips, with a message, where there is none, so
// the suite passes on CPU-only machines and runs as it is on a GPU machine.
#include <cuda_bf16.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/util/rng.hpp"
#include "kernels/cpu/adamw.hpp"
#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/chunk_hash.hpp"
#include "kernels/cpu/cross_entropy.hpp"
#include "kernels/cpu/elementwise.hpp"
#include "kernels/cpu/encoder.hpp"
#include "kernels/cpu/gelu.hpp"
#include "kernels/cpu/layernorm.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/newton_schulz.hpp"
#include "kernels/cuda/adamw.hpp"
#include "kernels/cuda/attention.hpp"
#include "kernels/cuda/attention_tiled.hpp"
#include "kernels/cuda/block_codec.hpp"
#include "kernels/cuda/chunk_hash.hpp"
#include "kernels/cuda/cross_entropy.hpp"
#include "kernels/cuda/device_buffer.hpp"
#include "kernels/cuda/elementwise.hpp"
#include "kernels/cuda/encoder.hpp"
#include "kernels/cuda/gelu.hpp"
#include "kernels/cuda/layernorm.hpp"
#include "kernels/cuda/matmul.hpp"
#include "kernels/cuda/newton_schulz.hpp"
#include "crosssite/codec/codec.hpp"
#include "crosssite/codec/error_feedback.hpp"
#include "tests/support/cuda_kernel_parity.hpp"

using namespace meridian;
using namespace meridian::testing::kernel_parity;

TEST_CASE_TEMPLATE("GELU and add move 16 bytes a thread where aligned, with the same bits as one element a thread", T,
                   float, bf16) {
  if (!have_gpu()) return;
  const std::size_t n = 1001;  // whole packs and a tail
  auto x = inputs<T>(n, 41), y = inputs<T>(n, 42);
  std::vector<float> x_late(1, 0.0f), y_late(1, 0.0f);  // the same values one element later: no pointer aligned
  x_late.insert(x_late.end(), x.begin(), x.end());
  y_late.insert(y_late.end(), y.begin(), y.end());
  auto d_x = upload<T>(x), d_y = upload<T>(y), d_x_late = upload<T>(x_late), d_y_late = upload<T>(y_late);
  const auto run = [&](const T* xs, const T* ys, std::size_t at) {
    DeviceBuffer<T> g(n + at), dg(n + at), sum(n + at);
    gpu::gelu_forward(g.data() + at, xs, n, nullptr);
    gpu::gelu_backward(dg.data() + at, xs, ys, n, nullptr);
    gpu::add(sum.data() + at, xs, ys, n, nullptr);
    std::vector<std::vector<float>> out;
    for (auto* b : {&g, &dg, &sum}) {
      const auto all = download(*b);
      out.emplace_back(all.begin() + static_cast<std::ptrdiff_t>(at), all.end());
    }
    return out;
  };
  CHECK(run(d_x.data(), d_y.data(), 0) == run(d_x_late.data() + 1, d_y_late.data() + 1, 1));
}

TEST_CASE_TEMPLATE(
    "products with their bias in cuBLASLt's epilogue match the CPU, both layouts, at aligned and odd sizes", T, float,
    bf16) {
  if (!have_gpu()) return;
  struct Shape {
    int N, IN, OUT;
  };
  // GPT-2's proportions at a small size, then sizes no 16-byte vector divides.
  for (const Shape& sh : {Shape{128, 64, 192}, Shape{37, 45, 51}}) {
    CAPTURE(sh.OUT);
    const int N = sh.N, IN = sh.IN, OUT = sh.OUT;
    auto inp = inputs<T>(N * IN, 31), w = inputs<T>(IN * OUT, 32, 0.2f), bias = inputs<T>(OUT, 33);
    std::vector<float> out(N * OUT), out_nt(N * OUT);
    cpu::matmul_forward(out.data(), inp.data(), w.data(), bias.data(), N, IN, OUT);
    cpu::matmul_nt_forward(out_nt.data(), inp.data(), w.data(), bias.data(), N, IN, OUT);
    gpu::Blas blas;
    auto d_inp = upload<T>(inp), d_w = upload<T>(w), d_bias = upload<T>(bias);
    DeviceBuffer<T> d_out(N * OUT), d_out_nt(N * OUT);
    gpu::matmul_forward(blas, d_out.data(), d_inp.data(), d_w.data(), d_bias.data(), N, IN, OUT);
    gpu::matmul_nt_forward(blas, d_out_nt.data(), d_inp.data(), d_w.data(), d_bias.data(), N, IN, OUT);
    MESSAGE("products through cuBLASLt's bias epilogue: " << blas.lt_products << " of 2");
    for (const auto& refused : blas.lt_refusals) MESSAGE("cuBLASLt refused an algorithm it offered: " << refused);
    if (OUT % 64 == 0) CHECK(blas.lt_products == 2);  // the aligned shape must take the epilogue
    CHECK_CLOSE(download(d_out), out, tol<T>());
    CHECK_CLOSE(download(d_out_nt), out_nt, tol<T>());
  }
}

TEST_CASE_TEMPLATE("matmul (Conv1D and tied-head layouts) forward and backward match the CPU", T, float, bf16) {
  if (!have_gpu()) return;
  const int N = 64, IN = 48, OUT = 80;
  auto inp = inputs<T>(N * IN, 1), w = inputs<T>(IN * OUT, 2, 0.2f), bias = inputs<T>(OUT, 3);
  auto dout = inputs<T>(N * OUT, 4), dw0 = inputs<float>(IN * OUT, 5), db0 = inputs<float>(OUT, 6);
  std::vector<float> out(N * OUT), dinp(N * IN), dw = dw0, db = db0;
  cpu::matmul_forward(out.data(), inp.data(), w.data(), bias.data(), N, IN, OUT);
  cpu::matmul_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), w.data(), N, IN, OUT);

  gpu::Blas blas;
  auto d_inp = upload<T>(inp), d_w = upload<T>(w), d_bias = upload<T>(bias), d_dout = upload<T>(dout);
  DeviceBuffer<T> d_out(N * OUT), d_dinp(N * IN);
  DeviceBuffer<float> d_dw(dw0), d_db(db0);
  gpu::matmul_forward(blas, d_out.data(), d_inp.data(), d_w.data(), d_bias.data(), N, IN, OUT);
  gpu::matmul_backward(blas, d_dinp.data(), d_dw.data(), d_db.data(), d_dout.data(), d_inp.data(), d_w.data(), N, IN,
                       OUT);
  CHECK_CLOSE(download(d_out), out, tol<T>());
  CHECK_CLOSE(download(d_dinp), dinp, tol<T>());
  CHECK_CLOSE(d_dw.download(), dw, wide_tol<T>());
  CHECK_CLOSE(d_db.download(), db, wide_tol<T>());

  // The tied head: weight stored (OUT, IN).
  std::vector<float> out_nt(N * OUT), dinp_nt(N * IN), dw_nt = dw0;
  cpu::matmul_nt_forward(out_nt.data(), inp.data(), w.data(), static_cast<const float*>(nullptr), N, IN, OUT);
  cpu::matmul_nt_backward(dinp_nt.data(), dw_nt.data(), static_cast<float*>(nullptr), dout.data(), inp.data(), w.data(), N,
                          IN, OUT);
  DeviceBuffer<float> d_dw_nt(dw0);
  gpu::matmul_nt_forward(blas, d_out.data(), d_inp.data(), d_w.data(), static_cast<const T*>(nullptr), N, IN, OUT);
  gpu::matmul_nt_backward(blas, d_dinp.data(), d_dw_nt.data(), nullptr, d_dout.data(), d_inp.data(), d_w.data(), N, IN,
                          OUT);
  CHECK_CLOSE(download(d_out), out_nt, tol<T>());
  CHECK_CLOSE(download(d_dinp), dinp_nt, tol<T>());
  CHECK_CLOSE(d_dw_nt.download(), dw_nt, wide_tol<T>());
}

TEST_CASE_TEMPLATE("encoder forward matches the CPU, its backward is bit-identical to it", T, float, bf16) {
  if (!have_gpu()) return;
  const int B = 4, Tn = 16, C = 24, V = 50;  // 64 positions over 50 tokens: many repeats
  const auto tok = random_tokens(B * Tn, V, 7);
  auto wte = inputs<T>(V * C, 8), wpe = inputs<T>(Tn * C, 9), dout = inputs<T>(B * Tn * C, 10);
  auto dwte0 = inputs<float>(V * C, 11), dwpe0 = inputs<float>(Tn * C, 12);
  std::vector<float> out(B * Tn * C), dwte = dwte0, dwpe = dwpe0;
  cpu::encoder_forward(out.data(), tok.data(), wte.data(), wpe.data(), B, Tn, C);
  cpu::encoder_backward(dwte.data(), dwpe.data(), dout.data(), tok.data(), B, Tn, C);

  DeviceBuffer<std::int32_t> d_tok(tok);
  auto d_wte = upload<T>(wte), d_wpe = upload<T>(wpe), d_dout = upload<T>(dout);
  DeviceBuffer<T> d_out(B * Tn * C);
  DeviceBuffer<float> d_dwte(dwte0), d_dwpe(dwpe0);
  gpu::encoder_forward(d_out.data(), d_tok.data(), d_wte.data(), d_wpe.data(), B, Tn, C, nullptr);
  gpu::encoder_backward(d_dwte.data(), d_dwpe.data(), d_dout.data(), d_tok.data(), B, Tn, C, nullptr);
  CHECK_CLOSE(download(d_out), out, tol<T>());
  CHECK(d_dwte.download() == dwte);
  CHECK(d_dwpe.download() == dwpe);
}

TEST_CASE_TEMPLATE("layernorm forward and backward match the CPU", T, float, bf16) {
  if (!have_gpu()) return;
  const int N = 37, C = 72;
  auto inp = inputs<T>(N * C, 20, 2.0f), w = inputs<T>(C, 21), b = inputs<T>(C, 22), dout = inputs<T>(N * C, 23);
  auto dinp0 = inputs<T>(N * C, 24), dw0 = inputs<float>(C, 25), db0 = inputs<float>(C, 26);
  std::vector<float> out(N * C), mean(N), rstd(N), dinp = dinp0, dw = dw0, db = db0;
  cpu::layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), w.data(), b.data(), N, C);
  cpu::layernorm_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), w.data(), mean.data(),
                          rstd.data(), N, C);

  auto d_inp = upload<T>(inp), d_w = upload<T>(w), d_b = upload<T>(b), d_dout = upload<T>(dout);
  auto d_dinp = upload<T>(dinp0);
  DeviceBuffer<T> d_out(N * C);
  DeviceBuffer<float> d_mean(N), d_rstd(N), d_dw(dw0), d_db(db0);
  gpu::layernorm_forward(d_out.data(), d_mean.data(), d_rstd.data(), d_inp.data(), d_w.data(), d_b.data(), N, C,
                         nullptr);
  gpu::layernorm_backward(d_dinp.data(), d_dw.data(), d_db.data(), d_dout.data(), d_inp.data(), d_w.data(),
                          d_mean.data(), d_rstd.data(), N, C, nullptr);
  CHECK_CLOSE(download(d_out), out, tol<T>());
  CHECK_CLOSE(d_mean.download(), mean, wide_tol<T>());
  CHECK_CLOSE(d_rstd.download(), rstd, wide_tol<T>());
  CHECK_CLOSE(download(d_dinp), dinp, tol<T>());
  CHECK_CLOSE(d_dw.download(), dw, wide_tol<T>());
  CHECK_CLOSE(d_db.download(), db, wide_tol<T>());
}

TEST_CASE_TEMPLATE("GELU forward and backward, and the residual add, match the CPU", T, float, bf16) {
  if (!have_gpu()) return;
  const std::size_t n = 1003;
  auto x = inputs<T>(n, 30, 3.0f), dout = inputs<T>(n, 31), y = inputs<T>(n, 32);
  std::vector<float> out(n), dinp(n), sum(n);
  cpu::gelu_forward(out.data(), x.data(), n);
  cpu::gelu_backward(dinp.data(), x.data(), dout.data(), n);
  cpu::add(sum.data(), x.data(), y.data(), n);
  auto d_x = upload<T>(x), d_dout = upload<T>(dout), d_y = upload<T>(y);
  DeviceBuffer<T> d_out(n), d_dinp(n), d_sum(n);
  gpu::gelu_forward(d_out.data(), d_x.data(), n, nullptr);
  gpu::gelu_backward(d_dinp.data(), d_x.data(), d_dout.data(), n, nullptr);
  gpu::add(d_sum.data(), d_x.data(), d_y.data(), n, nullptr);
  CHECK_CLOSE(download(d_out), out, tol<T>());
  CHECK_CLOSE(download(d_dinp), dinp, tol<T>());
  CHECK_CLOSE(download(d_sum), sum, tol<T>());
}

TEST_CASE_TEMPLATE("causal attention forward and backward match the CPU", T, float, bf16) {
  if (!have_gpu()) return;
  const int B = 2, Tn = 33, C = 64, NH = 4;  // T not a multiple of the warp
  auto qkv = inputs<T>(B * Tn * 3 * C, 40), dout = inputs<T>(B * Tn * C, 41);
  std::vector<float> out(B * Tn * C), att(B * NH * Tn * Tn), dqkv(qkv.size());
  cpu::attention_forward(out.data(), att.data(), qkv.data(), B, Tn, NH, NH, C / NH);
  cpu::attention_backward(dqkv.data(), dout.data(), qkv.data(), att.data(), B, Tn, NH, NH, C / NH);

  gpu::Blas blas;
  auto d_qkv = upload<T>(qkv), d_dout = upload<T>(dout);
  DeviceBuffer<T> d_out(out.size()), d_att(att.size()), d_dqkv(qkv.size());
  gpu::attention_forward(blas, d_out.data(), d_att.data(), d_qkv.data(), B, Tn, NH, NH, C / NH);
  gpu::attention_backward(blas, d_dqkv.data(), d_dout.data(), d_qkv.data(), d_att.data(), B, Tn, NH, NH, C / NH);
  const auto got_att = download(d_att);
  CHECK_CLOSE(got_att, att, tol<T>());
  for (int row = 0; row < B * NH * Tn; ++row)  // masked entries exactly zero
    for (int j = row % Tn + 1; j < Tn; ++j) REQUIRE(got_att[static_cast<std::size_t>(row) * Tn + j] == 0.0f);
  CHECK_CLOSE(download(d_out), out, tol<T>());
  CHECK_CLOSE(download(d_dqkv), dqkv, tol<T>());
}

TEST_CASE_TEMPLATE("tiled attention matches the CPU without keeping the probabilities", T, float, bf16) {
  if (!have_gpu()) return;
  // Tn spans several key tiles and ends mid-tile and mid-block; hs = 16 (fewer channels than
  // lanes) and hs = 96 (three per lane) exercise both sides of the per-lane split.
  for (const auto [Tn, C, NH] : {std::array{70, 64, 4}, std::array{33, 192, 2}}) {
    CAPTURE(Tn);
    const int B = 2;
    auto qkv = inputs<T>(B * Tn * 3 * C, 42), dout = inputs<T>(B * Tn * C, 43);
    std::vector<float> out(B * Tn * C), att(B * NH * Tn * Tn), dqkv(qkv.size());
    cpu::attention_forward(out.data(), att.data(), qkv.data(), B, Tn, NH, NH, C / NH);
    cpu::attention_backward(dqkv.data(), dout.data(), qkv.data(), att.data(), B, Tn, NH, NH, C / NH);

    auto d_qkv = upload<T>(qkv), d_dout = upload<T>(dout);
    DeviceBuffer<T> d_out(out.size()), d_dqkv(qkv.size());
    DeviceBuffer<float> d_lse(static_cast<std::size_t>(B) * NH * Tn);
    gpu::attention_tiled_forward(d_out.data(), d_lse.data(), d_qkv.data(), B, Tn, C, NH, nullptr);
    gpu::attention_tiled_backward(d_dqkv.data(), d_dout.data(), d_out.data(), d_qkv.data(), d_lse.data(), B, Tn, C,
                                  NH, nullptr);
    CHECK_CLOSE(download(d_out), out, tol<T>());
    CHECK_CLOSE(download(d_dqkv), dqkv, tol<T>());
  }
}

TEST_CASE_TEMPLATE("fused cross-entropy matches the CPU, in place too", T, float, bf16) {
  if (!have_gpu()) return;
  const int N = 7, V = 1000;  // V above the block size: the row loops
  auto logits = inputs<T>(N * V, 50, 3.0f);
  const auto targets = random_tokens(N, V, 51);
  const float dloss = 1.0f / N;
  std::vector<float> losses(N), dlogits(N * V);
  cpu::cross_entropy_forward_backward(dlogits.data(), losses.data(), logits.data(), targets.data(), N, V, dloss);

  DeviceBuffer<std::int32_t> d_targets(targets);
  auto d_logits = upload<T>(logits);
  DeviceBuffer<T> d_dlogits(N * V);
  DeviceBuffer<float> d_losses(N), d_losses_fwd(N);
  gpu::cross_entropy_forward(d_losses_fwd.data(), d_logits.data(), d_targets.data(), N, V, nullptr);
  gpu::cross_entropy_forward_backward(d_dlogits.data(), d_losses.data(), d_logits.data(), d_targets.data(), N, V,
                                      dloss, nullptr);
  CHECK_CLOSE(d_losses_fwd.download(), losses, wide_tol<T>());
  CHECK_CLOSE(d_losses.download(), losses, wide_tol<T>());
  CHECK_CLOSE(download(d_dlogits), dlogits, tol<T>());
  // dlogits aliasing logits, as the model calls it.
  gpu::cross_entropy_forward_backward(d_logits.data(), d_losses.data(), d_logits.data(), d_targets.data(), N, V,
                                      dloss, nullptr);
  CHECK_CLOSE(d_losses.download(), losses, wide_tol<T>());
  CHECK_CLOSE(download(d_logits), dlogits, tol<T>());
}

TEST_CASE_TEMPLATE("the output layer over logits rows of a padded stride matches the CPU and leaves the padding alone",
                   T, float, bf16) {
  if (!have_gpu()) return;
  const int N = 7, C = 48, V = 1000, ld = 1024;  // as 50,257 -> 50,304: rows 16-byte aligned
  auto inp = inputs<T>(N * C, 70), w = inputs<T>(V * C, 71, 0.2f), dw0 = inputs<float>(V * C, 72);
  const auto targets = random_tokens(N, V, 73);
  const float dloss = 1.0f / N;
  std::vector<float> logits(N * V), losses(N), dinp(N * C), dw = dw0;
  cpu::matmul_nt_forward(logits.data(), inp.data(), w.data(), static_cast<const float*>(nullptr), N, C, V);
  cpu::cross_entropy_forward_backward(logits.data(), losses.data(), logits.data(), targets.data(), N, V, dloss);
  cpu::matmul_nt_backward(dinp.data(), dw.data(), static_cast<float*>(nullptr), logits.data(), inp.data(), w.data(), N,
                          C, V);

  gpu::Blas blas;
  auto d_inp = upload<T>(inp), d_w = upload<T>(w);
  auto d_logits = upload<T>(std::vector<float>(static_cast<std::size_t>(N) * ld, 7.0f));  // the padding's mark
  DeviceBuffer<std::int32_t> d_targets(targets);
  DeviceBuffer<T> d_dinp(N * C);
  DeviceBuffer<float> d_losses(N), d_dw(dw0);
  gpu::matmul_nt_forward(blas, d_logits.data(), d_inp.data(), d_w.data(), static_cast<const T*>(nullptr), N, C, V, ld);
  gpu::cross_entropy_forward_backward(d_logits.data(), d_losses.data(), d_logits.data(), d_targets.data(), N, V, dloss,
                                      nullptr, ld);
  gpu::matmul_nt_backward(blas, d_dinp.data(), d_dw.data(), nullptr, d_logits.data(), d_inp.data(), d_w.data(), N, C, V,
                          ld);
  const auto padded = download(d_logits);
  std::vector<float> dlogits;
  for (int n = 0; n < N; ++n) {
    dlogits.insert(dlogits.end(), padded.begin() + n * ld, padded.begin() + n * ld + V);
    for (int i = V; i < ld; ++i) REQUIRE(padded[static_cast<std::size_t>(n) * ld + i] == 7.0f);
  }
  CHECK_CLOSE(d_losses.download(), losses, wide_tol<T>());
  CHECK_CLOSE(dlogits, logits, tol<T>());
  CHECK_CLOSE(download(d_dinp), dinp, tol<T>());
  CHECK_CLOSE(d_dw.download(), dw, wide_tol<T>());
}

TEST_CASE("fused AdamW matches the CPU and writes the bf16 copy of the new weights") {
  if (!have_gpu()) return;
  const std::size_t n = 10007;
  auto param = inputs<float>(n, 60), grad = inputs<float>(n, 61), m = inputs<float>(n, 62, 0.1f);
  auto v = inputs<float>(n, 63, 0.01f);
  for (auto& x : v) x = std::abs(x);
  const cpu::AdamWStep step{1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 3};
  DeviceBuffer<float> d_param(param), d_grad(grad), d_m(m), d_v(v);
  DeviceBuffer<bf16> d_copy(n);
  cpu::adamw_update(param.data(), grad.data(), m.data(), v.data(), n, step);
  gpu::adamw_update(d_param.data(), d_grad.data(), d_m.data(), d_v.data(), n, step, d_copy.data(), nullptr);
  const auto got = d_param.download();
  CHECK_CLOSE(got, param, 1e-6);
  CHECK_CLOSE(d_m.download(), m, 1e-6);
  CHECK_CLOSE(d_v.download(), v, 1e-6);
  const auto copy = download(d_copy);
  for (std::size_t i = 0; i < n; ++i) REQUIRE(copy[i] == round_bf16(got[i]));
}

TEST_CASE("Muon's Newton-Schulz iteration matches the CPU, wide and tall") {
  if (!have_gpu()) return;
  for (const auto& [rows, cols] : {std::pair{128, 512}, std::pair{512, 128}, std::pair{96, 96}}) {
    CAPTURE(rows);
    CAPTURE(cols);
    const auto g = inputs<float>(static_cast<std::size_t>(rows) * cols, 70 + rows);
    std::vector<float> want(g.size()), work(cpu::newton_schulz_work(rows, cols));
    cpu::newton_schulz(g.data(), want.data(), rows, cols, cpu::kNewtonSchulzSteps, work.data());
    gpu::Blas blas;
    DeviceBuffer<float> d_g(g), d_out(g.size()), d_work(work.size());
    gpu::newton_schulz(blas, d_g.data(), d_out.data(), rows, cols, cpu::kNewtonSchulzSteps, d_work.data());
    CHECK_CLOSE(d_out.download(), want, 1e-4);  // five chained products in fp32, summed in other orders
  }
}

TEST_CASE("gradient norm, scaling and fp16 unscaling with overflow detection match the CPU") {
  if (!have_gpu()) return;
  const std::size_t n = 1'000'003;
  auto g = inputs<float>(n, 70);
  DeviceBuffer<float> d_g(g);
  const double want = cpu::sum_squares(g.data(), n), got = gpu::sum_squares(d_g.data(), n, nullptr);
  CHECK(std::abs(got - want) <= 1e-12 * want);
  CHECK(gpu::sum_squares(d_g.data(), n, nullptr) == got);  // deterministic run to run

  cpu::scale(g.data(), n, 0.25f);
  gpu::scale(d_g.data(), n, 0.25f, nullptr);
  CHECK(d_g.download() == g);  // one multiply per element: exact

  CHECK(gpu::unscale_gradients(d_g.data(), n, 0.5f, nullptr));
  cpu::scale(g.data(), n, 0.5f);
  CHECK(d_g.download() == g);
  g[n / 3] = std::numeric_limits<float>::infinity();
  d_g.upload(g);
  CHECK_FALSE(gpu::unscale_gradients(d_g.data(), n, 0.5f, nullptr));
}

TEST_CASE("the device parameter hash equals the CPU's chunked hash, for every size") {
  if (!have_gpu()) return;
  Rng rng(80);
  for (std::size_t n : {std::size_t{0}, std::size_t{3}, std::size_t{4096}, std::size_t{4097},
                        std::size_t{(1 << 20) + 5}}) {
    std::vector<unsigned char> bytes(n);
    for (auto& b : bytes) b = static_cast<unsigned char>(rng.next_u64());
    DeviceBuffer<unsigned char> d(bytes);
    INFO("n=", n);
    CHECK(gpu::chunked_hash64(d.data(), n, nullptr) == cpu::chunked_hash64(bytes.data(), n));
  }
}

TEST_CASE("int8/int4 device codecs write the CPU codec's bytes, error feedback keeps its residual") {
  if (!have_gpu()) return;
  const std::size_t n = 1001, block = 64;
  for (const CodecKind kind : {CodecKind::Int8, CodecKind::Int4}) {
    const int bits = kind == CodecKind::Int8 ? 8 : 4;
    INFO("bits=", bits);
    const CodecOptions options{kind, static_cast<int>(block)};
    const std::size_t bytes = encoded_size(n, options), payload = bytes - kCodecHeaderBytes;
    ErrorFeedback feedback(n);
    DeviceBuffer<float> d_residual(std::vector<float>(n, 0.0f));
    DeviceBuffer<std::uint32_t> d_out((payload + 3) / 4);
    for (int round = 0; round < 3; ++round) {
      auto x = inputs<float>(n, 90 + round, 0.01f);
      std::fill(x.begin(), x.begin() + block, 0.0f);                       // a zero block
      for (std::size_t i = block; i < 2 * block; ++i) x[i] *= 1e-40f;      // a subnormal block
      const auto cpu_bytes = feedback.encode(x, options);
      DeviceBuffer<float> d_x(x);
      REQUIRE(gpu::encode_blockwise(bits, d_x.data(), d_residual.data(), n, block, d_out.data(), nullptr));
      const auto words = d_out.download();
      CHECK(std::memcmp(words.data(), cpu_bytes.data() + kCodecHeaderBytes, payload) == 0);
      const auto residual = d_residual.download();
      CHECK(std::equal(residual.begin(), residual.end(), feedback.residual().begin()));

      std::vector<float> decoded(n);
      decode(cpu_bytes, decoded);
      DeviceBuffer<float> d_decoded(n);
      REQUIRE(gpu::decode_blockwise(bits, d_out.data(), n, block, d_decoded.data(), nullptr));
      CHECK(d_decoded.download() == decoded);
    }
    // A non-finite value: refused, and the residual is left as it was.
    auto bad = inputs<float>(n, 99);
    bad[n - 1] = std::numeric_limits<float>::quiet_NaN();
    DeviceBuffer<float> d_bad(bad);
    const auto residual_before = d_residual.download();
    CHECK_FALSE(gpu::encode_blockwise(bits, d_bad.data(), d_residual.data(), n, block, d_out.data(), nullptr));
    CHECK(d_residual.download() == residual_before);
    // A negative scale in the payload: refused by the decoder.
    auto words = d_out.download();
    words[1] = std::bit_cast<std::uint32_t>(-1.0f);
    d_out.upload(words);
    DeviceBuffer<float> d_decoded(n);
    CHECK_FALSE(gpu::decode_blockwise(bits, d_out.data(), n, block, d_decoded.data(), nullptr));
  }
}
