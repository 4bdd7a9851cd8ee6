#pragma once
// A group's ranks in one process, each on a fiber of its own (a stack of its own, on the thread
// that calls run()), taking turns: one rank runs at a time, until it enters a collective or
// returns, and then the next rank that can run does. When every rank has entered a collective it
// completes, and the ranks run again from rank 0. What each rank computes, and the order in which
// the ranks touch anything outside the group (a simulated network, a virtual clock), is then a
// function of their inputs alone: the protocol simulator runs a site's replicas so, through the
// same Communicator seam as Gloo and NCCL. A turn passes in a user-space context switch, not a
// wake-up of another thread: the simulator's sharded seeds pass it hundreds of thousands of times.
//
// A rank that returns (or throws) while the others wait in a collective leaves them Error(Peer),
// as a dead replica does over a real fabric.
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <span>
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
  struct Fiber;  // a rank's stack and registers while another runs, or run()'s caller's
  // Every rank's bytes, by rank, on every rank: the collective all others are made of. Called by
  // rank `rank` on its own fiber while run() is under way.
  std::vector<std::vector<std::byte>> exchange(int rank, std::span<const std::byte> mine);
  // Where each rank's fiber begins: its call, then its turn passed on for good.
  static void start(unsigned high, unsigned low);
  // The turn passes to the next rank that can run, completing the collective under way when none
  // can (every rank in it, or gone): the rank to run, or -1 when the run is over.
  int pass_turn(int from);
  Fiber& fiber(int rank) { return rank < 0 ? *caller_ : *fibers_[static_cast<std::size_t>(rank)]; }
  // From the fiber running now to `next`'s (-1: run()'s caller), until the turn comes back.
  void switch_to(int next);
  // The same, by a rank whose call has ended: its fiber never runs again in this run.
  [[noreturn]] void leave_to(int next);
  // On the fiber just switched to: the sanitizer's side of the switch.
  void arrived(Fiber& here);

  // Only the rank whose turn it is (or run() between turns) reads or writes what follows.
  int size_;
  const std::function<void(Communicator&)>* call_ = nullptr;
  std::vector<State> states_;
  std::exception_ptr first_error_;
  std::vector<std::vector<std::byte>> deposits_;
  std::vector<std::vector<std::byte>> results_;  // the deposits of the collective last completed
  std::vector<char> failed_;                     // rank r waited in a collective another rank left
  std::vector<std::unique_ptr<Rank>> ranks_;
  std::vector<std::unique_ptr<Fiber>> fibers_;  // by rank
  std::unique_ptr<Fiber> caller_;
  int running_ = -1;   // whose fiber runs: a rank, or -1 (run()'s caller)
  int previous_ = -1;  // whose ran before it
};

}  // namespace meridian
