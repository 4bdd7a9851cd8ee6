// Cross-site transfer throughput on loopback: one delta (256 MiB) sent from one "site" to another
// through the Link (ZeroMQ and UCX, 4 MiB chunks), against a bare transfer of the same bytes over
// the same transport in the same run, so that the ratio isolates what the link adds (framing,
// checksums, what it keeps of the payload for re-requests, reassembly).
//
//   bench_transfer [repeats=5] [MiB=256] [chunk_MiB=4]
//
// Method: one process, two threads. The receiving side (its own Link instance, or the bare socket
// or worker) is driven by a receiver thread; the main thread sends, then serves its link as a site
// would (receive() with a short timeout) until the receiver is done. A run is timed from the start
// of the send to the moment the receiver holds all the bytes in one buffer (Received::bytes, or the
// bare receiver's buffer), and is then checked byte for byte. Bare paths, with no framing and no
// checksums: ZeroMQ PUSH -> PULL, chunk-sized messages sent zero-copy from the payload and received
// into their place in the buffer; UCX active messages of chunk size carrying their offset in the
// header, sent from the payload with the protocol UCX picks and received into the buffer. "fresh":
// bare into newly allocated memory. "link": the payload handed to the link as a shared_ptr (kept,
// not copied); "hashed" ("link (pre-hashed)"): the same, handed over with its chunk hashes, taken
// before the run as the delta encoder takes them (how CrossSite sends its own deltas; their cost is
// the encoder's, measured in bench_codec), so the sender reads none of the payload in the run;
// "copy": handed as a span (the link keeps a copy). Per kind: one warm-up of each path, then
// `repeats` rounds of {bare, fresh, link, hashed, copy}; GB/s = bytes / time (GB = 1e9 bytes),
// medians, and the ratios to bare. Then the ZeroMQ link over CURVE against itself in plaintext,
// with the process's CPU time per GB for each and the rate the host's cores allow CURVE.
#include <netinet/in.h>
#include <time.h>
#include <ucp/api/ucp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "bench/stats.hpp"
#include "core/util/rng.hpp"
#include "transport/link/curve.hpp"
#include "transport/link/ucx_link.hpp"
#include "transport/link/ucx_transport.hpp"
#include "transport/link/zmq_link.hpp"

using namespace meridian;
using bench::Clock;
using bench::median;

namespace {

using Bytes = std::vector<std::byte>;
using namespace std::chrono_literals;

// The CPU time of this whole process (every thread: ZeroMQ's I/O threads, and the kernel's work
// for the loopback TCP on their behalf), in seconds.
double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// Runs `receive` on a thread of its own and `send` on this one, then `serve` until `receive` has
// returned (if given); the time from just before `send` starts to the moment `receive` returns,
// and in `cpu` (if given) the process's CPU time over the same span.
double timed(const std::function<void()>& send, const std::function<void()>& receive,
             const std::function<void()>& serve = nullptr, double* cpu = nullptr) {
  std::atomic<bool> ready{false}, done{false};
  Clock::time_point end;
  double cpu_end = 0;
  std::thread receiver([&] {
    ready = true;
    receive();
    end = Clock::now();
    cpu_end = process_cpu_seconds();
    done = true;
  });
  while (!ready) std::this_thread::yield();
  const double cpu_start = process_cpu_seconds();
  const auto start = Clock::now();
  send();
  while (serve && !done) serve();
  receiver.join();
  if (cpu) *cpu = cpu_end - cpu_start;
  return std::chrono::duration<double>(end - start).count();
}

void check(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(what);
}

// How the payload is handed to the link: shared (kept, not copied), shared with its chunk hashes
// (`hashes`, taken before the run), or as a span (the link keeps a copy).
enum class Form { Shared, Hashed, Copied };

double link_run(Link& tx, Link& rx, const std::shared_ptr<const Bytes>& payload, const ChunkHashes& hashes,
                std::uint64_t id, Form form, double* cpu = nullptr) {
  const std::string to = rx.address();
  std::optional<Received> got;
  const double s = timed([&] {
                           if (form == Form::Shared) tx.send(to, id, 0, payload);
                           if (form == Form::Hashed) tx.send(to, id, 0, payload, hashes);
                           if (form == Form::Copied) tx.send(to, id, 0, std::span<const std::byte>(*payload));
                         },
                         [&] {
                           const auto deadline = Clock::now() + 60s;
                           while (!got && Clock::now() < deadline) got = rx.receive(100ms);
                         },
                         [&] { tx.receive(1ms); }, cpu);
  check(got && got->transfer_id == id && got->bytes == *payload, "link transfer arrived wrong");
  rx.recycle(std::move(got->bytes));  // as CrossSite does once a delta is merged
  return s;
}

// --- bare ZeroMQ ---------------------------------------------------------------------------------

struct BareZmq {
  zmq::context_t context{1};
  zmq::socket_t push{context, zmq::socket_type::push};
  zmq::socket_t pull{context, zmq::socket_type::pull};
  BareZmq() {
    pull.bind("tcp://127.0.0.1:*");
    push.connect(pull.get(zmq::sockopt::last_endpoint));
  }
};

double bare_zmq_run(BareZmq& z, const Bytes& payload, std::span<std::byte> out, std::size_t chunk) {
  return timed(
      [&] {
        for (std::size_t off = 0; off < payload.size(); off += chunk) {
          // Zero-copy: the payload outlives the run.
          zmq::message_t m(const_cast<std::byte*>(payload.data()) + off, std::min(chunk, payload.size() - off), nullptr,
                           nullptr);
          check(z.push.send(m, zmq::send_flags::none).has_value(), "zmq send");
        }
      },
      [&] {
        for (std::size_t off = 0; off < out.size(); off += chunk)
          check(z.pull.recv(zmq::mutable_buffer(out.data() + off, std::min(chunk, out.size() - off))).has_value(),
                "zmq recv");
      });
}

// --- bare UCX ------------------------------------------------------------------------------------

void ucx_check(ucs_status_t status, const char* what) {
  if (status != UCS_OK) throw std::runtime_error(std::string(what) + ": " + ucs_status_string(status));
}

// A sending and a receiving worker, one per thread (each in a context of its own): a listener on
// the receiving one, an endpoint to it from the sending one. Configured like the UCX link (TCP on
// the loopback device). Never torn down: that races UCX's own threads (see ucx_link.cpp), and the
// process ends right after.
struct BareUcx {
  ucp_worker_h tx = nullptr, rx = nullptr;
  ucp_ep_h ep = nullptr, accepted = nullptr;
  ucp_conn_request_h request = nullptr;
  std::byte* out = nullptr;
  std::size_t received = 0;

  static ucp_worker_h worker() {
    ucp_context_h context = make_ucp_context(true, UCP_FEATURE_AM);
    ucp_worker_params_t worker_params{};
    worker_params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    worker_params.thread_mode = UCS_THREAD_MODE_SINGLE;
    ucp_worker_h w = nullptr;
    ucx_check(ucp_worker_create(context, &worker_params, &w), "worker");
    return w;
  }

  BareUcx() : tx(worker()), rx(worker()) {
    ucp_am_handler_param_t am{};
    am.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG |
                    UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
    am.id = 1;
    am.flags = UCP_AM_FLAG_WHOLE_MSG;
    am.cb = &BareUcx::on_message;
    am.arg = this;
    ucx_check(ucp_worker_set_am_recv_handler(rx, &am), "handler");

    sockaddr_in any{};
    any.sin_family = AF_INET;
    any.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ucp_listener_params_t listen{};
    listen.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
    listen.sockaddr = {reinterpret_cast<const sockaddr*>(&any), sizeof any};
    listen.conn_handler = {[](ucp_conn_request_h r, void* self) { static_cast<BareUcx*>(self)->request = r; }, this};
    ucp_listener_h listener = nullptr;
    ucx_check(ucp_listener_create(rx, &listen, &listener), "listener");
    ucp_listener_attr_t attr{};
    attr.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
    ucx_check(ucp_listener_query(listener, &attr), "listener query");
    ucp_ep_params_t ep_params{};
    ep_params.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR;
    ep_params.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
    ep_params.sockaddr = {reinterpret_cast<const sockaddr*>(&attr.sockaddr), sizeof(sockaddr_in)};
    ucx_check(ucp_ep_create(tx, &ep_params, &ep), "endpoint");
    while (request == nullptr) ucp_worker_progress(tx), ucp_worker_progress(rx);
    ucp_ep_params_t accept{};
    accept.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST;
    accept.conn_request = request;
    ucx_check(ucp_ep_create(rx, &accept, &accepted), "accept");
  }

  static ucs_status_t on_message(void* arg, const void* header, std::size_t, void* data, std::size_t length,
                                 const ucp_am_recv_param_t* param) {
    auto* self = static_cast<BareUcx*>(arg);
    std::uint64_t offset;
    std::memcpy(&offset, header, sizeof offset);
    if (!(param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) {
      std::memcpy(self->out + offset, data, length);
      self->received += length;
      return UCS_OK;
    }
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.cb.recv_am = [](void* request, ucs_status_t status, std::size_t length, void* self) {
      if (status == UCS_OK) static_cast<BareUcx*>(self)->received += length;
      ucp_request_free(request);
    };
    p.user_data = self;
    const ucs_status_ptr_t r = ucp_am_recv_data_nbx(self->rx, data, self->out + offset, length, &p);
    if (r == nullptr) self->received += length;
    return UCS_INPROGRESS;
  }
};

double bare_ucx_run(BareUcx& u, const Bytes& payload, std::span<std::byte> out, std::size_t chunk) {
  u.out = out.data();
  u.received = 0;
  const std::size_t count = (payload.size() + chunk - 1) / chunk;
  std::vector<std::uint64_t> offsets(count);
  std::atomic<std::size_t> pending{0};
  return timed(
      [&] {
        for (std::size_t i = 0; i < count; ++i) {
          offsets[i] = i * chunk;
          ucp_request_param_t p{};
          p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
          p.cb.send = [](void* request, ucs_status_t, void* n) {
            --*static_cast<std::atomic<std::size_t>*>(n);
            ucp_request_free(request);
          };
          p.user_data = &pending;
          const ucs_status_ptr_t r =
              ucp_am_send_nbx(u.ep, 1, &offsets[i], sizeof offsets[i], payload.data() + offsets[i],
                              std::min(chunk, payload.size() - offsets[i]), &p);
          check(!UCS_PTR_IS_ERR(r), "ucx send");
          if (r != nullptr) ++pending;
        }
        while (pending > 0) ucp_worker_progress(u.tx);
      },
      [&] {
        while (u.received < out.size()) ucp_worker_progress(u.rx);
      });
}

// -------------------------------------------------------------------------------------------------

struct Result {
  std::vector<double> bare, fresh, link, hashed, copy;
};

// One kind: warm-up, then `repeats` rounds of {bare into the reused buffer, bare into a new buffer,
// link (shared payload), link (shared, pre-hashed), link (copied payload)}. bare(out) sends the
// payload into out; link(id, form) sends it as transfer id.
Result measure(int repeats, const Bytes& payload, const std::function<double(std::span<std::byte>)>& bare,
               const std::function<double(std::uint64_t, Form)>& link) {
  Result r;
  Bytes reused(payload.size());
  std::uint64_t id = 1;
  const auto bare_into = [&](std::span<std::byte> out) {
    std::memset(out.data(), 0, out.size());  // outside the timing: only what arrives counts
    const double s = bare(out);
    check(std::equal(out.begin(), out.end(), payload.begin(), payload.end()), "bare transfer arrived wrong");
    return s;
  };
  bare_into(reused);
  for (const Form form : {Form::Shared, Form::Hashed, Form::Copied}) link(id++, form);
  for (int i = 0; i < repeats; ++i) {
    r.bare.push_back(bare_into(reused));
    // A receiver that hands each delta on needs new memory for each, as the link's Received does.
    // Not value-initialised: the pages are first touched by the transfer itself.
    std::unique_ptr<std::byte[]> fresh(new std::byte[payload.size()]);
    r.fresh.push_back(bare({fresh.get(), payload.size()}));
    check(std::equal(payload.begin(), payload.end(), fresh.get()), "bare transfer arrived wrong");
    r.link.push_back(link(id++, Form::Shared));
    r.hashed.push_back(link(id++, Form::Hashed));
    r.copy.push_back(link(id++, Form::Copied));
  }
  return r;
}

void report(const char* kind, const Result& r, double gb) {
  const double bare = gb / median(r.bare), fresh = gb / median(r.fresh), link = gb / median(r.link),
               hashed = gb / median(r.hashed), copy = gb / median(r.copy);
  std::printf("%-4s %10.3f %10.3f %10.3f %9.0f%% %9.0f%% %10.3f %9.0f%% %10.3f %9.0f%%\n", kind, bare, fresh, link,
              100.0 * link / bare, 100.0 * link / fresh, hashed, 100.0 * hashed / bare, copy, 100.0 * copy / bare);
  for (const auto& [name, runs] : {std::pair{"bare", &r.bare}, std::pair{"fresh", &r.fresh},
                                   std::pair{"link", &r.link}, std::pair{"hashed", &r.hashed},
                                   std::pair{"copy", &r.copy}}) {
    std::printf("     %-6s runs GB/s:", name);
    for (double s : *runs) std::printf(" %.3f", gb / s);
    std::printf("\n");
  }
}

// CURVE's cost: the ZeroMQ link in plaintext and over CURVE (its sites' keypairs made here), each
// handed the payload pre-hashed as CrossSite sends its own deltas, one warm-up each, then
// `repeats` rounds of {plaintext, CURVE}; medians and their ratio. With both ends on one host the
// ratio is bounded by the cores: each run's CPU time (both ends together) per GB says how many
// core-seconds a GB costs, and `cores` / that is the most any number of threads could move here.
void compare_curve(int repeats, const std::shared_ptr<const Bytes>& payload, const ChunkHashes& hashes,
                   std::size_t chunk, double gb) {
  const CurveKeypair a = make_curve_keypair(), b = make_curve_keypair();
  const std::set<std::string> keys{a.public_key, b.public_key};
  auto tx = make_zmq_link("127.0.0.1", chunk), rx = make_zmq_link("127.0.0.1", chunk);
  auto ctx = make_zmq_link("127.0.0.1", chunk, {}, 0, kLinkQueueBytes, LinkCurve{a, keys});
  auto crx = make_zmq_link("127.0.0.1", chunk, {}, 0, kLinkQueueBytes, LinkCurve{b, keys});
  std::vector<double> plain, curve, plain_cpu, curve_cpu;
  std::uint64_t id = 1;
  auto run = [&](Link& from, Link& to, std::vector<double>& wall, std::vector<double>& cpu) {
    double seconds = 0;
    wall.push_back(link_run(from, to, payload, hashes, id++, Form::Hashed, &seconds));
    cpu.push_back(seconds);
  };
  link_run(*tx, *rx, payload, hashes, id++, Form::Hashed);
  link_run(*ctx, *crx, payload, hashes, id++, Form::Hashed);
  for (int i = 0; i < repeats; ++i) {
    run(*tx, *rx, plain, plain_cpu);
    run(*ctx, *crx, curve, curve_cpu);
  }
  const double p = gb / median(plain), c = gb / median(curve);
  std::printf("zmq link (pre-hashed), plaintext %.3f GB/s, CURVE %.3f GB/s: CURVE/plaintext %.0f%%\n", p, c,
              100.0 * c / p);
  for (const auto& [name, runs] : {std::pair{"plain", &plain}, std::pair{"curve", &curve}}) {
    std::printf("     %-6s runs GB/s:", name);
    for (double s : *runs) std::printf(" %.3f", gb / s);
    std::printf("\n");
  }
  const double plain_core_s = median(plain_cpu) / gb, curve_core_s = median(curve_cpu) / gb;
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  std::printf("     CPU (both ends) per GB: plaintext %.2f core-s, CURVE %.2f core-s; on this host's %u cores "
              "CURVE can move at most %.3f GB/s, %.0f%% of plaintext's measured rate\n",
              plain_core_s, curve_core_s, cores, cores / curve_core_s, 100.0 * cores / curve_core_s / p);
}

}  // namespace

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::atoi(argv[1]) : 5;
  const std::size_t bytes = (argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 256) << 20;
  const std::size_t chunk = (argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 4) << 20;
  if (repeats < 1 || bytes == 0 || chunk == 0 || chunk > kMaxChunkBytes) {
    std::fprintf(stderr, "usage: bench_transfer [repeats=5] [MiB=256] [chunk_MiB=4]\n");
    return 2;
  }
  const double gb = bytes / 1e9;
  auto shared = std::make_shared<Bytes>(bytes);
  Bytes& payload = *shared;
  Rng rng(7);
  for (std::size_t i = 0; i + 8 <= bytes; i += 8) {
    const std::uint64_t v = rng.next_u64();
    std::memcpy(payload.data() + i, &v, 8);
  }
  std::printf("%zu MiB over 127.0.0.1 in %zu MiB chunks, median of %d interleaved runs per path\n", bytes >> 20,
              chunk >> 20, repeats);
  std::printf("%-4s %10s %10s %10s %10s %10s %10s %10s %10s %10s\n", "kind", "bare GB/s", "fresh GB/s",
              "link GB/s", "link/bare", "link/fresh", "hashed GB/s", "hashed/bare", "copy GB/s", "copy/bare");
  // What the delta encoder hands CrossSite's link with each delta: outside the timed runs.
  const ChunkHashes hashes = chunk_hashes(payload, chunk);
  {
    BareZmq z;
    auto tx = make_zmq_link("127.0.0.1", chunk), rx = make_zmq_link("127.0.0.1", chunk);
    report("zmq",
           measure(
               repeats, payload, [&](std::span<std::byte> out) { return bare_zmq_run(z, payload, out, chunk); },
               [&](std::uint64_t id, Form form) { return link_run(*tx, *rx, shared, hashes, id, form); }),
           gb);
  }
  compare_curve(repeats, shared, hashes, chunk, gb);
  {
    BareUcx u;
    auto tx = make_ucx_link("127.0.0.1", chunk), rx = make_ucx_link("127.0.0.1", chunk);
    report("ucx",
           measure(
               repeats, payload, [&](std::span<std::byte> out) { return bare_ucx_run(u, payload, out, chunk); },
               [&](std::uint64_t id, Form form) { return link_run(*tx, *rx, shared, hashes, id, form); }),
           gb);
  }
  return 0;
}
