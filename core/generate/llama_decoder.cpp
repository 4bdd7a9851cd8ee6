#include "core/generate/family_decoders.hpp"
#include "core/model/llama.hpp"
#include "core/util/error.hpp"
#include "kernels/cpu/elementwise.hpp"
#include "kernels/cpu/encoder.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/rmsnorm.hpp"
#include "kernels/cpu/rope.hpp"
#include "kernels/cpu/swiglu.hpp"

namespace meridian {

namespace k = kernels;

LlamaDecoder::LlamaDecoder(const ModelConfig& config, std::span<const float> params, int window)
    : Decoder(config, params, window), off_(llama_offsets(layout_, config)) {
  MERIDIAN_CHECK(config.family == ModelFamily::Llama, "LlamaDecoder of a ", to_string(config.family), " shape");
  const std::size_t half = static_cast<std::size_t>(config.head_size()) / 2;
  rope_cos_.resize(static_cast<std::size_t>(window) * half);
  rope_sin_.resize(static_cast<std::size_t>(window) * half);
  k::rope_table(rope_cos_.data(), rope_sin_.data(), rope_inv_freq(config), window);
}

// Llama<float>::forward's layers (core/model/llama.cpp) over the new rows only.
void LlamaDecoder::forward(const std::int32_t* tokens, int n, int p) {
  const int C = config_.d_model, V = config_.vocab, NH = config_.n_head, KV = config_.kv_heads();
  const int hs = config_.head_size(), F = config_.ffn_hidden, QKV = (NH + 2 * KV) * hs;
  const double eps = config_.norm_eps;
  const std::size_t nc = static_cast<std::size_t>(n) * C, half = static_cast<std::size_t>(hs) / 2;
  const float* w = params_.data();
  const float* cos = rope_cos_.data() + static_cast<std::size_t>(p) * half;
  const float* sin = rope_sin_.data() + static_cast<std::size_t>(p) * half;
  float* x = scratch(0, n, C);
  float* norm = scratch(1, n, C);
  float* rstd = scratch(2, n, 1);
  float* qkv = scratch(3, n, QKV);
  float* att = scratch(4, n, C);
  float* branch = scratch(5, n, C);
  float* gate_up = scratch(6, n, 2 * F);
  float* act = scratch(7, n, F);
  k::encoder_forward(x, tokens, w + off_.embed, static_cast<const float*>(nullptr), 1, n, C);
  for (int l = 0; l < config_.n_layer; ++l) {
    const auto& o = off_.layers[static_cast<std::size_t>(l)];
    k::rmsnorm_forward(norm, rstd, x, w + o.attn_norm, n, C, eps);
    k::matmul_nt_forward(qkv, norm, w + o.qkv, off_.has_qkv_bias ? w + o.qkv_bias : nullptr, n, C, QKV);
    k::rope_forward(qkv, cos, sin, 1, n, NH, hs, QKV);
    k::rope_forward(qkv + NH * hs, cos, sin, 1, n, KV, hs, QKV);
    cache(l, qkv + NH * hs, qkv + (NH + KV) * hs, QKV, n, p);
    attend(att, qkv, QKV, l, n, p);
    k::matmul_nt_forward(branch, att, w + o.o, static_cast<const float*>(nullptr), n, C, C);
    k::add(x, x, branch, nc);
    k::rmsnorm_forward(norm, rstd, x, w + o.mlp_norm, n, C, eps);
    k::matmul_nt_forward(gate_up, norm, w + o.gate_up, static_cast<const float*>(nullptr), n, C, 2 * F);
    k::swiglu_forward(act, gate_up, n, F);
    k::matmul_nt_forward(branch, act, w + o.down, static_cast<const float*>(nullptr), n, F, C);
    k::add(x, x, branch, nc);
  }
  k::rmsnorm_forward(norm, rstd, x + (nc - C), w + off_.norm, 1, C, eps);
  k::matmul_nt_forward(logits_.data(), norm, w + off_.head, static_cast<const float*>(nullptr), 1, C, V);
}

}  // namespace meridian
