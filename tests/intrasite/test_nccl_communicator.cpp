// NcclCommunicator: ranks as threads sharing a MemoryStore, one GPU each. Every case that needs a
// GPU skips itself (with a message) where there is none, so the suite passes on CPU-only machines;
// the error for a missing device is checked everywhere.
#include <cuda_runtime_api.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "core/util/error.hpp"
#include "intrasite/comm/nccl_communicator.hpp"
#include "intrasite/comm/store.hpp"
#include "tests/support/ranks.hpp"

using namespace meridian;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

int gpu_count() {
  int count = 0;  // left unset when there is no driver
  return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
}

bool have_gpus(int needed) {
  const int found = gpu_count();
  if (found >= needed) return true;
  MESSAGE("skipped: needs ", needed, " CUDA device(s), found ", found);
  return false;
}

NcclOptions options_for(int device, std::chrono::milliseconds timeout = 20000ms) {
  NcclOptions options;
  options.device = device;
  options.timeout = timeout;
  return options;
}

using meridian::testing::require_no_errors;
using meridian::testing::run_ranks;

float input_value(int rank, std::size_t i) {
  return static_cast<float>(std::sin(0.001 * static_cast<double>(i) + rank) * std::pow(10.0, static_cast<int>(i % 7) - 3));
}

ErrorKind error_kind(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    return e.kind();
  }
}

}  // namespace

TEST_CASE("connect_nccl on a device that does not exist throws Error(Config) naming it") {
  // Without a GPU every device is missing; with one, the first index past the last is.
  MemoryStore store;
  const int missing = gpu_count();
  for (int size : {1, 2}) {
    try {
      connect_nccl(store, "gen0/", 0, size, options_for(missing, 1000ms));
      FAIL("connect_nccl succeeded on missing device ", missing);
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::Config);
      CHECK(std::string(e.what()).find("no CUDA device") != std::string::npos);
    }
  }
}

TEST_CASE("a size-1 communicator's collectives leave the data as it is") {
  if (!have_gpus(1)) return;
  MemoryStore store;
  auto comm = connect_nccl(store, "gen0/", 0, 1, options_for(0));
  CHECK(comm->rank() == 0);
  CHECK(comm->size() == 1);
  std::vector<float> data = {1.5f, -2.0f, 3.25f};
  comm->allreduce(data, ReduceOp::Sum);
  comm->allreduce(data, ReduceOp::Mean);
  CHECK(data == std::vector<float>{1.5f, -2.0f, 3.25f});
  std::vector<std::byte> bytes = {std::byte{7}, std::byte{9}};
  comm->broadcast(bytes, 0);
  CHECK(bytes == std::vector<std::byte>{std::byte{7}, std::byte{9}});
  comm->barrier();
  const std::vector<std::size_t> whole{data.size()};
  comm->reduce_scatter(data, whole, ReduceOp::Mean);
  comm->all_gather(data, whole);
  CHECK(data == std::vector<float>{1.5f, -2.0f, 3.25f});
  std::vector<float> own(data.size());
  comm->ring_shift(data, own);  // alone, a rank is its own next one
  CHECK(own == data);
}

TEST_CASE("one rank through NCCL itself: every collective runs NCCL's kernels and leaves the data as it is") {
  if (!have_gpus(1)) return;
  MemoryStore store;
  auto options = options_for(0);
  options.nccl_when_alone = true;  // what runs NCCL's kernels on a machine of one GPU
  auto comm = connect_nccl(store, "gen0/", 0, 1, options);
  CHECK(store.get("gen0/nccl_id", 1000ms).size() > 0);  // it made an NCCL communicator
  const std::size_t n = 100'003;
  std::vector<float> data(n), expected(n);
  for (std::size_t i = 0; i < n; ++i) expected[i] = data[i] = input_value(0, i);
  const std::vector<std::size_t> whole{n};
  comm->reduce_scatter(data, whole, ReduceOp::Mean);
  CHECK(data == expected);
  comm->all_gather(data, whole);
  CHECK(data == expected);
  comm->allreduce(data, ReduceOp::Sum);
  CHECK(data == expected);
  std::vector<std::byte> bytes = {std::byte{7}, std::byte{9}};
  comm->broadcast(bytes, 0);
  CHECK(bytes == std::vector<std::byte>{std::byte{7}, std::byte{9}});
  std::vector<float> own(n);
  comm->ring_shift(data, own);  // its own next one, through NCCL's send and receive
  CHECK(own == expected);
  comm->barrier();
}

TEST_CASE("a rank whose rank 0 never publishes the id times out in the store") {
  if (!have_gpus(1)) return;
  MemoryStore store;
  const auto start = Clock::now();
  try {
    connect_nccl(store, "gen0/", 1, 2, options_for(0, 300ms));
    FAIL("connect_nccl succeeded without rank 0");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Timeout);
    CHECK(std::string(e.what()).find("gen0/nccl_id") != std::string::npos);
  }
  CHECK(Clock::now() - start < 5s);
}

TEST_CASE("rank 0 whose peer never joins times out in the non-blocking init") {
  if (!have_gpus(1)) return;
  MemoryStore store;
  const auto start = Clock::now();
  try {
    connect_nccl(store, "gen0/", 0, 2, options_for(0, 1000ms));
    FAIL("connect_nccl succeeded without rank 1");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Timeout);
    MESSAGE(e.what());
  }
  CHECK(Clock::now() - start < 10s);  // the timeout plus NCCL's abort
  CHECK(store.check("gen0/nccl_id"));
}

TEST_CASE("two ranks all-reduce, broadcast and barrier like the CPU reference") {
  if (!have_gpus(2)) return;
  const std::vector<std::size_t> sizes = {1, 1000, (1u << 20) + 3};  // the device buffer grows
  std::vector<std::vector<std::vector<float>>> results(2);          // results[rank][case]
  std::vector<std::vector<std::byte>> broadcasts(2);
  MemoryStore store;
  require_no_errors(run_ranks(2, [&](int rank) {
    auto comm = connect_nccl(store, "gen0/", rank, 2, options_for(rank));
    REQUIRE(comm->rank() == rank);
    REQUIRE(comm->size() == 2);
    for (std::size_t n : sizes)
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Mean}) {
        std::vector<float> data(n);
        for (std::size_t i = 0; i < n; ++i) data[i] = input_value(rank, i);
        comm->allreduce(data, op);
        results[rank].push_back(std::move(data));
      }
    std::vector<std::byte> bytes(4099);
    for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::byte>(rank == 1 ? i * 31 % 251 : 0);
    comm->broadcast(bytes, 1);
    broadcasts[rank] = std::move(bytes);
    comm->barrier();
  }));

  // Two addends round the same in any order, so NCCL's sums must equal the host's (and Gloo's)
  // bit for bit, and the means are those sums scaled by one half.
  std::size_t c = 0;
  for (std::size_t n : sizes)
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Mean}) {
      CAPTURE(n);
      std::size_t mismatches = 0;
      for (std::size_t i = 0; i < n; ++i) {
        float expected = input_value(0, i) + input_value(1, i);
        if (op == ReduceOp::Mean) expected *= 0.5f;
        mismatches += results[0][c][i] != expected || results[1][c][i] != expected;
      }
      CHECK(mismatches == 0);
      ++c;
    }
  CHECK(broadcasts[0] == broadcasts[1]);
  CHECK(broadcasts[0][2] == static_cast<std::byte>(62));
}

TEST_CASE("a peer that stops issuing collectives makes the other rank's allreduce time out") {
  if (!have_gpus(2)) return;
  MemoryStore store;
  const auto errors = run_ranks(2, [&](int rank) {
    auto comm = connect_nccl(store, "gen0/", rank, 2, options_for(rank, 2000ms));
    comm->barrier();
    if (rank == 1) {
      // Hung, not dead: it keeps its communicator open but issues nothing until rank 0 gave up.
      store.get("rank0-gave-up", 30000ms);
      return;
    }
    std::vector<float> data(1 << 16, 1.0f);
    const auto start = Clock::now();
    try {
      comm->allreduce(data, ReduceOp::Sum);
    } catch (const Error&) {
      store.set("rank0-gave-up", {});
      CHECK(Clock::now() - start < 10s);
      CHECK_THROWS_AS(comm->barrier(), InvariantError);  // aborted: unusable
      throw;
    }
    store.set("rank0-gave-up", {});
  });
  REQUIRE(errors[0]);
  CHECK(error_kind(errors[0]) == ErrorKind::Timeout);
  CHECK_FALSE(errors[1]);

  // The survivors' way out: a new group under a new prefix.
  require_no_errors(run_ranks(2, [&](int rank) {
    auto comm = connect_nccl(store, "gen1/", rank, 2, options_for(rank));
    std::vector<float> data(3, static_cast<float>(rank + 1));
    comm->allreduce(data, ReduceOp::Mean);
    CHECK(data == std::vector<float>(3, 1.5f));
  }));
}

TEST_CASE("reduce_scatter and all_gather over every GPU (up to 4), the last part longer, match the CPU reference") {
  if (!have_gpus(2)) return;
  const int size = std::min(gpu_count(), 4);
  const std::size_t n = 100'003;
  std::vector<std::size_t> counts(static_cast<std::size_t>(size), n / static_cast<std::size_t>(size));
  counts.back() += n % static_cast<std::size_t>(size);
  std::vector<std::vector<float>> reduced(static_cast<std::size_t>(size)), gathered(static_cast<std::size_t>(size));
  MemoryStore store;
  require_no_errors(run_ranks(size, [&](int rank) {
    auto comm = connect_nccl(store, "gen0/", rank, size, options_for(rank));
    std::vector<float> data(n);
    for (std::size_t i = 0; i < n; ++i) data[i] = input_value(rank, i);
    comm->reduce_scatter(data, counts, ReduceOp::Mean);
    reduced[static_cast<std::size_t>(rank)] = data;
    for (std::size_t i = 0; i < n; ++i) data[i] = input_value(rank, i);
    comm->all_gather(data, counts);
    gathered[static_cast<std::size_t>(rank)] = std::move(data);
  }));
  for (int rank = 0; rank < size; ++rank) {
    CAPTURE(rank);
    const std::size_t from = part_offset(counts, rank), to = from + counts[static_cast<std::size_t>(rank)];
    double worst = 0;
    std::size_t wrong_gathered = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const int owner = std::min(static_cast<int>(i / counts[0]), size - 1);
      wrong_gathered += gathered[static_cast<std::size_t>(rank)][i] != input_value(owner, i);
      if (i < from || i >= to) continue;
      double mean = 0, magnitude = 0;
      for (int r = 0; r < size; ++r) {
        mean += input_value(r, i) / size;
        magnitude += std::abs(input_value(r, i)) / size;
      }
      // NCCL sums in an order of its own: within rounding of the exact mean.
      worst = std::max(worst, std::abs(reduced[static_cast<std::size_t>(rank)][i] - mean) / magnitude);
    }
    CHECK(worst < 1e-6);
    CHECK(wrong_gathered == 0);
  }
}

TEST_CASE("ring_shift over every GPU (up to 4): each rank receives the next one's part, the last part longer") {
  if (!have_gpus(2)) return;
  const int size = std::min(gpu_count(), 4);
  const auto length = [&](int rank) { return std::size_t{1000} + (rank == size - 1 ? 7u : 0u); };
  std::vector<std::vector<float>> received(static_cast<std::size_t>(size));
  MemoryStore store;
  require_no_errors(run_ranks(size, [&](int rank) {
    auto comm = connect_nccl(store, "gen0/", rank, size, options_for(rank));
    std::vector<float> out(length(rank));
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = input_value(rank, i);
    std::vector<float> in(length((rank + 1) % size));
    comm->ring_shift(out, in);
    received[static_cast<std::size_t>(rank)] = std::move(in);
  }));
  for (int rank = 0; rank < size; ++rank) {
    CAPTURE(rank);
    const int next = (rank + 1) % size;
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < length(next); ++i) wrong += received[static_cast<std::size_t>(rank)][i] != input_value(next, i);
    CHECK(wrong == 0);
  }
}
