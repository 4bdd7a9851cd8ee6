@0xb8e4c1f2a7d35e91;
# The records of the cross-site round/commit protocol (DESIGN.md, "Data flow of one round"), kept
# in etcd under the job's prefix (crosssite/round/records.hpp names the keys), and the small requests
# sites send each other over their links. The bulk bytes of a delta never go through etcd: they
# travel as chunk frames (chunk.capnp) tagged with the round they belong to.

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("meridian::wire");

# Bumped on any change a peer of the previous version would misread; readers refuse other versions.
# 2: deltas are named by a SHA-256 digest (version 1's 64-bit XXH3 checksum is no longer written).
# 3: that digest is the SHA-256 of the SHA-256s of the delta's units (crosssite/codec/delta_digest.hpp),
#    which a version-2 peer would take for other bytes than announced.
const roundSchemaVersion :UInt16 = 3;

# "members/<site>", on the site's lease: the site is alive and reachable at `address`.
struct MemberRecord {
  version @0 :UInt16;
  site @1 :Text;
  address @2 :Text;        # its link's address, e.g. tcp://127.0.0.1:PORT
  incarnation @3 :UInt64;  # changes when the site's leader (and with it the link) changes
  paused @4 :Bool;         # it announces no new round: its outer exchange is paused (pause-outer,
                           # which proposes nothing either) or it drains; no commit waits for it
  ended @5 :Int64 = -1;    # the version it ended the job on; -1 while it has not (a peer behind needs it until it has)
  lanes @6 :List(Text);    # a split exchange: the link addresses of its replicas 1, 2, ... (their lanes)
  partsUnit @7 :UInt64;    # not 0: its replicas take deltas in parts, cut on this many values (its
                           # outer state is sharded); part i for its replica i
}

# "deltas/<site>/vouched": the newest version the site applied, and the SHA-256 of that version's
# record as it read it: its vouch for the log up to there (CommitRecord.previous chains the rest).
struct Vouch {
  version @0 :UInt16;
  site @1 :Text;
  vouched @2 :Int64;
  digest @3 :Data;
}

# "deltas/<site>/<round>": a site finished a round and is sending its encoded delta.
struct DeltaAnnouncement {
  version @0 :UInt16;
  site @1 :Text;
  round @2 :Int64;
  baseVersion @3 :Int64;   # the global version the round started from
  tokens @4 :Int64;        # tokens the site trained on in this round: its weight in the mean
  bytes @5 :UInt64;        # size of the encoded delta
  checksumV1 @6 :UInt64;   # version 1 only; unused
  final @7 :Bool;          # the site's last round: it trains no further
  fragment @8 :UInt32;     # streaming DiLoCo: the fragment the delta covers (0 for DiLoCo, and in
                           # records from before fragments existed, which read as fragment 0)
  rounds @9 :UInt32 = 1;   # rounds of training the delta spans: more than one after the outer
                           # exchange was paused (older records read as 1)
  withdrawn @10 :Bool;     # its site restarted without these bytes: nobody will ever have them,
                           # so no commit waits for this round
  digest @11 :Data;        # SHA-256 of the encoded delta (32 bytes): its identity
}

struct SiteRound {
  site @0 :Text;
  round @1 :Int64;
}

struct CommitEntry {
  site @0 :Text;
  round @1 :Int64;
  baseVersion @2 :Int64;
  weight @3 :Float64;
  checksumV1 @4 :UInt64;  # version 1 only; unused
  fragment @5 :UInt32;  # streaming DiLoCo: the fragment the delta covers (0 for DiLoCo, and in
                        # records from before fragments existed)
  digest @6 :Data;      # the announced SHA-256 of the delta: the one set of bytes this commit merges
}

# "commits/<version>", written once by compare-and-swap: version = outer_step(version - 1, the
# weighted mean of these deltas, in this order). paramsHash is XXH3-64 of the resulting weights.
# Streaming DiLoCo: one outer step per fragment the entries cover, on the mean of its entries.
struct CommitRecord {
  version @0 :UInt16;
  number @1 :Int64;
  entries @2 :List(CommitEntry);
  paramsHash @3 :UInt64;
  proposer @4 :Text;
  merged @5 :List(SiteRound);  # per site, the newest round merged up to this version (this one included)
  fragment @6 :UInt32;         # streaming DiLoCo: whose turn this version is (0 for DiLoCo):
                               # fragment (number - 1) mod P, unless no site had a round of it
                               # (crosssite/round/commit_rule.hpp)
  roundTokens @7 :Float64;     # the tokens of a full round, every site that trains on counted: a
                               # commit missing some sites' deltas moves the weights by its share
                               # of it (commit_rule.hpp commit_share). 0, as in older records: by
                               # its entries' own tokens
  screens @8 :List(List(Float64));  # per fragment, the norms its delta screen holds once this
                               # version is made (delta_screen.hpp), oldest first: every site that
                               # holds the version screens alike, one that restarted or adopted a
                               # peer's state too. Empty in older records: the screens add the
                               # norms of the entries they decoded
  previous @9 :Data;           # SHA-256 of version number - 1's record as the proposer read it:
                               # the log's chain (absent for version 1 and in older records)
}

# Sent over a link: "send me your state (OuterState::snapshot) if you hold at least this version":
# how a site that was away, or restarted without its disk, catches up.
struct StateRequest {
  version @0 :UInt16;
  minVersion @1 :Int64;
}

# "deltas/<site>/<round>/disputed-by/<by>": site `by` received from `site`, intact through its
# link, bytes other than the announcement names. A site that says one thing to some peers and
# another to others is believed by none from then on: every site refuses its rounds.
struct DeltaDispute {
  version @0 :UInt16;
  site @1 :Text;       # who sent them
  round @2 :Int64;
  by @3 :Text;         # who received them
  announced @4 :Data;  # the SHA-256 the announcement names
  seen @5 :Data;       # the SHA-256 of the bytes that came
}

# Sent over a link: "send me this delta again" (it was lost or arrived damaged).
struct DeltaRequest {
  version @0 :UInt16;
  site @1 :Text;
  round @2 :Int64;
}
