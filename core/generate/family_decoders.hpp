#pragma once
// Each family's layers over a KV cache (decoder.hpp); make_decoder picks one.
#include <vector>

#include "core/generate/decoder.hpp"

namespace meridian {

// GPT-2: learned positions, LayerNorm, GELU MLP, biases, head tied to the token embedding.
class GptDecoder final : public Decoder {
 public:
  GptDecoder(const ModelConfig& config, std::span<const float> params, int window);

 private:
  void forward(const std::int32_t* tokens, int n, int p) override;
  GptOffsets off_;
};

// Llama: rotary positions, RMSNorm, SwiGLU, grouped-query attention, tied or untied head.
class LlamaDecoder final : public Decoder {
 public:
  LlamaDecoder(const ModelConfig& config, std::span<const float> params, int window);

 private:
  void forward(const std::int32_t* tokens, int n, int p) override;
  LlamaOffsets off_;
  std::vector<float> rope_cos_, rope_sin_;  // (window, head size / 2), as the training model's
};

}  // namespace meridian
