#include <doctest/doctest.h>

#include <string>

#include "core/util/error.hpp"
#include "sync/round/records.hpp"

using namespace meridian;

TEST_CASE("round records survive encode and decode") {
  const MemberRecord m{"eu-west", "tcp://10.0.0.1:5555", 7};
  CHECK(decode_member(encode(m)) == m);
  const DeltaAnnouncement a{"us-east", 12, 11, 65536, 834304, 0xdeadbeefcafef00dULL};
  CHECK(decode_announcement(encode(a)) == a);
  const CommitRecord c{13, {{"a", 12, 11, 3.5, 1}, {"b", 12, 12, 7.0, 2}}, 0x1234567890abcdefULL, "b"};
  CHECK(decode_commit(encode(c)) == c);
  const DeltaRequest r{"a", 12};
  CHECK(decode_delta_request(encode(r)) == r);
}

TEST_CASE("round records refuse bytes that are not theirs, as peer errors") {
  for (const std::string bad : {std::string(), std::string("xyz"), std::string(16, '\xff'), std::string(24, '\0')}) {
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
  const std::string good = encode(CommitRecord{2, {{"a", 1, 1, 1.0, 9}}, 5, "a"});
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
