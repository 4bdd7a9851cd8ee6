#include "core/generate/family_decoders.hpp"
#include "core/util/error.hpp"
#include "kernels/cpu/elementwise.hpp"
#include "kernels/cpu/encoder.hpp"
#include "kernels/cpu/gelu.hpp"
#include "kernels/cpu/layernorm.hpp"
#include "kernels/cpu/matmul.hpp"

namespace meridian {

namespace k = kernels;

GptDecoder::GptDecoder(const ModelConfig& config, std::span<const float> params, int window)
    : Decoder(config, params, window), off_(gpt_offsets(layout_, config.n_layer)) {
  MERIDIAN_CHECK(config.family == ModelFamily::Gpt2, "GptDecoder of a ", to_string(config.family), " shape");
}

// Gpt<float>::forward's layers (core/model/gpt.cpp) over the new rows only.
void GptDecoder::forward(const std::int32_t* tokens, int n, int p) {
  const int C = config_.d_model, V = config_.vocab;
  const std::size_t nc = static_cast<std::size_t>(n) * C;
  const float* w = params_.data();
  float* x = scratch(0, n, C);
  float* ln = scratch(1, n, C);
  float* mean = scratch(2, n, 1);
  float* rstd = scratch(3, n, 1);
  float* qkv = scratch(4, n, 3 * C);
  float* att = scratch(5, n, C);
  float* branch = scratch(6, n, C);
  float* fc = scratch(7, n, 4 * C);
  float* fc_gelu = scratch(8, n, 4 * C);
  k::encoder_forward(x, tokens, w + off_.wte, w + off_.wpe + static_cast<std::size_t>(p) * C, 1, n, C);
  for (int l = 0; l < config_.n_layer; ++l) {
    const auto& o = off_.layers[static_cast<std::size_t>(l)];  // kGptLayerTensors' order
    k::layernorm_forward(ln, mean, rstd, x, w + o[0], w + o[1], n, C);
    k::matmul_forward(qkv, ln, w + o[2], w + o[3], n, C, 3 * C);
    cache(l, qkv + C, qkv + 2 * C, 3 * C, n, p);
    attend(att, qkv, 3 * C, l, n, p);
    k::matmul_forward(branch, att, w + o[4], w + o[5], n, C, C);
    k::add(x, x, branch, nc);
    k::layernorm_forward(ln, mean, rstd, x, w + o[6], w + o[7], n, C);
    k::matmul_forward(fc, ln, w + o[8], w + o[9], n, C, 4 * C);
    k::gelu_forward(fc_gelu, fc, nc * 4);
    k::matmul_forward(branch, fc_gelu, w + o[10], w + o[11], n, 4 * C, C);
    k::add(x, x, branch, nc);
  }
  const float* last = x + (nc - C);
  k::layernorm_forward(ln, mean, rstd, last, w + off_.lnf_weight, w + off_.lnf_bias, 1, C);
  k::matmul_nt_forward(logits_.data(), ln, w + off_.wte, static_cast<const float*>(nullptr), 1, C, V);
}

}  // namespace meridian
