// Products with the bias added in cuBLASLt's epilogue (gemm.hpp, gemm_bias): the bias joins the
// fp32 accumulator before the output is rounded and written once, where the plain path writes the
// bias into the output first and has the product read it back (beta = 1).
#include <cublasLt.h>

#include <cstdint>
#include <map>
#include <type_traits>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/device_buffer.hpp"
#include "kernels/cuda/gemm.hpp"

// cuBLASLt's calls return cuBLAS's status type: MERIDIAN_CUBLAS checks them.
namespace meridian::kernels::cuda {
namespace {

template <class T>
constexpr cudaDataType_t lt_type() {
  if constexpr (std::is_same_v<T, float>)
    return CUDA_R_32F;
  else if constexpr (std::is_same_v<T, __half>)
    return CUDA_R_16F;
  else
    return CUDA_R_16BF;
}

constexpr std::size_t kWorkspaceBytes = 32u << 20;  // what cuBLAS itself takes on Hopper

// One product's shape, in cuBLAS's column-major terms, its types, and its pointers' alignments
// (cuBLASLt picks kernels for the alignment it is told, 256 bytes unless told less).
struct Shape {
  bool trans_first, trans_second;
  int rows, cols, inner, ld_first, ld_second, ld_out;
  cudaDataType_t in, out;
  std::uint32_t align_first, align_second, align_out;
  auto operator<=>(const Shape&) const = default;
};

std::uint32_t alignment(const void* p) {
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  std::uint32_t a = 256;
  while (a > 1 && address % a != 0) a /= 2;
  return a;
}

// What cuBLASLt found for a shape: the descriptors and the algorithm (none: no algorithm).
struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t first = nullptr, second = nullptr, out = nullptr;
  bool found = false;
  cublasLtMatmulAlgo_t algo{};
};

cublasLtMatrixLayout_t layout(cudaDataType_t type, bool trans, int rows, int cols, int ld) {
  cublasLtMatrixLayout_t l = nullptr;
  // A transposed operand is stored as its transpose: cols x rows.
  MERIDIAN_CUBLAS(cublasLtMatrixLayoutCreate(&l, type, trans ? cols : rows, trans ? rows : cols, ld));
  return l;
}

}  // namespace

struct Blas::Lt {
  cublasLtHandle_t handle = nullptr;
  DeviceBuffer<std::uint8_t> workspace{kWorkspaceBytes};
  std::map<Shape, Plan> plans;

  Lt() { MERIDIAN_CUBLAS(cublasLtCreate(&handle)); }
  ~Lt() {
    for (auto& [shape, p] : plans) {
      cublasLtMatrixLayoutDestroy(p.first);
      cublasLtMatrixLayoutDestroy(p.second);
      cublasLtMatrixLayoutDestroy(p.out);
      cublasLtMatmulDescDestroy(p.desc);
    }
    cublasLtDestroy(handle);
  }

  Plan& plan(const Shape& s) {
    if (const auto found = plans.find(s); found != plans.end()) return found->second;
    Plan p;
    MERIDIAN_CUBLAS(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t ta = s.trans_first ? CUBLAS_OP_T : CUBLAS_OP_N,
                            tb = s.trans_second ? CUBLAS_OP_T : CUBLAS_OP_N;
    MERIDIAN_CUBLAS(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    MERIDIAN_CUBLAS(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    MERIDIAN_CUBLAS(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue));
    p.first = layout(s.in, s.trans_first, s.rows, s.inner, s.ld_first);
    p.second = layout(s.in, s.trans_second, s.inner, s.cols, s.ld_second);
    p.out = layout(s.out, false, s.rows, s.cols, s.ld_out);
    cublasLtMatmulPreference_t preference = nullptr;
    MERIDIAN_CUBLAS(cublasLtMatmulPreferenceCreate(&preference));
    const std::size_t bytes = kWorkspaceBytes;
    MERIDIAN_CUBLAS(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &bytes,
                                                         sizeof bytes));
    const std::pair<cublasLtMatmulPreferenceAttributes_t, std::uint32_t> alignments[] = {
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, s.align_first},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, s.align_second},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, s.align_out},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, s.align_out}};
    for (const auto& [attribute, value] : alignments)
      MERIDIAN_CUBLAS(cublasLtMatmulPreferenceSetAttribute(preference, attribute, &value, sizeof value));
    cublasLtMatmulHeuristicResult_t result{};
    int count = 0;
    // No algorithm is an answer (the plain path runs), not a failure.
    const cublasStatus_t asked =
        cublasLtMatmulAlgoGetHeuristic(handle, p.desc, p.first, p.second, p.out, p.out, preference, 1, &result, &count);
    cublasLtMatmulPreferenceDestroy(preference);
    p.found = asked == CUBLAS_STATUS_SUCCESS && count > 0;
    if (p.found) p.algo = result.algo;
    return plans.emplace(s, p).first->second;
  }
};

Blas::Blas(cudaStream_t stream) : stream_(stream) {
  MERIDIAN_CUBLAS(cublasCreate(&handle_));
  MERIDIAN_CUBLAS(cublasSetStream(handle_, stream_));
}

Blas::~Blas() {
  lt_.reset();  // before the handle: its plans were made beside it
  cublasDestroy(handle_);
}

Blas::Lt& Blas::lt() {
  if (!lt_) lt_ = std::make_unique<Lt>();
  return *lt_;
}

// The operands swap places as in gemm (gemm.cu): the row-major C is the column-major C^T =
// op(B)^T op(A)^T, whose rows are C's columns, so the bias (one value per column of C) is
// cuBLASLt's per-row bias of D.
template <class Tin, class Tout>
bool gemm_bias(Blas& blas, bool trans_a, bool trans_b, int M, int N, int K, const Tin* A, int lda, const Tin* B,
               int ldb, const Tout* bias, Tout* C, int ldc) {
  if (!blas.bias_epilogue || alignment(bias) < 16) return false;  // the epilogue reads the bias in 16-byte vectors
  Blas::Lt& lt = blas.lt();
  const Shape shape{trans_b,      trans_a,      N,           M, K, ldb, lda, ldc, lt_type<Tin>(), lt_type<Tout>(),
                    alignment(B), alignment(A), alignment(C)};
  Plan& p = lt.plan(shape);
  if (!p.found) return false;
  MERIDIAN_CUBLAS(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
  const float alpha = 1.0f, beta = 0.0f;
  // An algorithm the heuristics offered but the call refuses (a configuration it does not run) is
  // dropped for the shape, and the plain path computes the product: a faster path that cannot run
  // must not stop training. Any other failure (an earlier kernel's fault reported here, no memory)
  // is an error where it shows, not a refusal that would hide it. Faults inside the kernel surface
  // at the next check, as for any kernel.
  const cublasStatus_t ran = cublasLtMatmul(lt.handle, p.desc, &alpha, B, p.first, A, p.second, &beta, C, p.out, C,
                                            p.out, &p.algo, lt.workspace.data(), kWorkspaceBytes, blas.stream());
  const bool refused =
      ran == CUBLAS_STATUS_NOT_SUPPORTED || ran == CUBLAS_STATUS_INVALID_VALUE || ran == CUBLAS_STATUS_ARCH_MISMATCH;
  if (refused) {
    p.found = false;
    blas.lt_refusals.push_back(cublasGetStatusName(ran));
    return false;
  }
  MERIDIAN_CUBLAS(ran);
  ++blas.lt_products;
  return true;
}

#define MERIDIAN_GEMM_BIAS(T) \
  template bool gemm_bias<T, T>(Blas&, bool, bool, int, int, int, const T*, int, const T*, int, const T*, T*, int);
MERIDIAN_GEMM_BIAS(float)
MERIDIAN_GEMM_BIAS(__nv_bfloat16)
MERIDIAN_GEMM_BIAS(__half)
#undef MERIDIAN_GEMM_BIAS

}  // namespace meridian::kernels::cuda
