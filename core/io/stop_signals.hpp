#pragma once
// SIGINT and SIGTERM, taken synchronously: no handler, no interrupted system calls. Every process
// of meridian that must stop cleanly (the launcher, a site's agent, a replica) blocks them first,
// so the threads it starts later inherit the mask, and takes them where it chooses.
#include <signal.h>

#include <chrono>
#include <functional>
#include <thread>

namespace meridian {

// Blocks SIGINT and SIGTERM in this thread (and the threads it starts from now on) until it goes,
// when the mask it found comes back.
class BlockedStopSignals {
 public:
  BlockedStopSignals();
  ~BlockedStopSignals();
  BlockedStopSignals(const BlockedStopSignals&) = delete;
  BlockedStopSignals& operator=(const BlockedStopSignals&) = delete;

  // Waits up to `timeout` for one of them; the signal taken, or 0.
  int wait(std::chrono::nanoseconds timeout) const;

 private:
  sigset_t set_, old_;
};

// A process that leaves before it ends: on SIGINT or SIGTERM, a thread of its own runs `leave`
// and then ends the process as the signal would have. Construct it before any other thread starts.
class LeaveOnStop {
 public:
  LeaveOnStop();
  ~LeaveOnStop();
  LeaveOnStop(const LeaveOnStop&) = delete;
  LeaveOnStop& operator=(const LeaveOnStop&) = delete;

  void on_stop(std::function<void()> leave);  // once

 private:
  BlockedStopSignals blocked_;
  sigset_t waited_;
  std::thread thread_;
};

}  // namespace meridian
