#pragma once
// Who is at the other end of a Gloo pair. Gloo's TCP transport takes the first connection to a
// pair's listening port as the peer it expects and asks nothing of it, so anyone who can reach the
// port (a port scan, or another program's reconnect loop) could stand in for a replica and have
// its bytes summed into the site's gradients. Each rank of a mesh therefore draws a fresh key,
// publishes it through the site's store (which answers only holders of the site's secret), and
// once connected sends each peer a proof made with it, bound to the mesh and to both ranks; a rank
// uses a pair only when the proof that came over it holds under the key its peer published.
#include <array>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>

#include "core/util/digest.hpp"

namespace meridian {

using MeshKey = std::array<std::byte, 32>;

// 32 bytes from the kernel's random source. Error(Io) when it gives none.
MeshKey new_mesh_key();
// The store key (under the mesh's prefix) where `rank` publishes its MeshKey.
std::string mesh_key_name(int rank);
// What rank `from` sends rank `to` over their pair in the mesh of `prefix`.
Digest pair_proof(const MeshKey& key, std::string_view prefix, int from, int to);
// Whether `proof`, received over the pair to `from`, was made with `key` (from's published key)
// for this mesh and this direction. Compared in constant time.
bool proof_holds(const MeshKey& key, std::string_view prefix, int from, int to, std::span<const std::byte> proof);

}  // namespace meridian
