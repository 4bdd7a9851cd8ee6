#include "kernels/cuda/phase_timer.hpp"

#include "kernels/cuda/cuda_check.hpp"

namespace meridian::kernels::cuda {

PhaseTimer::~PhaseTimer() {
  for (cudaEvent_t e : events_) cudaEventDestroy(e);
}

void PhaseTimer::mark(const char* phase) {
  const std::size_t i = phases_.size();
  if (i == events_.size()) {
    cudaEvent_t e;
    MERIDIAN_CUDA(cudaEventCreate(&e));
    events_.push_back(e);
  }
  MERIDIAN_CUDA(cudaEventRecord(events_[i], stream_));
  phases_.push_back(phase);
}

void PhaseTimer::collect(std::map<std::string, double>& ms) {
  if (phases_.empty()) return;
  MERIDIAN_CUDA(cudaEventSynchronize(events_[phases_.size() - 1]));
  for (std::size_t i = 0; i + 1 < phases_.size(); ++i) {
    if (phases_[i] == nullptr) continue;  // between an end() and the next mark: not a phase's
    float span = 0;
    MERIDIAN_CUDA(cudaEventElapsedTime(&span, events_[i], events_[i + 1]));
    ms[phases_[i]] += span;
  }
  phases_.clear();
}

}  // namespace meridian::kernels::cuda
