#pragma once
// Fused softmax + cross-entropy on the device, the contract of kernels/cpu/cross_entropy.hpp:
// one block per row reads the (N,V) logits, never materialising the probabilities. Losses are fp32.
#include <cuda_runtime_api.h>

#include <cstdint>

namespace meridian::kernels::cuda {

// losses[n] = -log softmax(logits[n,:])[targets[n]]
template <class T>
void cross_entropy_forward(float* losses, const T* logits, const std::int32_t* targets, int N, int V,
                           cudaStream_t stream);

// losses[n] as above and dlogits[n,:] = (softmax(logits[n,:]) - onehot(targets[n])) * dloss;
// dlogits may alias logits.
template <class T>
void cross_entropy_forward_backward(T* dlogits, float* losses, const T* logits, const std::int32_t* targets, int N,
                                    int V, float dloss, cudaStream_t stream);

}  // namespace meridian::kernels::cuda
