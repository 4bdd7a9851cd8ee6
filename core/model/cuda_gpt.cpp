#include "core/model/cuda_gpt.hpp"

#include <type_traits>
#include <utility>

#include "core/model/cuda_loss.hpp"
#include "core/util/error.hpp"
#include "kernels/cuda/elementwise.hpp"
#include "kernels/cuda/encoder.hpp"
#include "kernels/cuda/gelu.hpp"
#include "kernels/cuda/layernorm.hpp"
#include "kernels/cuda/matmul.hpp"

namespace meridian {

namespace kc = kernels::cuda;

template <class T>
CudaGpt<T>::CudaGpt(const ModelConfig& config, cudaStream_t stream, CudaAttention attention, int logits_align)
    : config_(config),
      layout_(ParamLayout::of(config)),
      stream_(stream),
      logits_ld_(logits_stride(config.vocab, logits_align)),
      blas_(stream),
      attention_(attention, blas_, stream, config.seq_len, config.n_head, config.n_head,
                 config.d_model / config.n_head),
      off_(gpt_offsets(layout_, config.n_layer)),
      weights_(layout_.total(), stream) {
  const auto problems = validate_model_config(config);
  MERIDIAN_CHECK(problems.empty(), "invalid model shape: ", problems.empty() ? "" : problems.front());
  MERIDIAN_CHECK(config.family == ModelFamily::Gpt2, "CudaGpt of a ", to_string(config.family), " shape");
}

template <class T>
void CudaGpt<T>::reserve(int B) {
  if (attention_.prepare(B)) capacity_ = 0;  // the layers now keep probabilities instead of log-sum-exps
  if (B <= capacity_) return;
  const std::size_t L = config_.n_layer, C = config_.d_model, NH = config_.n_head;
  const std::size_t Tn = config_.seq_len, BT = static_cast<std::size_t>(B) * Tn;
  auto& a = acts_;
  a = Activations{};  // free the smaller set first
  a.encoded = Buf<T>(BT * C);
  a.ln1 = Buf<T>(L * BT * C);
  a.ln1_mean = Buf<float>(L * BT);
  a.ln1_rstd = Buf<float>(L * BT);
  a.qkv = Buf<T>(L * BT * 3 * C);
  a.atty = Buf<T>(L * BT * C);
  if (attention_.keeps_probabilities())
    a.att = Buf<T>(L * B * NH * Tn * Tn);
  else
    a.lse = Buf<float>(L * BT * NH);
  a.attproj = Buf<T>(L * BT * C);
  a.res2 = Buf<T>(L * BT * C);
  a.ln2 = Buf<T>(L * BT * C);
  a.ln2_mean = Buf<float>(L * BT);
  a.ln2_rstd = Buf<float>(L * BT);
  a.fch = Buf<T>(L * BT * 4 * C);
  a.fch_gelu = Buf<T>(L * BT * 4 * C);
  a.fcproj = Buf<T>(L * BT * C);
  a.res3 = Buf<T>(L * BT * C);
  a.lnf = Buf<T>(BT * C);
  a.lnf_mean = Buf<float>(BT);
  a.lnf_rstd = Buf<float>(BT);
  a.logits = Buf<T>(BT * logits_ld_);  // backward overwrites it with its gradient
  a.losses = Buf<float>(BT);
  a.dres = Buf<T>(BT * C);
  a.dln = Buf<T>(BT * C);
  a.dqkv = Buf<T>(BT * 3 * C);
  a.datty = Buf<T>(BT * C);
  a.dfch = Buf<T>(BT * 4 * C);
  a.dfch_gelu = Buf<T>(BT * 4 * C);
  inputs_ = Buf<std::int32_t>(BT);
  targets_ = Buf<std::int32_t>(BT);
  host_losses_.resize(BT);
  capacity_ = B;
}

template <class T>
float CudaGpt<T>::forward(const std::int32_t* inputs, const std::int32_t* targets, int B,
                          std::optional<float> backward_scale) {
  MERIDIAN_CHECK(B >= 1, "B=", B);
  reserve(B);
  B_ = B;
  have_targets_ = targets != nullptr;
  logits_grad_scale_.reset();
  const int Tn = config_.seq_len, C = config_.d_model, NH = config_.n_head, V = config_.vocab;
  const std::size_t BT = static_cast<std::size_t>(B) * Tn;
  const int N = static_cast<int>(BT);
  MERIDIAN_CUDA(cudaMemcpyAsync(inputs_.data(), inputs, BT * sizeof(std::int32_t), cudaMemcpyHostToDevice, stream_));
  if (targets)
    MERIDIAN_CUDA(
        cudaMemcpyAsync(targets_.data(), targets, BT * sizeof(std::int32_t), cudaMemcpyHostToDevice, stream_));
  auto& a = acts_;
  const T* w = weights_.weights();
  kc::mark(phases_, "embedding (fwd)");
  kc::encoder_forward(a.encoded.data(), inputs_.data(), w + off_.wte, w + off_.wpe, B, Tn, C, stream_);
  for (int l = 0; l < config_.n_layer; ++l) {
    const auto& o = off_.layers[l];
    // Layer l's slice of an activation kept for every layer, `width` values per position.
    auto of = [&](auto& buf, std::size_t width) { return buf.size() == 0 ? nullptr : buf.data() + l * BT * width; };
    const T* res_in = l == 0 ? a.encoded.data() : a.res3.data() + (l - 1) * BT * C;
    kc::mark(phases_, "layernorm (fwd)");
    kc::layernorm_forward(of(a.ln1, C), of(a.ln1_mean, 1), of(a.ln1_rstd, 1), res_in, w + o[0], w + o[1], N, C,
                          stream_);
    kc::mark(phases_, "attention matmuls (fwd)");
    kc::matmul_forward(blas_, of(a.qkv, 3 * C), of(a.ln1, C), w + o[2], w + o[3], N, C, 3 * C);
    kc::mark(phases_, "attention (fwd)");
    attention_.forward(of(a.atty, C), of(a.att, NH * Tn), of(a.lse, NH), of(a.qkv, 3 * C), B);
    kc::mark(phases_, "attention matmuls (fwd)");
    kc::matmul_forward(blas_, of(a.attproj, C), of(a.atty, C), w + o[4], w + o[5], N, C, C);
    kc::mark(phases_, "residual (fwd)");
    kc::add(of(a.res2, C), res_in, of(a.attproj, C), BT * C, stream_);
    kc::mark(phases_, "layernorm (fwd)");
    kc::layernorm_forward(of(a.ln2, C), of(a.ln2_mean, 1), of(a.ln2_rstd, 1), of(a.res2, C), w + o[6], w + o[7], N,
                          C, stream_);
    kc::mark(phases_, "MLP matmuls (fwd)");
    kc::matmul_forward(blas_, of(a.fch, 4 * C), of(a.ln2, C), w + o[8], w + o[9], N, C, 4 * C);
    kc::mark(phases_, "GELU (fwd)");
    kc::gelu_forward(of(a.fch_gelu, 4 * C), of(a.fch, 4 * C), BT * 4 * C, stream_);
    kc::mark(phases_, "MLP matmuls (fwd)");
    kc::matmul_forward(blas_, of(a.fcproj, C), of(a.fch_gelu, 4 * C), w + o[10], w + o[11], N, 4 * C, C);
    kc::mark(phases_, "residual (fwd)");
    kc::add(of(a.res3, C), of(a.res2, C), of(a.fcproj, C), BT * C, stream_);
  }
  const T* last = a.res3.data() + (config_.n_layer - 1) * BT * C;
  kc::mark(phases_, "layernorm (fwd)");
  kc::layernorm_forward(a.lnf.data(), a.lnf_mean.data(), a.lnf_rstd.data(), last, w + off_.lnf_weight, w + off_.lnf_bias, N, C, stream_);
  kc::mark(phases_, "output layer (fwd)");
  kc::matmul_nt_forward(blas_, a.logits.data(), a.lnf.data(), w + off_.wte, static_cast<const T*>(nullptr), N, C, V,
                        logits_ld_);
  if (!targets) {
    kc::mark(phases_, nullptr);
    return 0.0f;
  }
  logits_grad_scale_ = backward_scale;
  return batch_loss(a.logits.data(), a.losses.data(), targets_.data(), {N, V, logits_ld_}, backward_scale, host_losses_,
                    stream_, phases_);
}

template <class T>
void CudaGpt<T>::backward(float loss_scale) {
  MERIDIAN_CHECK(B_ >= 1 && have_targets_, "backward() needs a forward() with targets first");
  const int B = B_, Tn = config_.seq_len, C = config_.d_model, NH = config_.n_head, V = config_.vocab;
  const std::size_t BT = static_cast<std::size_t>(B) * Tn;
  const int N = static_cast<int>(BT);
  auto& a = acts_;
  const T* w = weights_.weights();
  float* g = weights_.grads();

  T* dlogits = a.logits.data();
  logits_gradient(dlogits, a.losses.data(), targets_.data(), {N, V, logits_ld_}, loss_scale,
                  std::exchange(logits_grad_scale_, std::nullopt), stream_, phases_);
  kc::mark(phases_, "output layer (bwd)");
  kc::matmul_nt_backward(blas_, a.dln.data(), g + off_.wte, nullptr, dlogits, a.lnf.data(), w + off_.wte, N, C, V,
                         logits_ld_);
  kc::mark(phases_, "layernorm (bwd)");
  MERIDIAN_CUDA(cudaMemsetAsync(a.dres.data(), 0, BT * C * sizeof(T), stream_));
  const T* last = a.res3.data() + (config_.n_layer - 1) * BT * C;
  kc::layernorm_backward(a.dres.data(), g + off_.lnf_weight, g + off_.lnf_bias, a.dln.data(), last, w + off_.lnf_weight, a.lnf_mean.data(),
                         a.lnf_rstd.data(), N, C, stream_);
  for (int l = config_.n_layer - 1; l >= 0; --l) {
    const auto& o = off_.layers[l];
    auto of = [&](auto& buf, std::size_t width) { return buf.size() == 0 ? nullptr : buf.data() + l * BT * width; };
    const T* res_in = l == 0 ? a.encoded.data() : a.res3.data() + (l - 1) * BT * C;
    kc::mark(phases_, "MLP matmuls (bwd)");
    kc::matmul_backward(blas_, a.dfch_gelu.data(), g + o[10], g + o[11], a.dres.data(), of(a.fch_gelu, 4 * C),
                        w + o[10], N, 4 * C, C);
    kc::mark(phases_, "GELU (bwd)");
    kc::gelu_backward(a.dfch.data(), of(a.fch, 4 * C), a.dfch_gelu.data(), BT * 4 * C, stream_);
    kc::mark(phases_, "MLP matmuls (bwd)");
    kc::matmul_backward(blas_, a.dln.data(), g + o[8], g + o[9], a.dfch.data(), of(a.ln2, C), w + o[8], N, C, 4 * C);
    kc::mark(phases_, "layernorm (bwd)");
    kc::layernorm_backward(a.dres.data(), g + o[6], g + o[7], a.dln.data(), of(a.res2, C), w + o[6], of(a.ln2_mean, 1),
                           of(a.ln2_rstd, 1), N, C, stream_);
    kc::mark(phases_, "attention matmuls (bwd)");
    kc::matmul_backward(blas_, a.datty.data(), g + o[4], g + o[5], a.dres.data(), of(a.atty, C), w + o[4], N, C, C);
    kc::mark(phases_, "attention (bwd)");
    attention_.backward(a.dqkv.data(), a.datty.data(), of(a.atty, C), of(a.qkv, 3 * C), of(a.att, NH * Tn),
                        of(a.lse, NH), B);
    kc::mark(phases_, "attention matmuls (bwd)");
    kc::matmul_backward(blas_, a.dln.data(), g + o[2], g + o[3], a.dqkv.data(), of(a.ln1, C), w + o[2], N, C, 3 * C);
    kc::mark(phases_, "layernorm (bwd)");
    kc::layernorm_backward(a.dres.data(), g + o[0], g + o[1], a.dln.data(), res_in, w + o[0], of(a.ln1_mean, 1),
                           of(a.ln1_rstd, 1), N, C, stream_);
  }
  kc::mark(phases_, "embedding (bwd)");
  kc::encoder_backward(g + off_.wte, g + off_.wpe, a.dres.data(), inputs_.data(), B, Tn, C, stream_);
  kc::mark(phases_, nullptr);
  have_targets_ = false;  // the logits now hold their gradient
}

template class CudaGpt<float>;
template class CudaGpt<__nv_bfloat16>;
template class CudaGpt<__half>;

}  // namespace meridian
