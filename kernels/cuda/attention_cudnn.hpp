#pragma once
// Causal self-attention through cuDNN's fused flash attention: the layouts of attention.hpp
// (grouped-query heads included), without the (T, T) probabilities:
//   qkv: (B,T,(NH+2KV)*hs) q | k | v; out: (B,T,NH*hs), query head h reading key/value head
//        h / (NH/KV); stats: (B,NH,T) fp32, one log-sum-exp per query row, written by forward
//        for backward (the tiled kernel's lse has the same shape).
// Q, K and V are read where they lie in qkv and the gradients written there by strides: no head
// is copied into another layout. The graphs are built with NVIDIA's cudnn-frontend headers
// (third_party/cudnn-frontend) once per shape and kept. cuDNN is loaded at run time
// (libcudnn.so.9): a meridian built with its headers still runs where the library is missing,
// and `open` says why it cannot be used. bf16 and fp16 only: cuDNN's flash kernels take no fp32.
// Backward runs cuDNN's deterministic algorithm, so two runs give the same bits.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <string>
#include <variant>

namespace meridian::kernels::cuda {

struct AttentionShape {
  int B = 1, Tn = 1, NH = 1, KV = 1, hs = 1;
  auto operator<=>(const AttentionShape&) const = default;
};

class CudnnAttention {
 public:
  // cuDNN loaded, its version checked and a handle made on `stream`; otherwise why not (built
  // without cuDNN's headers, libcudnn.so.9 not found, a version before 9).
  static std::variant<std::unique_ptr<CudnnAttention>, std::string> open(cudaStream_t stream);
  // Why cuDNN cannot be used on this machine whatever the device (built without its headers, or
  // libcudnn.so.9 not loadable); empty when it can be loaded.
  static std::string library_missing();
  // Whether cudnn-frontend accepts both graphs of `s` for a GPU of compute capability
  // `sm_version` (90: Hopper), checked without a device: empty, or the reason.
  template <class T>
  static std::string validate_for(int sm_version, const AttentionShape& s);
  ~CudnnAttention();
  CudnnAttention(const CudnnAttention&) = delete;
  CudnnAttention& operator=(const CudnnAttention&) = delete;

  std::string version() const;  // the loaded library's, e.g. "9.19.0"
  // The workspace the graphs built so far share (the deterministic backward's grows as B·heads·T²).
  std::size_t workspace_bytes() const;
  // Empty when cuDNN builds both graphs of `s` for T (kept for forward and backward), else its
  // reason.
  template <class T>
  std::string unsupported(const AttentionShape& s);

  template <class T>
  void forward(T* out, float* stats, const T* qkv, const AttentionShape& s);
  // dqkv is overwritten; out and stats are forward's.
  template <class T>
  void backward(T* dqkv, const T* dout, const T* out, const T* qkv, const float* stats, const AttentionShape& s);

  struct Impl;

 private:
  explicit CudnnAttention(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace meridian::kernels::cuda

// The explicit instantiations of CudnnAttention's templates, for each 16-bit type; both
// implementations (with cuDNN's headers and without) define them.
#define MERIDIAN_CUDNN_ATTENTION_TYPES(T)                                                \
  template std::string CudnnAttention::validate_for<T>(int, const AttentionShape&);      \
  template std::string CudnnAttention::unsupported<T>(const AttentionShape&);            \
  template void CudnnAttention::forward<T>(T*, float*, const T*, const AttentionShape&); \
  template void CudnnAttention::backward<T>(T*, const T*, const T*, const T*, const float*, const AttentionShape&);
