#pragma once
// One replica process of a site: joins the generations the site agent publishes, trains in
// lockstep with the other members (gradients averaged over the group every step), heals from a
// peer at every generation boundary, and regroups after a failed collective.
#include <functional>
#include <string>

#include "core/config/job_config.hpp"

namespace meridian {

class Env;

struct ReplicaRun {
  JobConfig config;
  std::string site = "local";
  int id = 0;
  std::string store_endpoint;  // the site agent's rendezvous store, tcp://host:port
  std::string store_secret;    // what the store asks of every request (sites/site/store_secret.hpp)
};

// Returns when training is done (0). Errors that the group cannot absorb propagate as Error.
int run_replica(const ReplicaRun& run, Env& env, std::function<double()> now, std::function<double()> wall);

}  // namespace meridian
