#pragma once
// The records of the cross-site protocol and where they live in etcd (transport/schemas/round.capnp
// is the wire format). Every decode treats its bytes as untrusted: anything malformed is
// Error(Peer), so a site never acts on a record it could not read.
//
// Keys, under "/meridian/<job>/":
//   members/<site>          MemberRecord, on the site's lease
//   deltas/<site>/<round>   DeltaAnnouncement (round zero-padded, so keys sort by round)
//   deltas/<by>/disputes:<site>/<round>      DeltaDispute: <site> equivocated, filed by <by> under
//                                            its own records, the only ones its etcd role writes
//   commits/<version>       CommitRecord (zero-padded), created once: the commit log
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/util/digest.hpp"

namespace meridian {

struct MemberRecord {
  std::string site;
  std::string address;
  std::uint64_t incarnation = 0;
  bool paused = false;  // pause-outer or draining: no commit waits for a round it will not announce
  // The version the site ended the job on, -1 before: the others stay until every site has, so a
  // site still behind has someone to take the last versions from.
  std::int64_t ended = -1;
  // A split exchange: its replicas' own link addresses (replica 1 first), which carry the stripes
  // of its deltas beside its leader's link (transport/link/striped_link.hpp). Empty: no lanes.
  std::vector<std::string> lanes{};
  // Not 0: its replicas take deltas in parts cut on this many values, part i for replica i
  // (StripedLink's parts: its outer state is sharded, and the leader holds no peer's delta whole).
  std::uint64_t parts_unit = 0;
  bool operator==(const MemberRecord&) const = default;
};

// "deltas/<site>/vouched" (under the site's own records, not on its lease: it stands after the site
// is gone): the newest version the site applied and that version's record's SHA-256 as it read it.
// Down the chain of CommitRecord::previous it names every record before it: a site refuses a
// record a vouch contradicts (one written over the record its peers applied; vouches.hpp).
struct Vouch {
  std::string site;
  std::int64_t version = 0;
  Digest digest{};
  bool operator==(const Vouch&) const = default;
};

struct DeltaAnnouncement {
  std::string site;
  std::int64_t round = 0;
  std::int64_t base_version = 0;
  std::int64_t tokens = 0;
  std::uint64_t bytes = 0;
  Digest digest{};     // of the encoded delta (crosssite/codec/delta_digest.hpp)
  bool final = false;  // the site's last round
  int fragment = 0;    // streaming DiLoCo: the fragment its delta covers
  int rounds = 1;      // rounds of training it spans: more after pause-outer (the norm screen allows for them)
  // Its site restarted without the bytes (no disk, or its journal no longer had them): they will
  // never come, so the round is no offer (commit_rule) and later rounds of the site do not wait for it.
  bool withdrawn = false;
  bool operator==(const DeltaAnnouncement&) const = default;
};

struct CommitEntry {
  std::string site;
  std::int64_t round = 0;
  std::int64_t base_version = 0;
  double weight = 0;
  Digest digest{};   // the announced one: no other bytes are merged under this entry
  int fragment = 0;  // streaming DiLoCo: the fragment the delta covers
  bool operator==(const CommitEntry&) const = default;
};

struct CommitRecord {
  std::int64_t number = 0;  // the version this commit creates
  std::vector<CommitEntry> entries;
  std::uint64_t params_hash = 0;
  std::string proposer;
  // Per site, the newest round merged up to this version: what a site that skips versions (it
  // adopted a peer's state) needs to know which deltas are already in.
  std::map<std::string, std::int64_t> merged;
  int fragment = 0;  // streaming DiLoCo: whose turn this version is (its entries may add late rounds of others)
  // The tokens of a full round, every site that trains on counted (commit_rule.hpp round_tokens);
  // 0: a commit moves the weights by its entries' mean, however few sites they are.
  double round_tokens = 0;
  // Per fragment, the norms its delta screen holds once this version is made, oldest first: the
  // screen of every site that holds the version (delta_screen.hpp). Empty in older records.
  std::vector<std::vector<double>> screens{};
  // The SHA-256 of version number - 1's record as its proposer read it (CommitLog::digest): the
  // log's chain, down which a site's vouch covers every version (zeros: version 1, or a record from
  // before the chain).
  Digest previous{};
  bool operator==(const CommitRecord&) const = default;
};

// Site `by` received `site`'s delta of `round`, intact through its link, hashing to `seen` rather
// than to the `announced` digest: `site` equivocated (sent other peers other bytes, or other bytes
// than it announced). Filed under RoundKeys::dispute, read by every site.
struct DeltaDispute {
  std::string site;
  std::int64_t round = 0;
  std::string by;
  Digest announced{};
  Digest seen{};
  bool operator==(const DeltaDispute&) const = default;
};

struct StateRequest {
  std::int64_t min_version = 0;
  bool operator==(const StateRequest&) const = default;
};

struct DeltaRequest {
  std::string site;
  std::int64_t round = 0;
  bool operator==(const DeltaRequest&) const = default;
};

// etcd keeps bytes; the client's values are std::string.
std::string encode(const MemberRecord& r);
std::string encode(const DeltaAnnouncement& r);
std::string encode(const CommitRecord& r);
std::string encode(const DeltaRequest& r);
std::string encode(const DeltaDispute& r);
std::string encode(const Vouch& r);
std::string encode(const StateRequest& r);
MemberRecord decode_member(std::string_view bytes);
DeltaAnnouncement decode_announcement(std::string_view bytes);
CommitRecord decode_commit(std::string_view bytes);
DeltaRequest decode_delta_request(std::string_view bytes);
StateRequest decode_state_request(std::string_view bytes);
DeltaDispute decode_dispute(std::string_view bytes);
Vouch decode_vouch(std::string_view bytes);

class RoundKeys {
 public:
  explicit RoundKeys(const std::string& job) : prefix_("/meridian/" + job + "/") {}
  std::string root() const { return prefix_; }  // every key of the job is under it
  std::string members() const { return prefix_ + "members/"; }
  std::string member(const std::string& site) const { return members() + site; }
  std::string deltas() const { return prefix_ + "deltas/"; }
  std::string delta(const std::string& site, std::int64_t round) const;
  // Under deltas(), so the reads and the watch of the announcements see disputes too; under the
  // accuser's own records (etcd_site_permissions). ':' is in no job's or site's name.
  std::string dispute(const std::string& site, std::int64_t round, const std::string& by) const;
  static bool is_dispute(std::string_view key) { return key.find(kDisputes) != std::string_view::npos; }
  // Under deltas() too, the site's own records: read with the announcements.
  std::string vouch(const std::string& site) const { return deltas() + site + std::string(kVouched); }
  static bool is_vouch(std::string_view key) { return key.ends_with(kVouched); }
  std::string commits() const { return prefix_ + "commits/"; }
  std::string commit(std::int64_t version) const;
  // The version a key under commits() names, when it is one commit(v) writes; else nullopt.
  std::optional<std::int64_t> version_of_commit(std::string_view key) const;

 private:
  static constexpr std::string_view kDisputes = "/disputes:";
  static constexpr std::string_view kVouched = "/vouched";
  std::string prefix_;
};

// Link tags: what a transfer carries. The transfer id holds the round (Delta), the step
// (Gradients) or the version (State).
// Stripe: a share of a delta carried by one replica's lane in a split exchange (striped_link.hpp).
enum class LinkTag : std::uint16_t { Delta = 1, DeltaRequest = 2, Gradients = 3, StateRequest = 4, State = 5, Stripe = 6 };

}  // namespace meridian
