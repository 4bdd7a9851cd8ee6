// int8 and int4 blockwise codecs: symmetric, one fp32 scale per block (wire format in codec.hpp).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/util/error.hpp"
#include "crosssite/codec/codec_impl.hpp"

namespace meridian {

namespace {

template <int Bits>
constexpr float kQmax = Bits == 8 ? 127.0f : 7.0f;

// Adding and subtracting 1.5 * 2^23 rounds |v| < 2^22 to the nearest integer, ties to even, in
// plain float arithmetic: unlike std::nearbyint it vectorizes without -ffast-math or SSE4.1.
float round_even(float v) {
  constexpr float kMagic = 12582912.0f;
  return (v + kMagic) - kMagic;
}

template <int Bits>
std::uint8_t quantize(float v) {
  return static_cast<std::uint8_t>(static_cast<int>(std::clamp(round_even(v), -kQmax<Bits>, kQmax<Bits>)));
}

// Writes the block's values; scaled(v) maps a value to the integer grid before rounding. The
// uint8_t payload may alias anything as far as the compiler knows: __restrict lets it vectorize.
template <int Bits, class Scaled>
void store_block(const float* __restrict x, std::size_t len, std::uint8_t* __restrict q, Scaled scaled) {
  if constexpr (Bits == 8) {
    for (std::size_t i = 0; i < len; ++i) q[i] = quantize<8>(scaled(x[i]));
  } else {
    for (std::size_t j = 0; j < len / 2; ++j)
      q[j] = static_cast<std::uint8_t>((quantize<4>(scaled(x[2 * j])) & 0xF) |
                                       (quantize<4>(scaled(x[2 * j + 1])) << 4));
    if (len % 2) q[len / 2] = quantize<4>(scaled(x[len - 1])) & 0xF;
  }
}

// False if the block holds a non-finite value.
template <int Bits>
bool encode_block(const float* x, std::size_t len, std::byte* scale_out, std::uint8_t* q) {
  std::uint32_t worst = 0;
  for (std::size_t i = 0; i < len; ++i) worst = std::max(worst, std::bit_cast<std::uint32_t>(x[i]) & kAbsMask);
  if (worst >= kExpMask) return false;
  float scale = std::bit_cast<float>(worst) / kQmax<Bits>;
  // The decoder rejects a scale whose largest step overflows; near FLT_MAX the rounded quotient can.
  if (!std::isfinite(scale * kQmax<Bits>)) scale = std::nextafter(scale, 0.0f);
  std::memcpy(scale_out, &scale, sizeof scale);
  if (scale >= std::numeric_limits<float>::min()) {
    const float inv = 1.0f / scale;
    store_block<Bits>(x, len, q, [inv](float v) { return v * inv; });
  } else if (scale > 0.0f) {  // subnormal: 1/scale would overflow
    store_block<Bits>(x, len, q, [scale](float v) { return v / scale; });
  } else {
    store_block<Bits>(x, len, q, [](float) { return 0.0f; });
  }
  return true;
}

// A plain ternary: g++ 12 vectorizes it where it does not vectorize std::max or a float clamp.
int at_least(int v, int lo) { return v < lo ? lo : v; }

bool valid_scale(float scale, float qmax) { return scale >= 0.0f && std::isfinite(scale * qmax); }

// False if the scale is malformed. Stored values outside [-qmax, qmax] are never produced by an
// encoder; they are clamped rather than rejected, which keeps the result finite at no cost.
template <int Bits>
bool decode_block(const std::byte* scale_in, const std::uint8_t* __restrict q, std::size_t len, float* __restrict y) {
  float scale;
  std::memcpy(&scale, scale_in, sizeof scale);
  if (!valid_scale(scale, kQmax<Bits>)) return false;
  if constexpr (Bits == 8) {
    for (std::size_t i = 0; i < len; ++i)
      y[i] = static_cast<float>(at_least(static_cast<std::int8_t>(q[i]), -127)) * scale;
  } else {
    // Sign-extend each nibble by shifting it to the top of an int8 and back.
    for (std::size_t j = 0; j < len / 2; ++j) {
      const auto lo = static_cast<std::int8_t>(static_cast<std::int8_t>(q[j] << 4) >> 4);
      const auto hi = static_cast<std::int8_t>(static_cast<std::int8_t>(q[j]) >> 4);
      y[2 * j] = static_cast<float>(at_least(lo, -7)) * scale;
      y[2 * j + 1] = static_cast<float>(at_least(hi, -7)) * scale;
    }
    if (len % 2) {
      const auto lo = static_cast<std::int8_t>(static_cast<std::int8_t>(q[len / 2] << 4) >> 4);
      y[len - 1] = static_cast<float>(at_least(lo, -7)) * scale;
    }
  }
  return true;
}

constexpr std::size_t payload_offset(std::size_t elem, int bits) { return bits == 8 ? elem : elem / 2; }

}  // namespace

template <int Bits>
void encode_blockwise(std::span<const float> x, std::size_t block, std::byte* out) {
  const std::size_t n = x.size(), blocks = (n + block - 1) / block;
  auto* payload = reinterpret_cast<std::uint8_t*>(out + 4 * blocks);
  bool bad = false;
#pragma omp parallel for schedule(static) reduction(|| : bad) if (n > kParallelMin)
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::size_t start = b * block, len = std::min(block, n - start);
    bad = !encode_block<Bits>(x.data() + start, len, out + 4 * b, payload + payload_offset(start, Bits)) || bad;
  }
  if (bad) throw make_error(ErrorKind::Data, "codec: non-finite value at index ", first_non_finite(x));
}

template <int Bits>
void decode_blockwise(const std::byte* in, std::size_t block, std::span<float> y) {
  const std::size_t n = y.size(), blocks = (n + block - 1) / block;
  const auto* payload = reinterpret_cast<const std::uint8_t*>(in + 4 * blocks);
  bool bad = false;
#pragma omp parallel for schedule(static) reduction(|| : bad) if (n > kParallelMin)
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::size_t start = b * block, len = std::min(block, n - start);
    bad = !decode_block<Bits>(in + 4 * b, payload + payload_offset(start, Bits), len, y.data() + start) || bad;
  }
  if (!bad) return;
  for (std::size_t b = 0; b < blocks; ++b) {
    float scale;
    std::memcpy(&scale, in + 4 * b, sizeof scale);
    if (!valid_scale(scale, kQmax<Bits>))
      throw make_error(ErrorKind::Peer, "codec int", Bits, ": block ", b, " has an invalid scale ", scale,
                       " (negative, non-finite or overflowing)");
  }
}

template void encode_blockwise<8>(std::span<const float>, std::size_t, std::byte*);
template void encode_blockwise<4>(std::span<const float>, std::size_t, std::byte*);
template void decode_blockwise<8>(const std::byte*, std::size_t, std::span<float>);
template void decode_blockwise<4>(const std::byte*, std::size_t, std::span<float>);

}  // namespace meridian
