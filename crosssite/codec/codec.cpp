// Header, validation and dispatch; fp32 and bf16. The blockwise integer codecs are in block_codecs.cpp.
#include "crosssite/codec/codec.hpp"

#include <algorithm>
#include <bit>
#include <cstring>

#include "core/util/error.hpp"
#include "crosssite/codec/codec_impl.hpp"

namespace meridian {

static_assert(std::endian::native == std::endian::little, "the codec wire format is little-endian");

std::optional<CodecKind> parse_codec(std::string_view name) {
  if (name == "fp32") return CodecKind::Fp32;
  if (name == "bf16") return CodecKind::Bf16;
  if (name == "int8") return CodecKind::Int8;
  if (name == "int4") return CodecKind::Int4;
  if (name == "sparse") return CodecKind::Sparse;
  return std::nullopt;
}

std::string_view to_string(CodecKind kind) {
  switch (kind) {
    case CodecKind::Fp32: return "fp32";
    case CodecKind::Bf16: return "bf16";
    case CodecKind::Int8: return "int8";
    case CodecKind::Int4: return "int4";
    case CodecKind::Sparse: return "sparse";
  }
  return "unknown";
}

namespace {

// Sparse is at 3 (1: u16 positions and two levels; 2: Rice-coded gaps and two levels; 3: one
// level and signs): a peer on an old layout is refused by name rather than misread.
std::uint8_t format_version(CodecKind kind) { return kind == CodecKind::Sparse ? 3 : 1; }

bool is_blockwise(CodecKind kind) {
  return kind == CodecKind::Int8 || kind == CodecKind::Int4 || kind == CodecKind::Sparse;
}

// Why the block (or sparse's keep) is unusable for this kind, or nullptr.
const char* block_problem(CodecKind kind, std::int64_t block, std::int64_t keep) {
  if (kind != CodecKind::Sparse && keep != 0) return "keeps entries: only sparse does";
  if (!is_blockwise(kind)) return block == 0 ? nullptr : "must be 0 for a codec without scales";
  if (block < 1 || block > kCodecMaxBlock) return "must be in [1, 2^20]";
  if (kind == CodecKind::Int4 && block % 2 != 0) return "must be even for int4";
  if (kind == CodecKind::Sparse && block > kSparseMaxBlock) return "must be at most 2^16 for sparse";
  if (kind == CodecKind::Sparse && (keep < 1 || keep > block)) return "keeps entries outside [1, block]";
  if (kind == CodecKind::Sparse && keep > 0xFFFF) return "keeps more entries than the header's 16 bits hold";
  return nullptr;
}

std::size_t size_for(std::size_t n, CodecKind kind, std::size_t block, std::size_t keep) {
  switch (kind) {
    case CodecKind::Sparse: return kCodecHeaderBytes + sparse_size(n, block, keep);
    case CodecKind::Fp32: return kCodecHeaderBytes + 4 * n;
    case CodecKind::Bf16: return kCodecHeaderBytes + 2 * n;
    case CodecKind::Int8: return kCodecHeaderBytes + 4 * ((n + block - 1) / block) + n;
    case CodecKind::Int4: return kCodecHeaderBytes + 4 * ((n + block - 1) / block) + (n + 1) / 2;
  }
  return 0;
}

std::uint16_t to_bf16(float v) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(v);
  const std::uint32_t rounded = (bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16;
  // Rounding up from the largest finite bf16 carries into the Inf exponent: saturate instead.
  return static_cast<std::uint16_t>((rounded & 0x7F80u) == 0x7F80u ? rounded - 1 : rounded);
}

// Runs chunk(begin, end) over [0, n) in kChunk pieces (in parallel for large n); each returns the
// largest |bits| it saw, and the result says whether any was Inf or NaN. Chunks are independent,
// so the output does not depend on the thread count.
template <class Chunk>
bool any_non_finite(std::size_t n, Chunk chunk) {
  bool bad = false;
#pragma omp parallel for schedule(static) reduction(|| : bad) if (n > kParallelMin)
  for (std::size_t c = 0; c < n; c += kChunk) bad = bad || chunk(c, std::min(n, c + kChunk)) >= kExpMask;
  return bad;
}

std::uint32_t abs_bits(float v) { return std::bit_cast<std::uint32_t>(v) & kAbsMask; }

void encode_fp32(std::span<const float> x, std::byte* out) {
  const bool bad = any_non_finite(x.size(), [&](std::size_t c, std::size_t end) {
    std::uint32_t worst = 0;
    for (std::size_t i = c; i < end; ++i) worst = std::max(worst, abs_bits(x[i]));
    std::memcpy(out + 4 * c, x.data() + c, 4 * (end - c));
    return worst;
  });
  if (bad) throw make_error(ErrorKind::Data, "codec: non-finite value at index ", first_non_finite(x));
}

void encode_bf16(std::span<const float> x, std::byte* out) {
  const bool bad = any_non_finite(x.size(), [&](std::size_t c, std::size_t end) {
    std::uint32_t worst = 0;
    std::uint16_t packed[kChunk];
    for (std::size_t i = c; i < end; ++i) {
      worst = std::max(worst, abs_bits(x[i]));
      packed[i - c] = to_bf16(x[i]);
    }
    std::memcpy(out + 2 * c, packed, 2 * (end - c));
    return worst;
  });
  if (bad) throw make_error(ErrorKind::Data, "codec: non-finite value at index ", first_non_finite(x));
}

// Decoded values are checked after the copy: a peer must never hand us Inf or NaN to apply.
void decode_fp32(const std::byte* in, std::span<float> y) {
  const bool bad = any_non_finite(y.size(), [&](std::size_t c, std::size_t end) {
    std::memcpy(y.data() + c, in + 4 * c, 4 * (end - c));
    std::uint32_t worst = 0;
    for (std::size_t i = c; i < end; ++i) worst = std::max(worst, abs_bits(y[i]));
    return worst;
  });
  if (bad) throw make_error(ErrorKind::Peer, "codec: fp32 payload has a non-finite value at index ", first_non_finite(y));
}

void decode_bf16(const std::byte* in, std::span<float> y) {
  const bool bad = any_non_finite(y.size(), [&](std::size_t c, std::size_t end) {
    std::uint16_t packed[kChunk];
    std::memcpy(packed, in + 2 * c, 2 * (end - c));
    std::uint32_t worst = 0;
    for (std::size_t i = c; i < end; ++i) {
      const std::uint32_t bits = std::uint32_t{packed[i - c]} << 16;
      worst = std::max(worst, bits & kAbsMask);
      y[i] = std::bit_cast<float>(bits);
    }
    return worst;
  });
  if (bad) throw make_error(ErrorKind::Peer, "codec: bf16 payload has a non-finite value at index ", first_non_finite(y));
}

template <class T>
T read_le(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace

std::size_t encoded_size(std::size_t n, const CodecOptions& options) {
  const std::int64_t block = is_blockwise(options.kind) ? options.block : 0;
  const std::int64_t keep = options.kind == CodecKind::Sparse ? options.keep : 0;
  if (const char* problem = block_problem(options.kind, block, keep))
    throw make_error(ErrorKind::Config, "codec ", to_string(options.kind), ": block ", options.block, " keep ", keep,
                     ": ", problem);
  return size_for(n, options.kind, static_cast<std::size_t>(block), static_cast<std::size_t>(keep));
}

void encode(std::span<const float> x, const CodecOptions& options, std::span<std::byte> out) {
  const std::size_t size = encoded_size(x.size(), options);
  MERIDIAN_CHECK(out.size() == size, "codec output buffer has ", out.size(), " bytes, needs ", size);
  const std::uint32_t block = is_blockwise(options.kind) ? static_cast<std::uint32_t>(options.block) : 0;
  const std::uint16_t keep = options.kind == CodecKind::Sparse ? static_cast<std::uint16_t>(options.keep) : 0;
  const std::uint64_t n = x.size();
  std::byte* p = out.data();
  std::memset(p, 0, kCodecHeaderBytes);
  p[0] = static_cast<std::byte>(options.kind);
  p[1] = static_cast<std::byte>(format_version(options.kind));
  std::memcpy(p + 2, &keep, 2);
  std::memcpy(p + 4, &block, 4);
  std::memcpy(p + 8, &n, 8);
  p += kCodecHeaderBytes;
  switch (options.kind) {
    case CodecKind::Fp32: encode_fp32(x, p); break;
    case CodecKind::Bf16: encode_bf16(x, p); break;
    case CodecKind::Int8: encode_blockwise<8>(x, block, p); break;
    case CodecKind::Int4: encode_blockwise<4>(x, block, p); break;
    case CodecKind::Sparse: encode_sparse(x, block, keep, p); break;
  }
}

void decode(std::span<const std::byte> in, std::span<float> y) {
  if (in.size() < kCodecHeaderBytes)
    throw make_error(ErrorKind::Peer, "codec: message of ", in.size(), " bytes is shorter than the ",
                     kCodecHeaderBytes, "-byte header");
  const auto kind_id = read_le<std::uint8_t>(in.data());
  const auto version = read_le<std::uint8_t>(in.data() + 1);
  const auto keep = read_le<std::uint16_t>(in.data() + 2);
  const auto block = read_le<std::uint32_t>(in.data() + 4);
  const auto n = read_le<std::uint64_t>(in.data() + 8);
  if (kind_id > static_cast<std::uint8_t>(CodecKind::Sparse))
    throw make_error(ErrorKind::Peer, "codec: unknown codec id ", int{kind_id});
  const auto kind = static_cast<CodecKind>(kind_id);
  if (version != format_version(kind))
    throw make_error(ErrorKind::Peer, "codec: unsupported format version ", int{version});
  if (const char* problem = block_problem(kind, block, keep))
    throw make_error(ErrorKind::Peer, "codec ", to_string(kind), ": block ", block, " keep ", keep, ": ", problem);
  // n is checked against the real output before it is used in any size arithmetic.
  if (n != y.size())
    throw make_error(ErrorKind::Peer, "codec: message carries ", n, " values, expected ", y.size());
  const std::size_t want = size_for(y.size(), kind, block, keep);
  if (in.size() != want)
    throw make_error(ErrorKind::Peer, "codec ", to_string(kind), ": message has ", in.size(), " bytes, expected ", want);
  const std::byte* p = in.data() + kCodecHeaderBytes;
  switch (kind) {
    case CodecKind::Fp32: decode_fp32(p, y); break;
    case CodecKind::Bf16: decode_bf16(p, y); break;
    case CodecKind::Int8: decode_blockwise<8>(p, block, y); break;
    case CodecKind::Int4: decode_blockwise<4>(p, block, y); break;
    case CodecKind::Sparse: decode_sparse(p, block, keep, y); break;
  }
}

}  // namespace meridian
