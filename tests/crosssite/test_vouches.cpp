// What the other sites vouch for, judged against the log as one site read it
// (crosssite/round/vouches.hpp): a record a peer's vouch or the site's own newest record
// contradicts is named once, by version and voucher, and refused; a vouch it cannot judge yet, or
// one older than the record, holds nothing up.
#include <doctest/doctest.h>

#include <optional>
#include <string>
#include <vector>

#include "crosssite/round/vouches.hpp"
#include "tests/crosssite/chained_log.hpp"

namespace meridian {

using testing::chained;
using testing::Log;
using testing::sha;
using testing::write_all;

namespace {

// Reads each of `vouches` into `into`, then judges `record`.
std::optional<CommitLog::Contradiction> judged(Vouches& into, const std::vector<Vouch>& vouches,
                                               const CommitRecord& record, Log& log) {
  for (const auto& v : vouches) into.read(v);
  return into.against(record, log.log, log.events);
}

}  // namespace

TEST_CASE("vouches: a record written over the one a peer applied is refused, and named once") {
  const auto honest = chained(3);
  // c read the log first after b wrote version 2 over; its own newest record is version 2.
  Log c;
  write_all(c, chained(2, 2));
  Vouches vouches("c");
  const std::vector<Vouch> read{{"a", 3, sha(honest[2])}, {"b", 2, sha(chained(2, 2)[1])}, {"c", 1, sha(honest[0])}};
  const CommitRecord* two = c.log.find(2);
  REQUIRE(two != nullptr);
  // a's vouch for version 3 is not judged yet: c has not read version 3.
  CHECK_FALSE(judged(vouches, read, *two, c).has_value());
  REQUIRE(c.control.create_if_absent(c.log.keys().commit(3), honest[2]));
  c.read();
  // Now it is, down the chain: version 3 names the version 2 a applied, not the one c read.
  for (int look = 0; look < 3; ++look) {
    const auto why = judged(vouches, read, *two, c);
    REQUIRE(why.has_value());
    CHECK(why->version == 2);
    CHECK(why->why.starts_with("version 3 read here: the record of version 2 read here"));
  }
  REQUIRE(c.count("commit_contradicted") == 1);
  CHECK(c.events.back().site == "c");  // its own newest record says so first
  CHECK(c.events.back().number == 2);
  // Version 1 too: the chain down to it passes through the version 2 c read, so nothing c read
  // below that vouches for it any more (a tail written over whole would look the same from there).
  CHECK(judged(vouches, read, *c.log.find(1), c).has_value());
}

TEST_CASE("vouches: a peer's vouch alone refuses a rewritten newest record") {
  const auto honest = chained(2);
  Log c;
  write_all(c, chained(2, 2));  // version 2 written over, and nothing newer: c's own chain agrees with it
  Vouches vouches("c");
  const CommitRecord* two = c.log.find(2);
  REQUIRE(two != nullptr);
  CHECK_FALSE(judged(vouches, {}, *two, c).has_value());
  const auto why = judged(vouches, {{"a", 2, sha(honest[1])}}, *two, c);
  REQUIRE(why.has_value());
  CHECK(why->why.starts_with("a's vouch for version 2: the record of version 2 read here"));
  REQUIRE(c.count("commit_contradicted") == 1);
  CHECK(c.events.back().site == "a");
}

TEST_CASE("vouches: each site's newest vouch read stands, a site's own earlier one too") {
  const auto honest = chained(3);
  Log c;
  write_all(c, chained(2, 2));
  Vouches vouches("c");
  const CommitRecord* two = c.log.find(2);
  REQUIRE(two != nullptr);
  CHECK(judged(vouches, {{"a", 2, sha(honest[1])}}, *two, c).has_value());
  CHECK(judged(vouches, {{"a", 1, sha(honest[0])}}, *two, c).has_value());  // an older one replaces nothing
  // c's own vouch from before it restarted: what it applied then stands.
  Vouches restarted("c");
  CHECK(judged(restarted, {{"c", 2, sha(honest[1])}}, *two, c).has_value());
}

TEST_CASE("vouches: a site's own vouch names the record it applied at that version only") {
  const auto honest = chained(3);
  Vouches b("b");
  CHECK_FALSE(b.own(2).has_value());
  b.read({"a", 2, sha(honest[1])});
  CHECK_FALSE(b.own(2).has_value());  // a peer's word is not this site's
  b.read({"b", 2, sha(honest[1])});
  CHECK(b.own(2) == sha(honest[1]));
  CHECK_FALSE(b.own(1).has_value());
  b.read({"b", 3, sha(honest[2])});
  // Version 3's record names version 2 as its proposer read it: no word of this site's on 2.
  CHECK_FALSE(b.own(2).has_value());
  CHECK(b.own(3) == sha(honest[2]));
}

}  // namespace meridian
