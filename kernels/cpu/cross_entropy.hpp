#pragma once
#include <cstdint>

namespace meridian::kernels {

// losses[n] = -log softmax(logits[n,:])[targets[n]]     logits: (N,V)
template <class T>
void cross_entropy_forward(T* losses, const T* logits, const std::int32_t* targets, int N, int V);

// Fused softmax + cross-entropy forward and backward: writes losses[n] and
// dlogits[n,:] = (softmax(logits[n,:]) - onehot(targets[n])) * dloss. dlogits may alias logits.
template <class T>
void cross_entropy_forward_backward(T* dlogits, T* losses, const T* logits, const std::int32_t* targets, int N,
                                    int V, T dloss);

}  // namespace meridian::kernels
