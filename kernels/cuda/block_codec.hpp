#pragma once
// The int8/int4 blockwise delta codecs on the device, with error feedback fused in. They write and
// read the payload of the wire format that crosssite/codec/codec.hpp defines (everything after its
// 16-byte header: ceil(n/block) fp32 scales, then the packed values) and produce the same bytes as
// the CPU codec for the same input: scales by IEEE division, values by the reciprocal (division
// for a subnormal scale), rounding to nearest even, all without contraction. The header, and
// turning a non-finite input or a malformed scale into Error(Data)/Error(Peer), stay with
// crosssite/codec, which owns the format; these kernels know nothing about sites or rounds.
#include <cuda_runtime_api.h>

#include <cstddef>

namespace meridian::kernels::cuda {

// Encodes t = x + residual (residual null: t = x) with `bits` = 8 or 4 into out (4-byte aligned;
// block even for int4). With a residual, leaves residual = t - decode(out), as ErrorFeedback does.
// False when t holds a non-finite value; the residual is then untouched and out unspecified.
// Waits for the stream.
bool encode_blockwise(int bits, const float* x, float* residual, std::size_t n, std::size_t block, void* out,
                      cudaStream_t stream);

// Decodes into y. False when a block's scale is negative, non-finite or overflows (y is then
// unspecified). Waits for the stream.
bool decode_blockwise(int bits, const void* in, std::size_t n, std::size_t block, float* y, cudaStream_t stream);

}  // namespace meridian::kernels::cuda
