#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "core/util/error.hpp"
#include "core/util/hash.hpp"
#include "transport/chunking/assembler.hpp"
#include "transport/chunking/chunker.hpp"

using namespace meridian;
using Verdict = Assembler::Verdict;

namespace {

std::vector<std::byte> random_bytes(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::byte> out(n);
  for (auto& b : out) b = static_cast<std::byte>(rng());
  return out;
}

std::vector<std::byte> assemble(const std::vector<Frame>& frames) {
  Assembler a;
  for (const auto& f : frames) REQUIRE(a.add(f.header, f.payload).verdict == Verdict::Accepted);
  REQUIRE(a.complete());
  return a.take();
}

}  // namespace

TEST_CASE("round trips payloads around the chunk size, in order and shuffled") {
  constexpr std::size_t chunk = 64;
  std::mt19937 rng(7);
  for (const std::size_t n : {std::size_t{0}, std::size_t{1}, chunk - 1, chunk, chunk + 1, 10 * chunk + 3}) {
    CAPTURE(n);
    const auto payload = random_bytes(n, n);
    auto frames = make_frames(42, 3, payload, chunk);
    CHECK(frames.size() == std::max<std::size_t>(1, (n + chunk - 1) / chunk));
    CHECK(assemble(frames) == payload);
    std::shuffle(frames.begin(), frames.end(), rng);
    CHECK(assemble(frames) == payload);
  }
}

TEST_CASE("round trips 10 MB in shuffled 64 KiB chunks and reports progress") {
  const auto payload = random_bytes(10'000'000, 1);
  auto frames = make_frames(9, 1, payload, 64 << 10);
  REQUIRE(frames.size() == 153);
  std::shuffle(frames.begin(), frames.end(), std::mt19937(3));
  Assembler a;
  CHECK(a.missing().empty());
  for (std::size_t i = 0; i < frames.size(); ++i) {
    REQUIRE(a.add(frames[i].header, frames[i].payload).verdict == Verdict::Accepted);
    CHECK(a.complete() == (i + 1 == frames.size()));
  }
  CHECK(a.missing().empty());
  CHECK(a.take() == payload);
  CHECK(a.counts().accepted == 153);
}

TEST_CASE("missing lists what was not received, take before complete is a peer error") {
  const auto payload = random_bytes(500, 2);
  const auto frames = make_frames(1, 0, payload, 100);
  Assembler a;
  CHECK_THROWS_AS(a.take(), Error);
  Assembler b;
  for (const std::size_t i : {0, 2, 3}) REQUIRE(b.add(frames[i].header, frames[i].payload).verdict == Verdict::Accepted);
  CHECK(b.missing() == std::vector<std::uint32_t>{1, 4});
  CHECK_FALSE(b.complete());
  try {
    b.take();
    FAIL("take() of an incomplete transfer succeeded");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Peer);
  }
}

TEST_CASE("every single-bit flip is rejected or caught, never yields wrong bytes") {
  const auto payload = random_bytes(100, 3);
  const auto frames = make_frames(5, 2, payload, 32);
  REQUIRE(frames.size() == 4);
  int rejected = 0, harmless = 0;
  for (std::size_t target = 0; target < frames.size(); ++target) {
    for (const bool in_header : {true, false}) {
      const std::size_t bits = 8 * (in_header ? frames[target].header.size() : frames[target].payload.size());
      for (std::size_t bit = 0; bit < bits; ++bit) {
        CAPTURE(target);
        CAPTURE(in_header);
        CAPTURE(bit);
        auto header = frames[target].header;
        std::vector<std::byte> body(frames[target].payload.begin(), frames[target].payload.end());
        auto& flipped = in_header ? header : body;
        flipped[bit / 8] ^= static_cast<std::byte>(1u << (bit % 8));
        Assembler a;
        // The damaged frame goes first, where it would fix the transfer's fields if accepted.
        const auto r = a.add(header, body);
        if (r.verdict == Verdict::Rejected) {
          ++rejected;
          CHECK(!r.reason.empty());
          if (!in_header) CHECK(r.rerequest == target);
        } else {
          ++harmless;  // a flip in bytes the header's fields do not use
        }
        for (const auto& f : frames) a.add(f.header, f.payload);
        REQUIRE(a.complete());
        CHECK(a.take() == payload);
      }
    }
  }
  CHECK(rejected > 0);
  MESSAGE(rejected, " flips rejected, ", harmless, " harmless");
}

TEST_CASE("copy_frames copies the payload and frames it as make_frames does") {
  for (const std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{300'000}}) {
    CAPTURE(n);
    const auto payload = random_bytes(n, 11);
    std::vector<std::byte> copy(n);
    const auto made = make_frames(3, 1, payload, 100'000);
    const auto copied = copy_frames(3, 1, payload, copy, 100'000);
    CHECK(copy == payload);
    REQUIRE(copied.size() == made.size());
    for (std::size_t i = 0; i < made.size(); ++i) {
      CHECK(copied[i].header == made[i].header);
      CHECK(std::equal(copied[i].payload.begin(), copied[i].payload.end(), made[i].payload.begin(),
                       made[i].payload.end()));
      CHECK((copied[i].payload.empty() || copied[i].payload.data() == copy.data() + i * 100'000));
    }
    CHECK(assemble(copied) == payload);
  }
}

TEST_CASE("hashed_frames from chunk_hashes frame a payload as make_frames does, reading none of it") {
  for (const std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{300'000}, std::size_t{20} << 20}) {
    CAPTURE(n);
    const auto payload = random_bytes(n, 13);
    const std::size_t chunk = n > 1'000'000 ? std::size_t{1} << 20 : 100'000;
    const ChunkHashes hashes = chunk_hashes(payload, chunk);  // two threads from 16 MiB on
    CHECK(hashes.chunk_bytes == chunk);
    CHECK(hashes == chunk_hashes(payload, chunk, false));
    const auto made = make_frames(4, 2, payload, chunk);
    const auto hashed = hashed_frames(4, 2, payload, hashes);
    REQUIRE(hashed.size() == made.size());
    for (std::size_t i = 0; i < made.size(); ++i) {
      CHECK(hashed[i].header == made[i].header);
      CHECK(hashed[i].payload.data() == made[i].payload.data());
      CHECK(hashed[i].payload.size() == made[i].payload.size());
    }
    CHECK(assemble(hashed) == payload);
  }
  const auto payload = random_bytes(250'000, 14);
  ChunkHashes short_of_one = chunk_hashes(payload, 100'000);
  short_of_one.hashes.pop_back();
  CHECK_THROWS_AS(hashed_frames(1, 0, payload, short_of_one), InvariantError);  // a caller bug

  // A wrong hash frames fine (nothing reads the payload) but its chunk is refused, never accepted.
  ChunkHashes wrong = chunk_hashes(payload, 100'000);
  wrong.hashes[1] ^= 1;
  const auto frames = hashed_frames(1, 0, payload, wrong);
  Assembler a;
  CHECK(a.add(frames[0].header, frames[0].payload).verdict == Verdict::Accepted);
  const auto refused = a.add(frames[1].header, frames[1].payload);
  CHECK(refused.verdict == Verdict::Rejected);
  CHECK(refused.rerequest == 1u);
  CHECK(a.add(frames[2].header, frames[2].payload).verdict == Verdict::Accepted);
  CHECK_FALSE(a.complete());
}

TEST_CASE("a damaged chunk that continues the payload is cut off again, its good copy then fits") {
  const auto payload = random_bytes(1'000'000, 12);
  const auto frames = make_frames(1, 0, payload, 100'000);  // 10 chunks, pieces of 64 KiB within each
  Assembler a;
  for (const std::size_t i : {0, 1, 2}) REQUIRE(a.add(frames[i].header, frames[i].payload).verdict == Verdict::Accepted);
  for (const std::size_t at : {std::size_t{0}, std::size_t{70'000}, std::size_t{99'999}}) {
    std::vector<std::byte> damaged(frames[3].payload.begin(), frames[3].payload.end());
    damaged[at] ^= std::byte{0x40};
    const auto r = a.add(frames[3].header, damaged);
    CHECK(r.verdict == Verdict::Rejected);
    CHECK(r.rerequest == 3u);
  }
  // Chunk 5 ahead of 4 is held; 4 then continues the payload and 5 follows it in.
  REQUIRE(a.add(frames[5].header, frames[5].payload).verdict == Verdict::Accepted);
  CHECK(a.add(frames[5].header, frames[5].payload).verdict == Verdict::Duplicate);
  for (const std::size_t i : {3, 4}) REQUIRE(a.add(frames[i].header, frames[i].payload).verdict == Verdict::Accepted);
  CHECK(a.add(frames[4].header, frames[4].payload).verdict == Verdict::Duplicate);
  CHECK(a.missing() == std::vector<std::uint32_t>{6, 7, 8, 9});
  for (const std::size_t i : {9, 7, 8, 6}) REQUIRE(a.add(frames[i].header, frames[i].payload).verdict == Verdict::Accepted);
  CHECK(a.reserved() == payload.size());
  CHECK(a.take() == payload);
  CHECK(a.counts().rejected == 3);
  CHECK(a.counts().duplicates == 2);
}

TEST_CASE("the total hash is over the chunks' hashes, in order") {
  const auto payload = random_bytes(1000, 13);
  const auto frames = make_frames(1, 0, payload, 300);
  std::vector<std::uint64_t> hashes;
  for (const auto& f : frames) hashes.push_back(decode_chunk_header(f.header).payload_hash);
  CHECK(decode_chunk_header(frames[0].header).total_hash == total_hash_of(hashes));
  std::swap(hashes[0], hashes[1]);
  CHECK(decode_chunk_header(frames[0].header).total_hash != total_hash_of(hashes));
}

TEST_CASE("truncated payload is rejected with a re-request") {
  const auto payload = random_bytes(300, 4);
  const auto frames = make_frames(1, 0, payload, 100);
  Assembler a;
  const auto r = a.add(frames[1].header, frames[1].payload.first(99));
  CHECK(r.verdict == Verdict::Rejected);
  CHECK(r.rerequest == 1u);
  CHECK(a.counts().rejected == 1);
  CHECK(a.add(frames[1].header, frames[1].payload).verdict == Verdict::Accepted);
}

TEST_CASE("duplicates: same bytes are ignored, different bytes rejected") {
  const auto payload = random_bytes(300, 5);
  const auto frames = make_frames(1, 0, payload, 100);
  Assembler a;
  REQUIRE(a.add(frames[0].header, frames[0].payload).verdict == Verdict::Accepted);
  CHECK(a.add(frames[0].header, frames[0].payload).verdict == Verdict::Duplicate);
  CHECK(a.counts().duplicates == 1);
  // A self-consistent chunk 0 with other bytes: a sender that changed its mind mid-transfer.
  auto other = payload;
  other[0] ^= std::byte{1};
  const auto forged = make_frames(1, 0, other, 100);
  CHECK(a.add(forged[0].header, forged[0].payload).verdict == Verdict::Rejected);
  for (const auto& f : frames) a.add(f.header, f.payload);
  CHECK(a.take() == payload);
}

TEST_CASE("chunks of another transfer, tag or layout are rejected naming the field") {
  const auto payload = random_bytes(300, 6);
  const auto frames = make_frames(1, 0, payload, 100);
  Assembler a;
  REQUIRE(a.add(frames[0].header, frames[0].payload).verdict == Verdict::Accepted);
  const auto check_rejected = [&](const std::vector<Frame>& fs, const char* field) {
    const auto r = a.add(fs[1].header, fs[1].payload);
    CHECK(r.verdict == Verdict::Rejected);
    CHECK_MESSAGE(r.reason.find(field) != std::string::npos, r.reason);
  };
  check_rejected(make_frames(2, 0, payload, 100), "transfer_id");
  check_rejected(make_frames(1, 1, payload, 100), "tag");
  check_rejected(make_frames(1, 0, payload, 60), "count");
  check_rejected(make_frames(1, 0, random_bytes(301, 6), 101), "total_bytes");
  check_rejected(make_frames(1, 0, random_bytes(300, 7), 100), "total_hash");
  CHECK(a.counts().rejected == 5);
}

TEST_CASE("headers with out-of-range or inconsistent fields are rejected") {
  const auto payload = random_bytes(300, 8);
  const auto frames = make_frames(1, 0, payload, 100);
  const auto valid = decode_chunk_header(frames[1].header);
  const auto reject = [&](ChunkHeader h, std::span<const std::byte> body, const char* why) {
    Assembler a;
    REQUIRE(a.add(frames[0].header, frames[0].payload).verdict == Verdict::Accepted);
    const auto r = a.add(encode_chunk_header(h), body);
    CHECK_MESSAGE(r.verdict == Verdict::Rejected, why);
    CHECK(!r.reason.empty());
  };
  auto h = valid;
  h.index = 3;
  reject(h, frames[1].payload, "index out of range");
  h = valid;
  h.offset = 250;
  reject(h, frames[1].payload, "offset past the end");
  h = valid;
  h.offset = 50;
  reject(h, frames[1].payload, "overlaps chunk 0");
  h = valid;
  h.offset = std::uint64_t{0} - 10;
  reject(h, frames[1].payload, "offset overflow");
  h = valid;
  h.count = 4'000'000'000u;
  h.total_bytes = std::uint64_t{1} << 62;
  reject(h, frames[1].payload, "huge totals");
  // Chunk 1 fits between 0 and 2 but leaves too little for 2: the lengths cannot tile the total.
  Assembler b;
  REQUIRE(b.add(frames[0].header, frames[0].payload).verdict == Verdict::Accepted);
  h = valid;
  h.length = 60;
  const auto body = frames[1].payload.first(60);
  h.payload_hash = decode_chunk_header(make_frames(1, 0, body, 100)[0].header).payload_hash;
  CHECK(b.add(encode_chunk_header(h), body).verdict == Verdict::Accepted);
  CHECK(b.add(frames[2].header, frames[2].payload).verdict == Verdict::Rejected);
}

TEST_CASE("wrong version and garbage headers are rejected with a reason") {
  const auto payload = random_bytes(10, 9);
  const auto frames = make_frames(1, 0, payload, 100);
  auto header = frames[0].header;
  // The version is the first field of the root struct's data section, right after the segment table
  // and the root pointer; the header hash covers it, so the check that fires must name the version.
  // One more than ours: a peer of a later version.
  header[16] = static_cast<std::byte>(std::to_integer<unsigned>(header[16]) + 1);
  Assembler a;
  const auto r = a.add(header, frames[0].payload);
  CHECK(r.verdict == Verdict::Rejected);
  CHECK_MESSAGE(r.reason.find("version") != std::string::npos, r.reason);

  std::mt19937_64 rng(10);
  for (int i = 0; i < 20'000; ++i) {
    auto garbage = random_bytes(rng() % 160, rng());
    // Half keep a plausible segment table so that decoding gets past the first check.
    if (i % 2 && garbage.size() >= 8) std::copy_n(frames[0].header.begin(), 8, garbage.begin());
    const auto g = a.add(garbage, frames[0].payload);
    REQUIRE(g.verdict == Verdict::Rejected);
    CHECK(!g.reason.empty());
  }
  CHECK(a.add(frames[0].header, frames[0].payload).verdict == Verdict::Accepted);
  CHECK(a.take() == payload);
}

TEST_CASE("payload_hash is hash64 (XXH3 with seed 0), whatever vector unit computes it") {
  for (const std::size_t n :
       {std::size_t{0}, std::size_t{1}, std::size_t{240}, std::size_t{65'537}, std::size_t{4} << 20}) {
    CAPTURE(n);
    const auto bytes = random_bytes(n, n + 1);
    CHECK(payload_hash(bytes) == hash64(std::span<const std::byte>(bytes)));
    std::vector<std::byte> to(n);
    CHECK(copy_and_hash(bytes, to.data()) == hash64(std::span<const std::byte>(bytes)));
    CHECK(to == bytes);
  }
}

TEST_CASE("a payload large enough to be hashed by two threads frames as one hashed by one") {
  const auto payload = random_bytes(40 << 20, 21);  // above the two-thread size, an odd chunk count
  const auto frames = make_frames(3, 1, payload, 3 << 20);
  REQUIRE(frames.size() == 14);
  std::vector<std::uint64_t> hashes;
  for (std::size_t i = 0; i < frames.size(); ++i) {
    const auto h = decode_chunk_header(frames[i].header);
    CHECK(h.payload_hash == hash64(frames[i].payload));
    hashes.push_back(h.payload_hash);
  }
  CHECK(decode_chunk_header(frames[0].header).total_hash == total_hash_of(hashes));
  std::vector<std::byte> copy(payload.size());
  const auto copied = copy_frames(3, 1, payload, copy, 3 << 20);
  CHECK(copy == payload);
  for (std::size_t i = 0; i < frames.size(); ++i) CHECK(copied[i].header == frames[i].header);
}

// A transport writing a chunk's payload straight to its place: claim, write, settle.
TEST_CASE("claimed chunks are written in place, checked there, and mix with copied ones") {
  const auto payload = random_bytes(1'000'000, 14);
  const auto frames = make_frames(1, 0, payload, 100'000);  // 10 chunks
  Assembler a;
  const auto write = [&](std::size_t i) {
    const auto h = decode_chunk_header(frames[i].header);
    const auto place = a.claim(h, frames[i].payload.size());
    REQUIRE(place.has_value());
    CHECK(place->index == i);
    REQUIRE(place->bytes.size() == frames[i].payload.size());
    std::copy(frames[i].payload.begin(), frames[i].payload.end(), place->bytes.begin());
    return *place;
  };
  // Out of order, some claimed, some copied.
  for (const std::size_t i : {3, 0}) {
    const auto place = write(i);
    CHECK(a.settle(place.index, hash64(std::span<const std::byte>(place.bytes))).verdict == Verdict::Accepted);
  }
  REQUIRE(a.add(frames[1].header, frames[1].payload).verdict == Verdict::Accepted);
  CHECK(a.missing() == std::vector<std::uint32_t>{2, 4, 5, 6, 7, 8, 9});

  // Being written: not claimable again, and a copy arriving meanwhile is dropped as a duplicate
  // (or refused when damaged), never written over the place.
  const auto place2 = write(2);
  CHECK_FALSE(a.claim(decode_chunk_header(frames[2].header), frames[2].payload.size()).has_value());
  CHECK(a.add(frames[2].header, frames[2].payload).verdict == Verdict::Duplicate);
  std::vector<std::byte> damaged(frames[2].payload.begin(), frames[2].payload.end());
  damaged[5] ^= std::byte{1};
  const auto r = a.add(frames[2].header, damaged);
  CHECK(r.verdict == Verdict::Rejected);
  CHECK(r.rerequest == 2u);
  CHECK(a.missing() == std::vector<std::uint32_t>{2, 4, 5, 6, 7, 8, 9});  // being written is still missing

  // What landed is damaged: refused with a re-request, the place free again for the good copy.
  place2.bytes[7] ^= std::byte{0x10};
  const auto bad = a.settle(place2.index, hash64(std::span<const std::byte>(place2.bytes)));
  CHECK(bad.verdict == Verdict::Rejected);
  CHECK(bad.rerequest == 2u);
  const auto again = write(2);
  CHECK(a.settle(again.index, hash64(std::span<const std::byte>(again.bytes))).verdict == Verdict::Accepted);

  // A receive that never completes gives its place back.
  const auto lost = a.claim(decode_chunk_header(frames[4].header), frames[4].payload.size());
  REQUIRE(lost.has_value());
  a.release(lost->index);
  REQUIRE(a.add(frames[4].header, frames[4].payload).verdict == Verdict::Accepted);
  CHECK(a.add(frames[4].header, frames[4].payload).verdict == Verdict::Duplicate);

  for (const std::size_t i : {9, 5, 7}) {
    const auto place = write(i);
    CHECK(a.settle(place.index, hash64(std::span<const std::byte>(place.bytes))).verdict == Verdict::Accepted);
  }
  for (const std::size_t i : {8, 6}) REQUIRE(a.add(frames[i].header, frames[i].payload).verdict == Verdict::Accepted);
  REQUIRE(a.complete());
  CHECK(a.take() == payload);
}

TEST_CASE("claims are refused, with nothing counted, for what cannot take its place") {
  const auto payload = random_bytes(300, 15);
  const auto frames = make_frames(1, 0, payload, 100);
  Assembler a;
  const auto h0 = decode_chunk_header(frames[0].header);
  CHECK_FALSE(a.claim(h0, 99).has_value());  // not the header's length
  auto wrong = h0;
  wrong.offset = 250;
  CHECK_FALSE(a.claim(wrong, 100).has_value());  // past the end
  CHECK(a.reserved() == 0);
  REQUIRE(a.add(frames[0].header, frames[0].payload).verdict == Verdict::Accepted);
  CHECK_FALSE(a.claim(h0, 100).has_value());  // already in
  const auto other = decode_chunk_header(make_frames(1, 0, random_bytes(300, 16), 100)[1].header);
  CHECK_FALSE(a.claim(other, 100).has_value());  // another total hash
  auto overlapping = decode_chunk_header(frames[1].header);
  overlapping.offset = 50;
  CHECK_FALSE(a.claim(overlapping, 100).has_value());
  const auto empty = make_frames(2, 0, {}, 100);
  Assembler e;
  CHECK_FALSE(e.claim(decode_chunk_header(empty[0].header), 0).has_value());  // nothing to write
  CHECK(a.counts().rejected == 0);
  CHECK(a.counts().accepted == 1);
}

namespace {

Assembler::Placement placement_of(const Frame& f) {
  const auto h = decode_chunk_header(f.header);
  return {h.transfer_id, h.index, h.count, h.total_bytes, h.offset, h.length};
}

}  // namespace

// A sender that sends payloads while it is still hashing: each payload ahead of its header.
TEST_CASE("payloads sent ahead of their headers wait for them, and are accepted or refused by them") {
  const auto payload = random_bytes(1'000'000, 16);
  const auto frames = make_frames(4, 2, payload, 100'000);  // 10 chunks
  Assembler a;
  // Written in place (as a transport would) or copied, Pending either way until its header comes.
  for (const std::size_t i : {0, 1, 2, 3, 4}) {
    const auto place = a.claim(placement_of(frames[i]), frames[i].payload.size());
    REQUIRE(place.has_value());
    std::copy(frames[i].payload.begin(), frames[i].payload.end(), place->bytes.begin());
    CHECK(a.settle(place->index, hash64(std::span<const std::byte>(place->bytes))).verdict == Verdict::Pending);
  }
  for (const std::size_t i : {5, 6})
    CHECK(a.add(placement_of(frames[i]), frames[i].payload).verdict == Verdict::Pending);
  CHECK(a.missing().size() == 10);
  CHECK_FALSE(a.first_header().has_value());

  // Damaged on the way: its header refuses it and has it asked for again; the frame sent again fits.
  std::vector<std::byte> damaged(frames[7].payload.begin(), frames[7].payload.end());
  damaged[99] ^= std::byte{4};
  CHECK(a.add(placement_of(frames[7]), damaged).verdict == Verdict::Pending);
  const auto bad = a.confirm(frames[7].header);
  CHECK(bad.verdict == Verdict::Rejected);
  CHECK(bad.rerequest == 7u);
  REQUIRE(a.add(frames[7].header, frames[7].payload).verdict == Verdict::Accepted);

  // A payload that never came: its header says so (ask for it); the frame sent again fits.
  const auto missing = a.confirm(frames[8].header);
  CHECK(missing.verdict == Verdict::Missing);
  CHECK(missing.rerequest == 8u);
  REQUIRE(a.add(frames[8].header, frames[8].payload).verdict == Verdict::Accepted);

  // Being written when its header comes: accepted once the bytes land.
  const auto writing = a.claim(placement_of(frames[9]), frames[9].payload.size());
  REQUIRE(writing.has_value());
  CHECK(a.confirm(frames[9].header).verdict == Verdict::Pending);
  std::copy(frames[9].payload.begin(), frames[9].payload.end(), writing->bytes.begin());
  CHECK(a.settle(writing->index, hash64(std::span<const std::byte>(writing->bytes))).verdict == Verdict::Accepted);

  // Headers accept what came ahead; a header twice is a duplicate, and so is a payload sent twice.
  for (const std::size_t i : {3, 0, 6, 1}) REQUIRE(a.confirm(frames[i].header).verdict == Verdict::Accepted);
  CHECK(a.confirm(frames[3].header).verdict == Verdict::Duplicate);
  CHECK(a.add(placement_of(frames[3]), frames[3].payload).verdict == Verdict::Duplicate);
  CHECK(a.first_header()->tag == 2);
  // The whole frame of a chunk still waiting for its header accepts it just as well.
  REQUIRE(a.add(frames[2].header, frames[2].payload).verdict == Verdict::Accepted);
  CHECK_FALSE(a.complete());
  CHECK(a.missing() == std::vector<std::uint32_t>{4, 5});
  for (const std::size_t i : {4, 5}) REQUIRE(a.confirm(frames[i].header).verdict == Verdict::Accepted);
  REQUIRE(a.complete());
  CHECK(a.take() == payload);
  CHECK(a.counts().rejected == 1);
}

TEST_CASE("placements are not trusted: what does not fit is refused, what lies is caught by the header") {
  const auto payload = random_bytes(300, 17);
  const auto frames = make_frames(1, 0, payload, 100);
  Assembler a;
  auto p = placement_of(frames[1]);
  CHECK(a.add(p, frames[1].payload.first(50)).verdict == Verdict::Rejected);  // not the length it says
  auto huge = p;
  huge.total_bytes = kMaxTransferBytes + 1;
  CHECK(a.add(huge, frames[1].payload).verdict == Verdict::Rejected);
  CHECK(a.reserved() == 0);
  CHECK_FALSE(a.claim(huge, 100).has_value());
  // One that lands at the wrong offset is refused by its header, which has the chunk asked for again.
  auto shifted = p;
  shifted.offset = 150;
  shifted.length = 100;
  CHECK(a.add(shifted, frames[1].payload).verdict == Verdict::Pending);
  const auto wrong = a.confirm(frames[1].header);
  CHECK(wrong.verdict == Verdict::Rejected);
  CHECK(wrong.rerequest == 1u);
  // Another transfer's placement does not fit this one's layout.
  auto other = placement_of(frames[0]);
  other.transfer_id = 2;
  CHECK(a.add(other, frames[0].payload).verdict == Verdict::Rejected);
  for (const auto& f : frames) REQUIRE(a.add(f.header, f.payload).verdict == Verdict::Accepted);
  CHECK(a.take() == payload);
}
