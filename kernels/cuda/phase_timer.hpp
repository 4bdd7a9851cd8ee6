#pragma once
// Where a step's device time goes, phase by phase, from CUDA events on the step's stream: mark(p)
// says the work queued from here on belongs to phase p, until the next mark (or end()); collect()
// waits for the stream and adds each span's time to its phase. Events are recorded between
// launches, so the spans are the kernels' own time plus any gap the device idled in (the host
// launching, or a synchronisation): the sum is the step's device time. Off (no timer) costs nothing.
#include <cuda_runtime_api.h>

#include <map>
#include <string>
#include <vector>

namespace meridian::kernels::cuda {

class PhaseTimer {
 public:
  explicit PhaseTimer(cudaStream_t stream) : stream_(stream) {}
  ~PhaseTimer();
  PhaseTimer(const PhaseTimer&) = delete;
  PhaseTimer& operator=(const PhaseTimer&) = delete;

  void mark(const char* phase);
  void end() { mark(nullptr); }
  // Milliseconds per phase of the spans marked since the last collect, added to `ms`.
  void collect(std::map<std::string, double>& ms);

 private:
  cudaStream_t stream_;
  std::vector<cudaEvent_t> events_;  // reused from step to step
  std::vector<const char*> phases_;  // phases_[i]: the span from events_[i] to events_[i + 1]
};

// Null-safe: the models hold a PhaseTimer* that is null unless someone is timing phases.
inline void mark(PhaseTimer* timer, const char* phase) {
  if (timer) timer->mark(phase);
}

}  // namespace meridian::kernels::cuda
