#include "intrasite/comm/gloo_communicator.hpp"

#include <signal.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

#include <gloo/allgather.h>
#include <gloo/allgatherv.h>
#include <gloo/alltoall.h>
#include <gloo/alltoallv.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/common/logging.h>
#include <gloo/gather.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/scatter.h>
#include <gloo/transport/tcp/device.h>

#include "core/util/error.hpp"
#include "intrasite/comm/mesh_proof.hpp"

namespace meridian {
namespace {

using Clock = std::chrono::steady_clock;

// Gloo's view of a meridian Store, for one rendezvous. Keys are prefixed here rather than with
// gloo's PrefixStore, which would insert a second '/' ("gen3//0"). All waits share one deadline
// so that the rendezvous as a whole, not each key, is bounded by the timeout.
class RendezvousStore final : public gloo::rendezvous::Store {
 public:
  RendezvousStore(meridian::Store& store, std::string prefix, Clock::time_point deadline)
      : store_(store), prefix_(std::move(prefix)), deadline_(deadline) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    store_.set(prefix_ + key, std::as_bytes(std::span(data)));
  }

  std::vector<char> get(const std::string& key) override {
    const auto bytes = store_.get(prefix_ + key, time_left(deadline_));
    std::vector<char> out(bytes.size());
    std::memcpy(out.data(), bytes.data(), bytes.size());
    return out;
  }

  void wait(const std::vector<std::string>& keys) override { wait(keys, gloo::kNoTimeout); }

  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    const auto deadline = timeout == gloo::kNoTimeout ? deadline_ : std::min(deadline_, Clock::now() + timeout);
    for (const auto& key : keys) store_.get(prefix_ + key, time_left(deadline));
  }

 private:
  static std::chrono::milliseconds time_left(Clock::time_point deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    return std::max(left, std::chrono::milliseconds(0));
  }

  meridian::Store& store_;
  const std::string prefix_;
  const Clock::time_point deadline_;
};

// Gloo reports every transport failure as IoException; only the text tells a silent peer
// ("Timed out waiting ...", "Read timeout", ...) from a dead one ("Connection reset by peer").
bool is_timeout(const std::string& message) {
  std::string lower = message;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  return lower.find("timeout") != std::string::npos || lower.find("timed out") != std::string::npos;
}

// Runs one Gloo call and turns its exceptions into meridian Errors naming `what` and the rank.
// EnforceNotMet is included because Gloo validates what peers send with GLOO_ENFORCE.
template <class F>
void translate_gloo_errors(const char* what, int rank, int size, F&& call) {
  try {
    call();
  } catch (const gloo::IoException& e) {
    const ErrorKind kind = is_timeout(e.what()) ? ErrorKind::Timeout : ErrorKind::Peer;
    throw make_error(kind, "gloo ", what, " failed on rank ", rank, " of ", size, ": ", e.what());
  } catch (const gloo::Exception& e) {
    throw make_error(ErrorKind::Peer, "gloo ", what, " failed on rank ", rank, " of ", size, ": ", e.what());
  } catch (const gloo::EnforceNotMet& e) {
    throw make_error(ErrorKind::Peer, "gloo ", what, " failed on rank ", rank, " of ", size, ": ", e.what());
  }
}

void ignore_sigpipe_unless_handled() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction current {};
    ::sigaction(SIGPIPE, nullptr, &current);
    if ((current.sa_flags & SA_SIGINFO) == 0 && current.sa_handler == SIG_DFL) {
      struct sigaction ignore {};
      ignore.sa_handler = SIG_IGN;
      sigemptyset(&ignore.sa_mask);
      ::sigaction(SIGPIPE, &ignore, nullptr);
    }
  });
}

// Sends each peer this rank's proof over their pair and checks the one that came back, before any
// collective reads what a pair brings (mesh_proof.hpp). Error(Peer) naming the rank whose pair
// carried no valid proof: whoever connected to that pair is not the rank that published its key.
void prove_pairs(const std::shared_ptr<gloo::Context>& context, RendezvousStore& rendezvous, const std::string& prefix,
                 const MeshKey& key) {
  const int rank = context->rank, size = context->size;
  constexpr std::size_t kProof = sizeof(Digest);
  std::vector<std::byte> sent(kProof * static_cast<std::size_t>(size)), received(sent.size());
  for (int peer = 0; peer < size; ++peer) {
    const Digest proof = pair_proof(key, prefix, rank, peer);
    std::copy(proof.begin(), proof.end(), sent.begin() + static_cast<std::ptrdiff_t>(kProof * peer));
  }
  gloo::AlltoallOptions opts(context);
  opts.setInput(reinterpret_cast<std::uint8_t*>(sent.data()), sent.size());
  opts.setOutput(reinterpret_cast<std::uint8_t*>(received.data()), received.size());
  gloo::alltoall(opts);
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    const auto published = rendezvous.get(mesh_key_name(peer));
    MeshKey peer_key{};
    if (published.size() != peer_key.size())
      throw make_error(ErrorKind::Peer, "rank ", rank, " of ", size, ": rank ", peer, " published a mesh key of ",
                       published.size(), " bytes under prefix \"", prefix, "\", not ", peer_key.size());
    std::memcpy(peer_key.data(), published.data(), peer_key.size());
    const auto proof = std::span(received).subspan(kProof * static_cast<std::size_t>(peer), kProof);
    if (!proof_holds(peer_key, prefix, peer, rank, proof))
      throw make_error(ErrorKind::Peer, "rank ", rank, " of ", size, ": the connection on its pair for rank ", peer,
                       " under prefix \"", prefix, "\" did not prove rank ", peer,
                       "'s key from the store; whoever connected to that pair's port is not rank ", peer,
                       " (another process reached the port first)");
  }
}

// Not thread-safe: one thread drives a communicator, as every rank must issue the same
// collectives in the same order anyway.
class GlooCommunicator final : public Communicator {
 public:
  GlooCommunicator(int rank, int size, std::shared_ptr<gloo::Context> context)
      : rank_(rank), size_(size), context_(std::move(context)) {}

  int rank() const override { return rank_; }
  int size() const override { return size_; }


  // A reduce-scatter then an all-gather, as Gloo's ring does, but each element summed in rank
  // order: the bits of a sharded group's reduce-scatter (ZeRO), whatever the cut, and the same
  // on every rank.
  void allreduce(std::span<float> data, ReduceOp op) override {
    if (size_ == 1 || data.empty()) return;
    const auto counts = even_parts(data.size());
    reduce_scatter(data, counts, op);
    all_gather(data, counts);
  }

  void broadcast(std::span<std::byte> data, int root) override {
    MERIDIAN_CHECK(root >= 0 && root < size_, "root=", root, " size=", size_);
    if (size_ == 1 || data.empty()) return;
    run("broadcast", [&] {
      gloo::BroadcastOptions opts(context_);
      opts.setOutput(data.data(), data.size());
      opts.setRoot(root);
      gloo::broadcast(opts);
    });
  }

  // Every rank learns every size (one all-gather of 8 bytes each), then one gather of the parts,
  // each padded to the longest: the root alone receives them.
  std::vector<std::vector<std::byte>> gather(std::span<const std::byte> mine, int root) override {
    MERIDIAN_CHECK(root >= 0 && root < size_, "root=", root, " size=", size_);
    const auto n = static_cast<std::size_t>(size_);
    if (size_ == 1) return {std::vector<std::byte>(mine.begin(), mine.end())};
    std::vector<std::uint64_t> sizes(n);
    std::uint64_t own = mine.size();
    run("gather", [&] {
      gloo::AllgatherOptions opts(context_);
      opts.setInput(&own, 1);
      opts.setOutput(sizes.data(), sizes.size());
      gloo::allgather(opts);
    });
    const std::uint64_t longest = *std::max_element(sizes.begin(), sizes.end());
    std::vector<std::vector<std::byte>> parts;
    if (longest == 0) {
      if (rank_ == root) parts.resize(n);
      return parts;
    }
    std::vector<std::byte> padded(longest);
    std::copy(mine.begin(), mine.end(), padded.begin());
    std::vector<std::byte> all(rank_ == root ? longest * n : 0);
    run("gather", [&] {
      gloo::GatherOptions opts(context_);
      opts.setInput(padded.data(), padded.size());
      if (rank_ == root) opts.setOutput(all.data(), all.size());
      opts.setRoot(root);
      gloo::gather(opts);
    });
    if (rank_ != root) return parts;
    for (std::size_t r = 0; r < n; ++r) {
      const auto from = all.begin() + static_cast<std::ptrdiff_t>(r * longest);
      parts.emplace_back(from, from + static_cast<std::ptrdiff_t>(sizes[r]));
    }
    return parts;
  }

  // Every rank learns every size (one broadcast of 8 bytes each), then one scatter of the parts,
  // each padded to the longest.
  std::vector<std::byte> scatter(std::span<const std::vector<std::byte>> parts, int root) override {
    const auto n = static_cast<std::size_t>(size_);
    MERIDIAN_CHECK(root >= 0 && root < size_ && (rank_ != root || parts.size() == n), "root=", root, " size=", size_,
                   " parts=", parts.size());
    if (size_ == 1) return parts.front();
    std::vector<std::uint64_t> sizes(n);
    if (rank_ == root)
      for (std::size_t r = 0; r < n; ++r) sizes[r] = parts[r].size();
    broadcast(std::as_writable_bytes(std::span(sizes)), root);
    const std::uint64_t longest = *std::max_element(sizes.begin(), sizes.end());
    if (longest == 0) return {};
    std::vector<std::byte> all(rank_ == root ? longest * n : 0), mine(longest);
    std::vector<std::byte*> inputs;
    for (std::size_t r = 0; r < n && rank_ == root; ++r) {
      std::copy(parts[r].begin(), parts[r].end(), all.begin() + static_cast<std::ptrdiff_t>(r * longest));
      inputs.push_back(all.data() + r * longest);
    }
    run("scatter", [&] {
      gloo::ScatterOptions opts(context_);
      if (rank_ == root) opts.setInputs(inputs, longest);
      opts.setOutput(mine.data(), mine.size());
      opts.setRoot(root);
      gloo::scatter(opts);
    });
    mine.resize(sizes[static_cast<std::size_t>(rank_)]);
    return mine;
  }

  void barrier() override {
    if (size_ == 1) return;
    run("barrier", [&] {
      gloo::BarrierOptions opts(context_);
      gloo::barrier(opts);
    });
  }

  void reduce_scatter(std::span<float> data, std::span<const std::size_t> counts, ReduceOp op) override {
    check_parts(data.size(), counts, size_);
    if (size_ == 1) return;
    // Every rank sends part p to rank p and sums the copies of its own in rank order: each element
    // is summed on one rank, in one order, whatever the cut of the others. In rounds of at most
    // kReduceScatterRound of each part, so the copies received take a bounded buffer.
    const std::size_t mine = counts[static_cast<std::size_t>(rank_)];
    const auto part = data.subspan(part_offset(counts, rank_), mine);
    const std::size_t longest = *std::max_element(counts.begin(), counts.end());
    for (std::size_t done = 0; done < longest; done += kReduceScatterRound) {
      const auto in_round = [&](std::size_t count) { return count > done ? std::min(kReduceScatterRound, count - done) : 0; };
      std::vector<std::int64_t> sent;
      std::vector<float> outgoing;
      for (int p = 0; p < size_; ++p) {
        const std::size_t n = in_round(counts[static_cast<std::size_t>(p)]);
        sent.push_back(static_cast<std::int64_t>(n));
        const float* from = data.data() + part_offset(counts, p) + (n > 0 ? done : 0);
        outgoing.insert(outgoing.end(), from, from + n);
      }
      const std::size_t own = in_round(mine);
      received_.resize(own * static_cast<std::size_t>(size_));
      run("reduce_scatter", [&] {
        gloo::AlltoallvOptions opts(context_);
        opts.setInput(outgoing.data(), std::move(sent));
        opts.setOutput(received_.data(), std::vector<std::int64_t>(static_cast<std::size_t>(size_),
                                                                   static_cast<std::int64_t>(own)));
        gloo::alltoallv(opts);
      });
      float* sum = part.data() + done;
      std::copy_n(received_.begin(), own, sum);
      for (int r = 1; r < size_; ++r) {
        const float* copy = received_.data() + static_cast<std::size_t>(r) * own;
        for (std::size_t i = 0; i < own; ++i) sum[i] += copy[i];
      }
    }
    if (op == ReduceOp::Mean) scale_to_mean(part, size_);
  }

  void all_gather(std::span<float> data, std::span<const std::size_t> counts) override {
    check_parts(data.size(), counts, size_);
    if (size_ == 1) return;
    run("all_gather", [&] {
      // No input: this rank's part is read from the output buffer in place.
      gloo::AllgathervOptions opts(context_);
      opts.setOutput(data.data(), std::vector<std::size_t>(counts.begin(), counts.end()));
      gloo::allgatherv(opts);
    });
  }

  void ring_shift(std::span<const float> out, std::span<float> in) override {
    if (size_ == 1) {
      MERIDIAN_CHECK(in.size() == out.size(), "ring_shift alone: in ", in.size(), " out ", out.size());
      std::copy(out.begin(), out.end(), in.begin());
      return;
    }
    const int before = (rank_ + size_ - 1) % size_, after = (rank_ + 1) % size_;
    std::vector<std::int64_t> sent(static_cast<std::size_t>(size_), 0), received(static_cast<std::size_t>(size_), 0);
    sent[static_cast<std::size_t>(before)] = static_cast<std::int64_t>(out.size());
    received[static_cast<std::size_t>(after)] = static_cast<std::int64_t>(in.size());
    run("ring_shift", [&] {
      gloo::AlltoallvOptions opts(context_);
      opts.setInput(const_cast<float*>(out.data()), std::move(sent));  // read only
      opts.setOutput(in.data(), std::move(received));
      gloo::alltoallv(opts);
    });
  }

 private:
  // n elements cut into size_ parts that differ by at most one.
  std::vector<std::size_t> even_parts(std::size_t n) const {
    std::vector<std::size_t> counts(static_cast<std::size_t>(size_), n / static_cast<std::size_t>(size_));
    for (std::size_t r = 0; r < n % static_cast<std::size_t>(size_); ++r) ++counts[r];
    return counts;
  }

  template <class F>
  void run(const char* what, F&& call) {
    MERIDIAN_CHECK(!failed_, "rank ", rank_, ": ", what, " on a communicator that already failed; "
                   "build a new one under a new prefix");
    failed_ = true;  // stays set if the call throws
    translate_gloo_errors(what, rank_, size_, call);
    failed_ = false;
  }

  const int rank_;
  const int size_;
  const std::shared_ptr<gloo::Context> context_;  // null when size_ == 1
  std::vector<float> received_;  // reduce_scatter: every rank's copy of one round of this rank's part
  bool failed_ = false;
};

}  // namespace

std::unique_ptr<Communicator> connect_gloo(Store& store, const std::string& prefix, int rank, int size,
                                           const GlooOptions& options) {
  MERIDIAN_CHECK(size >= 1 && rank >= 0 && rank < size, "rank=", rank, " size=", size);
  MERIDIAN_CHECK(options.timeout.count() > 0, "timeout=", options.timeout.count(), " ms");
  if (size == 1) return std::make_unique<GlooCommunicator>(0, 1, nullptr);
  ignore_sigpipe_unless_handled();

  const auto deadline = Clock::now() + options.timeout;
  std::shared_ptr<gloo::transport::Device> device;
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = options.address;
    attr.ai_family = AF_INET;
    device = gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    throw make_error(ErrorKind::Config, "gloo cannot listen on address \"", options.address, "\": ", e.what());
  }

  auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
  context->setTimeout(options.timeout);
  RendezvousStore rendezvous(store, prefix, deadline);
  // Published before this rank's addresses: a peer that reads them finds the key there too.
  const MeshKey key = new_mesh_key();
  rendezvous.set(mesh_key_name(rank), std::vector<char>(reinterpret_cast<const char*>(key.data()),
                                                        reinterpret_cast<const char*>(key.data()) + key.size()));
  translate_gloo_errors("rendezvous", rank, size, [&] {
    try {
      context->connectFullMesh(rendezvous, device);
    } catch (const Error& e) {
      // From the store: its message names the missing key, i.e. the rank that did not show up.
      throw make_error(e.kind(), "rank ", rank, " of ", size, ": not all ranks joined under prefix \"", prefix,
                       "\" within ", options.timeout.count(), " ms: ", e.what());
    }
    prove_pairs(context, rendezvous, prefix, key);
    // A pair counts as connected on one side as soon as the peer's kernel has queued the
    // connection, before the peer has accepted it. Without this barrier a fast rank could finish
    // its first collective and close its sockets while a slow rank is still connecting, and the
    // slow rank would see a healthy, departed peer as a failure.
    gloo::BarrierOptions opts(context);
    gloo::barrier(opts);
  });
  return std::make_unique<GlooCommunicator>(rank, size, std::move(context));
}

}  // namespace meridian
