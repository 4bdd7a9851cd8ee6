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

}  // namespace meridian
