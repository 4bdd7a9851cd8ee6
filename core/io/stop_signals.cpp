#include "core/io/stop_signals.hpp"

#include <pthread.h>

namespace meridian {
namespace {

sigset_t stop_set() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

}  // namespace

BlockedStopSignals::BlockedStopSignals() : set_(stop_set()) { ::pthread_sigmask(SIG_BLOCK, &set_, &old_); }

BlockedStopSignals::~BlockedStopSignals() { ::pthread_sigmask(SIG_SETMASK, &old_, nullptr); }

int BlockedStopSignals::wait(std::chrono::nanoseconds timeout) const {
  const auto s = std::chrono::duration_cast<std::chrono::seconds>(timeout);
  const timespec t{static_cast<time_t>(s.count()), static_cast<long>((timeout - s).count())};
  const int sig = ::sigtimedwait(&set_, nullptr, &t);
  return sig > 0 ? sig : 0;
}

// SIGUSR2 only wakes the thread when the process ends without a stop signal.
LeaveOnStop::LeaveOnStop() : waited_(stop_set()) { sigaddset(&waited_, SIGUSR2); }

LeaveOnStop::~LeaveOnStop() {
  if (!thread_.joinable()) return;
  ::pthread_kill(thread_.native_handle(), SIGUSR2);
  thread_.join();
}

void LeaveOnStop::on_stop(std::function<void()> leave) {
  ::pthread_sigmask(SIG_BLOCK, &waited_, nullptr);
  thread_ = std::thread([this, leave = std::move(leave)] {
    int sig = 0;
    if (::sigwait(&waited_, &sig) != 0 || sig == SIGUSR2) return;
    leave();
    ::signal(sig, SIG_DFL);
    sigset_t only;
    sigemptyset(&only);
    sigaddset(&only, sig);
    ::pthread_sigmask(SIG_UNBLOCK, &only, nullptr);
    ::raise(sig);
  });
}

}  // namespace meridian
