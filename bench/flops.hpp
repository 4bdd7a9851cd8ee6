#pragma once
// FLOPs of one training step (forward + backward) of a model as meridian computes it: every matmul
// 2*M*N*K forward and twice that backward, and causal attention counting only the unmasked half.
// GPT-2: qkv, projection and a 4C MLP per layer; Llama: q, k, v (grouped-query: 2 KV hs wide),
// o, and SwiGLU's gate, up and down per layer. Norms, activations and rotary embeddings are not
// counted (as llm.c and PyTorch's counts do not).
#include <cstdint>

#include "core/model/model_config.hpp"

namespace meridian::bench {

inline double train_flops_per_step(const ModelConfig& c, int B) {
  const double BT = static_cast<double>(B) * c.seq_len, C = c.d_model, L = c.n_layer;
  double per_layer = C * 3 * C + C * C + C * 4 * C + 4 * C * C;
  if (c.family == ModelFamily::Llama) {
    const double kv = 2.0 * c.kv_heads() * c.head_size();
    per_layer = C * (C + kv) + C * C + 3.0 * C * c.ffn_hidden;
  }
  const double matmul_fwd = 2.0 * BT * (L * per_layer + C * c.vocab);
  // scores q.k and the weighted sum of v over keys 0..t: 2 * 2 * C * T(T+1)/2 per sequence and layer
  const double attention_fwd = L * B * 2.0 * C * c.seq_len * (c.seq_len + 1.0);
  return 3.0 * (matmul_fwd + attention_fwd);
}

}  // namespace meridian::bench
