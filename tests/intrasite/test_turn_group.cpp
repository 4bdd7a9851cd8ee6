// TurnGroup: a group's ranks on fibers that take turns, one at a time, through the Communicator
// seam. Its collectives against a sequential reference, its turn order, a rank that leaves, and
// exceptions handled across turns.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/util/error.hpp"
#include "intrasite/comm/turn_group.hpp"

using namespace meridian;

namespace {

// Values whose float sum depends on the order of the additions.
float value(int rank, std::size_t i) {
  return static_cast<float>(std::sin(0.001 * static_cast<double>(i) + rank) *
                            std::pow(10.0, static_cast<int>(i % 7) - 3));
}

std::vector<float> values(int rank, std::size_t from, std::size_t n) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = value(rank, from + i);
  return v;
}

bool same_bits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size_bytes()) == 0);
}

}  // namespace

TEST_CASE("turn group at 1 to 4 ranks: every collective equals the sequential reference, bit for bit") {
  for (int size = 1; size <= 4; ++size) {
    CAPTURE(size);
    // An uneven cut with an empty part when there are several.
    std::vector<std::size_t> counts(static_cast<std::size_t>(size), 101);
    counts.back() += 3;
    if (size > 2) counts[1] = 0;
    const std::size_t n = part_offset(counts, size);
    std::vector<float> sum(n);
    for (std::size_t i = 0; i < n; ++i) {
      sum[i] = value(0, i);
      for (int r = 1; r < size; ++r) sum[i] += value(r, i);
    }
    TurnGroup group(size);
    int checked = 0;
    group.run([&](Communicator& comm) {
      const int rank = comm.rank();
      CHECK(comm.size() == size);
      auto data = values(rank, 0, n);
      comm.allreduce(data, ReduceOp::Sum);
      CHECK(same_bits(data, sum));
      data = values(rank, 0, n);
      comm.reduce_scatter(data, counts, ReduceOp::Mean);
      const std::size_t from = part_offset(counts, rank), count = counts[static_cast<std::size_t>(rank)];
      auto mean = std::vector<float>(sum.begin() + static_cast<std::ptrdiff_t>(from),
                                     sum.begin() + static_cast<std::ptrdiff_t>(from + count));
      for (float& x : mean) x *= 1.0f / static_cast<float>(size);
      CHECK(same_bits(std::span(data).subspan(from, count), mean));
      // All-gather: each rank's own part, put together on every rank.
      std::vector<float> gathered(n, NAN);
      const auto mine = values(rank, from, count);
      std::copy(mine.begin(), mine.end(), gathered.begin() + static_cast<std::ptrdiff_t>(from));
      comm.all_gather(gathered, counts);
      for (int r = 0; r < size; ++r) {
        const std::size_t at = part_offset(counts, r), c = counts[static_cast<std::size_t>(r)];
        CHECK(same_bits(std::span(gathered).subspan(at, c), values(r, at, c)));
      }
      // The ring: each rank gets the next one's part.
      const int next = (rank + 1) % size;
      std::vector<float> in(counts[static_cast<std::size_t>(next)]);
      comm.ring_shift(mine, in);
      CHECK(same_bits(in, values(next, part_offset(counts, next), in.size())));
      // Bytes: a broadcast, a gather at rank 0 and a scatter from the last rank.
      std::string word = rank == 1 % size ? "from one" : "xxxxxxxx";
      comm.broadcast(std::as_writable_bytes(std::span(word.data(), word.size())), 1 % size);
      CHECK(word == "from one");
      const std::string said(static_cast<std::size_t>(rank), static_cast<char>('a' + rank));
      const auto parts = comm.gather(std::as_bytes(std::span(said.data(), said.size())), 0);
      CHECK(parts.size() == (rank == 0 ? static_cast<std::size_t>(size) : 0u));
      for (std::size_t r = 0; r < parts.size(); ++r) CHECK(parts[r].size() == r);
      std::vector<std::vector<std::byte>> out;
      if (rank == size - 1)
        for (int r = 0; r < size; ++r)
          out.emplace_back(static_cast<std::size_t>(2 * r), std::byte{static_cast<unsigned char>(r)});
      const auto got = comm.scatter(out, size - 1);
      CHECK(got ==
            std::vector<std::byte>(static_cast<std::size_t>(2 * rank), std::byte{static_cast<unsigned char>(rank)}));
      comm.barrier();
      ++checked;  // no lock: one rank runs at a time
    });
    CHECK(checked == size);
  }
}

TEST_CASE("turn group: one rank runs at a time, in an order fixed by the calls alone, run after run") {
  // Each rank writes down where it is, without a lock: the log is the interleaving.
  const auto trace = [] {
    TurnGroup group(3);
    std::vector<std::string> log;
    for (int run = 0; run < 2; ++run)
      group.run([&](Communicator& comm) {
        const std::string me = std::to_string(comm.rank());
        log.push_back(me + " starts");
        std::vector<float> x(4, static_cast<float>(comm.rank()));
        comm.allreduce(x, ReduceOp::Sum);
        log.push_back(me + " summed " + std::to_string(static_cast<int>(x[0])));
        if (comm.rank() == 0) log.push_back("0 again");  // still rank 0's turn: nobody else ran
        comm.barrier();
        log.push_back(me + " ends");
      });
    return log;
  };
  const auto log = trace();
  const std::vector<std::string> once = {"0 starts",   "1 starts",   "2 starts", "0 summed 3", "0 again",
                                         "1 summed 3", "2 summed 3", "0 ends",   "1 ends",     "2 ends"};
  REQUIRE(log.size() == 2 * once.size());
  CHECK(std::vector<std::string>(log.begin(), log.begin() + static_cast<std::ptrdiff_t>(once.size())) == once);
  CHECK(std::vector<std::string>(log.begin() + static_cast<std::ptrdiff_t>(once.size()), log.end()) == once);
  CHECK(trace() == log);
}

TEST_CASE(
    "turn group: a rank that leaves mid-run leaves the others Error(Peer) in their collective, and its error comes out "
    "of run()") {
  TurnGroup group(3);
  std::vector<std::string> seen(3);
  try {
    group.run([&](Communicator& comm) {
      comm.barrier();
      if (comm.rank() == 1) throw make_error(ErrorKind::Data, "rank 1 gave up");
      try {
        comm.barrier();
      } catch (const Error& e) {
        seen[static_cast<std::size_t>(comm.rank())] = e.kind() == ErrorKind::Peer ? "peer" : e.what();
        throw;
      }
    });
    FAIL("run() returned");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Data);  // the cause, not the others' Error(Peer) that followed
  }
  CHECK(seen == std::vector<std::string>{"peer", "", "peer"});
  // The group runs again, whole.
  int ran = 0;
  group.run([&](Communicator& comm) {
    comm.barrier();
    ++ran;
  });
  CHECK(ran == 3);
}

TEST_CASE("turn group: ranks that enter collectives while handling exceptions each rethrow their own") {
  TurnGroup group(2);
  std::vector<std::string> rethrown(2);
  for (int run = 0; run < 2; ++run) {
    group.run([&](Communicator& comm) {
      const auto me = static_cast<std::size_t>(comm.rank());
      try {
        try {
          throw std::runtime_error("rank " + std::to_string(me));
        } catch (const std::runtime_error&) {
          comm.barrier();  // the other rank catches (and ends) its own exception meanwhile
          CHECK(std::uncaught_exceptions() == 0);
          comm.barrier();
          throw;
        }
      } catch (const std::runtime_error& e) {
        rethrown[me] = e.what();
      }
    });
    CHECK(rethrown == std::vector<std::string>{"rank 0", "rank 1"});
  }
}

TEST_CASE("turn group: a rank's deep stack is its own") {
  // A recursion a few MiB deep on each rank, across turns: each finds its own frames again.
  TurnGroup group(2);
  std::vector<long> sums(2);
  group.run([&](Communicator& comm) {
    const std::function<long(int)> down = [&](int depth) -> long {
      volatile char frame[2048];
      frame[0] = static_cast<char>(depth);
      if (depth % 256 == 0) comm.barrier();
      return depth == 0 ? comm.rank() : frame[0] + down(depth - 1);
    };
    sums[static_cast<std::size_t>(comm.rank())] = down(1024);
  });
  long expected = 0;
  for (int d = 1; d <= 1024; ++d) expected += static_cast<char>(d);
  CHECK(sums == std::vector<long>{expected, expected + 1});
}
