#pragma once
// The CPU implementation of Communicator: Gloo over TCP, one full mesh per group generation.
#include <chrono>
#include <memory>
#include <string>

#include "intrasite/comm/communicator.hpp"
#include "intrasite/comm/store.hpp"

namespace meridian {

struct GlooOptions {
  std::string address = "127.0.0.1";  // the interface this rank listens on (IPv4)
  // Bounds the rendezvous and every later collective: a peer silent for this long is an Error(Timeout).
  std::chrono::milliseconds timeout{30000};
};

// reduce_scatter moves at most this many elements of each part per round, so what it receives
// takes a bounded buffer (the size of a round's copies of this rank's part, times the ranks).
inline constexpr std::size_t kReduceScatterRound = std::size_t{1} << 20;

// Joins the group of `size` ranks whose rendezvous keys live under `prefix` in `store` and
// connects it as a full TCP mesh. Each generation of a group needs a prefix of its own
// (e.g. "gen3/"): keys left by an earlier generation would otherwise be taken for live peers.
// Returns once every rank has connected and each pair has proved it is the rank the store names
// (mesh_proof.hpp; it ends with a barrier). Error(Timeout) when the other ranks do not all show up
// within options.timeout, Error(Peer) when a peer fails while connecting or what connected to a
// pair does not prove its rank's key, Error(Config) when options.address cannot be listened on. size == 1 opens no
// socket and its collectives are no-ops.
//
// Collectives throw Error(Peer) when a peer disconnects and Error(Timeout) when one stops
// answering. After any error the communicator is unusable (the mesh is in an unknown state);
// the survivors build a new one under a new prefix. One thread at a time may use a communicator.
//
// Ignores SIGPIPE for the whole process unless the program installed its own handler: Gloo
// writes to sockets without MSG_NOSIGNAL, so a peer that died would otherwise kill this process
// instead of surfacing as Error(Peer).
std::unique_ptr<Communicator> connect_gloo(Store& store, const std::string& prefix, int rank, int size,
                                           const GlooOptions& options);

}  // namespace meridian
