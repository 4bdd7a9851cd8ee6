#include "core/model/llama.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/util/error.hpp"
#include "core/util/rng.hpp"
#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/cross_entropy.hpp"
#include "kernels/cpu/elementwise.hpp"
#include "kernels/cpu/encoder.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/rmsnorm.hpp"
#include "kernels/cpu/rope.hpp"
#include "kernels/cpu/swiglu.hpp"

namespace meridian {

namespace k = kernels;

std::vector<double> rope_inv_freq(const ModelConfig& c) {
  const int hs = c.head_size();
  std::vector<double> inv(static_cast<std::size_t>(hs / 2));
  for (std::size_t i = 0; i < inv.size(); ++i)
    inv[i] = 1.0 / std::pow(c.rope_theta, static_cast<double>(2 * i) / hs);
  const RopeScaling& s = c.rope_scaling;
  if (!s.enabled()) return inv;
  const double low_wavelen = s.original_context / s.low_freq_factor;
  const double high_wavelen = s.original_context / s.high_freq_factor;
  for (auto& f : inv) {
    const double wavelen = 2 * std::numbers::pi / f;
    if (wavelen > low_wavelen) f /= s.factor;  // long wavelengths: stretched
    else if (wavelen >= high_wavelen) {        // between the two: interpolated
      const double smooth = (s.original_context / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
      f = (1 - smooth) * f / s.factor + smooth * f;
    }
  }
  return inv;
}

template <class T>
Llama<T>::Llama(const ModelConfig& config) : LanguageModel<T>(config), off_(llama_offsets(this->layout_, config)) {
  MERIDIAN_CHECK(config.family == ModelFamily::Llama, "Llama of a ", to_string(config.family), " shape");
  const std::size_t half = config.head_size() / 2;
  rope_cos_.resize(config.seq_len * half);
  rope_sin_.resize(config.seq_len * half);
  k::rope_table(rope_cos_.data(), rope_sin_.data(), rope_inv_freq(config), config.seq_len);
}

template <class T>
void Llama<T>::init_weights(std::uint64_t seed, std::span<const ShardRange> keep) {
  Rng rng(seed);
  const double residual_std = 0.02 / std::sqrt(2.0 * this->config_.n_layer);
  for (const auto& v : this->layout_.views()) {
    if (v.shape.size() == 1) {  // RMSNorm gains are 1, biases 0
      const T x = v.name.ends_with("norm.weight") ? T(1) : T(0);
      this->init_range(v.offset, v.numel, keep, [x] { return x; });
      continue;
    }
    const bool residual = v.name.ends_with("o_proj.weight") || v.name.ends_with("down_proj.weight");
    const double stddev = residual ? residual_std : 0.02;
    this->init_range(v.offset, v.numel, keep, [&] { return static_cast<T>(rng.normal() * stddev); });
  }
}

template <class T>
void Llama<T>::set_recompute(Recompute mode) {
  if (plan_.mode == mode) return;
  plan_.mode = mode;
  acts_ = Activations{};  // reallocated to the new plan by the next forward
  capacity_ = 0;
  B_ = 0;
}

template <class T>
std::size_t Llama<T>::activation_bytes() const {
  const auto& a = acts_;
  std::size_t n = 0;
  for (const auto* v : {&a.encoded, &a.attn_norm, &a.attn_rstd, &a.qkv, &a.att, &a.atty, &a.res_mid, &a.mlp_norm,
                        &a.mlp_rstd, &a.gate_up, &a.act, &a.res_out, &a.norm_out, &a.norm_rstd, &a.logits, &a.losses,
                        &a.proj, &a.dres, &a.dln, &a.dqkv, &a.datty, &a.dgate_up, &a.dact})
    n += v->size();
  return n * sizeof(T);
}

template <class T>
void Llama<T>::ensure_batch(int B) {
  if (B <= capacity_) return;
  const auto& c = this->config_;
  const std::size_t L = c.n_layer, C = c.d_model, V = c.vocab, NH = c.n_head, F = c.ffn_hidden, QKV = qkv_width();
  const std::size_t Tn = c.seq_len, BT = static_cast<std::size_t>(B) * Tn;
  const std::size_t cheap = plan_.cheap_slots(c.n_layer), block = plan_.block_slots(c.n_layer);
  auto& a = acts_;
  a.encoded.resize(BT * C);
  a.attn_norm.resize(cheap * BT * C);
  a.attn_rstd.resize(block * BT);
  a.qkv.resize(block * BT * QKV);
  a.att.resize(block * B * NH * Tn * Tn);
  a.atty.resize(block * BT * C);
  a.res_mid.resize(block * BT * C);
  a.mlp_norm.resize(cheap * BT * C);
  a.mlp_rstd.resize(block * BT);
  a.gate_up.resize(block * BT * 2 * F);
  a.act.resize(cheap * BT * F);
  a.res_out.resize(L * BT * C);
  a.norm_out.resize(BT * C);
  a.norm_rstd.resize(BT);
  a.logits.resize(BT * V);
  a.losses.resize(BT);
  a.proj.resize(BT * C);
  a.dres.resize(BT * C);
  a.dln.resize(BT * C);
  a.dqkv.resize(BT * QKV);
  a.datty.resize(BT * C);
  a.dgate_up.resize(BT * 2 * F);
  a.dact.resize(BT * F);
  capacity_ = B;
}

template <class T>
T Llama<T>::forward(const std::int32_t* inputs, const std::int32_t* targets, int B) {
  MERIDIAN_CHECK(B >= 1, "B=", B);
  ensure_batch(B);
  B_ = B;
  const auto& c = this->config_;
  const int Tn = c.seq_len, C = c.d_model, V = c.vocab;
  const std::size_t BT = static_cast<std::size_t>(B) * Tn;
  const int N = static_cast<int>(BT);
  inputs_.assign(inputs, inputs + BT);
  if (targets) targets_.assign(targets, targets + BT);
  else targets_.clear();
  auto& a = acts_;
  const T* w = this->params_.data();

  const std::size_t front = layer_begin(0), back = this->layout_.total() - off_.norm;
  this->need_weights(0, front);
  k::encoder_forward(a.encoded.data(), inputs, w + off_.embed, static_cast<const T*>(nullptr), B, Tn, C);
  for (int l = 0; l < c.n_layer; ++l) {
    this->need_weights(layer_begin(l), layer_size(l));
    layer_forward(l, true);
    this->done_weights(layer_begin(l), layer_size(l));
  }
  const T* last = a.res_out.data() + (c.n_layer - 1) * BT * C;
  this->need_weights(off_.norm, back);
  k::rmsnorm_forward(a.norm_out.data(), a.norm_rstd.data(), last, w + off_.norm, N, C, c.norm_eps);
  k::matmul_nt_forward(a.logits.data(), a.norm_out.data(), w + off_.head, static_cast<const T*>(nullptr), N, C, V);
  this->done_weights(off_.norm, back);
  this->done_weights(0, front);
  if (!targets) return T(0);
  k::cross_entropy_forward(a.losses.data(), a.logits.data(), targets, N, V);
  double sum = 0;  // serial, in order: the reported loss is bit-reproducible
  for (std::size_t i = 0; i < BT; ++i) sum += a.losses[i];
  return static_cast<T>(sum / static_cast<double>(BT));
}

template <class T>
void Llama<T>::layer_forward(int l, bool output) {
  const auto& c = this->config_;
  const int B = B_, Tn = c.seq_len, C = c.d_model, NH = c.n_head, KV = c.kv_heads(), hs = c.head_size();
  const int F = c.ffn_hidden, QKV = qkv_width();
  const std::size_t BT = static_cast<std::size_t>(B) * Tn;
  const int N = static_cast<int>(BT);
  auto& a = acts_;
  const T* w = this->params_.data();
  const auto& o = off_.layers[l];
  const std::size_t cs = plan_.cheap_slot(l), bs = plan_.block_slot(l);
  const auto cheap = [&](auto& buf, std::size_t width) { return buf.data() + cs * BT * width; };
  const auto block = [&](auto& buf, std::size_t width) { return buf.data() + bs * BT * width; };
  const T* res_in = l == 0 ? a.encoded.data() : a.res_out.data() + (l - 1) * BT * C;
  T* qkv = block(a.qkv, QKV);
  k::rmsnorm_forward(cheap(a.attn_norm, C), block(a.attn_rstd, 1), res_in, w + o.attn_norm, N, C, c.norm_eps);
  k::matmul_nt_forward(qkv, cheap(a.attn_norm, C), w + o.qkv, off_.has_qkv_bias ? w + o.qkv_bias : nullptr, N, C, QKV);
  k::rope_forward(qkv, rope_cos_.data(), rope_sin_.data(), B, Tn, NH, hs, QKV);
  k::rope_forward(qkv + NH * hs, rope_cos_.data(), rope_sin_.data(), B, Tn, KV, hs, QKV);
  k::attention_forward(block(a.atty, C), a.att.data() + bs * static_cast<std::size_t>(B) * NH * Tn * Tn, qkv, B, Tn,
                       NH, KV, hs);
  k::matmul_nt_forward(a.proj.data(), block(a.atty, C), w + o.o, static_cast<const T*>(nullptr), N, C, C);
  k::add(block(a.res_mid, C), res_in, a.proj.data(), BT * C);
  k::rmsnorm_forward(cheap(a.mlp_norm, C), block(a.mlp_rstd, 1), block(a.res_mid, C), w + o.mlp_norm, N, C, c.norm_eps);
  k::matmul_nt_forward(block(a.gate_up, 2 * F), cheap(a.mlp_norm, C), w + o.gate_up, static_cast<const T*>(nullptr), N,
                       C, 2 * F);
  k::swiglu_forward(cheap(a.act, F), block(a.gate_up, 2 * F), N, F);
  k::matmul_nt_forward(a.proj.data(), cheap(a.act, F), w + o.down, static_cast<const T*>(nullptr), N, F, C);
  if (output) k::add(a.res_out.data() + l * BT * C, block(a.res_mid, C), a.proj.data(), BT * C);
}

template <class T>
void Llama<T>::recompute_for_backward(int l) {
  if (plan_.mode == Recompute::None) return;
  if (plan_.mode == Recompute::Full) return layer_forward(l, false);
  const auto& c = this->config_;
  const int C = c.d_model, F = c.ffn_hidden;
  const std::size_t BT = static_cast<std::size_t>(B_) * c.seq_len, bs = plan_.block_slot(l);
  const int N = static_cast<int>(BT);
  auto& a = acts_;
  const T* w = this->params_.data();
  const auto& o = off_.layers[l];
  const T* res_in = l == 0 ? a.encoded.data() : a.res_out.data() + (l - 1) * BT * C;
  // The norms' statistics are rewritten with the bits they had.
  k::rmsnorm_forward(a.attn_norm.data(), a.attn_rstd.data() + bs * BT, res_in, w + o.attn_norm, N, C, c.norm_eps);
  k::rmsnorm_forward(a.mlp_norm.data(), a.mlp_rstd.data() + bs * BT, a.res_mid.data() + bs * BT * C, w + o.mlp_norm, N,
                     C, c.norm_eps);
  k::swiglu_forward(a.act.data(), a.gate_up.data() + bs * BT * 2 * F, N, F);
}

template <class T>
void Llama<T>::backward(T loss_scale, const typename LanguageModel<T>::GradsReady& ready) {
  MERIDIAN_CHECK(B_ >= 1 && !targets_.empty(), "backward() needs a forward() with targets first");
  const auto& c = this->config_;
  const int B = B_, Tn = c.seq_len, C = c.d_model, NH = c.n_head, KV = c.kv_heads(), hs = c.head_size(), V = c.vocab;
  const int F = c.ffn_hidden, QKV = qkv_width();
  const std::size_t BT = static_cast<std::size_t>(B) * Tn;
  const int N = static_cast<int>(BT);
  auto& a = acts_;
  const T* w = this->params_.data();
  T* g = this->grads_.data();
  const std::size_t total = this->layout_.total();

  const std::size_t front = layer_begin(0), back = total - off_.norm;
  this->need_weights(0, front);
  this->need_weights(off_.norm, back);
  // The logits' gradient overwrites the logits (the kernel allows it).
  k::cross_entropy_forward_backward(a.logits.data(), a.losses.data(), a.logits.data(), targets_.data(), N, V,
                                    loss_scale / static_cast<T>(BT));
  k::matmul_nt_backward(a.dln.data(), g + off_.head, static_cast<T*>(nullptr), a.logits.data(), a.norm_out.data(),
                        w + off_.head, N, C, V);
  std::fill(a.dres.begin(), a.dres.begin() + BT * C, T(0));
  const T* last = a.res_out.data() + (c.n_layer - 1) * BT * C;
  k::rmsnorm_backward(a.dres.data(), g + off_.norm, a.dln.data(), last, w + off_.norm, a.norm_rstd.data(), N, C);
  this->done_weights(off_.norm, back);
  this->done_weights(0, front);
  if (ready) ready(off_.norm, back);  // norm, and lm_head after it when untied
  for (int l = c.n_layer - 1; l >= 0; --l) {
    this->need_weights(layer_begin(l), layer_size(l));
    recompute_for_backward(l);
    const auto& o = off_.layers[l];
    const std::size_t cs = plan_.cheap_slot(l), bs = plan_.block_slot(l);
    const auto cheap = [&](auto& buf, std::size_t width) { return buf.data() + cs * BT * width; };
    const auto block = [&](auto& buf, std::size_t width) { return buf.data() + bs * BT * width; };
    const T* res_in = l == 0 ? a.encoded.data() : a.res_out.data() + (l - 1) * BT * C;
    k::matmul_nt_backward(a.dact.data(), g + o.down, static_cast<T*>(nullptr), a.dres.data(), cheap(a.act, F),
                          w + o.down, N, F, C);
    k::swiglu_backward(a.dgate_up.data(), block(a.gate_up, 2 * F), a.dact.data(), N, F);
    k::matmul_nt_backward(a.dln.data(), g + o.gate_up, static_cast<T*>(nullptr), a.dgate_up.data(),
                          cheap(a.mlp_norm, C), w + o.gate_up, N, C, 2 * F);
    k::rmsnorm_backward(a.dres.data(), g + o.mlp_norm, a.dln.data(), block(a.res_mid, C), w + o.mlp_norm,
                        block(a.mlp_rstd, 1), N, C);
    k::matmul_nt_backward(a.datty.data(), g + o.o, static_cast<T*>(nullptr), a.dres.data(), block(a.atty, C), w + o.o,
                          N, C, C);
    k::attention_backward(a.dqkv.data(), a.datty.data(), block(a.qkv, QKV),
                          a.att.data() + bs * static_cast<std::size_t>(B) * NH * Tn * Tn, B, Tn, NH, KV, hs);
    k::rope_backward(a.dqkv.data(), rope_cos_.data(), rope_sin_.data(), B, Tn, NH, hs, QKV);
    k::rope_backward(a.dqkv.data() + NH * hs, rope_cos_.data(), rope_sin_.data(), B, Tn, KV, hs, QKV);
    k::matmul_nt_backward(a.dln.data(), g + o.qkv, off_.has_qkv_bias ? g + o.qkv_bias : nullptr, a.dqkv.data(),
                          cheap(a.attn_norm, C), w + o.qkv, N, C, QKV);
    k::rmsnorm_backward(a.dres.data(), g + o.attn_norm, a.dln.data(), res_in, w + o.attn_norm, block(a.attn_rstd, 1),
                        N, C);
    this->done_weights(layer_begin(l), layer_size(l));
    if (ready) ready(layer_begin(l), layer_size(l));
  }
  k::encoder_backward(g + off_.embed, static_cast<T*>(nullptr), a.dres.data(), inputs_.data(), B, Tn, C);
  if (ready) ready(off_.embed, front);
}

// A layer's tensors are contiguous, from its input_layernorm to the next layer's (or the norm).
template <class T>
std::size_t Llama<T>::layer_begin(int l) const {
  return l < this->config_.n_layer ? off_.layers[static_cast<std::size_t>(l)].attn_norm : off_.norm;
}

template <class T>
std::size_t Llama<T>::layer_size(int l) const {
  return layer_begin(l + 1) - layer_begin(l);
}

template class Llama<float>;
template class Llama<double>;

}  // namespace meridian
