#pragma once
// Fused softmax + cross-entropy on the device, the contract of kernels/cpu/cross_entropy.hpp:
// one block per row reads the (N,V) logits, never materialising the probabilities. Losses are fp32.
#include <cuda_runtime_api.h>

#include <cstdint>

namespace meridian::kernels::cuda {

// losses[n] = -log softmax(logits[n,:])[targets[n]]. `ld`: the rows' stride in elements (0: V),
// which may be V rounded up so that every row starts 16-byte aligned (the output layer's products
// then take cuBLAS's aligned kernels); the columns past V are neither read nor written.
template <class T>
void cross_entropy_forward(float* losses, const T* logits, const std::int32_t* targets, int N, int V,
                           cudaStream_t stream, int ld = 0);

// losses[n] as above and dlogits[n,:] = (softmax(logits[n,:]) - onehot(targets[n])) * dloss;
// dlogits may alias logits, and has the same stride.
template <class T>
void cross_entropy_forward_backward(T* dlogits, float* losses, const T* logits, const std::int32_t* targets, int N,
                                    int V, float dloss, cudaStream_t stream, int ld = 0);

}  // namespace meridian::kernels::cuda
