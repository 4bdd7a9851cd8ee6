#pragma once
// XXH64 as specified in xxHash's doc/xxhash_spec.md, written once for both sides: the device
// hashes parameter chunks with it (chunk_hash.cu), and the CPU build compiles the same code so
// that a test checks it against the xxHash library on machines without a GPU. Little-endian.
#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define MERIDIAN_HOST_DEVICE __host__ __device__
#else
#define MERIDIAN_HOST_DEVICE
#endif

namespace meridian::kernels::cuda::xxh64_detail {

constexpr std::uint64_t kP1 = 0x9E3779B185EBCA87ull, kP2 = 0xC2B2AE3D27D4EB4Full, kP3 = 0x165667B19E3779F9ull,
                        kP4 = 0x85EBCA77C2B2AE63ull, kP5 = 0x27D4EB2F165667C5ull;

MERIDIAN_HOST_DEVICE inline std::uint64_t rotl(std::uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

// p must be aligned to the read's size on the device; the host copies, so any p is fine there.
MERIDIAN_HOST_DEVICE inline std::uint64_t read64(const unsigned char* p) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const std::uint64_t*>(p);
#else
  std::uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
#endif
}

MERIDIAN_HOST_DEVICE inline std::uint32_t read32(const unsigned char* p) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const std::uint32_t*>(p);
#else
  std::uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
#endif
}

MERIDIAN_HOST_DEVICE inline std::uint64_t round(std::uint64_t acc, std::uint64_t input) {
  acc += input * kP2;
  return rotl(acc, 31) * kP1;
}

MERIDIAN_HOST_DEVICE inline std::uint64_t merge_round(std::uint64_t acc, std::uint64_t val) {
  acc ^= round(0, val);
  return acc * kP1 + kP4;
}

}  // namespace meridian::kernels::cuda::xxh64_detail

namespace meridian::kernels::cuda {

MERIDIAN_HOST_DEVICE inline std::uint64_t xxh64(const unsigned char* p, std::size_t len, std::uint64_t seed) {
  using namespace xxh64_detail;
  std::uint64_t h;
  std::size_t i = 0;  // bytes consumed
  if (len >= 32) {
    std::uint64_t v1 = seed + kP1 + kP2, v2 = seed + kP2, v3 = seed, v4 = seed - kP1;
    for (; i + 32 <= len; i += 32) {
      v1 = round(v1, read64(p + i));
      v2 = round(v2, read64(p + i + 8));
      v3 = round(v3, read64(p + i + 16));
      v4 = round(v4, read64(p + i + 24));
    }
    h = rotl(v1, 1) + rotl(v2, 7) + rotl(v3, 12) + rotl(v4, 18);
    h = merge_round(h, v1);
    h = merge_round(h, v2);
    h = merge_round(h, v3);
    h = merge_round(h, v4);
  } else {
    h = seed + kP5;
  }
  h += len;
  for (; i + 8 <= len; i += 8) {
    h ^= round(0, read64(p + i));
    h = rotl(h, 27) * kP1 + kP4;
  }
  if (i + 4 <= len) {
    h ^= static_cast<std::uint64_t>(read32(p + i)) * kP1;
    h = rotl(h, 23) * kP2 + kP3;
    i += 4;
  }
  for (; i < len; ++i) {
    h ^= static_cast<std::uint64_t>(p[i]) * kP5;
    h = rotl(h, 11) * kP1;
  }
  h ^= h >> 33;
  h *= kP2;
  h ^= h >> 29;
  h *= kP3;
  h ^= h >> 32;
  return h;
}

}  // namespace meridian::kernels::cuda
