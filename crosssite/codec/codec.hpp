#pragma once
// Codecs for the pseudo-gradient deltas that sites exchange (DESIGN.md, "Data flow of one round",
// step 2). A delta is a flat fp32 vector; what travels is a self-describing byte string.
//
// Wire format, all little-endian (the host must be little-endian; checked at compile time):
//   header, 16 bytes: u8 kind | u8 format version (3 for sparse, 1 for the others) | u16 keep |
//     u32 block | u64 n
//     block is 0 for fp32 and bf16 (no scales), the elements per scale for int8 and int4, the
//     elements per selection for sparse; keep is the entries sparse keeps per block, 0 otherwise.
//   fp32: n x f32.
//   bf16: n x u16, the top half of the fp32 bits rounded to nearest, ties to even; values above
//         the largest finite bf16 saturate to it instead of becoming Inf.
//   int8: ceil(n/block) x f32 scales, then n x i8. scale = max|x| of the block / 127, q = x/scale
//         rounded to nearest, ties to even, so |x - q*scale| <= scale/2 up to float rounding.
//   int4: ceil(n/block) x f32 scales, then ceil(n/2) bytes; element i is the nibble (two's
//         complement, low nibble first) of byte i/2; scale = max|x| / 7, q in [-7, 7]. block
//         must be even so that every block owns whole bytes (blocks are coded in parallel).
//   sparse: per block of len = min(block, what is left) values, kept = min(keep, len) of them:
//         f32 level | the positions' Rice code in ceil(P/8) bytes | ceil(kept/8) bytes of signs,
//         entry j's at bit j%8 of byte j/8 (1: negative); unused bits zero. The Rice code, bits
//         least significant first: for each kept position p_j, ascending, its gap g_j = p_j -
//         p_{j-1} - 1 (g_0 = p_0) as g_j >> r zero bits, a one bit, then the low r bits of g_j;
//         then zero bits to the slot's end. r is the least r in [0, 16] minimizing P = kept(r+1) +
//         ((len-kept) >> r), the code's longest length (the gaps sum to at most len - kept). The
//         kept entries are those of largest magnitude (ties to the lower position), each decoded
//         as its sign times the level, the mean of their magnitudes. The rest decode as zero: it
//         is for error feedback to carry on. block <= 65536, 1 <= keep <= min(block, 65535).
// A block whose scale would be subnormal is coded by division instead of by the reciprocal
// (which would overflow), so its error bound carries an absolute slack of ~64 x denorm_min.
//
// Encoding refuses non-finite input with Error(Data) naming the first bad index: a non-finite
// delta is a local bug or a diverged run and must not leave the site. Decoding treats the bytes as
// untrusted: any malformation (size, kind, version, block, n, a negative or non-finite scale, a
// scale that would overflow, a non-finite fp32/bf16 value) is Error(Peer), so a decoded delta is
// always finite. Both are deterministic: the bytes depend on the input only, not on thread count.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace meridian {

enum class CodecKind : std::uint8_t { Fp32 = 0, Bf16 = 1, Int8 = 2, Int4 = 3, Sparse = 4 };

// "fp32" | "bf16" | "int8" | "int4" | "sparse"; nullopt for anything else.
std::optional<CodecKind> parse_codec(std::string_view name);
std::string_view to_string(CodecKind kind);

struct CodecOptions {
  CodecKind kind = CodecKind::Int8;
  int block = 256;  // elements per scale (int8, int4) or per selection (sparse); ignored by fp32 and bf16
  int keep = 0;     // sparse: entries kept per block; ignored by the others
};

inline constexpr std::size_t kCodecHeaderBytes = 16;
inline constexpr int kCodecMaxBlock = 1 << 20;
inline constexpr int kSparseMaxBlock = 1 << 16;  // positions are u16

// Encoded size in bytes for n values, header and scales included. Error(Config) when the options
// are invalid for their kind (block outside [1, kCodecMaxBlock], or odd for int4; sparse: block
// above kSparseMaxBlock, keep outside [1, block]).
std::size_t encoded_size(std::size_t n, const CodecOptions& options);

// Encodes x into out; out.size() must equal encoded_size(x.size(), options) (a caller bug
// otherwise). Error(Data) on non-finite input, after which out holds unspecified bytes.
void encode(std::span<const float> x, const CodecOptions& options, std::span<std::byte> out);

// The most entries a sparse block of `block` values may keep within bytes_per_value x block bytes
// (0 when not even one fits); block in [1, kSparseMaxBlock] (a caller bug otherwise).
int sparse_keep_within(int block, double bytes_per_value);

// Decodes into y, whose size must equal the encoded n; Error(Peer) on anything malformed.
void decode(std::span<const std::byte> in, std::span<float> y);

}  // namespace meridian
