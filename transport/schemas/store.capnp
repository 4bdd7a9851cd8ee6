@0xfa1853ae62303842;
# The site's rendezvous store on the wire (sync/comm/tcp_store): one StoreRequest per ZeroMQ frame
# from a client, one StoreResponse per frame back. Values are opaque bytes; counters are the
# 8-byte native int64 that MemoryStore also uses, so both stores hold the same bytes for a key.

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("meridian::wire");

# Bumped on any change a peer of the previous version would misread; a server answers a request
# of another version with an error instead of guessing.
const storeSchemaVersion :UInt16 = 1;

struct StoreRequest {
  version @0 :UInt16;
  # Chosen by the client and echoed in the response: a client that gave up on a request (its
  # timeout passed) recognises and drops the late answer.
  id @1 :UInt64;
  key @2 :Text;
  union {
    set @3 :Data;     # the value to store under key
    get @4 :UInt32;   # how long (ms) the server keeps the get parked while key does not exist
    check @5 :Void;
    add @6 :Int64;    # the delta
  }
  # The site's store secret (sites/site: written by the agent, readable by its owner only). A
  # request without it is refused: a local process that is not one of the site's must not be able
  # to change what its replicas read (an operator's command filed under ops/cmd, for one).
  secret @7 :Data;
}

struct StoreResponse {
  version @0 :UInt16;
  id @1 :UInt64;  # the request's id; 0 when the request was too malformed to carry one
  union {
    ok @2 :Void;        # set
    value @3 :Data;     # get
    present @4 :Bool;   # check
    counter @5 :Int64;  # add: the new value
    error @6 :Failure;
  }

  struct Failure {
    kind @0 :Kind;
    message @1 :Text;

    enum Kind {
      invalid @0;  # malformed, oversized, wrong version, or not applicable (add on a non-counter)
      timeout @1;  # a get's key did not appear within the time the get allowed
      busy @2;     # the server holds too many parked gets to take another
      unauthenticated @3;  # the request did not carry the store's secret
    }
  }
}
