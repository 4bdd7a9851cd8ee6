#pragma once
// Collectives inside a site, over the flat fp32 buffers of core/. One interface, one
// implementation per fabric: Gloo on CPUs (gloo_communicator), NCCL on GPUs (nccl_communicator).
// A peer that dies or hangs surfaces as Error(Peer) or Error(Timeout): expected, recoverable by
// building a new communicator for the survivors under a new generation prefix.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/util/error.hpp"

namespace meridian {

enum class ReduceOp { Sum, Mean };

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // In place; every rank ends with the same values.
  virtual void allreduce(std::span<float> data, ReduceOp op) = 0;
  // In place; every rank ends with root's bytes.
  virtual void broadcast(std::span<std::byte> data, int root) = 0;
  virtual void barrier() = 0;

  // Sharded state: `data` is cut into size() consecutive parts, rank r's of counts[r] elements
  // (parts may differ in length, or be empty), and every rank passes the same cut.
  //
  // Every rank passes its whole buffer; rank r's part ends as the sum (or mean) over the ranks of
  // their part r. The other parts are left as they were.
  virtual void reduce_scatter(std::span<float> data, std::span<const std::size_t> counts, ReduceOp op) = 0;
  // Every rank passes its own part filled in; every part ends holding its owner's values.
  virtual void all_gather(std::span<float> data, std::span<const std::size_t> counts) = 0;
  // The ranks in a ring: every rank sends `out` to the rank before it and receives into `in` the
  // `out` of the rank after it (as long as that one's; alone, its own). How a rank keeps a copy of
  // the next rank's part, at 1/size of an all-gather's traffic.
  virtual void ring_shift(std::span<const float> out, std::span<float> in) = 0;

  // Each rank's bytes (any length, none included) to `root`, which gets them all, by rank; the
  // others get nothing. By default one broadcast of each rank's size and one of its bytes when it
  // has some, so every rank sees every part; a fabric that can send to one rank does only that.
  virtual std::vector<std::vector<std::byte>> gather(std::span<const std::byte> mine, int root);
  // The root's `parts` (one per rank, by rank, any length, none included; the others pass none)
  // to their ranks: each rank gets its own. By default a broadcast of each part's size and bytes,
  // so every rank sees every part; a fabric that can send to one rank sends each only its own.
  virtual std::vector<std::byte> scatter(std::span<const std::vector<std::byte>> parts, int root);
};

// Every rank's 64-bit value (a hash), in rank order, on every rank; all call it together.
std::vector<std::uint64_t> all_hashes(Communicator& comm, std::uint64_t mine);

// Where rank `rank`'s part starts in a buffer cut by `counts` (see reduce_scatter).
inline std::size_t part_offset(std::span<const std::size_t> counts, int rank) {
  std::size_t offset = 0;
  for (int r = 0; r < rank; ++r) offset += counts[static_cast<std::size_t>(r)];
  return offset;
}

// A cut that does not fit the buffer or the group is a caller's bug.
inline void check_parts(std::size_t elements, std::span<const std::size_t> counts, int size) {
  std::size_t total = 0;
  for (const std::size_t c : counts) total += c;
  MERIDIAN_CHECK(counts.size() == static_cast<std::size_t>(size) && total == elements, "parts=", counts.size(),
                 " ranks=", size, " elements in parts=", total, " buffer=", elements);
}

// Sum -> mean after an all-reduce. Every rank scales the same sums by the same factor, so the
// means stay bit-identical across ranks; implementations sum and then call this.
inline void scale_to_mean(std::span<float> sums, int size) {
  const float scale = 1.0f / static_cast<float>(size);
  for (float& x : sums) x *= scale;
}

}  // namespace meridian
