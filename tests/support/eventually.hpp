#pragma once
// Waiting on real processes (etcd, sockets, threads): for an event, not a guessed time. A test
// that sleeps a fixed time and then counts fails whenever the machine is slower than the guess.
#include <chrono>
#include <functional>
#include <thread>

namespace meridian::testing {

// Looks at `condition` every `every` until it holds (true) or `limit` has passed (false).
inline bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds limit = std::chrono::seconds(10),
                       std::chrono::milliseconds every = std::chrono::milliseconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(every);
  }
  return true;
}

// How long `duration` of a steady clock has run since `since`, for conditions that also need time to pass.
inline bool elapsed(std::chrono::steady_clock::time_point since, std::chrono::milliseconds duration) {
  return std::chrono::steady_clock::now() - since >= duration;
}

}  // namespace meridian::testing
