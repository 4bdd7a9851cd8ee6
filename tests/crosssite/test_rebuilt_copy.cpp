// A copy of the outer state rebuilt from a site's own disk (crosssite/round/rebuilt_copy.hpp):
// its checkpoint's state, checked against its version, then each version replayed from the
// journal's deltas, as far as they go, each delta and each outcome checked against its record.
#include <doctest/doctest.h>

#include <map>
#include <string>
#include <vector>

#include "core/util/error.hpp"
#include "crosssite/codec/codec.hpp"
#include "crosssite/codec/delta_digest.hpp"
#include "crosssite/round/rebuilt_copy.hpp"
#include "tests/support/flipped_bit.hpp"

namespace meridian {
namespace {

constexpr std::size_t kValues = 96;

std::vector<float> initial() {
  std::vector<float> w(kValues);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = 0.01f * static_cast<float>(i % 13) - 0.06f;
  return w;
}

OuterState whole() { return OuterState(initial(), {0.7f, 0.9f, true}, CodecOptions{CodecKind::Fp32}, false); }

// A job's history as one site lived it: versions 1 to 4, each of one site's delta (alternately
// a's and b's), committed on `live` from the delta decoded apart from the code under test; the
// records, the journal, and the state as a checkpoint took it at version 1.
struct History {
  OuterState live = whole();
  std::map<std::int64_t, CommitRecord> records;
  std::map<DeltaKey, std::vector<std::byte>> journal;
  std::optional<OuterState> checkpoint;

  History() {
    for (std::int64_t v = 1; v <= 4; ++v) {
      const std::string site = v % 2 ? "a" : "b";
      std::vector<float> local(live.global().begin(), live.global().end());
      for (std::size_t i = 0; i < local.size(); ++i) local[i] -= 1e-3f * static_cast<float>((i + v) % 5);
      OuterState encoder = live;
      const auto bytes = encoder.encode_delta(local);
      std::vector<float> mean(kValues);
      decode(bytes, mean);
      auto outcome = live.preview(mean);
      CommitRecord record;
      record.number = v;
      record.entries = {{site, v - 1, v - 1, 1000, delta_digest(std::span<const std::byte>(bytes)), 0}};
      record.params_hash = outcome.hash;
      record.proposer = site;
      live.commit(v, std::move(outcome));
      records[v] = record;
      journal[{site, v - 1}] = bytes;
      if (v == 1) checkpoint = live;
    }
  }

  RebuildSources sources() const {
    return {[this](std::int64_t v) -> const CommitRecord* {
              const auto it = records.find(v);
              return it == records.end() ? nullptr : &it->second;
            },
            [this](const DeltaKey& key) -> std::optional<std::vector<std::byte>> {
              const auto it = journal.find(key);
              return it == journal.end() ? std::nullopt : std::optional(it->second);
            },
            OuterState::weights_hash(initial())};
  }
};

std::string refusal(const History& h) {
  try {
    rebuild_copy(*h.checkpoint, h.sources(), {});
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Data);
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE(
    "rebuilt copy: a checkpoint of version 1 and the journal's deltas of versions 2 to 4 give version 4, momentum and "
    "all") {
  const History h;
  const auto rebuilt = rebuild_copy(*h.checkpoint, h.sources(), {});
  CHECK(rebuilt.from == 1);
  CHECK(rebuilt.version == 4);
  OuterState taken = whole();
  std::vector<float> local = initial();
  taken.adopt(rebuilt.snapshot, h.records.at(4).params_hash, local);
  CHECK(taken.version() == 4);
  // The next outer step agrees bit for bit: the momentum was replayed too.
  const std::vector<float> mean(kValues, 0.002f);
  CHECK(taken.preview(mean).hash == h.live.preview(mean).hash);
}

TEST_CASE("rebuilt copy: the replay ends where the records or the journal do") {
  History h;
  h.journal.erase({"b", 3});  // version 4's delta
  CHECK(rebuild_copy(*h.checkpoint, h.sources(), {}).version == 3);
  h.records.erase(3);
  CHECK(rebuild_copy(*h.checkpoint, h.sources(), {}).version == 2);
}

TEST_CASE("rebuilt copy: version 0 is held to the weights the process built") {
  History h;
  h.checkpoint = whole();
  CHECK(rebuild_copy(*h.checkpoint, h.sources(), {}).version == 4);
  auto sources = h.sources();
  sources.origin_hash.reset();
  CHECK_THROWS_WITH_AS(rebuild_copy(*h.checkpoint, sources, {}),
                       doctest::Contains("the checkpoint holds version 0, whose record this site no longer holds"),
                       Error);
}

TEST_CASE(
    "rebuilt copy: a damaged checkpoint, a journaled delta not its record's and a version that does not hash are "
    "refused, named") {
  SUBCASE("the checkpoint's copy") {
    History h;
    testing::flip_bit(*h.checkpoint, 17);
    CHECK(refusal(h).starts_with("the checkpoint's copy of version 1 hashes to "));
  }
  SUBCASE("a delta in the journal") {
    History h;
    h.journal.at({"a", 2})[40] ^= std::byte{0x01};
    CHECK(refusal(h) == "the journal's delta of a round 2 (merged by version 3) does not match its record's digest");
  }
  SUBCASE("bytes that are no delta at all") {
    History h;
    h.journal.at({"a", 2}).resize(3);
    CHECK(refusal(h) == "the journal's delta of a round 2 (merged by version 3) does not match its record's digest");
  }
  SUBCASE("a record's hash") {
    History h;
    h.records.at(3).params_hash ^= 1;
    CHECK(refusal(h).starts_with("version 3 replayed from the journal hashes to "));
  }
}

}  // namespace meridian
