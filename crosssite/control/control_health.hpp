#pragma once
// What an operator sees of a job's control plane (meridianctl status): the etcd cluster's members
// with their client URLs, which of them leads, whether each answers, and a site's lease with the
// seconds granted and left. Every call is bounded: a member that is dead or stopped costs at most
// `member_timeout` and shows as unreachable; nothing here throws for an unreachable cluster. Meant
// for the site agent, off the training path, with clients of its own.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "crosssite/control/etcd_client.hpp"

namespace meridian {

struct ControlHealthOptions {
  EtcdOptions etcd;                                 // the site's: endpoints, TLS, credentials
  std::chrono::milliseconds member_timeout{500};    // per member asked, and for the member list
};

struct ControlHealth {
  struct Member {
    std::string id;  // hex, as etcdctl prints it; empty when the member list was not available
    std::string name;
    std::vector<std::string> client_urls;
    bool reachable = false;
    bool leader = false;
    std::string version;  // etcd's, as the member says
    std::string error;    // why it is not reachable, or answered without a leader
    std::uint64_t leader_id = 0;  // the leader it knows (0: none)
  };
  std::vector<Member> members;
  std::optional<std::string> leader;  // the leading member's name, as the reachable members agree
  std::string error;                  // the member list could not be read (members: the endpoints)
  struct Lease {
    std::int64_t id = 0;
    bool alive = false;  // etcd still knows it
    std::int64_t remaining_s = 0, granted_s = 0;
    std::string error;   // could not be asked
  };
  std::optional<Lease> lease;
};

// Reads the member list (from the first endpoint that answers), asks every member for its status
// at once, and, when `lease` is not 0, the lease's time to live. Takes at most about
// (endpoints + 2) x member_timeout, one member_timeout more than the list when all is well.
ControlHealth read_control_health(const ControlHealthOptions& options, std::int64_t lease);

nlohmann::json to_json(const ControlHealth& health);

}  // namespace meridian
