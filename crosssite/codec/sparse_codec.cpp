// The sparse codec (SparseLoCo-style, Sarfi et al. 2025): per block the `keep` entries of largest
// magnitude, each as a Rice-coded gap to the previous position and its sign, at the mean kept
// magnitude of the block (wire format in codec.hpp). What it leaves out, and what the one level
// gets wrong, is what error feedback carries into the next round: without it most of every delta
// would be lost.
//
// Why Rice codes in a fixed-size slot: a kept entry at density d costs about log2(1/d) + 2 bits
// for its gap instead of a 16-bit position, so the same bytes carry 2-3x the entries; and the gaps
// of `kept` ascending positions in a block of `len` sum to at most len - kept, which bounds the
// code's length, so every block's bytes (and a delta's) still depend on n, block and keep only.
// Why one level and a sign: at equal bytes, the entries a second level's bit would cost trained
// better than the finer values (docs/quality.md, "The sparse codec at 0.1 byte").
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "core/util/error.hpp"
#include "crosssite/codec/codec.hpp"
#include "crosssite/codec/codec_impl.hpp"

namespace meridian {
namespace {

constexpr std::size_t kLevelBytes = 4;  // f32: the block's one magnitude

// The mean magnitude of the kept entries: what minimizes the squared error of sign x level.
float level_of(const float* x, const std::uint16_t* index, std::size_t kept) {
  double sum = 0;
  for (std::size_t j = 0; j < kept; ++j) sum += std::abs(x[index[j]]);
  return static_cast<float>(sum / static_cast<double>(kept));
}

// Bits of the position code with Rice parameter r at its longest: kept terminators and r-bit
// remainders, plus the unary quotients, which sum to at most (len - kept) >> r.
std::size_t position_bits(std::size_t len, std::size_t kept, int r) {
  return kept * static_cast<std::size_t>(r + 1) + ((len - kept) >> r);
}

// The parameter whose longest code is shortest (the smallest such), so the slot wastes least.
int rice_parameter(std::size_t len, std::size_t kept) {
  int best = 0;
  for (int r = 1; r <= 16; ++r)
    if (position_bits(len, kept, r) < position_bits(len, kept, best)) best = r;
  return best;
}

std::size_t position_bytes(std::size_t len, std::size_t kept) {
  return (position_bits(len, kept, rice_parameter(len, kept)) + 7) / 8;
}

std::size_t sign_bytes(std::size_t kept) { return (kept + 7) / 8; }

// Least significant bit first. The writer's slot is zeroed beforehand; it never passes its end
// (position_bits bounds what it is given).
class BitWriter {
 public:
  explicit BitWriter(std::uint8_t* out) : out_(out) {}
  void put(std::uint32_t value, int bits) {
    for (int b = 0; b < bits; ++b, ++at_)
      if ((value >> b) & 1u) out_[at_ / 8] = static_cast<std::uint8_t>(out_[at_ / 8] | (1u << (at_ % 8)));
  }
  void unary(std::size_t q) {  // q zeros, then a one
    at_ += q;
    put(1, 1);
  }
  std::size_t bits() const { return at_; }

 private:
  std::uint8_t* out_;
  std::size_t at_ = 0;
};

// Reads untrusted bits: every read says whether it stayed within the slot.
class BitReader {
 public:
  BitReader(const std::uint8_t* in, std::size_t bytes) : in_(in), end_(8 * bytes) {}
  bool bit(unsigned& b) {
    if (at_ >= end_) return false;
    b = (in_[at_ / 8] >> (at_ % 8)) & 1u;
    ++at_;
    return true;
  }
  bool get(int bits, std::size_t& value) {
    value = 0;
    for (int i = 0; i < bits; ++i) {
      unsigned b;
      if (!bit(b)) return false;
      value |= std::size_t{b} << i;
    }
    return true;
  }
  bool unary(std::size_t& q) {
    for (q = 0;; ++q) {
      unsigned b;
      if (!bit(b)) return false;
      if (b) return true;
    }
  }
  bool rest_is_zero() {
    for (unsigned b; bit(b);)
      if (b) return false;
    return true;
  }

 private:
  const std::uint8_t* in_;
  std::size_t end_, at_ = 0;
};

void write_positions(const std::uint16_t* index, std::size_t len, std::size_t kept, std::uint8_t* out) {
  const int r = rice_parameter(len, kept);
  std::memset(out, 0, position_bytes(len, kept));
  BitWriter w(out);
  std::size_t next = 0;  // the least position the next entry may take
  for (std::size_t j = 0; j < kept; ++j) {
    const std::size_t gap = index[j] - next;
    w.unary(gap >> r);
    w.put(static_cast<std::uint32_t>(gap & ((std::size_t{1} << r) - 1)), r);
    next = std::size_t{index[j]} + 1;
  }
  MERIDIAN_CHECK(w.bits() <= position_bits(len, kept, r), "sparse position code of ", w.bits(), " bits");
}

// Why the position code is malformed, or nullptr; fills index (kept of them, ascending, < len).
const char* read_positions(const std::uint8_t* in, std::size_t len, std::size_t kept, std::uint16_t* index) {
  const int r = rice_parameter(len, kept);
  BitReader reader(in, position_bytes(len, kept));
  std::size_t next = 0;
  for (std::size_t j = 0; j < kept; ++j) {
    std::size_t q, rest;
    if (!reader.unary(q) || !reader.get(r, rest)) return "the position code runs past its bytes";
    // q is below the slot's bit count, so neither the shift nor the sum can overflow.
    const std::size_t at = next + ((q << r) | rest);
    if (at >= len) return "a position lies past the block";
    index[j] = static_cast<std::uint16_t>(at);
    next = at + 1;
  }
  if (!reader.rest_is_zero()) return "unused position bits are set";
  return nullptr;
}

void write_signs(const float* x, const std::uint16_t* index, std::size_t kept, std::uint8_t* signs) {
  std::memset(signs, 0, sign_bytes(kept));
  for (std::size_t j = 0; j < kept; ++j)
    if (std::signbit(x[index[j]])) signs[j / 8] = static_cast<std::uint8_t>(signs[j / 8] | (1u << (j % 8)));
}

// The block's positions of largest magnitude (ties to the lower position, so the bytes depend on
// the input only), ascending. False on a non-finite value.
bool select_largest(const float* x, std::size_t len, std::size_t kept, std::vector<std::uint16_t>& order) {
  for (std::size_t i = 0; i < len; ++i)
    if (!std::isfinite(x[i])) return false;
  order.resize(len);
  std::iota(order.begin(), order.end(), std::uint16_t{0});
  const auto larger = [x](std::uint16_t a, std::uint16_t b) {
    const float fa = std::abs(x[a]), fb = std::abs(x[b]);
    return fa > fb || (fa == fb && a < b);
  };
  std::nth_element(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(kept - 1), order.end(), larger);
  std::sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(kept));
  return true;
}

bool encode_block(const float* x, std::size_t len, std::size_t kept, std::byte* out) {
  std::vector<std::uint16_t> order;
  if (!select_largest(x, len, kept, order)) return false;
  const float level = level_of(x, order.data(), kept);
  std::memcpy(out, &level, 4);
  auto* positions = reinterpret_cast<std::uint8_t*>(out + kLevelBytes);
  write_positions(order.data(), len, kept, positions);
  write_signs(x, order.data(), kept, positions + position_bytes(len, kept));
  return true;
}

// Why a block's bytes are malformed, or nullptr; writes its values into y (len of them).
const char* decode_block(const std::byte* in, std::size_t len, std::size_t kept, float* y) {
  float level;
  std::memcpy(&level, in, 4);
  if (!std::isfinite(level) || level < 0) return "the level is negative or not finite";
  std::vector<std::uint16_t> index(kept);
  const auto* positions = reinterpret_cast<const std::uint8_t*>(in + kLevelBytes);
  if (const char* problem = read_positions(positions, len, kept, index.data())) return problem;
  const auto* signs = positions + position_bytes(len, kept);
  std::fill(y, y + len, 0.0f);
  for (std::size_t j = 0; j < kept; ++j) y[index[j]] = ((signs[j / 8] >> (j % 8)) & 1u) ? -level : level;
  if (kept % 8 != 0 && (signs[kept / 8] >> (kept % 8)) != 0) return "unused sign bits are set";
  return nullptr;
}

std::size_t kept_in(std::size_t len, std::size_t keep) { return std::min(len, keep); }

}  // namespace

std::size_t sparse_block_bytes(std::size_t len, std::size_t keep) {
  const std::size_t kept = kept_in(len, keep);
  return kLevelBytes + position_bytes(len, kept) + sign_bytes(kept);
}

int sparse_keep_within(int block, double bytes_per_value) {
  MERIDIAN_CHECK(block >= 1 && block <= kSparseMaxBlock, "block=", block);
  // A block's bytes grow with keep (every Rice parameter's longest code does), so the first keep
  // over the budget ends the search.
  const auto len = static_cast<std::size_t>(block);
  const double budget = bytes_per_value * static_cast<double>(block);
  std::size_t keep = 0;
  while (keep < std::min<std::size_t>(len, 0xFFFF) && static_cast<double>(sparse_block_bytes(len, keep + 1)) <= budget) ++keep;
  return static_cast<int>(keep);
}

std::size_t sparse_size(std::size_t n, std::size_t block, std::size_t keep) {
  const std::size_t full = n / block, tail = n % block;
  return full * sparse_block_bytes(block, keep) + (tail ? sparse_block_bytes(tail, keep) : 0);
}

void encode_sparse(std::span<const float> x, std::size_t block, std::size_t keep, std::byte* out) {
  const std::size_t blocks = (x.size() + block - 1) / block, stride = sparse_block_bytes(block, keep);
  std::size_t bad_block = blocks;
#pragma omp parallel for schedule(static) reduction(min : bad_block) if (x.size() > kParallelMin)
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::size_t len = std::min(block, x.size() - b * block);
    if (!encode_block(x.data() + b * block, len, kept_in(len, keep), out + b * stride)) bad_block = std::min(bad_block, b);
  }
  if (bad_block < blocks) {
    const auto at = first_non_finite(x.subspan(bad_block * block));
    throw make_error(ErrorKind::Data, "codec: non-finite value at index ", bad_block * block + at);
  }
}

void decode_sparse(const std::byte* in, std::size_t block, std::size_t keep, std::span<float> y) {
  const std::size_t blocks = (y.size() + block - 1) / block, stride = sparse_block_bytes(block, keep);
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::size_t len = std::min(block, y.size() - b * block);
    if (const char* problem = decode_block(in + b * stride, len, kept_in(len, keep), y.data() + b * block))
      throw make_error(ErrorKind::Peer, "codec sparse: block ", b, ": ", problem);
  }
}

}  // namespace meridian
