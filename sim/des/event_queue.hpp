#pragma once
// The simulator's virtual clock: events ordered by time, ties broken by the order they were
// scheduled, so a run is a pure function of its scenario and seed.
#include <cstdint>
#include <queue>
#include <vector>

#include "core/util/error.hpp"

namespace meridian::sim {

struct Event {
  double t = 0;
  std::uint64_t seq = 0;  // scheduling order: the tie-break
  int kind = 0;
  int site = -1;
  std::int64_t arg = 0;
  std::uint64_t token = 0;  // lets a handler tell a superseded event from a current one
};

class EventQueue {
 public:
  double now() const { return now_; }
  bool empty() const { return heap_.empty(); }
  std::size_t size() const { return heap_.size(); }
  std::uint64_t scheduled() const { return next_seq_; }

  // An event in the past is a bug in the model, never an input problem.
  void schedule(Event e) {
    MERIDIAN_CHECK(e.t >= now_, "event at t=", e.t, " scheduled at now=", now_, " kind=", e.kind);
    e.seq = next_seq_++;
    heap_.push(e);
  }
  // The next event; the clock moves to its time.
  Event pop() {
    MERIDIAN_CHECK(!heap_.empty(), "pop from an empty event queue at t=", now_);
    Event e = heap_.top();
    heap_.pop();
    now_ = e.t;
    return e;
  }

 private:
  struct Later {
    bool operator()(const Event& a, const Event& b) const { return a.t != b.t ? a.t > b.t : a.seq > b.seq; }
  };
  std::priority_queue<Event, std::vector<Event>, Later> heap_;
  double now_ = 0;
  std::uint64_t next_seq_ = 0;
};

}  // namespace meridian::sim
