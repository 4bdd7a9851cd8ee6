#pragma once
// AdamW over flat device buffers: core/optim/adamw.hpp on a GPU, with the same options, the same
// decay ranges, and moments in the parameters' layout (download them to checkpoint or send).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <span>
#include <vector>

#include "core/model/param_layout.hpp"
#include "core/optim/adamw.hpp"
#include "kernels/cuda/device_buffer.hpp"

namespace meridian {

class CudaAdamW {
 public:
  CudaAdamW(const ParamLayout& layout, AdamWOptions options, cudaStream_t stream = nullptr);

  // params, grads: device, layout.total() floats. weight_copy (may be null): the bf16 copy of
  // the weights, rewritten in the same pass (mixed precision).
  void step(float* params, const float* grads, float lr, __nv_bfloat16* weight_copy = nullptr);
  // The same for fp16 mixed precision: weight_copy is the fp16 copy.
  void step(float* params, const float* grads, float lr, __half* weight_copy);

  // Restores a saved state (a checkpoint, a healed replica): both moments and the step count
  // that sets their bias correction.
  void upload_moments(std::span<const float> m, std::span<const float> v, std::int64_t steps_taken);
  std::vector<float> download_m() const;
  std::vector<float> download_v() const;
  std::int64_t steps_taken() const { return t_; }

 private:
  template <class Copy>
  void update(float* params, const float* grads, float lr, Copy* weight_copy);

  AdamWOptions options_;
  std::vector<DecayRange> ranges_;
  cudaStream_t stream_;
  kernels::cuda::DeviceBuffer<float> m_, v_;
  std::int64_t t_ = 0;
};

}  // namespace meridian
