#include "core/model/cuda_llama.hpp"

#include <utility>

#include "core/model/cuda_loss.hpp"
#include "core/model/llama.hpp"
#include "core/util/error.hpp"
#include "kernels/cpu/rope.hpp"
#include "kernels/cuda/elementwise.hpp"
#include "kernels/cuda/encoder.hpp"
#include "kernels/cuda/matmul.hpp"
#include "kernels/cuda/rmsnorm.hpp"
#include "kernels/cuda/rope.hpp"
#include "kernels/cuda/swiglu.hpp"

namespace meridian {

namespace kc = kernels::cuda;

template <class T>
CudaLlama<T>::CudaLlama(const ModelConfig& config, cudaStream_t stream, CudaAttention attention, int logits_align)
    : config_(config),
      layout_(ParamLayout::of(config)),
      stream_(stream),
      logits_ld_(logits_stride(config.vocab, logits_align)),
      blas_(stream),
      attention_(attention, blas_, stream, config.seq_len, config.n_head, config.kv_heads(), config.head_size()),
      off_(llama_offsets(layout_, config)),
      weights_(layout_.total(), stream) {
  const auto problems = validate_model_config(config);
  MERIDIAN_CHECK(problems.empty(), "invalid model shape: ", problems.empty() ? "" : problems.front());
  MERIDIAN_CHECK(config.family == ModelFamily::Llama, "CudaLlama of a ", to_string(config.family), " shape");
  std::vector<float> cos(static_cast<std::size_t>(config.seq_len) * (config.head_size() / 2)), sin(cos.size());
  kernels::rope_table(cos.data(), sin.data(), rope_inv_freq(config), config.seq_len);
  rope_cos_ = Buf<float>(cos);
  rope_sin_ = Buf<float>(sin);
}

template <class T>
void CudaLlama<T>::reserve(int B) {
  if (attention_.prepare(B)) capacity_ = 0;  // the layers now keep probabilities instead of log-sum-exps
  if (B <= capacity_) return;
  const std::size_t L = config_.n_layer, C = config_.d_model, NH = config_.n_head;
  const std::size_t F = config_.ffn_hidden, QKV = qkv_width(), Tn = config_.seq_len, BT = B * Tn;
  auto& a = acts_;
  a = Activations{};  // free the smaller set first
  a.encoded = Buf<T>(BT * C);
  a.attn_norm = Buf<T>(L * BT * C);
  a.attn_rstd = Buf<float>(L * BT);
  a.qkv = Buf<T>(L * BT * QKV);
  if (attention_.keeps_probabilities())
    a.att = Buf<T>(L * B * NH * Tn * Tn);
  else
    a.lse = Buf<float>(L * BT * NH);
  a.atty = Buf<T>(L * BT * C);
  a.res_mid = Buf<T>(L * BT * C);
  a.mlp_norm = Buf<T>(L * BT * C);
  a.mlp_rstd = Buf<float>(L * BT);
  a.gate_up = Buf<T>(L * BT * 2 * F);
  a.act = Buf<T>(L * BT * F);
  a.res_out = Buf<T>(L * BT * C);
  a.norm_out = Buf<T>(BT * C);
  a.norm_rstd = Buf<float>(BT);
  a.logits = Buf<T>(BT * logits_ld_);  // backward overwrites it with its gradient
  a.losses = Buf<float>(BT);
  a.proj = Buf<T>(BT * C);
  a.dres = Buf<T>(BT * C);
  a.dln = Buf<T>(BT * C);
  a.dqkv = Buf<T>(BT * QKV);
  a.datty = Buf<T>(BT * C);
  a.dgate_up = Buf<T>(BT * 2 * F);
  a.dact = Buf<T>(BT * F);
  inputs_ = Buf<std::int32_t>(BT);
  targets_ = Buf<std::int32_t>(BT);
  host_losses_.resize(BT);
  capacity_ = B;
}

template <class T>
float CudaLlama<T>::forward(const std::int32_t* inputs, const std::int32_t* targets, int B,
                            std::optional<float> backward_scale) {
  MERIDIAN_CHECK(B >= 1, "B=", B);
  reserve(B);
  B_ = B;
  have_targets_ = targets != nullptr;
  logits_grad_scale_.reset();
  const int Tn = config_.seq_len, C = config_.d_model, NH = config_.n_head, KV = config_.kv_heads();
  const int hs = config_.head_size(), V = config_.vocab, F = config_.ffn_hidden, QKV = qkv_width();
  const float eps = static_cast<float>(config_.norm_eps);
  const std::size_t BT = static_cast<std::size_t>(B) * Tn;
  const int N = static_cast<int>(BT);
  MERIDIAN_CUDA(cudaMemcpyAsync(inputs_.data(), inputs, BT * sizeof(std::int32_t), cudaMemcpyHostToDevice, stream_));
  if (targets)
    MERIDIAN_CUDA(cudaMemcpyAsync(targets_.data(), targets, BT * sizeof(std::int32_t), cudaMemcpyHostToDevice, stream_));
  auto& a = acts_;
  const T* w = weights_.weights();
  const T* none = nullptr;
  kc::mark(phases_, "embedding (fwd)");
  kc::encoder_forward(a.encoded.data(), inputs_.data(), w + off_.embed, none, B, Tn, C, stream_);
  for (int l = 0; l < config_.n_layer; ++l) {
    const auto& o = off_.layers[l];
    auto of = [&](auto& buf, std::size_t width) { return buf.size() == 0 ? nullptr : buf.data() + l * BT * width; };
    const T* res_in = l == 0 ? a.encoded.data() : of(a.res_out, C) - BT * C;
    T* qkv = of(a.qkv, QKV);
    kc::mark(phases_, "RMSNorm (fwd)");
    kc::rmsnorm_forward(of(a.attn_norm, C), of(a.attn_rstd, 1), res_in, w + o.attn_norm, N, C, eps, stream_);
    kc::mark(phases_, "attention matmuls (fwd)");
    kc::matmul_nt_forward(blas_, qkv, of(a.attn_norm, C), w + o.qkv, off_.has_qkv_bias ? w + o.qkv_bias : none, N, C,
                          QKV);
    kc::mark(phases_, "rotary (fwd)");
    kc::rope_forward(qkv, rope_cos_.data(), rope_sin_.data(), B, Tn, NH, hs, QKV, stream_);
    kc::rope_forward(qkv + NH * hs, rope_cos_.data(), rope_sin_.data(), B, Tn, KV, hs, QKV, stream_);
    kc::mark(phases_, "attention (fwd)");
    attention_.forward(of(a.atty, C), of(a.att, NH * Tn), of(a.lse, NH), qkv, B);
    kc::mark(phases_, "attention matmuls (fwd)");
    kc::matmul_nt_forward(blas_, a.proj.data(), of(a.atty, C), w + o.o, none, N, C, C);
    kc::mark(phases_, "residual (fwd)");
    kc::add(of(a.res_mid, C), res_in, a.proj.data(), BT * C, stream_);
    kc::mark(phases_, "RMSNorm (fwd)");
    kc::rmsnorm_forward(of(a.mlp_norm, C), of(a.mlp_rstd, 1), of(a.res_mid, C), w + o.mlp_norm, N, C, eps, stream_);
    kc::mark(phases_, "MLP matmuls (fwd)");
    kc::matmul_nt_forward(blas_, of(a.gate_up, 2 * F), of(a.mlp_norm, C), w + o.gate_up, none, N, C, 2 * F);
    kc::mark(phases_, "SwiGLU (fwd)");
    kc::swiglu_forward(of(a.act, F), of(a.gate_up, 2 * F), N, F, stream_);
    kc::mark(phases_, "MLP matmuls (fwd)");
    kc::matmul_nt_forward(blas_, a.proj.data(), of(a.act, F), w + o.down, none, N, F, C);
    kc::mark(phases_, "residual (fwd)");
    kc::add(of(a.res_out, C), of(a.res_mid, C), a.proj.data(), BT * C, stream_);
  }
  const T* last = a.res_out.data() + (config_.n_layer - 1) * BT * C;
  kc::mark(phases_, "RMSNorm (fwd)");
  kc::rmsnorm_forward(a.norm_out.data(), a.norm_rstd.data(), last, w + off_.norm, N, C, eps, stream_);
  kc::mark(phases_, "output layer (fwd)");
  kc::matmul_nt_forward(blas_, a.logits.data(), a.norm_out.data(), w + off_.head, none, N, C, V, logits_ld_);
  if (!targets) {
    kc::mark(phases_, nullptr);
    return 0.0f;
  }
  logits_grad_scale_ = backward_scale;
  return batch_loss(a.logits.data(), a.losses.data(), targets_.data(), {N, V, logits_ld_}, backward_scale, host_losses_,
                    stream_, phases_);
}

template <class T>
void CudaLlama<T>::backward(float loss_scale) {
  MERIDIAN_CHECK(B_ >= 1 && have_targets_, "backward() needs a forward() with targets first");
  const int B = B_, Tn = config_.seq_len, C = config_.d_model, NH = config_.n_head, KV = config_.kv_heads();
  const int hs = config_.head_size(), V = config_.vocab, F = config_.ffn_hidden, QKV = qkv_width();
  const std::size_t BT = static_cast<std::size_t>(B) * Tn;
  const int N = static_cast<int>(BT);
  auto& a = acts_;
  const T* w = weights_.weights();
  float* g = weights_.grads();

  T* dlogits = a.logits.data();
  logits_gradient(dlogits, a.losses.data(), targets_.data(), {N, V, logits_ld_}, loss_scale,
                  std::exchange(logits_grad_scale_, std::nullopt), stream_, phases_);
  kc::mark(phases_, "output layer (bwd)");
  kc::matmul_nt_backward(blas_, a.dln.data(), g + off_.head, nullptr, dlogits, a.norm_out.data(), w + off_.head, N, C, V,
                         logits_ld_);
  kc::mark(phases_, "RMSNorm (bwd)");
  MERIDIAN_CUDA(cudaMemsetAsync(a.dres.data(), 0, BT * C * sizeof(T), stream_));
  const T* last = a.res_out.data() + (config_.n_layer - 1) * BT * C;
  kc::rmsnorm_backward(a.dres.data(), g + off_.norm, a.dln.data(), last, w + off_.norm, a.norm_rstd.data(), N, C,
                       stream_);
  for (int l = config_.n_layer - 1; l >= 0; --l) {
    const auto& o = off_.layers[l];
    auto of = [&](auto& buf, std::size_t width) { return buf.size() == 0 ? nullptr : buf.data() + l * BT * width; };
    const T* res_in = l == 0 ? a.encoded.data() : of(a.res_out, C) - BT * C;
    kc::mark(phases_, "MLP matmuls (bwd)");
    kc::matmul_nt_backward(blas_, a.dact.data(), g + o.down, nullptr, a.dres.data(), of(a.act, F), w + o.down, N, F, C);
    kc::mark(phases_, "SwiGLU (bwd)");
    kc::swiglu_backward(a.dgate_up.data(), of(a.gate_up, 2 * F), a.dact.data(), N, F, stream_);
    kc::mark(phases_, "MLP matmuls (bwd)");
    kc::matmul_nt_backward(blas_, a.dln.data(), g + o.gate_up, nullptr, a.dgate_up.data(), of(a.mlp_norm, C),
                           w + o.gate_up, N, C, 2 * F);
    kc::mark(phases_, "RMSNorm (bwd)");
    kc::rmsnorm_backward(a.dres.data(), g + o.mlp_norm, a.dln.data(), of(a.res_mid, C), w + o.mlp_norm,
                         of(a.mlp_rstd, 1), N, C, stream_);
    kc::mark(phases_, "attention matmuls (bwd)");
    kc::matmul_nt_backward(blas_, a.datty.data(), g + o.o, nullptr, a.dres.data(), of(a.atty, C), w + o.o, N, C, C);
    kc::mark(phases_, "attention (bwd)");
    attention_.backward(a.dqkv.data(), a.datty.data(), of(a.atty, C), of(a.qkv, QKV), of(a.att, NH * Tn), of(a.lse, NH),
                        B);
    kc::mark(phases_, "rotary (bwd)");
    kc::rope_backward(a.dqkv.data(), rope_cos_.data(), rope_sin_.data(), B, Tn, NH, hs, QKV, stream_);
    kc::rope_backward(a.dqkv.data() + NH * hs, rope_cos_.data(), rope_sin_.data(), B, Tn, KV, hs, QKV, stream_);
    kc::mark(phases_, "attention matmuls (bwd)");
    kc::matmul_nt_backward(blas_, a.dln.data(), g + o.qkv, off_.has_qkv_bias ? g + o.qkv_bias : nullptr, a.dqkv.data(),
                           of(a.attn_norm, C), w + o.qkv, N, C, QKV);
    kc::mark(phases_, "RMSNorm (bwd)");
    kc::rmsnorm_backward(a.dres.data(), g + o.attn_norm, a.dln.data(), res_in, w + o.attn_norm, of(a.attn_rstd, 1), N,
                         C, stream_);
  }
  kc::mark(phases_, "embedding (bwd)");
  kc::encoder_backward(g + off_.embed, nullptr, a.dres.data(), inputs_.data(), B, Tn, C, stream_);
  kc::mark(phases_, nullptr);
  have_targets_ = false;  // the logits now hold their gradient
}

template <class T>
std::vector<float> CudaLlama<T>::logits() const {
  const std::size_t rows = static_cast<std::size_t>(B_) * config_.seq_len, V = config_.vocab;
  const std::size_t padded = rows * logits_ld_;  // the padding columns come along and are dropped here
  std::vector<float> out(rows * V);
  kc::DeviceBuffer<float> wide(padded);
  kc::widen_to_f32(wide.data(), acts_.logits.data(), padded, stream_);
  MERIDIAN_CUDA(cudaStreamSynchronize(stream_));
  MERIDIAN_CUDA(cudaMemcpy2D(out.data(), V * sizeof(float), wide.data(), logits_ld_ * sizeof(float), V * sizeof(float),
                             rows, cudaMemcpyDeviceToHost));
  return out;
}

template class CudaLlama<float>;
template class CudaLlama<__nv_bfloat16>;
template class CudaLlama<__half>;

}  // namespace meridian
