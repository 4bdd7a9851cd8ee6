// Parity suite of the Llama family's CUDA kernels against their CPU twins on the same random
// inputs: RMSNorm, rotary embeddings, SwiGLU, grouped-query attention (and multi-query), and the
// Linear-layout product with Qwen 2's bias. Tolerances as tests/support/cuda_kernel_parity.hpp.
// Every case skips, with a message, where there is no device.
#include <cuda_bf16.h>
#include <doctest/doctest.h>

#include <cmath>
#include <utility>
#include <vector>

#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/rmsnorm.hpp"
#include "kernels/cpu/rope.hpp"
#include "kernels/cpu/swiglu.hpp"
#include "kernels/cuda/attention.hpp"
#include "kernels/cuda/matmul.hpp"
#include "kernels/cuda/rmsnorm.hpp"
#include "kernels/cuda/rope.hpp"
#include "kernels/cuda/swiglu.hpp"
#include "tests/support/cuda_kernel_parity.hpp"

using namespace meridian;
using namespace meridian::testing::kernel_parity;

TEST_CASE_TEMPLATE("rmsnorm forward and backward match the CPU", T, float, bf16) {
  if (!have_gpu()) return;
  const int N = 37, C = 72;
  const float eps = 1e-5f;
  auto inp = inputs<T>(N * C, 1), w = inputs<T>(C, 2), dout = inputs<T>(N * C, 3), dinp0 = inputs<T>(N * C, 4);
  auto dw0 = inputs<float>(C, 5);
  std::vector<float> out(N * C), rstd(N), dinp = dinp0, dw = dw0;
  cpu::rmsnorm_forward(out.data(), rstd.data(), inp.data(), w.data(), N, C, eps);
  cpu::rmsnorm_backward(dinp.data(), dw.data(), dout.data(), inp.data(), w.data(), rstd.data(), N, C);

  auto d_inp = upload<T>(inp), d_w = upload<T>(w), d_dout = upload<T>(dout), d_dinp = upload<T>(dinp0);
  DeviceBuffer<T> d_out(N * C);
  DeviceBuffer<float> d_rstd(N), d_dw(dw0);
  gpu::rmsnorm_forward(d_out.data(), d_rstd.data(), d_inp.data(), d_w.data(), N, C, eps, nullptr);
  gpu::rmsnorm_backward(d_dinp.data(), d_dw.data(), d_dout.data(), d_inp.data(), d_w.data(), d_rstd.data(), N, C, nullptr);
  CHECK_CLOSE(download(d_out), out, tol<T>());
  CHECK_CLOSE(d_rstd.download(), rstd, wide_tol<T>());
  CHECK_CLOSE(download(d_dinp), dinp, tol<T>());
  CHECK_CLOSE(d_dw.download(), dw, wide_tol<T>());
}

TEST_CASE_TEMPLATE("rotary embeddings forward and backward match the CPU, heads inside a wider row", T, float, bf16) {
  if (!have_gpu()) return;
  const int B = 2, Tn = 33, heads = 3, hs = 16, ld = 5 * hs;  // q of 3 heads at the front of a q|k|v row
  std::vector<double> inv_freq(hs / 2);
  for (int i = 0; i < hs / 2; ++i) inv_freq[i] = std::pow(10000.0, -2.0 * i / hs);
  std::vector<float> cos(Tn * hs / 2), sin(cos.size());
  cpu::rope_table(cos.data(), sin.data(), inv_freq, Tn);
  const auto x0 = inputs<T>(B * Tn * ld, 6);
  std::vector<float> x = x0, dx = x0;
  cpu::rope_forward(x.data(), cos.data(), sin.data(), B, Tn, heads, hs, ld);
  cpu::rope_backward(dx.data(), cos.data(), sin.data(), B, Tn, heads, hs, ld);

  DeviceBuffer<float> d_cos(cos), d_sin(sin);
  auto d_x = upload<T>(x0), d_dx = upload<T>(x0);
  gpu::rope_forward(d_x.data(), d_cos.data(), d_sin.data(), B, Tn, heads, hs, ld, nullptr);
  gpu::rope_backward(d_dx.data(), d_cos.data(), d_sin.data(), B, Tn, heads, hs, ld, nullptr);
  CHECK_CLOSE(download(d_x), x, tol<T>());
  CHECK_CLOSE(download(d_dx), dx, tol<T>());
}

TEST_CASE_TEMPLATE("swiglu forward and backward match the CPU", T, float, bf16) {
  if (!have_gpu()) return;
  const int N = 45, F = 96;
  auto gate_up = inputs<T>(N * 2 * F, 7, 2.0f), dout = inputs<T>(N * F, 8);
  std::vector<float> out(N * F), dgate_up(N * 2 * F);
  cpu::swiglu_forward(out.data(), gate_up.data(), N, F);
  cpu::swiglu_backward(dgate_up.data(), gate_up.data(), dout.data(), N, F);
  auto d_gate_up = upload<T>(gate_up), d_dout = upload<T>(dout);
  DeviceBuffer<T> d_out(out.size()), d_dgate_up(dgate_up.size());
  gpu::swiglu_forward(d_out.data(), d_gate_up.data(), N, F, nullptr);
  gpu::swiglu_backward(d_dgate_up.data(), d_gate_up.data(), d_dout.data(), N, F, nullptr);
  CHECK_CLOSE(download(d_out), out, tol<T>());
  CHECK_CLOSE(download(d_dgate_up), dgate_up, tol<T>());
}

TEST_CASE_TEMPLATE("grouped-query and multi-query attention forward and backward match the CPU", T, float, bf16) {
  if (!have_gpu()) return;
  const int B = 2, Tn = 33, hs = 16;
  for (const auto& [NH, KV] : {std::pair{4, 2}, std::pair{4, 1}, std::pair{6, 3}}) {
    CAPTURE(NH);
    CAPTURE(KV);
    const int width = (NH + 2 * KV) * hs;
    auto qkv = inputs<T>(B * Tn * width, 9), dout = inputs<T>(B * Tn * NH * hs, 10);
    std::vector<float> out(B * Tn * NH * hs), att(B * NH * Tn * Tn), dqkv(qkv.size());
    cpu::attention_forward(out.data(), att.data(), qkv.data(), B, Tn, NH, KV, hs);
    cpu::attention_backward(dqkv.data(), dout.data(), qkv.data(), att.data(), B, Tn, NH, KV, hs);

    gpu::Blas blas;
    auto d_qkv = upload<T>(qkv), d_dout = upload<T>(dout);
    DeviceBuffer<T> d_out(out.size()), d_att(att.size()), d_dqkv(qkv.size());
    gpu::attention_forward(blas, d_out.data(), d_att.data(), d_qkv.data(), B, Tn, NH, KV, hs);
    gpu::attention_backward(blas, d_dqkv.data(), d_dout.data(), d_qkv.data(), d_att.data(), B, Tn, NH, KV, hs);
    CHECK_CLOSE(download(d_att), att, tol<T>());
    CHECK_CLOSE(download(d_out), out, tol<T>());
    CHECK_CLOSE(download(d_dqkv), dqkv, tol<T>());
  }
}

TEST_CASE_TEMPLATE("the Linear-layout product with a bias (Qwen 2's q/k/v) matches the CPU", T, float, bf16) {
  if (!have_gpu()) return;
  const int N = 64, IN = 48, OUT = 80;
  auto inp = inputs<T>(N * IN, 11), w = inputs<T>(OUT * IN, 12, 0.2f), bias = inputs<T>(OUT, 13);
  auto dout = inputs<T>(N * OUT, 14), dw0 = inputs<float>(OUT * IN, 15), db0 = inputs<float>(OUT, 16);
  std::vector<float> out(N * OUT), dinp(N * IN), dw = dw0, db = db0;
  cpu::matmul_nt_forward(out.data(), inp.data(), w.data(), bias.data(), N, IN, OUT);
  cpu::matmul_nt_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), w.data(), N, IN, OUT);
  gpu::Blas blas;
  auto d_inp = upload<T>(inp), d_w = upload<T>(w), d_bias = upload<T>(bias), d_dout = upload<T>(dout);
  DeviceBuffer<T> d_out(N * OUT), d_dinp(N * IN);
  DeviceBuffer<float> d_dw(dw0), d_db(db0);
  gpu::matmul_nt_forward(blas, d_out.data(), d_inp.data(), d_w.data(), d_bias.data(), N, IN, OUT);
  gpu::matmul_nt_backward(blas, d_dinp.data(), d_dw.data(), d_db.data(), d_dout.data(), d_inp.data(), d_w.data(), N, IN,
                          OUT);
  CHECK_CLOSE(download(d_out), out, tol<T>());
  CHECK_CLOSE(download(d_dinp), dinp, tol<T>());
  CHECK_CLOSE(d_dw.download(), dw, wide_tol<T>());
  CHECK_CLOSE(d_db.download(), db, wide_tol<T>());
}
