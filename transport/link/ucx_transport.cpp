#include "transport/link/ucx_transport.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sched.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "core/util/error.hpp"

namespace meridian {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// The active-message id of everything a link sends.
constexpr unsigned kAmId = 0x4d;
// Connections accepted at once, so that peers cannot make us hold unbounded state.
constexpr std::size_t kMaxAccepted = 1024;
// Lets messages already posted leave the host when the transport is destroyed right after.
constexpr milliseconds kLinger{1000};
// How the progress thread waits for UCX. UCX signals arrivals on the worker's event fd, but not
// every step of a rendezvous nor a socket that has room again, so while messages are going out or
// coming in, the thread keeps looking as long as UCX made progress within kSpinFor (yielding its
// core to any other thread that wants it), and otherwise sleeps on the fd kBusyWait at a time;
// idle, kIdleWait. Sleeping whenever UCX had nothing to do cost the link much of bare UCX's
// throughput (bench/README.md has the figures).
constexpr std::chrono::microseconds kSpinFor{200};
constexpr timespec kBusyWait{0, 50'000};
constexpr timespec kIdleWait{0, 10'000'000};
// Rendezvous data fetched at once from one connection. UCX 1.13 over TCP completes the fetches from
// a sender together, once all their data is in (seen in traces: the sender's acknowledgements wait
// for its connection to drain), so with every chunk of a transfer fetched at once, the link could check none
// before the whole transfer had arrived; fetched a few at a time, they arrive group by group, each
// checked while the next arrives. Per connection, so that a slow peer holds up only itself.
constexpr std::size_t kMaxFetches = 4;

struct SockAddr {
  sockaddr_storage storage{};
  socklen_t size = 0;
  const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage); }
};

// numeric_host: peers' addresses come off the wire and must not cause name lookups.
std::optional<SockAddr> resolve(const std::string& host, const std::string& port, bool numeric_host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (numeric_host ? AI_NUMERICHOST : 0);
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0 || found == nullptr) return std::nullopt;
  SockAddr a;
  std::memcpy(&a.storage, found->ai_addr, found->ai_addrlen);
  a.size = found->ai_addrlen;
  freeaddrinfo(found);
  return a;
}

std::optional<SockAddr> parse_address(const std::string& address) {
  const std::string scheme = "ucx://";
  const auto colon = address.rfind(':');
  if (!address.starts_with(scheme) || colon == std::string::npos || colon < scheme.size()) return std::nullopt;
  std::string host = address.substr(scheme.size(), colon - scheme.size());
  const std::string port = address.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  const bool digits = std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (port.empty() || port.size() > 5 || !digits || std::stoul(port) == 0 || std::stoul(port) > 65535)
    return std::nullopt;
  return resolve(host, port, true);
}

std::string format_address(const sockaddr_storage& s) {
  char text[INET6_ADDRSTRLEN] = {};
  if (s.ss_family == AF_INET) {
    const auto& a = reinterpret_cast<const sockaddr_in&>(s);
    inet_ntop(AF_INET, &a.sin_addr, text, sizeof text);
    return detail::concat("ucx://", text, ":", ntohs(a.sin_port));
  }
  const auto& a = reinterpret_cast<const sockaddr_in6&>(s);
  inet_ntop(AF_INET6, &a.sin6_addr, text, sizeof text);
  return detail::concat("ucx://[", text, "]:", ntohs(a.sin6_port));
}

bool is_loopback(const SockAddr& a) {
  if (a.storage.ss_family == AF_INET)
    return (ntohl(reinterpret_cast<const sockaddr_in&>(a.storage).sin_addr.s_addr) >> 24) == 127;
  return IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6&>(a.storage).sin6_addr);
}

void check_io(ucs_status_t status, const std::string& what) {
  if (status != UCS_OK) throw make_error(ErrorKind::Io, what, ": ", ucs_status_string(status));
}

// UCX 1.13 calls into a destroyed listener when a connection it had accepted delivers its request
// afterwards (openucx/ucx#8243, #11087), which happens when a peer connects just as a link goes;
// only destroying the worker removes such connections, and the listener must go first. So a
// transport's listener, worker and context outlive it, unprogressed (no callback of the transport
// runs again), and are destroyed once retired for kRetiredFor, when no peer is connecting any more.
// A retired transport holds about 100 KB and 5 file descriptors.
constexpr std::chrono::seconds kRetiredFor{10};

struct Retired {
  ucp_context_h context;
  ucp_worker_h worker;
  ucp_listener_h listener;
  Clock::time_point since;
  // An endpoint whose close never completed makes UCX 1.13 abort in ucp_worker_destroy ("pending
  // request ... should have been flushed"): such a worker is never destroyed.
  bool closed;
};

void retire(const Retired& ucx) {
  static std::mutex mutex;
  static auto* retired = new std::vector<Retired>;  // never freed: reachable, and alive at exit
  std::vector<Retired> expired;
  {
    std::lock_guard lock(mutex);
    std::erase_if(*retired, [&](const Retired& r) {
      if (!r.closed || ucx.since - r.since < kRetiredFor) return false;
      expired.push_back(r);
      return true;
    });
    retired->push_back(ucx);
  }
  for (const Retired& r : expired) {
    ucp_listener_destroy(r.listener);
    ucp_worker_destroy(r.worker);
    ucp_cleanup(r.context);
  }
}

}  // namespace

struct UcxTransport::Endpoint {  // heap-allocated so that UCX's error callback can point at it
  ucp_ep_h ep = nullptr;
  ucs_status_t error = UCS_OK;
};

struct UcxTransport::Outgoing {
  UcxTransport* transport;
  Message message;
  std::uint64_t seq = 0;    // the order in which UCX was given it, once it was
  std::uint64_t after = 0;  // fenced: the messages given to UCX up to this one must have completed
};

// --- Arrival -------------------------------------------------------------------------------------

UcxTransport::Arrival::Arrival(Arrival&& other) noexcept { *this = std::move(other); }

UcxTransport::Arrival& UcxTransport::Arrival::operator=(Arrival&& other) noexcept {
  if (this != &other) {
    if (held_ != nullptr) owner_->release(held_);
    if (own_ != nullptr) owner_->give_back(own_size_, std::move(own_));
    owner_ = other.owner_;
    header_ = std::move(other.header_);
    held_ = std::exchange(other.held_, nullptr);
    own_ = std::move(other.own_);
    own_size_ = other.own_size_;
    place_ = std::exchange(other.place_, nullptr);
    placed_ = std::move(other.placed_);
    length_ = other.length_;
    refused_ = other.refused_;
    from_ = other.from_;
  }
  return *this;
}

UcxTransport::Arrival::~Arrival() {
  if (held_ != nullptr) owner_->release(held_);
  if (own_ != nullptr && owner_ != nullptr) owner_->give_back(own_size_, std::move(own_));
}

std::unique_ptr<std::byte[]> UcxTransport::spare_buffer(std::size_t size) {
  {
    std::lock_guard lock(spare_mutex_);
    for (auto it = spare_.begin(); it != spare_.end(); ++it)
      if (it->first == size) {
        auto buffer = std::move(it->second);
        spare_.erase(it);
        return buffer;
      }
  }
  return std::unique_ptr<std::byte[]>(new std::byte[size]);  // not value-initialised: it is filled
}

void UcxTransport::give_back(std::size_t size, std::unique_ptr<std::byte[]> buffer) {
  constexpr std::size_t kSpares = 8;
  std::lock_guard lock(spare_mutex_);
  if (spare_.size() >= kSpares) spare_.erase(spare_.begin());
  spare_.emplace_back(size, std::move(buffer));
}

std::span<const std::byte> UcxTransport::Arrival::data() const {
  if (held_ != nullptr) return {static_cast<const std::byte*>(held_), length_};
  if (own_ != nullptr) return {own_.get(), length_};
  if (place_ != nullptr) return {place_, length_};
  return {};
}

// --- the caller's side ---------------------------------------------------------------------------

UcxTransport::UcxTransport(const std::string& bind_address, std::size_t max_data, std::uint16_t port, Placer placer,
                           std::size_t queue_bytes)
    : max_data_(max_data), queue_bytes_(queue_bytes), placer_(std::move(placer)) {
  try {
    start(bind_address, port);
    progress_ = std::thread([this] { run(); });
  } catch (...) {
    shut_down();
    throw;
  }
}

UcxTransport::~UcxTransport() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  ucp_worker_signal(worker_);
  progress_.join();  // the thread shuts UCX down on its way out
}

bool UcxTransport::valid_address(const std::string& address) { return parse_address(address).has_value(); }

bool UcxTransport::post(std::vector<Message> messages, bool may_drop) {
  if (messages.empty()) return true;
  std::size_t bytes = 0;
  for (const Message& m : messages) bytes += m.data.size();
  {
    std::lock_guard lock(mutex_);
    // A peer that takes nothing must neither make us hold unbounded memory nor stop this thread.
    const std::string& peer = messages.front().peer;
    const auto it = queued_bytes_.find(peer);
    if (may_drop && it != queued_bytes_.end() && it->second > queue_bytes_) return false;
    if (bytes > 0) queued_bytes_[peer] += bytes;
    for (Message& m : messages) outbox_.push_back(std::make_unique<Outgoing>(Outgoing{this, std::move(m)}));
  }
  ucp_worker_signal(worker_);
  return true;
}

std::optional<UcxTransport::Arrival> UcxTransport::next(Clock::time_point deadline) {
  std::unique_lock lock(mutex_);
  changed_.wait_until(lock, deadline, [&] { return !incoming_.empty(); });
  if (incoming_.empty()) return std::nullopt;
  Arrival in = std::move(incoming_.front());
  incoming_.pop_front();
  return in;
}

void UcxTransport::release(void* data) {
  std::lock_guard lock(mutex_);
  releases_.push_back(data);
}

// --- setting up and tearing down -----------------------------------------------------------------

ucp_context_h make_ucp_context(bool loopback, std::uint64_t features) {
  ucp_config_t* config = nullptr;
  check_io(ucp_config_read(nullptr, nullptr, &config), "cannot read the UCX configuration");
  ucs_status_t status = ucp_config_modify(config, "TLS", "tcp");
  if (status == UCS_OK) status = ucp_config_modify(config, "SOCKADDR_TLS_PRIORITY", "tcp");
  if (status == UCS_OK && loopback) status = ucp_config_modify(config, "NET_DEVICES", "lo");
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = features;
  ucp_context_h context = nullptr;
  if (status == UCS_OK) status = ucp_init(&params, config, &context);
  ucp_config_release(config);
  check_io(status, "cannot start UCX");
  return context;
}

void UcxTransport::start(const std::string& bind_address, std::uint16_t port) {
  const auto bind = resolve(bind_address, std::to_string(port), false);
  if (!bind) throw make_error(ErrorKind::Io, "cannot bind a link to ", bind_address, ": not an address");
  context_ = make_ucp_context(is_loopback(*bind), UCP_FEATURE_AM | UCP_FEATURE_WAKEUP);

  ucp_worker_params_t worker_params{};
  worker_params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  worker_params.thread_mode = UCS_THREAD_MODE_SINGLE;
  check_io(ucp_worker_create(context_, &worker_params, &worker_), "cannot create a UCX worker");
  check_io(ucp_worker_get_efd(worker_, &efd_), "cannot get the UCX worker's event fd");
  ucp_worker_attr_t attr{};
  attr.field_mask = UCP_WORKER_ATTR_FIELD_MAX_AM_HEADER;
  check_io(ucp_worker_query(worker_, &attr), "cannot query the UCX worker");
  max_header_ = attr.max_am_header;

  ucp_am_handler_param_t am{};
  am.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_FLAGS | UCP_AM_HANDLER_PARAM_FIELD_CB |
                  UCP_AM_HANDLER_PARAM_FIELD_ARG;
  am.id = kAmId;
  am.flags = UCP_AM_FLAG_WHOLE_MSG | UCP_AM_FLAG_PERSISTENT_DATA;
  am.cb = &UcxTransport::on_message;
  am.arg = this;
  check_io(ucp_worker_set_am_recv_handler(worker_, &am), "cannot set the UCX message handler");

  ucp_listener_params_t listen{};
  listen.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
  listen.sockaddr = {bind->get(), bind->size};
  listen.conn_handler = {&UcxTransport::on_connection, this};
  check_io(ucp_listener_create(worker_, &listen, &listener_), "cannot bind a link to " + bind_address);
  ucp_listener_attr_t listener_attr{};
  listener_attr.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
  check_io(ucp_listener_query(listener_, &listener_attr), "cannot query the UCX listener");
  address_ = format_address(listener_attr.sockaddr);
}

void UcxTransport::shut_down() {
  if (worker_ != nullptr) {
    const auto deadline = Clock::now() + kLinger;
    while (in_flight_ > 0 && Clock::now() < deadline) {
      ucp_worker_progress(worker_);
      send_fenced();
      tend_endpoints();
    }
    for (auto& [from, queue] : waiting_)
      for (auto& [in, data] : queue) releases_.push_back(data);
    waiting_.clear();
    for (Arrival& in : arrived_) releases_.push_back(std::exchange(in.held_, nullptr));
    for (Arrival& in : incoming_) releases_.push_back(std::exchange(in.held_, nullptr));
    for (void* data : releases_)
      if (data != nullptr) ucp_am_data_release(worker_, data);
    // Graceful closes: what UCX still holds of our messages goes out first (a forced close may drop
    // it; UCX allows a graceful one only once no send is pending), and peers learn at once that we
    // are gone, so that their own closes need not wait for us.
    for (auto& [peer, e] : peers_) close(*e, in_flight_ > 0 || e->error != UCS_OK);
    for (auto& e : accepted_) close(*e, e->error != UCS_OK);
    bool closed = true;
    for (void* request : closing_) closed = wait_for(request, deadline + kLinger) && closed;
    for (ucp_conn_request_h request : conn_requests_) ucp_listener_reject(listener_, request);
    if (listener_ != nullptr) return retire({context_, worker_, listener_, Clock::now(), closed});
    ucp_worker_destroy(worker_);
  }
  if (context_ != nullptr) ucp_cleanup(context_);
}

// Whether the request completed (well or not) by the deadline.
bool UcxTransport::wait_for(ucs_status_ptr_t request, Clock::time_point deadline) {
  if (request == nullptr || UCS_PTR_IS_ERR(request)) return true;
  ucs_status_t status;
  while ((status = ucp_request_check_status(request)) == UCS_INPROGRESS && Clock::now() < deadline)
    ucp_worker_progress(worker_);
  ucp_request_free(request);
  return status != UCS_INPROGRESS;
}

// force: the endpoint failed, or still has sends pending.
void UcxTransport::close(Endpoint& e, bool force) {
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
  const ucs_status_ptr_t request = ucp_ep_close_nbx(e.ep, &param);
  if (request != nullptr && !UCS_PTR_IS_ERR(request)) closing_.push_back(request);
}

// --- the progress thread -------------------------------------------------------------------------

void UcxTransport::run() {
  prctl(PR_SET_TIMERSLACK, 5'000UL);  // kBusyWait as asked for, not up to 50 us later (the default slack)
  auto progressed = Clock::now();  // when UCX last reported progress
  for (;;) {
    std::deque<std::unique_ptr<Outgoing>> posts;
    std::vector<void*> releases;
    bool stop = false;
    {
      std::lock_guard lock(mutex_);
      posts.swap(outbox_);
      releases.swap(releases_);
      stop = stopping_;
    }
    for (void* data : releases) ucp_am_data_release(worker_, data);
    for (auto& out : posts) {
      if (!out->message.fence) {
        send(std::move(out));
        continue;
      }
      out->after = next_seq_ - 1;  // every message posted before it has been given to UCX
      if (fenced_.count(out->message.peer) == 0 && unfenced(*out))
        send(std::move(out));
      else
        fenced_[out->message.peer].push_back(std::move(out));
    }
    if (stop) break;
    unsigned events = 0;
    for (int i = 0; i < 64; ++i) {  // bounded, so that new messages and releases are not kept waiting
      const unsigned e = ucp_worker_progress(worker_);
      fetch_waiting();
      if (e == 0) break;
      events += e;
    }
    const bool unfenced = send_fenced();
    tend_endpoints();
    publish();
    // Moving data: look again at once (leaving the core to any other thread that wants it) while
    // UCX made progress lately; otherwise sleep on the event fd.
    const bool busy = in_flight_ > 0 || fetching_ > 0 || !waiting_.empty();
    if (events > 0 || !posts.empty() || unfenced) progressed = Clock::now();
    if (busy && Clock::now() - progressed < kSpinFor) {
      if (events == 0) sched_yield();
      continue;
    }
    if (events > 0 || !posts.empty() || unfenced || !releases.empty() || ucp_worker_arm(worker_) == UCS_ERR_BUSY)
      continue;
    pollfd fd{efd_, POLLIN, 0};
    const timespec wait = busy ? kBusyWait : kIdleWait;
    ppoll(&fd, 1, &wait, nullptr);
  }
  shut_down();
}

// Hands what arrived, and the room that messages leaving made, to the caller's side.
void UcxTransport::publish() {
  if (arrived_.empty() && left_bytes_.empty()) return;
  {
    std::lock_guard lock(mutex_);
    for (Arrival& in : arrived_) incoming_.push_back(std::move(in));
    for (const auto& [peer, bytes] : left_bytes_) {
      if (bytes == 0) continue;
      const auto it = queued_bytes_.find(peer);
      MERIDIAN_CHECK(it != queued_bytes_.end() && it->second >= bytes, "peer ", peer, " left ", bytes, " bytes");
      if ((it->second -= bytes) == 0) queued_bytes_.erase(it);
    }
  }
  arrived_.clear();
  left_bytes_.clear();
  changed_.notify_all();
}

// nullptr when no endpoint can be made; a peer that failed is reached afresh.
UcxTransport::Endpoint* UcxTransport::endpoint(const std::string& peer) {
  if (const auto it = peers_.find(peer); it != peers_.end()) {
    if (it->second->error == UCS_OK) return it->second.get();
    close(*it->second, true);
    peers_.erase(it);
  }
  const auto address = parse_address(peer);
  if (!address) return nullptr;
  auto e = std::make_unique<Endpoint>();
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
  params.sockaddr = {address->get(), address->size};
  params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  params.err_handler = {&UcxTransport::on_endpoint_error, e.get()};
  if (ucp_ep_create(worker_, &params, &e->ep) != UCS_OK) return nullptr;
  return peers_.emplace(peer, std::move(e)).first->second.get();
}

// Accepts waiting connections and forgets peers that went away.
void UcxTransport::tend_endpoints() {
  for (ucp_conn_request_h request : conn_requests_) {
    auto e = std::make_unique<Endpoint>();
    ucp_ep_params_t params{};
    params.field_mask =
        UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
    params.conn_request = request;
    params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    params.err_handler = {&UcxTransport::on_endpoint_error, e.get()};
    if (accepted_.size() >= kMaxAccepted)
      ucp_listener_reject(listener_, request);
    else if (ucp_ep_create(worker_, &params, &e->ep) == UCS_OK)
      accepted_.push_back(std::move(e));
  }
  conn_requests_.clear();
  std::erase_if(accepted_, [&](const std::unique_ptr<Endpoint>& e) {
    if (e->error == UCS_OK) return false;
    close(*e, true);
    return true;
  });
  std::erase_if(closing_, [&](void* request) {
    if (ucp_request_check_status(request) == UCS_INPROGRESS) return false;
    ucp_request_free(request);
    return true;
  });
}

void UcxTransport::send(std::unique_ptr<Outgoing> out) {
  const Message& m = out->message;
  Endpoint* e = endpoint(m.peer);
  ucs_status_ptr_t request = UCS_STATUS_PTR(UCS_ERR_UNREACHABLE);
  if (e != nullptr) {
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
    param.cb.send = &UcxTransport::on_sent;
    param.user_data = out.get();
    param.flags = UCP_AM_SEND_FLAG_REPLY;  // the receiver learns which connection it came on
    out->seq = next_seq_++;
    request = ucp_am_send_nbx(e->ep, kAmId, m.header.data(), m.header.size(), m.data.data(), m.data.size(), &param);
  }
  if (request == nullptr || UCS_PTR_IS_ERR(request)) {
    left_bytes_[m.peer] += m.data.size();  // gone already, or lost like a message to a dead peer
  } else {
    sending_[m.peer].insert(out->seq);
    ++in_flight_;
    out.release();
  }
}

// Whether every message given to UCX before the fenced `out` to its peer has completed.
bool UcxTransport::unfenced(const Outgoing& out) const {
  const auto it = sending_.find(out.message.peer);
  return it == sending_.end() || *it->second.begin() > out.after;
}

// Sends the fenced messages that may go now, in order per peer; whether any were sent.
bool UcxTransport::send_fenced() {
  bool any = false;
  for (auto it = fenced_.begin(); it != fenced_.end();) {
    auto& queue = it->second;
    while (!queue.empty() && unfenced(*queue.front())) {
      send(std::move(queue.front()));
      queue.pop_front();
      any = true;
    }
    it = queue.empty() ? fenced_.erase(it) : std::next(it);
  }
  return any;
}

void UcxTransport::on_sent(void* request, ucs_status_t, void* user_data) {
  std::unique_ptr<Outgoing> out(static_cast<Outgoing*>(user_data));
  UcxTransport* self = out->transport;
  if (const auto it = self->sending_.find(out->message.peer); it != self->sending_.end()) {
    it->second.erase(out->seq);
    if (it->second.empty()) self->sending_.erase(it);
  }
  --out->transport->in_flight_;
  out->transport->left_bytes_[out->message.peer] += out->message.data.size();
  ucp_request_free(request);
}

void UcxTransport::on_connection(ucp_conn_request_h request, void* arg) {
  auto* self = static_cast<UcxTransport*>(arg);
  try {
    self->conn_requests_.push_back(request);
  } catch (...) {
    ucp_listener_reject(self->listener_, request);
  }
}

void UcxTransport::on_endpoint_error(void* arg, ucp_ep_h, ucs_status_t status) {
  static_cast<Endpoint*>(arg)->error = status;
}

// Called inside ucp_worker_progress: the message is kept for the caller's thread as UCX has it, or,
// when it came by rendezvous (large data), once its data is fetched: where the placer says, or
// into a buffer of ours.
ucs_status_t UcxTransport::on_message(void* arg, const void* header, std::size_t header_length, void* data,
                                      std::size_t length, const ucp_am_recv_param_t* param) {
  auto* self = static_cast<UcxTransport*>(arg);
  try {
    auto in = std::make_unique<Arrival>();
    in->owner_ = self;
    const auto* h = static_cast<const std::byte*>(header);
    if (header_length > 0) in->header_.assign(h, h + header_length);
    in->length_ = length;
    const bool refused = in->refused_ = length > self->max_data_;
    const bool rendezvous = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
    if (refused || (!rendezvous && !(param->recv_attr & UCP_AM_RECV_ATTR_FLAG_DATA))) {
      if (!refused) {
        in->own_ = self->spare_buffer(length);
        in->own_size_ = length;
        std::memcpy(in->own_.get(), data, length);
      }
      self->arrived_.push_back(std::move(*in));
      return rendezvous && refused ? UCS_ERR_MESSAGE_TRUNCATED : UCS_OK;
    }
    if (!rendezvous) {
      self->arrived_.push_back(std::move(*in));
      self->arrived_.back().held_ = data;
      return UCS_INPROGRESS;
    }
    // Without a reply endpoint (a sender that is no link), the connection is not known: such
    // messages share one window.
    in->from_ = (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) != 0 ? param->reply_ep : nullptr;
    if (self->waiting_.count(in->from_) == 0 && self->room_to_fetch(in->from_))
      self->fetch(std::move(in), data);
    else
      self->waiting_[in->from_].emplace_back(std::move(in), data);
    return UCS_INPROGRESS;
  } catch (...) {
    return UCS_OK;  // out of memory: the message is dropped
  }
}

// Fetches the rendezvous data of `in` (described by UCX's `data`): where the placer says, or into a
// buffer of ours.
void UcxTransport::fetch(std::unique_ptr<Arrival> in, void* data) {
  const std::size_t length = in->length_;
  std::optional<Place> place;
  if (placer_) place = placer_(in->header_, length);
  if (place && place->bytes.size() == length) {
    in->place_ = place->bytes.data();
    in->placed_ = std::move(place->holder);
  } else {
    in->own_ = spare_buffer(length);
    in->own_size_ = length;
  }
  std::size_t& from = fetching_from_[in->from_];  // before the fetch starts: nothing throws after
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.cb.recv_am = &UcxTransport::on_fetched;
  param.user_data = in.get();
  void* to = in->place_ != nullptr ? static_cast<void*>(in->place_) : in->own_.get();
  const ucs_status_ptr_t request = ucp_am_recv_data_nbx(worker_, data, to, length, &param);
  if (request != nullptr && !UCS_PTR_IS_ERR(request)) {
    ++fetching_;
    ++from;
    in.release();  // on_fetched takes it
    return;
  }
  if (from == 0) fetching_from_.erase(in->from_);
  if (request == nullptr) arrived_.push_back(std::move(*in));  // fetched already
}

bool UcxTransport::room_to_fetch(ucp_ep_h from) const {
  const auto it = fetching_from_.find(from);
  return it == fetching_from_.end() || it->second < kMaxFetches;
}

// Starts the fetches that waited for room.
void UcxTransport::fetch_waiting() {
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    auto& [from, queue] = *it;
    while (!queue.empty() && room_to_fetch(from)) {
      auto [in, data] = std::move(queue.front());
      queue.pop_front();
      try {
        fetch(std::move(in), data);
      } catch (...) {
        ucp_am_data_release(worker_, data);  // out of memory: the message is dropped
      }
    }
    it = queue.empty() ? waiting_.erase(it) : std::next(it);
  }
}

void UcxTransport::on_fetched(void* request, ucs_status_t status, std::size_t length, void* user_data) {
  std::unique_ptr<Arrival> in(static_cast<Arrival*>(user_data));
  ucp_request_free(request);
  UcxTransport* self = in->owner_;
  --self->fetching_;
  if (const auto it = self->fetching_from_.find(in->from_); it != self->fetching_from_.end() && --it->second == 0)
    self->fetching_from_.erase(it);
  if (status != UCS_OK) return;  // the sender went away meanwhile
  in->length_ = length;
  try {
    in->owner_->arrived_.push_back(std::move(*in));
  } catch (...) {
  }
}

}  // namespace meridian
