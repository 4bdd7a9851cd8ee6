#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <capnp/message.h>
#include <capnp/serialize.h>

#include "core/util/error.hpp"
#include "transport/schemas/round.capnp.h"
#include "crosssite/round/records.hpp"

using namespace meridian;

namespace {

// A digest of all-`b` bytes: any 32 bytes stand for one here.
Digest digest(int b) {
  Digest d{};
  d.fill(static_cast<std::byte>(b));
  return d;
}

}  // namespace

TEST_CASE("round records survive encode and decode") {
  const MemberRecord m{"eu-west", "tcp://10.0.0.1:5555", 7};
  CHECK(decode_member(encode(m)) == m);
  const MemberRecord paused{"eu-west", "tcp://10.0.0.1:5555", 7, true};
  CHECK(decode_member(encode(paused)).paused);
  CHECK(decode_member(encode(m)).ended == -1);  // a site under way; also what a record from before `ended` reads as
  const MemberRecord ended{"eu-west", "tcp://10.0.0.1:5555", 7, false, 42};
  CHECK(decode_member(encode(ended)) == ended);
  // A split exchange's lanes, and the unit its replicas take deltas' parts on (0: none, as before).
  const MemberRecord in_parts{"eu-west", "tcp://10.0.0.1:5555", 7, false, -1, {"tcp://10.0.0.2:1", "tcp://10.0.0.3:1"},
                              4096};
  CHECK(decode_member(encode(in_parts)) == in_parts);
  CHECK(decode_member(encode(ended)).parts_unit == 0);
  const DeltaAnnouncement a{"us-east", 12, 11, 65536, 834304, sha256(std::as_bytes(std::span("delta", 5)))};
  CHECK(decode_announcement(encode(a)) == a);
  const CommitRecord c{13, {{"a", 12, 11, 3.5, digest(1)}, {"b", 12, 12, 7.0, digest(2)}}, 0x1234567890abcdefULL, "b", {}};
  CHECK(decode_commit(encode(c)) == c);
  const DeltaRequest r{"a", 12};
  CHECK(decode_delta_request(encode(r)) == r);
}

TEST_CASE("a dispute survives encode and decode, and lives under the accuser's records, among the announcements") {
  const DeltaDispute d{"a", 12, "c", digest(1), digest(2)};
  CHECK(decode_dispute(encode(d)) == d);
  const RoundKeys keys("job");
  const std::string key = keys.dispute("a", 12, "c");
  CHECK(key == keys.deltas() + "c/disputes:a/000000000012");
  CHECK(RoundKeys::is_dispute(key));
  CHECK_FALSE(RoundKeys::is_dispute(keys.delta("a", 12)));
  CHECK_THROWS_AS(decode_dispute(encode(DeltaRequest{"a", 12})), Error);
}

TEST_CASE("a commit carries a full round's tokens: 0 in records from before, a negative or NaN count refused") {
  CommitRecord c{13, {{"a", 12, 11, 3.5, digest(1)}}, 7, "a", {}, 0, 196608.0};
  CHECK(decode_commit(encode(c)).round_tokens == 196608.0);
  c.round_tokens = 0;
  CHECK(decode_commit(encode(c)).round_tokens == 0);
  for (const double bad : {-1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    c.round_tokens = bad;
    try {
      decode_commit(encode(c));
      FAIL("accepted ", bad);
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::Peer);
    }
  }
}

TEST_CASE("a commit carries every fragment's screen: none in records from before, an impossible norm refused") {
  CommitRecord c{13, {{"a", 12, 11, 3.5, digest(1)}}, 7, "a", {}, 1, 0, {{0.5, 0.25}, {}, {3}}};
  CHECK(decode_commit(encode(c)) == c);
  c.screens.clear();
  CHECK(decode_commit(encode(c)).screens.empty());
  for (const double bad : {-1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    c.screens = {{1, bad}};
    try {
      decode_commit(encode(c));
      FAIL("accepted ", bad);
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::Peer);
      CHECK(std::string(e.what()).find("impossible norm") != std::string::npos);
    }
  }
  c.screens = {std::vector<double>(2000, 1.0)};  // far past any window
  CHECK_THROWS_AS(decode_commit(encode(c)), Error);
}

TEST_CASE(
    "a commit names the record before it (none in records from before), and a vouch lives under its site's records") {
  CommitRecord c{13, {{"a", 12, 11, 3.5, digest(1)}}, 7, "a", {}};
  c.previous = digest(9);
  CHECK(decode_commit(encode(c)) == c);
  c.previous = Digest{};  // version 1, or a record from before the chain
  CHECK(decode_commit(encode(c)).previous == Digest{});
  const Vouch v{"eu-west", 41, digest(4)};
  CHECK(decode_vouch(encode(v)) == v);
  CHECK_THROWS_AS(decode_vouch(encode(Vouch{"eu-west", 0, digest(4)})), Error);  // no version 0 record
  CHECK_THROWS_AS(decode_vouch(encode(DeltaRequest{"a", 12})), Error);
  const RoundKeys keys("job");
  CHECK(keys.vouch("eu-west") == keys.deltas() + "eu-west/vouched");
  CHECK(RoundKeys::is_vouch(keys.vouch("eu-west")));
  CHECK_FALSE(RoundKeys::is_vouch(keys.delta("eu-west", 12)));
  CHECK_FALSE(RoundKeys::is_dispute(keys.vouch("eu-west")));
}

TEST_CASE("round records refuse bytes that are not theirs, as peer errors") {
  for (const std::string& bad : {std::string(), std::string("xyz"), std::string(16, '\xff'), std::string(24, '\0')}) {
    CAPTURE(bad.size());
    CHECK_THROWS_AS(decode_commit(bad), Error);
    try {
      decode_announcement(bad);
      FAIL("decoded garbage");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::Peer);
    }
  }
  // Every truncation of a valid record is refused, never misread.
  const std::string good = encode(CommitRecord{2, {{"a", 1, 1, 1.0, digest(9)}}, 5, "a", {}});
  for (std::size_t n = 0; n < good.size(); n += 8) CHECK_THROWS_AS(decode_commit(good.substr(0, n)), Error);
}

TEST_CASE("keys sort by round and by version, and live under the job's prefix") {
  const RoundKeys keys("job1");
  CHECK(keys.commit(9) < keys.commit(10));
  CHECK(keys.delta("a", 99) < keys.delta("a", 100));
  CHECK(keys.commit(3).rfind(keys.commits(), 0) == 0);
  CHECK(keys.member("a") == "/meridian/job1/members/a");
  CHECK(RoundKeys("job2").commit(1) != keys.commit(1));
}

namespace {

std::string from_hex(std::string_view hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  return out;
}

}  // namespace

TEST_CASE("streaming: announcements and commit entries carry their fragment") {
  DeltaAnnouncement a{"us-east", 12, 11, 65536, 834304, digest(42), true};
  a.fragment = 3;
  CHECK(decode_announcement(encode(a)) == a);
  CommitRecord c{13, {{"a", 12, 11, 3.5, digest(1), 2}, {"b", 12, 11, 3.5, digest(2), 3}}, 7, "b", {{"a", 12}}, 3};
  CHECK(decode_commit(encode(c)) == c);

  // A fragment number no job could have is the peer's error.
  a.fragment = 1 << 21;
  try {
    decode_announcement(encode(a));
    FAIL("decoded an impossible fragment");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Peer);
  }
}

TEST_CASE("an announcement carries the rounds its delta spans: 1 in records from before, a count no site could skip refused") {
  DeltaAnnouncement a{"us-east", 12, 11, 3 * 65536, 834304, digest(42)};
  CHECK(a.rounds == 1);
  a.rounds = 3;
  CHECK(decode_announcement(encode(a)) == a);
  a.rounds = (1 << 20) + 1;
  try {
    decode_announcement(encode(a));
    FAIL("decoded an impossible round count");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Peer);
    CHECK(std::string(e.what()).find("spans 1048577 rounds") != std::string::npos);
  }
  a.rounds = 0;
  CHECK_THROWS_AS(encode(a), InvariantError);
}

// Records of schema version 1 named a delta by a 64-bit XXH3, which anyone can forge a second
// payload for: a site reading one now refuses it, as a peer's error, rather than trust it.
TEST_CASE("records of the schema before digests are refused, and so is a digest of the wrong size") {
  // Written by `capnp encode` with round.capnp as it was at schema version 1 (before fragments).
  const auto old_announcement = from_hex(
      "0000000009000000000000000600010001000100000000000c000000000000000b00000000000000000001000000000000bb0c0000000000"
      "2a00000000000000010000004200000075732d6561737400");
  const auto old_commit = from_hex(
      "0000000013000000000000000300030001000000000000000d000000000000000700000000000000090000002f000000210000001200000021"
      "0000001700000004000000040001000c000000000000000b000000000000000000000000000c4001000000000000000100000012000000610000"
      "0000000000620000000000000004000000010001000c0000000000000001000000120000006100000000000000");
  for (const auto& [what, read] : std::vector<std::pair<std::string, std::function<void()>>>{
           {"delta announcement", [&] { decode_announcement(old_announcement); }},
           {"commit record", [&] { decode_commit(old_commit); }}}) {
    try {
      read();
      FAIL("decoded a version-1 ", what);
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::Peer);
      CHECK(std::string(e.what()) == what + " has schema version 1, expected 3");
    }
  }
  // A current announcement whose digest is one byte short.
  capnp::MallocMessageBuilder message;
  auto w = message.initRoot<wire::DeltaAnnouncement>();
  w.setVersion(wire::ROUND_SCHEMA_VERSION);
  w.setSite("a");
  w.setRounds(1);
  w.initDigest(31);
  const auto words = capnp::messageToFlatArray(message);
  try {
    decode_announcement({reinterpret_cast<const char*>(words.asBytes().begin()), words.asBytes().size()});
    FAIL("decoded a short digest");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Peer);
    CHECK(std::string(e.what()).find("has a digest of 31 bytes, not 32") != std::string::npos);
  }
}
