#include "core/model/gpt.hpp"

#include <algorithm>
#include <cmath>

#include "core/util/error.hpp"
#include "core/util/rng.hpp"
#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/cross_entropy.hpp"
#include "kernels/cpu/elementwise.hpp"
#include "kernels/cpu/encoder.hpp"
#include "kernels/cpu/gelu.hpp"
#include "kernels/cpu/layernorm.hpp"
#include "kernels/cpu/matmul.hpp"

namespace meridian {

namespace k = kernels;

template <class T>
Gpt<T>::Gpt(const ModelConfig& config) : LanguageModel<T>(config), off_(gpt_offsets(this->layout_, config.n_layer)) {
  MERIDIAN_CHECK(config.family == ModelFamily::Gpt2, "Gpt of a ", to_string(config.family), " shape");
}

template <class T>
void Gpt<T>::init_weights(std::uint64_t seed, std::span<const ShardRange> keep) {
  Rng rng(seed);
  const double residual_std = 0.02 / std::sqrt(2.0 * this->config_.n_layer);
  for (const auto& v : this->layout_.views()) {
    const bool is_weight = v.name.ends_with(".weight");
    if (v.shape.size() == 1) {  // LayerNorm gains are 1, every bias and LayerNorm shift 0
      const T x = is_weight && v.name.find("ln_") != std::string::npos ? T(1) : T(0);
      this->init_range(v.offset, v.numel, keep, [x] { return x; });
      continue;
    }
    const bool residual = v.name.ends_with("c_proj.weight");
    const double stddev = residual ? residual_std : 0.02;
    this->init_range(v.offset, v.numel, keep, [&] { return static_cast<T>(rng.normal() * stddev); });
  }
}

template <class T>
void Gpt<T>::set_recompute(Recompute mode) {
  if (plan_.mode == mode) return;
  plan_.mode = mode;
  acts_ = Activations{};  // reallocated to the new plan by the next forward
  capacity_ = 0;
  B_ = 0;
}

template <class T>
std::size_t Gpt<T>::activation_bytes() const {
  const auto& a = acts_;
  std::size_t n = 0;
  for (const auto* v : {&a.encoded, &a.ln1, &a.ln1_mean, &a.ln1_rstd, &a.qkv, &a.atty, &a.att, &a.attproj, &a.res2,
                        &a.ln2, &a.ln2_mean, &a.ln2_rstd, &a.fch, &a.fch_gelu, &a.fcproj, &a.res3, &a.lnf, &a.lnf_mean,
                        &a.lnf_rstd, &a.logits, &a.losses, &a.dres, &a.dln, &a.dqkv, &a.datty, &a.dfch, &a.dfch_gelu,
                        &a.dlogits})
    n += v->size();
  return n * sizeof(T);
}

template <class T>
void Gpt<T>::ensure_batch(int B) {
  if (B <= capacity_) return;
  const std::size_t L = this->config_.n_layer, C = this->config_.d_model, V = this->config_.vocab, NH = this->config_.n_head;
  const std::size_t BT = static_cast<std::size_t>(B) * this->config_.seq_len;
  const std::size_t cheap = plan_.cheap_slots(static_cast<int>(L)), block = plan_.block_slots(static_cast<int>(L));
  auto& a = acts_;
  a.encoded.resize(BT * C);
  a.ln1.resize(cheap * BT * C);
  a.ln1_mean.resize(block * BT);
  a.ln1_rstd.resize(block * BT);
  a.qkv.resize(block * BT * 3 * C);
  a.atty.resize(block * BT * C);
  a.att.resize(block * B * NH * this->config_.seq_len * this->config_.seq_len);
  a.attproj.resize(block * BT * C);
  a.res2.resize(block * BT * C);
  a.ln2.resize(cheap * BT * C);
  a.ln2_mean.resize(block * BT);
  a.ln2_rstd.resize(block * BT);
  a.fch.resize(block * BT * 4 * C);
  a.fch_gelu.resize(cheap * BT * 4 * C);
  a.fcproj.resize(block * BT * C);
  a.res3.resize(L * BT * C);
  a.lnf.resize(BT * C);
  a.lnf_mean.resize(BT);
  a.lnf_rstd.resize(BT);
  a.logits.resize(BT * V);
  a.losses.resize(BT);
  a.dres.resize(BT * C);
  a.dln.resize(BT * C);
  a.dqkv.resize(BT * 3 * C);
  a.datty.resize(BT * C);
  a.dfch.resize(BT * 4 * C);
  a.dfch_gelu.resize(BT * 4 * C);
  a.dlogits.resize(BT * V);
  capacity_ = B;
}

template <class T>
template <class P, class Ptr>
P Gpt<T>::layer_ptrs(Ptr base, int l) const {
  const auto& o = off_.layers[l];
  return P{base + o[0], base + o[1], base + o[2], base + o[3], base + o[4],  base + o[5],
           base + o[6], base + o[7], base + o[8], base + o[9], base + o[10], base + o[11]};
}

template <class T>
T Gpt<T>::forward(const std::int32_t* inputs, const std::int32_t* targets, int B) {
  MERIDIAN_CHECK(B >= 1, "B=", B);
  ensure_batch(B);
  B_ = B;
  const int Tn = this->config_.seq_len, C = this->config_.d_model, V = this->config_.vocab;
  const std::size_t BT = static_cast<std::size_t>(B) * Tn;
  inputs_.assign(inputs, inputs + BT);
  if (targets) targets_.assign(targets, targets + BT);
  else targets_.clear();
  auto& a = acts_;
  const T* wte = this->params_.data() + off_.wte;
  const T* wpe = this->params_.data() + off_.wpe;

  const std::size_t front = layer_begin(0), back = this->layout_.total() - off_.lnf_weight;
  this->need_weights(0, front);
  k::encoder_forward(a.encoded.data(), inputs, wte, wpe, B, Tn, C);
  for (int l = 0; l < this->config_.n_layer; ++l) {
    this->need_weights(layer_begin(l), layer_size(l));
    layer_forward(l, true);
    this->done_weights(layer_begin(l), layer_size(l));
  }
  const T* last = a.res3.data() + (this->config_.n_layer - 1) * BT * C;
  this->need_weights(off_.lnf_weight, back);
  k::layernorm_forward(a.lnf.data(), a.lnf_mean.data(), a.lnf_rstd.data(), last,
                       this->params_.data() + off_.lnf_weight,
                       this->params_.data() + off_.lnf_bias, static_cast<int>(BT), C);
  k::matmul_nt_forward(a.logits.data(), a.lnf.data(), wte, static_cast<const T*>(nullptr), static_cast<int>(BT), C, V);
  this->done_weights(off_.lnf_weight, back);
  this->done_weights(0, front);
  if (!targets) return T(0);
  k::cross_entropy_forward(a.losses.data(), a.logits.data(), targets, static_cast<int>(BT), V);
  double sum = 0;  // serial, in order: the reported loss is bit-reproducible
  for (std::size_t i = 0; i < BT; ++i) sum += a.losses[i];
  return static_cast<T>(sum / static_cast<double>(BT));
}

template <class T>
void Gpt<T>::layer_forward(int l, bool output) {
  const int B = B_, Tn = this->config_.seq_len, C = this->config_.d_model, NH = this->config_.n_head;
  const std::size_t BT = static_cast<std::size_t>(B) * Tn;
  auto& a = acts_;
  const std::size_t cs = plan_.cheap_slot(l), bs = plan_.block_slot(l);
  const auto p = layer_ptrs<LayerParams>(this->params_.data(), l);
  const T* res_in = l == 0 ? a.encoded.data() : a.res3.data() + (l - 1) * BT * C;
  T* ln1 = a.ln1.data() + cs * BT * C;
  T* qkv = a.qkv.data() + bs * BT * 3 * C;
  T* atty = a.atty.data() + bs * BT * C;
  T* attproj = a.attproj.data() + bs * BT * C;
  T* res2 = a.res2.data() + bs * BT * C;
  T* ln2 = a.ln2.data() + cs * BT * C;
  T* fch = a.fch.data() + bs * BT * 4 * C;
  T* fch_gelu = a.fch_gelu.data() + cs * BT * 4 * C;
  T* fcproj = a.fcproj.data() + bs * BT * C;
  const int N = static_cast<int>(BT);
  k::layernorm_forward(ln1, a.ln1_mean.data() + bs * BT, a.ln1_rstd.data() + bs * BT, res_in, p.ln1w, p.ln1b, N, C);
  k::matmul_forward(qkv, ln1, p.qkvw, p.qkvb, N, C, 3 * C);
  k::attention_forward(atty, a.att.data() + bs * static_cast<std::size_t>(B) * NH * Tn * Tn, qkv, B, Tn, NH, NH, C / NH);
  k::matmul_forward(attproj, atty, p.projw, p.projb, N, C, C);
  k::add(res2, res_in, attproj, BT * C);
  k::layernorm_forward(ln2, a.ln2_mean.data() + bs * BT, a.ln2_rstd.data() + bs * BT, res2, p.ln2w, p.ln2b, N, C);
  k::matmul_forward(fch, ln2, p.fcw, p.fcb, N, C, 4 * C);
  k::gelu_forward(fch_gelu, fch, BT * 4 * C);
  k::matmul_forward(fcproj, fch_gelu, p.fcprojw, p.fcprojb, N, 4 * C, C);
  if (output) k::add(a.res3.data() + l * BT * C, res2, fcproj, BT * C);
}

template <class T>
void Gpt<T>::recompute_for_backward(int l) {
  if (plan_.mode == Recompute::None) return;
  if (plan_.mode == Recompute::Full) return layer_forward(l, false);
  const int C = this->config_.d_model;
  const std::size_t BT = static_cast<std::size_t>(B_) * this->config_.seq_len, bs = plan_.block_slot(l);
  auto& a = acts_;
  const auto p = layer_ptrs<LayerParams>(this->params_.data(), l);
  const T* res_in = l == 0 ? a.encoded.data() : a.res3.data() + (l - 1) * BT * C;
  const int N = static_cast<int>(BT);
  // The norms' statistics are rewritten with the bits they had.
  k::layernorm_forward(a.ln1.data(), a.ln1_mean.data() + bs * BT, a.ln1_rstd.data() + bs * BT, res_in, p.ln1w, p.ln1b,
                       N, C);
  k::layernorm_forward(a.ln2.data(), a.ln2_mean.data() + bs * BT, a.ln2_rstd.data() + bs * BT,
                       a.res2.data() + bs * BT * C, p.ln2w, p.ln2b, N, C);
  k::gelu_forward(a.fch_gelu.data(), a.fch.data() + bs * BT * 4 * C, BT * 4 * C);
}

template <class T>
void Gpt<T>::backward(T loss_scale, const typename LanguageModel<T>::GradsReady& ready) {
  MERIDIAN_CHECK(B_ >= 1 && !targets_.empty(), "backward() needs a forward() with targets first");
  const int B = B_, Tn = this->config_.seq_len, C = this->config_.d_model, NH = this->config_.n_head, V = this->config_.vocab;
  const std::size_t BT = static_cast<std::size_t>(B) * Tn;
  const int N = static_cast<int>(BT);
  auto& a = acts_;
  const T* wte = this->params_.data() + off_.wte;
  T* dwte = this->grads_.data() + off_.wte;

  const std::size_t front = layer_begin(0), back = this->layout_.total() - off_.lnf_weight;
  this->need_weights(0, front);
  this->need_weights(off_.lnf_weight, back);
  k::cross_entropy_forward_backward(a.dlogits.data(), a.losses.data(), a.logits.data(), targets_.data(), N, V,
                                    loss_scale / static_cast<T>(BT));
  k::matmul_nt_backward(a.dln.data(), dwte, static_cast<T*>(nullptr), a.dlogits.data(), a.lnf.data(), wte, N, C, V);
  std::fill(a.dres.begin(), a.dres.begin() + BT * C, T(0));
  const T* last = a.res3.data() + (this->config_.n_layer - 1) * BT * C;
  k::layernorm_backward(a.dres.data(), this->grads_.data() + off_.lnf_weight,
                        this->grads_.data() + off_.lnf_bias, a.dln.data(), last,
                        this->params_.data() + off_.lnf_weight, a.lnf_mean.data(), a.lnf_rstd.data(), N,
                        C);
  this->done_weights(off_.lnf_weight, back);
  this->done_weights(0, front);
  if (ready) ready(off_.lnf_weight, back);  // ln_f: weight and bias, the last tensors
  // a.dres is the gradient of the residual stream; each block adds its branches' gradients into it.
  for (int l = this->config_.n_layer - 1; l >= 0; --l) {
    this->need_weights(layer_begin(l), layer_size(l));
    recompute_for_backward(l);
    const std::size_t cs = plan_.cheap_slot(l), bs = plan_.block_slot(l);
    const auto p = layer_ptrs<LayerParams>(this->params_.data(), l);
    const auto g = layer_ptrs<LayerGrads>(this->grads_.data(), l);
    const T* res_in = l == 0 ? a.encoded.data() : a.res3.data() + (l - 1) * BT * C;
    k::matmul_backward(a.dfch_gelu.data(), g.fcprojw, g.fcprojb, a.dres.data(), a.fch_gelu.data() + cs * BT * 4 * C,
                       p.fcprojw, N, 4 * C, C);
    k::gelu_backward(a.dfch.data(), a.fch.data() + bs * BT * 4 * C, a.dfch_gelu.data(), BT * 4 * C);
    k::matmul_backward(a.dln.data(), g.fcw, g.fcb, a.dfch.data(), a.ln2.data() + cs * BT * C, p.fcw, N, C, 4 * C);
    k::layernorm_backward(a.dres.data(), g.ln2w, g.ln2b, a.dln.data(), a.res2.data() + bs * BT * C, p.ln2w,
                          a.ln2_mean.data() + bs * BT, a.ln2_rstd.data() + bs * BT, N, C);
    k::matmul_backward(a.datty.data(), g.projw, g.projb, a.dres.data(), a.atty.data() + bs * BT * C, p.projw, N, C, C);
    k::attention_backward(a.dqkv.data(), a.datty.data(), a.qkv.data() + bs * BT * 3 * C,
                          a.att.data() + bs * static_cast<std::size_t>(B) * NH * Tn * Tn, B, Tn, NH, NH, C / NH);
    k::matmul_backward(a.dln.data(), g.qkvw, g.qkvb, a.dqkv.data(), a.ln1.data() + cs * BT * C, p.qkvw, N, C, 3 * C);
    k::layernorm_backward(a.dres.data(), g.ln1w, g.ln1b, a.dln.data(), res_in, p.ln1w, a.ln1_mean.data() + bs * BT,
                          a.ln1_rstd.data() + bs * BT, N, C);
    this->done_weights(layer_begin(l), layer_size(l));
    if (ready) ready(layer_begin(l), layer_size(l));
  }
  k::encoder_backward(dwte, this->grads_.data() + off_.wpe, a.dres.data(), inputs_.data(), B, Tn, C);
  if (ready) ready(off_.wte, front);  // wte and wpe come first
}

// A layer's tensors are contiguous, from its ln_1.weight to the next layer's (or ln_f).
template <class T>
std::size_t Gpt<T>::layer_begin(int l) const {
  return l < this->config_.n_layer ? off_.layers[static_cast<std::size_t>(l)][0] : off_.lnf_weight;
}

template <class T>
std::size_t Gpt<T>::layer_size(int l) const {
  return layer_begin(l + 1) - layer_begin(l);
}

template class Gpt<float>;
template class Gpt<double>;

}  // namespace meridian
