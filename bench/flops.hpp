#pragma once
// FLOPs of one training step (forward + backward) of the GPT as meridian computes it: every matmul
// 2*M*N*K forward and twice that backward, and causal attention counting only the unmasked half.
#include <cstdint>

#include "core/model/model_config.hpp"

namespace meridian::bench {

inline double train_flops_per_step(const ModelConfig& c, int B) {
  const double BT = static_cast<double>(B) * c.seq_len, C = c.d_model, L = c.n_layer;
  const double matmul_fwd = 2.0 * BT * (L * (C * 3 * C + C * C + C * 4 * C + 4 * C * C) + C * c.vocab);
  // scores q.k and the weighted sum of v over keys 0..t: 2 * 2 * C * T(T+1)/2 per sequence and layer
  const double attention_fwd = L * B * 2.0 * C * c.seq_len * (c.seq_len + 1.0);
  return 3.0 * (matmul_fwd + attention_fwd);
}

}  // namespace meridian::bench
