#pragma once
// The UCX plumbing under UcxLink (ucx_link.hpp): one UCP context, worker and listener, driven by a
// thread of their own, that send and receive whole active messages by peer address. It knows
// nothing of chunks; the link does the framing.
//
// Only the progress thread calls into UCX (the worker is THREAD_MODE_SINGLE): it posts what post()
// queued, progresses the worker, accepts connections and queues what arrives for next(). UCP moves
// nothing and accepts no connection unless its worker is progressed, so without that thread a
// message would leave only while its sender happened to be inside the link, and a connection would
// be set up only while both ends were there: a site that sent its delta and went back to training
// would strand it. (ZeroMQ's I/O thread plays the same part for zmq_link.)
#include <ucp/api/ucp.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace meridian {

// A UCP context configured in code for links, whatever UCX_* variables say: TCP alone (shared
// memory cannot be reached through a listener: "sm,self" fails; a link's peers are other hosts
// anyway), and the loopback device when `loopback`. Error(Io) when UCX cannot start. Also what
// tests and benchmarks that talk UCP directly use, so they meet links on the same terms.
ucp_context_h make_ucp_context(bool loopback, std::uint64_t features);

class UcxTransport {
 public:
  struct Message {
    std::string peer;                   // a valid_address()
    std::vector<std::byte> header;      // small; UCX limits it (max_header())
    std::span<const std::byte> data;    // into *owner
    std::shared_ptr<const void> owner;  // kept until UCX is done with data
    // Sent only once every message posted to the same peer before it has completed (a rendezvous
    // message once the peer has fetched its data); messages posted after it do not hold it up.
    bool fence = false;
  };

  // Where the data of a message that comes by rendezvous is to be received instead of a buffer of
  // the transport's own: `bytes` (as many as the message carries), which `holder` keeps alive; the
  // Arrival holds on to it. A Placer is asked with the message's header and data length, on the
  // progress thread, before the data is fetched; nullopt: a buffer of the transport's own.
  struct Place {
    std::span<std::byte> bytes;
    std::shared_ptr<void> holder;
  };
  using Placer = std::function<std::optional<Place>(std::span<const std::byte> header, std::size_t length)>;

  // A received message. Its bytes may be UCX's own buffer, which goes back to the progress thread
  // when the Arrival is destroyed; the UcxTransport must outlive it.
  class Arrival {
   public:
    Arrival() = default;
    Arrival(Arrival&& other) noexcept;
    Arrival& operator=(Arrival&& other) noexcept;
    ~Arrival();
    std::span<const std::byte> header() const { return header_; }
    std::span<const std::byte> data() const;
    bool refused() const { return refused_; }  // its data was larger than the transport takes
    // The Place's holder when the data was received where the Placer said (data() is there).
    const std::shared_ptr<void>& placed() const { return placed_; }

   private:
    friend class UcxTransport;
    UcxTransport* owner_ = nullptr;
    std::vector<std::byte> header_;
    void* held_ = nullptr;  // UCX's buffer
    std::unique_ptr<std::byte[]> own_;
    std::size_t own_size_ = 0;  // what own_ was allocated with
    std::byte* place_ = nullptr;  // where the Placer put it
    std::shared_ptr<void> placed_;
    std::size_t length_ = 0;
    bool refused_ = false;
    ucp_ep_h from_ = nullptr;  // the connection it came on, when known
  };

  // bind_address is an interface address; port 0 lets the system choose. Messages with more
  // than max_data bytes of data are refused. Error(Io) when UCX cannot start or the address
  // cannot be bound. `placer` (optional) chooses where rendezvous data goes.
  // queue_bytes: what post() lets wait to leave for one peer before it drops that peer's messages.
  UcxTransport(const std::string& bind_address, std::size_t max_data, std::uint16_t port, Placer placer,
               std::size_t queue_bytes);
  ~UcxTransport();
  UcxTransport(const UcxTransport&) = delete;
  UcxTransport& operator=(const UcxTransport&) = delete;

  // "ucx://IP:PORT" or "ucx://[IPv6]:PORT".
  const std::string& address() const { return address_; }
  static bool valid_address(const std::string& address);
  std::size_t max_header() const { return max_header_; }

  // Queues messages (to one peer) to be sent in order and returns at once. Never waits: while more
  // than queue_bytes is already waiting to leave for that peer (one that takes nothing), drops
  // them and returns false, unless `may_drop` is false. Messages to a peer that cannot be reached are
  // dropped later, as frames to a dead peer are lost.
  bool post(std::vector<Message> messages, bool may_drop = true);
  // The next message that arrived, waiting until deadline; nullopt when none came.
  std::optional<Arrival> next(std::chrono::steady_clock::time_point deadline);

 private:
  struct Endpoint;
  struct Outgoing;

  void start(const std::string& bind_address, std::uint16_t port);
  void run();
  void publish();
  void shut_down();
  bool wait_for(ucs_status_ptr_t request, std::chrono::steady_clock::time_point deadline);
  void close(Endpoint& e, bool force);
  Endpoint* endpoint(const std::string& peer);
  void tend_endpoints();
  void send(std::unique_ptr<Outgoing> out);
  bool send_fenced();
  bool unfenced(const Outgoing& out) const;
  void fetch(std::unique_ptr<Arrival> in, void* data);
  void fetch_waiting();
  bool room_to_fetch(ucp_ep_h from) const;
  void release(void* data);
  static void on_sent(void* request, ucs_status_t status, void* user_data);
  static void on_fetched(void* request, ucs_status_t status, std::size_t length, void* user_data);
  static void on_connection(ucp_conn_request_h request, void* arg);
  static void on_endpoint_error(void* arg, ucp_ep_h ep, ucs_status_t status);
  static ucs_status_t on_message(void* arg, const void* header, std::size_t header_length, void* data,
                                 std::size_t length, const ucp_am_recv_param_t* param);

  // Fixed once constructed.
  std::string address_;
  std::size_t max_header_ = 0;
  std::size_t max_data_;
  std::size_t queue_bytes_;
  Placer placer_;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  ucp_listener_h listener_ = nullptr;
  int efd_ = -1;

  // Buffers of consumed arrivals, by size, for the next ones of that size: their pages are mapped,
  // where a fresh buffer for every 4 MiB frame paid a page fault per page. Taken by the progress
  // thread, given back by the caller's; bounded.
  std::unique_ptr<std::byte[]> spare_buffer(std::size_t size);
  void give_back(std::size_t size, std::unique_ptr<std::byte[]> buffer);
  std::mutex spare_mutex_;
  std::vector<std::pair<std::size_t, std::unique_ptr<std::byte[]>>> spare_;

  // Shared by the caller's thread and the progress thread, under mutex_.
  std::mutex mutex_;
  std::condition_variable changed_;  // something arrived, or messages left
  std::deque<std::unique_ptr<Outgoing>> outbox_;
  std::vector<void*> releases_;
  std::deque<Arrival> incoming_;
  std::map<std::string, std::size_t> queued_bytes_;  // posted and not yet gone, by peer
  bool stopping_ = false;

  // The progress thread's.
  std::map<std::string, std::unique_ptr<Endpoint>> peers_;  // ours, by the peer's address
  std::vector<std::unique_ptr<Endpoint>> accepted_;         // peers' connections to us; only received on
  std::vector<ucp_conn_request_h> conn_requests_;
  std::vector<void*> closing_;
  std::vector<Arrival> arrived_;
  std::size_t in_flight_ = 0;  // sends UCX has not completed
  std::map<std::string, std::set<std::uint64_t>> sending_;  // the same by peer: their seq
  std::uint64_t next_seq_ = 1;
  // Fenced messages waiting for their peer's sends in flight to complete, by peer, in order.
  std::map<std::string, std::deque<std::unique_ptr<Outgoing>>> fenced_;
  std::size_t fetching_ = 0;   // rendezvous data being fetched
  std::map<ucp_ep_h, std::size_t> fetching_from_;  // the same by connection (reply endpoint)
  // Rendezvous data to fetch once its connection has room (kMaxFetches), with UCX's descriptor.
  std::map<ucp_ep_h, std::deque<std::pair<std::unique_ptr<Arrival>, void*>>> waiting_;
  std::map<std::string, std::size_t> left_bytes_;  // gone since the last publish(), by peer
  std::thread progress_;
};

}  // namespace meridian
