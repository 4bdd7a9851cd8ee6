// All-reduce bandwidth of the Gloo communicator against bare Gloo, two processes on loopback.
// Both paths run in the same processes on the same buffer, timed alternately, so that the ratio
// isolates what the communicator adds (option setup, error translation, nothing else expected).
//
//   bench_allreduce [repeats=10] [floats=16777216]
//
// Method: fork 2 ranks; each connects a meridian communicator (connect_gloo) and a bare gloo
// context built the same way (TCP device on 127.0.0.1, full mesh through the same FileStore).
// One warm-up all-reduce per path, then `repeats` rounds of {meridian, bare}; before each timed
// all-reduce a gloo barrier lines the ranks up, and rank 0 times the all-reduce alone.
// Algorithm bandwidth = buffer bytes / time (GB = 1e9 bytes); the medians are reported.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include "bench/stats.hpp"
#include "core/util/error.hpp"
#include "intrasite/comm/gloo_communicator.hpp"

using namespace meridian;
using bench::Clock;
using bench::median;
using bench::seconds_since;

namespace {

constexpr int kRanks = 2;

// gloo::sum is overloaded; this picks the element-wise form that AllreduceOptions takes.
void (*const kSum)(void*, const void*, const void*, std::size_t) = &gloo::sum<float>;

// connect_gloo needs a meridian Store that crosses processes; gloo's FileStore is one.
class FileStoreAdapter final : public Store {
 public:
  explicit FileStoreAdapter(const std::string& dir) : files_(dir) {}
  gloo::rendezvous::Store& gloo_store() { return files_; }

  void set(const std::string& key, std::span<const std::byte> value) override {
    const auto* first = reinterpret_cast<const char*>(value.data());
    files_.set(key, std::vector<char>(first, first + value.size()));
  }
  std::vector<std::byte> get(const std::string& key, std::chrono::milliseconds timeout) override {
    files_.wait({key}, timeout);
    const auto chars = files_.get(key);
    const auto* first = reinterpret_cast<const std::byte*>(chars.data());
    return {first, first + chars.size()};
  }
  bool check(const std::string& key) override { return files_.has(key); }
  std::int64_t add(const std::string& key, std::int64_t) override {
    MERIDIAN_CHECK(false, "the rendezvous never calls add (key ", key, ")");
    return 0;
  }

 private:
  // FileStore's check() is protected; it is the non-blocking existence test Store::check needs.
  struct Files final : gloo::rendezvous::FileStore {
    using FileStore::FileStore;
    bool has(const std::string& key) { return check({key}); }
  } files_;
};


void bare_allreduce(const std::shared_ptr<gloo::Context>& context, std::vector<float>& data) {
  gloo::AllreduceOptions opts(context);
  opts.setOutput(data.data(), data.size());
  opts.setReduceFunction(kSum);
  gloo::allreduce(opts);
}

void line_up(const std::shared_ptr<gloo::Context>& context) {
  gloo::BarrierOptions opts(context);
  gloo::barrier(opts);
}

template <class F>
double time_one(const std::shared_ptr<gloo::Context>& sync, F&& allreduce) {
  line_up(sync);
  const auto t0 = Clock::now();
  allreduce();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

void run_rank(const std::string& dir, int rank, int repeats, std::size_t floats) {
  FileStoreAdapter store(dir);
  const GlooOptions options{"127.0.0.1", std::chrono::milliseconds(60000)};
  auto comm = connect_gloo(store, "meridian-", rank, kRanks, options);

  gloo::transport::tcp::attr attr;
  attr.hostname = options.address;
  attr.ai_family = AF_INET;
  auto device = gloo::transport::tcp::CreateDevice(attr);
  auto bare = std::make_shared<gloo::rendezvous::Context>(rank, kRanks);
  bare->setTimeout(options.timeout);
  bare->connectFullMesh(store.gloo_store(), device);

  // Equal values on both ranks: each all-reduce doubles them, far from overflow at these repeats.
  std::vector<float> data(floats, 1.0f);
  comm->allreduce(data, ReduceOp::Sum);
  bare_allreduce(bare, data);
  std::vector<double> ours, theirs;
  for (int i = 0; i < repeats; ++i) {
    ours.push_back(time_one(bare, [&] { comm->allreduce(data, ReduceOp::Sum); }));
    theirs.push_back(time_one(bare, [&] { bare_allreduce(bare, data); }));
  }
  if (rank != 0) return;
  const double bytes = static_cast<double>(floats * sizeof(float));
  const double ours_gbs = bytes / median(ours) / 1e9, theirs_gbs = bytes / median(theirs) / 1e9;
  std::printf("all-reduce (sum) of %zu floats (%.1f MiB), %d ranks on 127.0.0.1, %d timed repeats per path,\n"
              "alternating, each after a barrier; algorithm bandwidth = bytes / time, medians:\n",
              floats, bytes / (1 << 20), kRanks, repeats);
  std::printf("  meridian GlooCommunicator  %6.3f GB/s  (median %.1f ms, min %.1f, max %.1f)\n", ours_gbs,
              1e3 * median(ours), 1e3 * *std::min_element(ours.begin(), ours.end()),
              1e3 * *std::max_element(ours.begin(), ours.end()));
  std::printf("  bare gloo::allreduce       %6.3f GB/s  (median %.1f ms, min %.1f, max %.1f)\n", theirs_gbs,
              1e3 * median(theirs), 1e3 * *std::min_element(theirs.begin(), theirs.end()),
              1e3 * *std::max_element(theirs.begin(), theirs.end()));
  std::printf("  ratio meridian / bare      %6.1f %%\n", 100.0 * ours_gbs / theirs_gbs);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::atoi(argv[1]) : 10;
  const std::size_t floats = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : std::size_t{1} << 24;
  if (repeats < 1 || floats < 1) {
    std::fprintf(stderr, "usage: bench_allreduce [repeats >= 1] [floats >= 1]\n");
    return 2;
  }
  // FileStore needs a fresh directory per run.
  std::string dir = (std::filesystem::temp_directory_path() / "meridian-bench-allreduce-XXXXXX").string();
  if (!::mkdtemp(dir.data())) {
    std::perror("mkdtemp");
    return 1;
  }
  // Fork before any gloo object exists: gloo's threads and sockets belong to one process.
  pid_t pids[kRanks];
  for (int rank = 0; rank < kRanks; ++rank) {
    pids[rank] = ::fork();
    if (pids[rank] < 0) {
      std::perror("fork");
      return 1;
    }
    if (pids[rank] == 0) {
      try {
        run_rank(dir, rank, repeats, floats);
        ::_exit(0);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
        ::_exit(1);
      }
    }
  }
  int failed = 0;
  for (pid_t pid : pids) {
    int status = 0;
    if (::waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
  }
  std::filesystem::remove_all(dir);
  if (failed) std::fprintf(stderr, "bench_allreduce: %d rank(s) failed\n", failed);
  return failed ? 1 : 0;
}
