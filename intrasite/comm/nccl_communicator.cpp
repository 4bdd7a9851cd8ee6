#include "intrasite/comm/nccl_communicator.hpp"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "core/util/error.hpp"

namespace meridian {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

std::chrono::milliseconds remaining(Clock::time_point deadline) {
  return std::max(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()), 0ms);
}

std::string nccl_message(ncclResult_t result, ncclComm_t comm) {
  std::string message = ncclGetErrorString(result);
  const char* last = ncclGetLastError(comm);
  if (last != nullptr && *last != '\0') message += std::string(": ") + last;
  return message;
}

// Makes the rank's device current for one call and then restores the caller's, so that the
// communicator can be driven from any thread without disturbing that thread's own device.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    if (previous_ != device) cudaSetDevice(device);
  }
  ~DeviceScope() {
    if (previous_ >= 0) cudaSetDevice(previous_);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = -1;
};

// A missing GPU or driver is the machine's configuration, not a peer problem: re-forming the
// group would not help.
void require_device(int device) {
  int count = 0;  // cudaGetDeviceCount leaves it unset when there is no driver
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess)
    throw make_error(ErrorKind::Config, "no CUDA device: cudaGetDeviceCount failed: ", cudaGetErrorString(err));
  if (device < 0 || device >= count)
    throw make_error(ErrorKind::Config, "no CUDA device ", device, ": this machine has ", count, " device(s)");
}

// Not thread-safe: one thread at a time drives a communicator, as every rank must issue the
// same collectives in the same order anyway.
class NcclCommunicator final : public Communicator {
 public:
  // alone: a group of one, without an NCCL communicator; its collectives are no-ops.
  NcclCommunicator(int rank, int size, int device, std::chrono::milliseconds timeout, bool alone)
      : rank_(rank), size_(size), device_(device), timeout_(timeout), alone_(alone) {}

  ~NcclCommunicator() override {
    DeviceScope scope(device_);
    if (comm_ != nullptr) {
      // Finalize waits for the peers to quiesce; a dead peer would make it wait forever, so it
      // gets the same bound as a collective and is abandoned for an abort after that.
      const ncclResult_t r = ncclCommFinalize(comm_);
      if ((r == ncclSuccess || r == ncclInProgress) && !settle(Clock::now() + timeout_, false))
        ncclCommDestroy(comm_);
      else
        ncclCommAbort(comm_);
    }
    if (buffer_ != nullptr) cudaFree(buffer_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  // Non-blocking initialisation, so that a rank that never shows up costs a bounded wait.
  void init(const ncclUniqueId& id, Clock::time_point deadline) {
    DeviceScope scope(device_);
    cuda("cudaStreamCreate", cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    const ncclResult_t r = ncclCommInitRankConfig(&comm_, size_, id, rank_, &config);
    if (r != ncclSuccess && r != ncclInProgress) fail(ErrorKind::Peer, "init", nccl_message(r, comm_));
    complete("init", deadline, false);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void allreduce(std::span<float> data, ReduceOp op) override {
    if (alone_ || data.empty()) return;
    DeviceScope scope(device_);
    check_usable("allreduce");
    reserve(data.size_bytes());
    cuda("cudaMemcpyAsync", cudaMemcpyAsync(buffer_, data.data(), data.size_bytes(), cudaMemcpyHostToDevice, stream_));
    // Sum, not ncclAvg: NCCL averages floats by scaling the inputs before summing, which would
    // round differently from the Gloo communicator's sum-then-scale.
    enqueue("allreduce", ncclAllReduce(buffer_, buffer_, data.size(), ncclFloat32, ncclSum, comm_, stream_));
    // Copying into pageable host memory blocks the host until the stream drains, without a
    // bound; so the collective is waited for first, with one.
    complete("allreduce", Clock::now() + timeout_, true);
    copy_to_host(data.data(), data.size_bytes());
    if (op == ReduceOp::Mean) scale_to_mean(data, size_);
  }

  void broadcast(std::span<std::byte> data, int root) override {
    MERIDIAN_CHECK(root >= 0 && root < size_, "root=", root, " size=", size_);
    if (alone_ || data.empty()) return;
    DeviceScope scope(device_);
    check_usable("broadcast");
    reserve(data.size_bytes());
    if (rank_ == root)
      cuda("cudaMemcpyAsync", cudaMemcpyAsync(buffer_, data.data(), data.size_bytes(), cudaMemcpyHostToDevice, stream_));
    enqueue("broadcast", ncclBroadcast(buffer_, buffer_, data.size_bytes(), ncclUint8, root, comm_, stream_));
    complete("broadcast", Clock::now() + timeout_, true);
    if (rank_ != root) copy_to_host(data.data(), data.size_bytes());
  }

  // NCCL cuts buffers into equal parts: each part travels padded to the longest one, and the
  // padding's values are never read back.
  void reduce_scatter(std::span<float> data, std::span<const std::size_t> counts, ReduceOp op) override {
    check_parts(data.size(), counts, size_);
    if (alone_ || data.empty()) return;
    DeviceScope scope(device_);
    check_usable("reduce_scatter");
    const std::size_t longest = *std::max_element(counts.begin(), counts.end());
    reserve((static_cast<std::size_t>(size_) + 1) * longest * sizeof(float));
    auto* padded = static_cast<float*>(buffer_);
    float* reduced = padded + static_cast<std::size_t>(size_) * longest;
    for (int r = 0; r < size_; ++r)
      copy_part(padded + static_cast<std::size_t>(r) * longest, data.data() + part_offset(counts, r),
                counts[static_cast<std::size_t>(r)], cudaMemcpyHostToDevice);
    enqueue("reduce_scatter", ncclReduceScatter(padded, reduced, longest, ncclFloat32, ncclSum, comm_, stream_));
    complete("reduce_scatter", Clock::now() + timeout_, true);
    const auto part = data.subspan(part_offset(counts, rank_), counts[static_cast<std::size_t>(rank_)]);
    copy_part(part.data(), reduced, part.size(), cudaMemcpyDeviceToHost);
    complete("copy to host", Clock::now() + timeout_, true);
    if (op == ReduceOp::Mean) scale_to_mean(part, size_);
  }

  void all_gather(std::span<float> data, std::span<const std::size_t> counts) override {
    check_parts(data.size(), counts, size_);
    if (alone_ || data.empty()) return;
    DeviceScope scope(device_);
    check_usable("all_gather");
    const std::size_t longest = *std::max_element(counts.begin(), counts.end());
    reserve(static_cast<std::size_t>(size_) * longest * sizeof(float));
    auto* padded = static_cast<float*>(buffer_);
    float* own = padded + static_cast<std::size_t>(rank_) * longest;
    copy_part(own, data.data() + part_offset(counts, rank_), counts[static_cast<std::size_t>(rank_)],
              cudaMemcpyHostToDevice);
    enqueue("all_gather", ncclAllGather(own, padded, longest, ncclFloat32, comm_, stream_));
    complete("all_gather", Clock::now() + timeout_, true);
    for (int r = 0; r < size_; ++r)
      copy_part(data.data() + part_offset(counts, r), padded + static_cast<std::size_t>(r) * longest,
                counts[static_cast<std::size_t>(r)], cudaMemcpyDeviceToHost);
    complete("copy to host", Clock::now() + timeout_, true);
  }

  void ring_shift(std::span<const float> out, std::span<float> in) override {
    if (alone_) {
      MERIDIAN_CHECK(in.size() == out.size(), "ring_shift alone: in ", in.size(), " out ", out.size());
      std::copy(out.begin(), out.end(), in.begin());
      return;
    }
    DeviceScope scope(device_);
    check_usable("ring_shift");
    reserve((out.size() + in.size()) * sizeof(float));
    auto* sent = static_cast<float*>(buffer_);
    float* received = sent + out.size();
    copy_part(sent, out.data(), out.size(), cudaMemcpyHostToDevice);
    const int before = (rank_ + size_ - 1) % size_, after = (rank_ + 1) % size_;
    enqueue("ring_shift", ncclGroupStart());
    enqueue("ring_shift", ncclSend(sent, out.size(), ncclFloat32, before, comm_, stream_));
    enqueue("ring_shift", ncclRecv(received, in.size(), ncclFloat32, after, comm_, stream_));
    enqueue("ring_shift", ncclGroupEnd());
    complete("ring_shift", Clock::now() + timeout_, true);
    copy_part(in.data(), received, in.size(), cudaMemcpyDeviceToHost);
    complete("copy to host", Clock::now() + timeout_, true);
  }

  void barrier() override {
    if (alone_) return;
    DeviceScope scope(device_);
    check_usable("barrier");
    // Only completion matters, not the value summed: the buffer's contents are left as they are.
    reserve(sizeof(float));
    enqueue("barrier", ncclAllReduce(buffer_, buffer_, 1, ncclFloat32, ncclSum, comm_, stream_));
    complete("barrier", Clock::now() + timeout_, true);
  }

 private:
  void check_usable(const char* what) const {
    MERIDIAN_CHECK(comm_ != nullptr, "rank ", rank_, ": ", what, " on a communicator that already failed; "
                   "build a new one under a new prefix");
  }

  // Grows only: steps all-reduce the same gradient buffers, so a fitting buffer is the rule.
  void reserve(std::size_t bytes) {
    if (bytes <= capacity_) return;
    if (buffer_ != nullptr) cudaFree(buffer_);
    buffer_ = nullptr;
    capacity_ = 0;
    cuda("cudaMalloc", cudaMalloc(&buffer_, bytes));
    capacity_ = bytes;
  }

  void copy_to_host(void* host, std::size_t bytes) {
    cuda("cudaMemcpyAsync", cudaMemcpyAsync(host, buffer_, bytes, cudaMemcpyDeviceToHost, stream_));
    complete("copy to host", Clock::now() + timeout_, true);
  }

  void copy_part(float* to, const float* from, std::size_t count, cudaMemcpyKind kind) {
    if (count > 0) cuda("cudaMemcpyAsync", cudaMemcpyAsync(to, from, count * sizeof(float), kind, stream_));
  }

  void cuda(const char* call, cudaError_t err) {
    if (err != cudaSuccess) fail(ErrorKind::Peer, call, cudaGetErrorString(err));
  }

  // A non-blocking communicator may still be enqueueing when the call returns (ncclInProgress).
  void enqueue(const char* what, ncclResult_t r) {
    if (r != ncclSuccess && r != ncclInProgress) fail(ErrorKind::Peer, what, nccl_message(r, comm_));
  }

  // Polls until the communicator has no operation in progress and, with `stream`, the stream has
  // drained. Returns the reason it stopped early: NCCL's own waits are unbounded, and a hung or
  // dead peer must not hang this rank.
  std::optional<std::pair<ErrorKind, std::string>> settle(Clock::time_point deadline, bool stream) {
    const auto spin_until = Clock::now() + 1ms;
    for (;;) {
      ncclResult_t state = ncclSuccess;
      const ncclResult_t r = ncclCommGetAsyncError(comm_, &state);
      if (r != ncclSuccess) state = r;
      if (state != ncclSuccess && state != ncclInProgress)
        return std::pair{ErrorKind::Peer, nccl_message(state, comm_)};
      if (state == ncclSuccess) {
        if (!stream) return std::nullopt;
        const cudaError_t err = cudaStreamQuery(stream_);
        if (err == cudaSuccess) return std::nullopt;
        if (err != cudaErrorNotReady) return std::pair{ErrorKind::Peer, std::string(cudaGetErrorString(err))};
      }
      const auto now = Clock::now();
      if (now >= deadline)
        return std::pair{ErrorKind::Timeout, detail::concat("did not complete within ", timeout_.count(),
                                                            " ms: a peer is missing or hung")};
      // Spinning briefly keeps small collectives (barriers) fast; sleeping after that keeps a
      // long wait from burning a core.
      if (now < spin_until)
        std::this_thread::yield();
      else
        std::this_thread::sleep_for(100us);
    }
  }

  void complete(const char* what, Clock::time_point deadline, bool stream) {
    if (auto problem = settle(deadline, stream)) fail(problem->first, what, problem->second);
  }

  // Aborts the NCCL communicator, which also stops what is still running on the device, so
  // that a failed rank leaves nothing pending behind it.
  [[noreturn]] void fail(ErrorKind kind, const char* what, const std::string& detail) {
    if (comm_ != nullptr) ncclCommAbort(comm_);
    comm_ = nullptr;
    throw make_error(kind, "nccl ", what, " failed on rank ", rank_, " of ", size_, " (device ", device_,
                     "): ", detail);
  }

  const int rank_;
  const int size_;
  const int device_;
  const std::chrono::milliseconds timeout_;
  const bool alone_;
  ncclComm_t comm_ = nullptr;  // null when alone_ and after a failure
  cudaStream_t stream_ = nullptr;
  void* buffer_ = nullptr;
  std::size_t capacity_ = 0;
};

ncclUniqueId exchange_unique_id(Store& store, const std::string& prefix, int rank, int size,
                                Clock::time_point deadline) {
  const std::string key = prefix + "nccl_id";
  ncclUniqueId id{};
  if (rank == 0) {
    const ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess)
      throw make_error(ErrorKind::Peer, "nccl rank 0 of ", size, ": ncclGetUniqueId failed: ", nccl_message(r, nullptr));
    store.set(key, std::as_bytes(std::span(&id, 1)));
    return id;
  }
  std::vector<std::byte> bytes;
  try {
    bytes = store.get(key, remaining(deadline));
  } catch (const Error& e) {
    throw make_error(e.kind(), "nccl rank ", rank, " of ", size, ": rank 0 did not publish its id under prefix \"",
                     prefix, "\" in time: ", e.what());
  }
  if (bytes.size() != sizeof id)
    throw make_error(ErrorKind::Peer, "nccl rank ", rank, " of ", size, ": \"", key, "\" holds ", bytes.size(),
                     " bytes, not an NCCL unique id (", sizeof id, " bytes)");
  std::memcpy(&id, bytes.data(), sizeof id);
  return id;
}

}  // namespace

std::unique_ptr<Communicator> connect_nccl(Store& store, const std::string& prefix, int rank, int size,
                                           const NcclOptions& options) {
  MERIDIAN_CHECK(size >= 1 && rank >= 0 && rank < size, "rank=", rank, " size=", size);
  MERIDIAN_CHECK(options.timeout.count() > 0, "timeout=", options.timeout.count(), " ms");
  require_device(options.device);
  const bool alone = size == 1 && !options.nccl_when_alone;
  auto comm = std::make_unique<NcclCommunicator>(rank, size, options.device, options.timeout, alone);
  if (alone) return comm;
  const auto deadline = Clock::now() + options.timeout;
  comm->init(exchange_unique_id(store, prefix, rank, size, deadline), deadline);
  return comm;
}

}  // namespace meridian
