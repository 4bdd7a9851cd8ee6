@0xf6d93ec8f494c035;
# Records a site agent and its replicas exchange through the site's rendezvous store
# (sync/group/protocol.hpp names the keys).

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("meridian::wire");

const siteSchemaVersion :UInt16 = 1;

# "gen/<n>": who trains together from generation n on; rank r is members[r].
struct GenerationRecord {
  version @0 :UInt16;
  number @1 :Int64;
  members @2 :List(Int32);
}
