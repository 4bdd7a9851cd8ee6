// CudnnAttention in a meridian configured without cuDNN's headers (cudnn.h not found next to
// the CUDA toolkit): `open` says so, and nothing else can be reached without an instance.
#include "kernels/cuda/attention_cudnn.hpp"
#include "kernels/cuda/cuda_check.hpp"

namespace meridian::kernels::cuda {

struct CudnnAttention::Impl {};

CudnnAttention::CudnnAttention(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudnnAttention::~CudnnAttention() = default;

std::string CudnnAttention::library_missing() {
  return "this meridian was built without cuDNN's headers (cudnn.h was not found at configure time)";
}

std::variant<std::unique_ptr<CudnnAttention>, std::string> CudnnAttention::open(cudaStream_t) {
  return library_missing();
}

template <class T>
std::string CudnnAttention::validate_for(int, const AttentionShape&) {
  return library_missing();
}

std::string CudnnAttention::version() const { throw CudaError("cuDNN attention: built without cuDNN"); }
std::size_t CudnnAttention::workspace_bytes() const { throw CudaError("cuDNN attention: built without cuDNN"); }

template <class T>
std::string CudnnAttention::unsupported(const AttentionShape&) {
  throw CudaError("cuDNN attention: built without cuDNN");
}

template <class T>
void CudnnAttention::forward(T*, float*, const T*, const AttentionShape&) {
  throw CudaError("cuDNN attention: built without cuDNN");
}

template <class T>
void CudnnAttention::backward(T*, const T*, const T*, const T*, const float*, const AttentionShape&) {
  throw CudaError("cuDNN attention: built without cuDNN");
}

MERIDIAN_CUDNN_ATTENTION_TYPES(__nv_bfloat16)
MERIDIAN_CUDNN_ATTENTION_TYPES(__half)

}  // namespace meridian::kernels::cuda
