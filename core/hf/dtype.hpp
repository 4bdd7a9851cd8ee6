#pragma once
// The floating-point types Hugging Face checkpoints store weights in, and their conversions to
// and from the fp32 meridian trains in.
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace meridian {

enum class HfDtype { F32, BF16, F16 };

// "F32" | "BF16" | "F16" (safetensors' names); nullopt for any other.
std::optional<HfDtype> parse_hf_dtype(std::string_view name);
std::string_view to_string(HfDtype dtype);
// "float32" | "bfloat16" | "float16" (config.json's torch_dtype)
std::string_view torch_dtype_name(HfDtype dtype);
inline std::size_t dtype_bytes(HfDtype dtype) { return dtype == HfDtype::F32 ? 4 : 2; }

inline float bits_to_f32(std::uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline std::uint32_t f32_to_bits(float f) {
  std::uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

// bfloat16 is the upper half of an fp32, so widening is exact.
inline float bf16_to_f32(std::uint16_t h) { return bits_to_f32(std::uint32_t{h} << 16); }

// Round to nearest, ties to even, as PyTorch's .to(torch.bfloat16); NaN stays a (quiet) NaN.
inline std::uint16_t f32_to_bf16(float f) {
  const std::uint32_t bits = f32_to_bits(f);
  if ((bits & 0x7F800000u) == 0x7F800000u && (bits & 0x007FFFFFu) != 0)
    return static_cast<std::uint16_t>((bits >> 16) | 0x0040u);
  const std::uint32_t rounded = bits + 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>(rounded >> 16);
}

// IEEE 754 half precision, subnormals and specials included; exact.
inline float f16_to_f32(std::uint16_t h) {
  const std::uint32_t sign = std::uint32_t{h & 0x8000u} << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1Fu;
  std::uint32_t mantissa = h & 0x3FFu;
  if (exponent == 0x1F) return bits_to_f32(sign | 0x7F800000u | (mantissa << 13));  // inf, NaN
  if (exponent != 0) return bits_to_f32(sign | ((exponent + 112) << 23) | (mantissa << 13));
  if (mantissa == 0) return bits_to_f32(sign);  // +-0
  int shift = 0;  // subnormal: normalise the mantissa
  while ((mantissa & 0x400u) == 0) {
    mantissa <<= 1;
    ++shift;
  }
  return bits_to_f32(sign | static_cast<std::uint32_t>(113 - shift) << 23 | ((mantissa & 0x3FFu) << 13));
}

}  // namespace meridian
