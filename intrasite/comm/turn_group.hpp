#pragma once
// A group's ranks in one process, each on a thread of its own, taking turns: one rank runs at a
// time, until it enters a collective or returns, and then the next rank that can run does. When
// every rank has entered a collective it completes, and the ranks run again from rank 0. What each
// rank computes, and the order in which the ranks touch anything outside the group (a simulated
// network, a virtual clock), is then a function of their inputs alone: the protocol simulator
// runs a site's replicas so, through the same Communicator seam as Gloo and NCCL.
//
// A rank that returns (or throws) while the others wait in a collective leaves them Error(Peer),
// as a dead replica does over a real fabric.
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <semaphore>
#include <span>
#include <thread>
#include <vector>

#include "intrasite/comm/communicator.hpp"

namespace meridian {

class TurnGroup {
 public:
  explicit TurnGroup(int size);
  ~TurnGroup();
  TurnGroup(const TurnGroup&) = delete;
  TurnGroup& operator=(const TurnGroup&) = delete;

  int size() const { return size_; }
  // Runs `call` once per rank, rank 0 first, each with its rank's communicator, and returns once
  // every rank has; the first exception a rank let out is rethrown here after all ended (those of
  // the ranks it left waiting, Error(Peer), come after it).
  void run(const std::function<void(Communicator&)>& call);

 private:
  enum class State { Idle, Running, Waiting, Done };
  class Rank;
  // Every rank's bytes, by rank, on every rank: the collective all others are made of. Called by
  // rank `rank` on its own thread while run() is under way.
  std::vector<std::vector<std::byte>> exchange(int rank, std::span<const std::byte> mine);
  void worker(int rank);
  // The turn passes to the next rank that can run, completing the collective under way when none
  // can (every rank in it, or gone): the rank to wake, or -1 when the run is over.
  int pass_turn(int from);
  // Wakes `next` (the caller of run() for -1); the hand-over orders everything either side did.
  void wake(int next);

  // Only the rank whose turn it is (or run() between turns) reads or writes what follows: the
  // semaphores hand the turn over, so no lock is needed.
  int size_;
  const std::function<void(Communicator&)>* call_ = nullptr;
  std::vector<State> states_;
  std::exception_ptr first_error_;
  std::vector<std::vector<std::byte>> deposits_;
  std::vector<std::vector<std::byte>> results_;  // the deposits of the collective last completed
  std::vector<char> failed_;                     // rank r waited in a collective another rank left
  bool stopping_ = false;
  std::vector<std::unique_ptr<Rank>> ranks_;
  std::vector<std::unique_ptr<std::binary_semaphore>> turns_;  // one per rank
  std::binary_semaphore ended_{0};
  std::vector<std::thread> threads_;
};

}  // namespace meridian
