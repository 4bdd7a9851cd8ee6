// cuDNN's flash attention (kernels/cuda/attention_cudnn) against the CPU's attention on the same
// bf16 inputs: multi-head with GPT-2's head size, grouped-query and multi-query with Llama's, a
// context that is not a multiple of any tile; and its backward run twice gives the same bits.
// Tolerances as tests/support/cuda_kernel_parity.hpp. Skipped, with a message, without a device
// or without the cuDNN library (it is optional at run time).
#include <cuda_bf16.h>
#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "kernels/cpu/attention.hpp"
#include "kernels/cuda/attention_cudnn.hpp"
#include "tests/support/cuda_kernel_parity.hpp"

using namespace meridian;
using namespace meridian::testing::kernel_parity;

namespace {

std::unique_ptr<gpu::CudnnAttention> open_cudnn() {
  auto opened = gpu::CudnnAttention::open(nullptr);
  if (const auto* why = std::get_if<std::string>(&opened)) {
    MESSAGE("skipped: cuDNN's attention is not available here: " << *why);
    return nullptr;
  }
  auto cudnn = std::move(std::get<std::unique_ptr<gpu::CudnnAttention>>(opened));
  MESSAGE("cuDNN " << cudnn->version());
  return cudnn;
}

}  // namespace

TEST_CASE("cuDNN's flash attention forward and backward match the CPU, multi-head and grouped-query") {
  if (!have_gpu()) return;
  const auto cudnn = open_cudnn();
  if (!cudnn) return;
  struct Case {
    int B, Tn, NH, KV, hs;
  };
  for (const Case& c : {Case{2, 64, 4, 4, 64}, Case{2, 33, 4, 2, 128}, Case{1, 100, 6, 1, 64}}) {
    CAPTURE(c.Tn);
    CAPTURE(c.NH);
    CAPTURE(c.KV);
    CAPTURE(c.hs);
    const gpu::AttentionShape shape{c.B, c.Tn, c.NH, c.KV, c.hs};
    const std::string refused = cudnn->unsupported<bf16>(shape);
    REQUIRE_MESSAGE(refused.empty(), refused);
    const int width = (c.NH + 2 * c.KV) * c.hs;
    auto qkv = inputs<bf16>(static_cast<std::size_t>(c.B) * c.Tn * width, 21);
    auto dout = inputs<bf16>(static_cast<std::size_t>(c.B) * c.Tn * c.NH * c.hs, 22);
    std::vector<float> out(dout.size()), att(static_cast<std::size_t>(c.B) * c.NH * c.Tn * c.Tn), dqkv(qkv.size());
    cpu::attention_forward(out.data(), att.data(), qkv.data(), c.B, c.Tn, c.NH, c.KV, c.hs);
    cpu::attention_backward(dqkv.data(), dout.data(), qkv.data(), att.data(), c.B, c.Tn, c.NH, c.KV, c.hs);

    auto d_qkv = upload<bf16>(qkv), d_dout = upload<bf16>(dout);
    DeviceBuffer<bf16> d_out(out.size()), d_dqkv(qkv.size()), d_again(qkv.size());
    DeviceBuffer<float> d_stats(static_cast<std::size_t>(c.B) * c.NH * c.Tn);
    cudnn->forward(d_out.data(), d_stats.data(), d_qkv.data(), shape);
    cudnn->backward(d_dqkv.data(), d_dout.data(), d_out.data(), d_qkv.data(), d_stats.data(), shape);
    cudnn->backward(d_again.data(), d_dout.data(), d_out.data(), d_qkv.data(), d_stats.data(), shape);
    CHECK_CLOSE(download(d_out), out, tol<bf16>());
    CHECK_CLOSE(download(d_dqkv), dqkv, tol<bf16>());
    CHECK(download(d_again) == download(d_dqkv));  // the deterministic algorithm
  }
}

TEST_CASE("without a device, opening cuDNN's attention gives the reason instead of failing later") {
  if (meridian::cuda_device_count() > 0) {
    MESSAGE("skipped: a CUDA device is present");
    return;
  }
  auto opened = gpu::CudnnAttention::open(nullptr);
  REQUIRE(std::holds_alternative<std::string>(opened));
  const std::string why = std::get<std::string>(opened);
  MESSAGE(why);
  CHECK(!why.empty());
}

TEST_CASE(
    "the forward and backward graphs of GPT-2's and Llama's shapes pass cudnn-frontend's checks for A100 and H100") {
  // No device needed: the frontend checks the tensors' dims, strides, types and the mask against
  // what its flash attention supports on that architecture.
  if (const std::string missing = gpu::CudnnAttention::library_missing(); !missing.empty()) {
    MESSAGE("skipped: " << missing);
    return;
  }
  for (const int sm : {80, 90})
    for (const gpu::AttentionShape& s : {gpu::AttentionShape{8, 1024, 12, 12, 64},  // GPT-2 124M
                                         gpu::AttentionShape{4, 2048, 32, 8, 64},   // Llama 3.2 1B
                                         gpu::AttentionShape{2, 33, 4, 2, 128}}) {  // Llama 3's head size
      CAPTURE(sm);
      CAPTURE(s.NH);
      CAPTURE(s.hs);
      CHECK(gpu::CudnnAttention::validate_for<bf16>(sm, s) == "");
      CHECK(gpu::CudnnAttention::validate_for<__half>(sm, s) == "");
    }
  // And it does check: a head size that is not a multiple of 8 is refused, with a reason.
  const std::string refused = gpu::CudnnAttention::validate_for<bf16>(90, {1, 64, 4, 4, 12});
  MESSAGE(refused);
  CHECK(!refused.empty());
}
