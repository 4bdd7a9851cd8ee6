#pragma once
// The keys a site agent and its replicas share in the site's rendezvous store, and the encoding
// of the records under them (Cap'n Proto, transport/schemas/site.capnp).
//   gen/<n>          GenerationRecord: members of generation n (written once, by the agent)
//   hb/<id>          heartbeat counter; a replica's heartbeat thread adds 1 every interval
//   ready/<id>       incarnation of a replica that waits to join a generation
//   fail/<n>/<id>    replica id saw a collective of generation n fail
//   arrived/<n>/<id> replica id is at generation n's rendezvous, waiting for the other members
//   done/<id>        replica id finished training (how an attached replica's exit is known)
// Gloo's own rendezvous keys live under "g<n>/" so generations never see each other's addresses.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "intrasite/group/membership.hpp"

namespace meridian::site_keys {

// head + the numbers joined by '/' (appended piecewise: GCC 12 warns on chained operator+ here).
template <class... N>
std::string key(const char* head, N... numbers) {
  std::string k = head;
  ((k.append("/").append(std::to_string(numbers))), ...);
  return k;
}

inline std::string generation(std::int64_t n) { return key("gen", n); }
inline std::string heartbeat(int id) { return key("hb", id); }
inline std::string ready(int id) { return key("ready", id); }
inline std::string failure(std::int64_t n, int id) { return key("fail", n, id); }
inline std::string arrived(std::int64_t n, int id) { return key("arrived", n, id); }
inline std::string done(int id) { return key("done", id); }
inline std::string gloo_prefix(std::int64_t n) { return key("g", n).append("/"); }
// The group leader's latest figures (JSON), which the agent serves on its metrics endpoint.
inline std::string figures() { return "ops/figures"; }
// What the group leader waits for across sites while a wait lasts over a second (JSON: "for", what
// it waits on, and "s", for how long); "{}" once it ends.
inline std::string waiting() { return "ops/waiting"; }
// Operator commands for the whole group (JSON), numbered from 1, and the newest number filed.
inline std::string ops_command(std::int64_t n) { return key("ops/cmd", n); }
inline std::string ops_commands() { return "ops/cmds"; }
// What the group does as the operator asked (JSON, by the leader): training, draining or drained,
// and whether its outer exchange is paused. Outlives the replicas: a regrouped group reads it back.
inline std::string ops_mode() { return "ops/mode"; }

}  // namespace meridian::site_keys

namespace meridian {

std::vector<std::byte> encode_generation(const Generation& g);
// Error(Peer) naming the problem when the bytes are not a valid record of this schema version.
Generation decode_generation(std::span<const std::byte> bytes);

}  // namespace meridian
