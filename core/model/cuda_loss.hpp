#pragma once
// The loss at the end of a model's forward on the device, shared by both families: the rows'
// cross-entropies (kernels/cuda/cross_entropy), their mean summed serially in double on the host,
// as the CPU does. Training passes the backward's scale: the same pass over the logits then
// writes d(mean loss)/d(logits) times that scale over them, in place, and the backward starts
// from there instead of reading the logits a second time.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "kernels/cuda/phase_timer.hpp"

namespace meridian {

struct LogitsRows {
  int N = 0, V = 0, ld = 0;  // rows, vocabulary, the rows' stride
};

template <class T>
float batch_loss(T* logits, float* losses, const std::int32_t* targets, LogitsRows rows,
                 std::optional<float> backward_scale, std::vector<float>& host_losses, cudaStream_t stream,
                 kernels::cuda::PhaseTimer* phases);

// The backward's first kernel: dlogits over the logits, unless the forward wrote them (`written`,
// at the scale it was given, which must be this one).
template <class T>
void logits_gradient(T* logits, float* losses, const std::int32_t* targets, LogitsRows rows, float loss_scale,
                     std::optional<float> written, cudaStream_t stream, kernels::cuda::PhaseTimer* phases);

}  // namespace meridian
