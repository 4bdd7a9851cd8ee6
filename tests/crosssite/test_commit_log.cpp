// The commit log as one site reads it (crosssite/round/commit_log.hpp), on the in-memory control
// plane: records read since the last read, junk that a proposal may replace, and a record written
// over a readable one, which the site never applies.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>

#include "tests/crosssite/chained_log.hpp"

namespace meridian {

using testing::Log;
using testing::record;

TEST_CASE("commit log: each read sees the records written since the last, and the newest version") {
  Log l;
  const RoundKeys& keys = l.log.keys();
  REQUIRE(l.control.create_if_absent(keys.commit(1), encode(record(1, "a", 0))));
  l.read();
  REQUIRE(l.log.find(1) != nullptr);
  CHECK(l.log.find(1)->proposer == "a");
  REQUIRE(l.control.create_if_absent(keys.commit(2), encode(record(2, "b", 1))));
  l.read();
  CHECK(l.log.newest() == 2);
  const auto held = l.log.forget_before(2);
  REQUIRE(held.has_value());
  CHECK(held->number == 1);
  CHECK(l.log.find(1) == nullptr);
  CHECK(l.log.find(2) != nullptr);
  CHECK(l.events.empty());
}

TEST_CASE("commit log: junk where the next version goes is an event, and a proposal replaces it by compare-and-swap") {
  Log l;
  const RoundKeys& keys = l.log.keys();
  l.control.put(keys.commit(1), "junk");
  l.read();
  CHECK(l.count("commit_unreadable") == 1);
  CHECK(l.log.find(1) == nullptr);
  CHECK(l.log.claim(l.control, 1, encode(record(1, "a", 0)), "a", l.events));
  CHECK(l.count("commit_record_replaced") == 1);
  l.read();
  REQUIRE(l.log.find(1) != nullptr);
  CHECK(l.log.find(1)->proposer == "a");
}

TEST_CASE("commit log: a record written over a readable one is an event, and the first one stands") {
  Log l;
  const RoundKeys& keys = l.log.keys();
  const CommitRecord first = record(1, "a", 0);
  REQUIRE(l.control.create_if_absent(keys.commit(1), encode(first)));
  l.read();
  // A member with write access to commits/ (every site has it: etcd has no create-only) puts a
  // record of its own over version 1 before this site applied it.
  l.control.put(keys.commit(1), encode(record(1, "mallory", 7)));
  l.read();
  REQUIRE(l.count("commit_rewritten") == 1);
  const auto rewritten = std::find_if(l.events.begin(), l.events.end(),
                                      [](const CrossSiteEvent& e) { return e.kind == "commit_rewritten"; });
  CHECK(rewritten->number == 1);
  CHECK(rewritten->detail.find("mallory") != std::string::npos);
  REQUIRE(l.log.find(1) != nullptr);
  CHECK(*l.log.find(1) == first);
  // Nor does a proposal for version 1 ever replace it: the version is taken.
  CHECK_FALSE(l.log.claim(l.control, 1, encode(record(1, "b", 0)), "b", l.events));

  // After the site applied version 1 and forgot it, a rewrite is still named, and never comes back.
  REQUIRE(l.log.forget_before(2).has_value());
  l.control.put(keys.commit(1), encode(record(1, "mallory", 8)));
  l.read();
  CHECK(l.count("commit_rewritten") == 2);
  CHECK(l.log.find(1) == nullptr);
  CHECK(l.log.newest() == 1);
}

TEST_CASE("commit log: junk over a readable record, then that record put back, is no rewrite") {
  Log l;
  const RoundKeys& keys = l.log.keys();
  const std::string bytes = encode(record(1, "a", 0));
  REQUIRE(l.control.create_if_absent(keys.commit(1), bytes));
  l.read();
  l.control.put(keys.commit(1), "damage");
  l.read();
  CHECK(l.count("commit_unreadable") == 1);
  l.control.put(keys.commit(1), bytes);  // an operator's repair
  l.read();
  CHECK(l.count("commit_rewritten") == 0);
  REQUIRE(l.log.find(1) != nullptr);
  // Version 1 is readable again: a proposal for it finds it taken instead of swapping the junk.
  CHECK_FALSE(l.log.claim(l.control, 1, encode(record(1, "b", 0)), "b", l.events));
  CHECK(l.control.get(keys.commit(1)) == bytes);
}

TEST_CASE(
    "commit log: the version held keeps its record, and with keep_held every version held since the checkpoint's") {
  const auto write = [](Log& l, std::int64_t from, std::int64_t to) {
    for (std::int64_t v = from; v <= to; ++v)
      REQUIRE(l.control.create_if_absent(l.log.keys().commit(v), encode(record(v, "a", v - 1))));
    l.read();
  };
  SUBCASE("the version held alone") {
    Log l;
    write(l, 1, 4);
    l.log.forget_before(3);  // holds 2
    CHECK(l.log.record(1) == nullptr);
    REQUIRE(l.log.record(2) != nullptr);
    CHECK(l.log.record(2)->number == 2);
    CHECK(l.log.record(3) != nullptr);  // not held yet
    l.log.forget_before(5);             // holds 4
    CHECK(l.log.record(2) == nullptr);
    CHECK(l.log.record(3) == nullptr);
    CHECK(l.log.record(4) != nullptr);
  }
  SUBCASE("kept from the first version held, then from the checkpoint's") {
    Log l;
    l.log.keep_held();
    write(l, 1, 6);
    l.log.forget_before(3);  // a restarted site: its checkpoint holds 2
    l.log.forget_before(6);  // holds 5
    CHECK(l.log.record(1) == nullptr);
    for (std::int64_t v = 2; v <= 6; ++v) CHECK(l.log.record(v) != nullptr);
    l.log.keep_from(4);  // its next checkpoint
    CHECK(l.log.record(3) == nullptr);
    CHECK(l.log.record(4) != nullptr);
    CHECK(l.log.record(5) != nullptr);
  }
}

using testing::chained;
using testing::sha;
using testing::write_all;

TEST_CASE("commit log: a vouch names every record down the chain, and a record written over one is contradicted") {
  const auto log = chained(4);
  const Digest vouch = sha(log[3]);  // a peer applied version 4 as written
  Log honest;
  write_all(honest, log);
  for (std::int64_t v = 1; v <= 4; ++v) CHECK_FALSE(honest.log.contradiction(v, 4, vouch).has_value());
  CHECK(honest.log.digest(4) == vouch);
  const auto wrong = honest.log.contradiction(2, 4, sha(log[2]));
  REQUIRE(wrong.has_value());
  CHECK(wrong->version == 4);
  CHECK(wrong->why.starts_with("the record of version 4 read here (SHA-256 " + short_hex(vouch) + ")"));

  // A site that reads the log for the first time after version 2 was written over.
  Log late;
  write_all(late, chained(4, 2));
  const auto why = late.log.contradiction(2, 4, vouch);
  REQUIRE(why.has_value());
  CHECK(why->version == 2);
  CHECK(why->why == "the record of version 2 read here (SHA-256 " + short_hex(sha(chained(4, 2)[1])) +
                        ") is not the one vouched for (" + short_hex(sha(log[1])) + ")");
  CHECK_FALSE(late.log.contradiction(3, 4, vouch).has_value());  // the records after it are the ones written
  // Its own newest record heads the same chain: no peer is needed to see it.
  CHECK(late.log.contradiction(2, 4, *late.log.digest(4)).has_value());
  // Nothing to judge: a vouch for a version not read here, or for one before the record.
  CHECK_FALSE(late.log.contradiction(2, 5, vouch).has_value());
  CHECK_FALSE(late.log.contradiction(3, 2, sha(log[1])).has_value());
}

TEST_CASE("commit log: a record from before the chain ends the walk, and judges nothing below it") {
  auto log = chained(3, 1);
  auto three = decode_commit(log[2]);
  three.previous = Digest{};
  log[2] = encode(three);
  Log l;
  write_all(l, log);
  CHECK_FALSE(l.log.contradiction(1, 3, sha(log[2])).has_value());
  CHECK(l.log.contradiction(1, 2, sha(chained(2)[1])).has_value());
}

TEST_CASE(
    "commit log: a restarted site's version held as its own vouch names it: another record read there is forgotten") {
  const auto honest = chained(3);
  Log b;  // restarted from its disk at version 2 after version 2 was written over
  write_all(b, chained(3, 2));
  b.log.forget_before(3);
  REQUIRE(b.log.record(2) != nullptr);
  const auto other = b.log.held_as(2, sha(honest[1]));
  REQUIRE(other.has_value());
  CHECK(*other == sha(chained(3, 2)[1]));
  CHECK(b.log.digest(2) == sha(honest[1]));  // what its next proposal chains onto
  CHECK(b.log.record(2) == nullptr);
  // The record it applied, put back, is no rewrite; the forged one read again is one.
  REQUIRE(b.control.compare_and_swap(b.log.keys().commit(2), chained(3, 2)[1], honest[1]));
  b.read();
  CHECK(b.count("commit_rewritten") == 0);
  REQUIRE(b.control.compare_and_swap(b.log.keys().commit(2), honest[1], chained(3, 2)[1]));
  b.read();
  CHECK(b.count("commit_rewritten") == 1);
  // Held as read: nothing changes.
  Log c;
  write_all(c, honest);
  c.log.forget_before(3);
  CHECK_FALSE(c.log.held_as(2, sha(honest[1])).has_value());
  CHECK(c.log.record(2) != nullptr);
}

TEST_CASE(
    "commit log: the records a restarted site recalls from its journal stand as read, and one written over them is put "
    "back") {
  const auto honest = chained(3);
  Log b;
  for (std::int64_t v = 1; v <= 3; ++v)
    REQUIRE(b.control.create_if_absent(b.log.keys().commit(v), v == 2 ? chained(3, 2)[1] : honest[v - 1]));
  b.log.recall({{2, honest[1]}, {3, honest[2]}, {4, "junk the journal damaged"}});
  CHECK(b.log.newest() == 0);  // what the control plane shows: nothing read yet
  CHECK(b.log.digest(2) == sha(honest[1]));
  REQUIRE(b.log.bytes(2) != nullptr);
  CHECK(*b.log.bytes(2) == honest[1]);
  CHECK(b.log.bytes(4) == nullptr);
  b.read();
  CHECK(b.log.newest() == 3);
  CHECK(b.count("commit_rewritten") == 1);  // version 2 as the log has it now
  CHECK(b.log.find(3) != nullptr);          // the same record read again is no rewrite, and stays to apply
  b.log.forget_before(3);                   // it restarted holding version 2
  b.log.repair(b.control, b.events);
  CHECK(b.count("commit_restored") == 1);
  CHECK(*b.control.get(b.log.keys().commit(2)) == honest[1]);
}

}  // namespace meridian
