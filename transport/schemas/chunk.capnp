@0xd5699e0849513283;
# One chunk of a large payload (an encoded delta, a state transfer) between sites
# (transport/chunking): the encoded ChunkHeader travels next to the chunk's bytes, whatever link
# (ZeroMQ, UCX) carries them. Payloads are cut into chunks because a Data field stays below 2^29
# bytes and because a corrupted chunk is cheaper to ask again for than a whole payload.

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("meridian::wire");

# Bumped on any change a peer of the previous version would misread; a receiver rejects headers of
# another version instead of guessing.
# 2: totalHash is the hash of the chunks' payload hashes (it was the hash of the whole payload).
const chunkSchemaVersion :UInt16 = 2;

struct ChunkHeader {
  version @0 :UInt16;
  transferId @1 :UInt64;    # chosen by the sender; every chunk of one payload carries it
  tag @2 :UInt16;           # what the payload is (delta, state, ...), for the receiver to dispatch
  index @3 :UInt32;         # 0 .. count-1, in the order of the chunks' offsets
  count @4 :UInt32;
  totalBytes @5 :UInt64;    # size of the whole payload
  offset @6 :UInt64;        # where this chunk's bytes start in the whole payload
  length @7 :UInt32;        # this chunk's bytes
  payloadHash @8 :UInt64;   # XXH3-64 of this chunk's bytes
  # XXH3-64 of the payloadHash of every chunk, in index order, each as 8 little-endian bytes;
  # checked once the payload is reassembled. Each chunk's bytes are verified by its payloadHash and
  # its place by headerHash, so this ties the chunks together (a whole made of chunks of one
  # payload) without a second pass over the bytes on either side.
  totalHash @9 :UInt64;
  # XXH3-64 of fields 0..9, each as 8 little-endian bytes: without it a flipped bit in an id, an
  # index or an offset would pass unnoticed and misplace correct bytes.
  headerHash @10 :UInt64;
}

# One stripe of a transfer that a site's replicas carry together (transport/link/stripes.hpp): the
# sending site's replica i sends stripe i to the receiving site's replica i, each over its own link
# (its own stream across the WAN), and the receiving site puts the whole back together. The header
# travels in front of the stripe's bytes, in the payload of an ordinary link transfer, whose chunk
# hashes protect both; the whole is checked against its announced digest once put together.
const stripeSchemaVersion :UInt16 = 1;

struct StripeHeader {
  version @0 :UInt16;
  transferId @1 :UInt64;  # the whole transfer's id and tag, as its sender's protocol chose them
  tag @2 :UInt16;
  index @3 :UInt16;       # 0 .. count-1
  count @4 :UInt16;
  totalBytes @5 :UInt64;  # of the whole; stripe i holds [i * total / count, (i + 1) * total / count)
  part @6 :Bool;          # it holds part i of `count` of the whole as its receiver cuts it, not a
                          # share of its bytes (totalBytes 0): the receiver keeps it, whole is never put together
}
