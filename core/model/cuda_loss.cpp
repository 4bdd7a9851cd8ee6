#include "core/model/cuda_loss.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "core/util/error.hpp"
#include "kernels/cuda/cross_entropy.hpp"
#include "kernels/cuda/cuda_check.hpp"

namespace meridian {

namespace kc = kernels::cuda;

template <class T>
float batch_loss(T* logits, float* losses, const std::int32_t* targets, LogitsRows rows,
                 std::optional<float> backward_scale, std::vector<float>& host_losses, cudaStream_t stream,
                 kc::PhaseTimer* phases) {
  const auto n = static_cast<std::size_t>(rows.N);
  if (backward_scale) {
    kc::mark(phases, "cross-entropy with its gradient, loss to host (fwd)");
    kc::cross_entropy_forward_backward(logits, losses, logits, targets, rows.N, rows.V,
                                       *backward_scale / static_cast<float>(n), stream, rows.ld);
  } else {
    kc::mark(phases, "cross-entropy and loss to host (fwd)");
    kc::cross_entropy_forward(losses, logits, targets, rows.N, rows.V, stream, rows.ld);
  }
  host_losses.resize(n);
  MERIDIAN_CUDA(cudaMemcpyAsync(host_losses.data(), losses, n * sizeof(float), cudaMemcpyDeviceToHost, stream));
  kc::mark(phases, nullptr);
  MERIDIAN_CUDA(cudaStreamSynchronize(stream));
  double sum = 0;  // serial, in order, as on the CPU
  for (std::size_t i = 0; i < n; ++i) sum += host_losses[i];
  return static_cast<float>(sum / static_cast<double>(n));
}

template <class T>
void logits_gradient(T* logits, float* losses, const std::int32_t* targets, LogitsRows rows, float loss_scale,
                     std::optional<float> written, cudaStream_t stream, kc::PhaseTimer* phases) {
  if (written) {
    MERIDIAN_CHECK(*written == loss_scale, "the forward wrote the logits' gradient at scale ", *written,
                   ", the backward asks for ", loss_scale);
    return;
  }
  kc::mark(phases, "cross-entropy (bwd)");
  kc::cross_entropy_forward_backward(logits, losses, logits, targets, rows.N, rows.V,
                                     loss_scale / static_cast<float>(rows.N), stream, rows.ld);
}

#define MERIDIAN_CUDA_LOSS(T)                                                                                          \
  template float batch_loss<T>(T*, float*, const std::int32_t*, LogitsRows, std::optional<float>, std::vector<float>&, \
                               cudaStream_t, kc::PhaseTimer*);                                                         \
  template void logits_gradient<T>(T*, float*, const std::int32_t*, LogitsRows, float, std::optional<float>,           \
                                   cudaStream_t, kc::PhaseTimer*);
MERIDIAN_CUDA_LOSS(float)
MERIDIAN_CUDA_LOSS(__nv_bfloat16)
MERIDIAN_CUDA_LOSS(__half)
#undef MERIDIAN_CUDA_LOSS

}  // namespace meridian
