#pragma once
// Which of this host's addresses a replica listens on. A site's replicas may span hosts (a cluster
// launcher starts them, `meridian site --attach`): each one's collectives listen on the interface
// its traffic to the site's store leaves from, so the mesh forms over the network that reaches the
// store (loopback when the store is on this host's loopback); its link and lanes on the site's
// `host` where that is this host's, else on its own address toward it.
#include <string>

namespace meridian {

// The host of a "tcp://host:port" endpoint. Error(Config) naming the endpoint otherwise.
std::string endpoint_host(const std::string& endpoint);

// This host's IPv4 address that traffic to `host` (an IPv4 address or a name) leaves from, as the
// kernel's routing table says; nothing is sent. Error(Config) when `host` resolves to no IPv4
// address, Error(Peer) when no route reaches it (an interface down, a cable out).
std::string route_address_toward(const std::string& host);

// Where a server for a site's `host` listens on this host: `host` itself when it is one of this
// host's addresses (any loopback address included), otherwise this host's address on the way to it.
// A site whose replicas span hosts thus leads, and opens its replicas' lanes, from whichever host
// its leader is on; its peers read the address from the control plane. Errors as above.
std::string listen_address_for(const std::string& host);

}  // namespace meridian
