#pragma once
// Fused AdamW on the device, the contract (and AdamWStep) of kernels/cpu/adamw.hpp: fp32 master
// weights and moments; under mixed precision the same pass writes the bf16 (or fp16) copy the next
// forward reads, so the weights are read once per step.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstddef>

#include "kernels/cpu/adamw.hpp"

namespace meridian::kernels::cuda {

// param_bf16 may be null (fp32 training).
void adamw_update(float* param, const float* grad, float* m, float* v, std::size_t n, const AdamWStep& s,
                  __nv_bfloat16* param_bf16, cudaStream_t stream);
// The same writing an fp16 copy (fp16 mixed precision).
void adamw_update(float* param, const float* grad, float* m, float* v, std::size_t n, const AdamWStep& s,
                  __half* param_f16, cudaStream_t stream);

}  // namespace meridian::kernels::cuda
