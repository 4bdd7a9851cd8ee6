// The sparse codec (SparseLoCo-style, Sarfi et al. 2025): per block the `keep` entries of largest
// magnitude, each as a position and two bits (wire format in codec.hpp). What it leaves out is
// what error feedback carries into the next round: without it most of every delta would be lost.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "core/util/error.hpp"
#include "sync/codec/codec_impl.hpp"

namespace meridian {
namespace {

struct Levels {
  float lo = 0, hi = 0, split = 0;  // a kept magnitude above `split` is coded as hi, else as lo
};

// Two magnitudes for the kept entries: the mean of those in the lower half of their range and
// the mean of those in the upper half, so each coded value is within half that range of the truth.
Levels levels_of(const float* x, const std::uint16_t* index, std::size_t kept) {
  float least = std::abs(x[index[0]]), most = least;
  for (std::size_t j = 1; j < kept; ++j) {
    least = std::min(least, std::abs(x[index[j]]));
    most = std::max(most, std::abs(x[index[j]]));
  }
  Levels out;
  out.split = least + 0.5f * (most - least);
  double sum_lo = 0, sum_hi = 0;
  std::size_t n_lo = 0, n_hi = 0;
  for (std::size_t j = 0; j < kept; ++j) {
    const float a = std::abs(x[index[j]]);
    if (a > out.split) sum_hi += a, ++n_hi;
    else sum_lo += a, ++n_lo;
  }
  out.lo = static_cast<float>(n_lo ? sum_lo / static_cast<double>(n_lo) : 0.0);
  out.hi = static_cast<float>(n_hi ? sum_hi / static_cast<double>(n_hi) : out.lo);
  return out;
}

// One block: its positions of largest magnitude (ties to the lower position, so the bytes depend
// on the input only), ascending, and their codes. Returns false on a non-finite value.
bool encode_block(const float* x, std::size_t len, std::size_t kept, std::byte* out) {
  std::vector<std::uint16_t> order(len);
  std::iota(order.begin(), order.end(), std::uint16_t{0});
  for (std::size_t i = 0; i < len; ++i)
    if (!std::isfinite(x[i])) return false;
  const auto larger = [x](std::uint16_t a, std::uint16_t b) {
    const float fa = std::abs(x[a]), fb = std::abs(x[b]);
    return fa > fb || (fa == fb && a < b);
  };
  std::nth_element(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(kept - 1), order.end(), larger);
  std::sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(kept));
  const Levels levels = levels_of(x, order.data(), kept);
  std::memcpy(out, &levels.lo, 4);
  std::memcpy(out + 4, &levels.hi, 4);
  std::memcpy(out + 8, order.data(), 2 * kept);
  auto* codes = reinterpret_cast<std::uint8_t*>(out + 8 + 2 * kept);
  std::memset(codes, 0, (kept + 3) / 4);
  for (std::size_t j = 0; j < kept; ++j) {
    const float v = x[order[j]];
    const unsigned code = (std::signbit(v) ? 1u : 0u) | (std::abs(v) > levels.split ? 2u : 0u);
    codes[j / 4] = static_cast<std::uint8_t>(codes[j / 4] | (code << (2 * (j % 4))));
  }
  return true;
}

// Why a block's bytes are malformed, or nullptr; writes its values into y (len of them).
const char* decode_block(const std::byte* in, std::size_t len, std::size_t kept, float* y) {
  float lo, hi;
  std::memcpy(&lo, in, 4);
  std::memcpy(&hi, in + 4, 4);
  if (!std::isfinite(lo) || !std::isfinite(hi) || lo < 0 || hi < 0) return "a level is negative or not finite";
  std::vector<std::uint16_t> index(kept);
  std::memcpy(index.data(), in + 8, 2 * kept);
  const auto* codes = reinterpret_cast<const std::uint8_t*>(in + 8 + 2 * kept);
  std::fill(y, y + len, 0.0f);
  for (std::size_t j = 0; j < kept; ++j) {
    if (index[j] >= len || (j > 0 && index[j] <= index[j - 1])) return "positions are not ascending within the block";
    const unsigned code = (codes[j / 4] >> (2 * (j % 4))) & 3u;
    const float magnitude = (code & 2u) ? hi : lo;
    y[index[j]] = (code & 1u) ? -magnitude : magnitude;
  }
  if (kept % 4 != 0 && (codes[kept / 4] >> (2 * (kept % 4))) != 0) return "unused code bits are set";
  return nullptr;
}

std::size_t kept_in(std::size_t len, std::size_t keep) { return std::min(len, keep); }

}  // namespace

std::size_t sparse_block_bytes(std::size_t len, std::size_t keep) {
  const std::size_t kept = kept_in(len, keep);
  return 8 + 2 * kept + (kept + 3) / 4;
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
