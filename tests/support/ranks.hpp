#pragma once
// Ranks of a collective as threads of one test: body(rank) on each, and what each one threw.
#include <doctest/doctest.h>
#include <unistd.h>

#include <exception>
#include <string>
#include <thread>
#include <vector>

namespace meridian::testing {

// Gloo 0.5 takes any connection to a pair's listening port as its peer. On a shared machine, other
// programs' reconnect loops (ZeroMQ retries every 100 ms) aimed at a 127.0.0.1 port that a pair has
// just been given break the rendezvous; a loopback address of this process's own keeps them out.
inline std::string own_loopback_address() {
  const auto pid = static_cast<unsigned>(::getpid());
  return "127." + std::to_string(1 + pid % 254) + "." + std::to_string(1 + pid / 254 % 254) + ".1";
}

template <class F>
std::vector<std::exception_ptr> run_ranks(int size, F body) {
  std::vector<std::exception_ptr> errors(size);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r)
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  return errors;
}

inline void require_no_errors(const std::vector<std::exception_ptr>& errors) {
  bool any = false;
  for (std::size_t r = 0; r < errors.size(); ++r) {
    if (!errors[r]) continue;
    any = true;
    try {
      std::rethrow_exception(errors[r]);
    } catch (const std::exception& e) {
      FAIL_CHECK("rank ", r, " threw: ", std::string(e.what()));
    }
  }
  REQUIRE_FALSE(any);
}

}  // namespace meridian::testing
