#include "sites/replica/replica_loop.hpp"

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

#include "core/io/stop_signals.hpp"
#include "sites/replica/replica_process.hpp"

namespace meridian {

int run_replica(const ReplicaRun& run, Env& env, std::function<double()> now, std::function<double()> wall) {
  // The replicas of a CPU site share this machine's cores: OpenMP teams larger than a replica's
  // share spin against each other at every barrier (3 replicas x 2 threads on 2 cores ran ~10x
  // slower). An explicit OMP_NUM_THREADS from the launcher wins.
  if (std::getenv("OMP_NUM_THREADS") == nullptr)
    omp_set_num_threads(std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / run.config.replicas.count));
  LeaveOnStop stops;  // first, so every thread started below inherits the blocked mask
  ReplicaProcess process(run, env, std::move(now), std::move(wall), stops);
  return process.run();
}

}  // namespace meridian
