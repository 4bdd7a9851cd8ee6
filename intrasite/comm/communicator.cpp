#include "intrasite/comm/communicator.hpp"

#include <cstdint>

namespace meridian {

std::vector<std::vector<std::byte>> Communicator::gather(std::span<const std::byte> mine, int root) {
  MERIDIAN_CHECK(root >= 0 && root < size(), "root=", root, " size=", size());
  std::vector<std::vector<std::byte>> parts(static_cast<std::size_t>(size()));
  for (int r = 0; r < size(); ++r) {
    auto& part = parts[static_cast<std::size_t>(r)];
    if (r == rank()) part.assign(mine.begin(), mine.end());
    std::uint64_t bytes = part.size();
    broadcast(std::as_writable_bytes(std::span(&bytes, 1)), r);
    part.resize(bytes);
    if (bytes > 0) broadcast(part, r);
  }
  if (rank() != root) parts.clear();
  return parts;
}

std::vector<std::byte> Communicator::scatter(std::span<const std::vector<std::byte>> parts, int root) {
  MERIDIAN_CHECK(root >= 0 && root < size() && (rank() != root || parts.size() == static_cast<std::size_t>(size())),
                 "root=", root, " size=", size(), " parts=", parts.size());
  std::vector<std::byte> mine;
  for (int r = 0; r < size(); ++r) {
    std::vector<std::byte> part;
    if (rank() == root) part = parts[static_cast<std::size_t>(r)];
    std::uint64_t bytes = part.size();
    broadcast(std::as_writable_bytes(std::span(&bytes, 1)), root);
    part.resize(bytes);
    if (bytes > 0) broadcast(part, root);
    if (r == rank()) mine = std::move(part);
  }
  return mine;
}

// One float all-reduce: each rank writes its value as four 16-bit pieces (exact in fp32) into its
// own slots, zeros elsewhere, and the sum fills every slot.
std::vector<std::uint64_t> all_hashes(Communicator& comm, std::uint64_t mine) {
  std::vector<float> slots(4 * static_cast<std::size_t>(comm.size()), 0.0f);
  for (int i = 0; i < 4; ++i) slots[4 * comm.rank() + i] = static_cast<float>((mine >> (16 * i)) & 0xFFFF);
  comm.allreduce(slots, ReduceOp::Sum);
  std::vector<std::uint64_t> hashes(comm.size(), 0);
  for (int r = 0; r < comm.size(); ++r)
    for (int i = 0; i < 4; ++i) hashes[r] |= static_cast<std::uint64_t>(slots[4 * r + i]) << (16 * i);
  return hashes;
}

}  // namespace meridian
