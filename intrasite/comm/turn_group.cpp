#include "intrasite/comm/turn_group.hpp"

#include <cxxabi.h>
#include <sys/mman.h>
#include <ucontext.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <utility>

#if defined(__SANITIZE_ADDRESS__)
#define MERIDIAN_ASAN_FIBERS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MERIDIAN_ASAN_FIBERS 1
#endif
#endif
#ifdef MERIDIAN_ASAN_FIBERS
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

namespace meridian {

namespace {

std::span<const std::byte> bytes_of(std::span<const float> values) { return std::as_bytes(values); }

// Rank r's `count` floats of a deposit, from element `offset`.
std::span<const float> floats_of(const std::vector<std::byte>& deposit, std::size_t offset, std::size_t count) {
  MERIDIAN_CHECK(deposit.size() >= (offset + count) * sizeof(float), "a deposit of ", deposit.size(), " bytes read at ",
                 offset, "+", count, " floats");
  return {reinterpret_cast<const float*>(deposit.data()) + offset, count};
}

// A rank's stack: as large as a thread's, committed only as it is touched, with a guard page below
// it so that an overflow faults rather than writes over the next one.
constexpr std::size_t kStackBytes = std::size_t{8} << 20;
constexpr std::size_t kGuardBytes = 4096;

}  // namespace

// Rank `rank`'s view: every collective is one exchange of every rank's bytes, combined here in
// rank order, so sums are the same bits on every rank and in every run.
class TurnGroup::Rank final : public Communicator {
 public:
  Rank(TurnGroup& group, int rank) : group_(group), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return group_.size(); }

  void allreduce(std::span<float> data, ReduceOp op) override {
    const auto all = group_.exchange(rank_, bytes_of(data));
    sum_into(data, all, 0);
    if (op == ReduceOp::Mean) scale_to_mean(data, size());
  }
  void broadcast(std::span<std::byte> data, int root) override {
    MERIDIAN_CHECK(root >= 0 && root < size(), "root=", root, " size=", size());
    const auto all =
        group_.exchange(rank_, rank_ == root ? std::span<const std::byte>(data) : std::span<const std::byte>());
    const auto& from = all[static_cast<std::size_t>(root)];
    MERIDIAN_CHECK(from.size() == data.size(), "a broadcast of ", from.size(), " bytes into ", data.size());
    std::copy(from.begin(), from.end(), data.begin());
  }
  void barrier() override { group_.exchange(rank_, {}); }
  void reduce_scatter(std::span<float> data, std::span<const std::size_t> counts, ReduceOp op) override {
    check_parts(data.size(), counts, size());
    const auto all = group_.exchange(rank_, bytes_of(data));
    const std::size_t offset = part_offset(counts, rank_);
    auto part = data.subspan(offset, counts[static_cast<std::size_t>(rank_)]);
    sum_into(part, all, offset);
    if (op == ReduceOp::Mean) scale_to_mean(part, size());
  }
  void all_gather(std::span<float> data, std::span<const std::size_t> counts) override {
    check_parts(data.size(), counts, size());
    const std::size_t offset = part_offset(counts, rank_);
    const auto all = group_.exchange(rank_, bytes_of(data.subspan(offset, counts[static_cast<std::size_t>(rank_)])));
    for (int r = 0; r < size(); ++r) {
      const auto part = floats_of(all[static_cast<std::size_t>(r)], 0, counts[static_cast<std::size_t>(r)]);
      std::copy(part.begin(), part.end(), data.begin() + static_cast<std::ptrdiff_t>(part_offset(counts, r)));
    }
  }
  void ring_shift(std::span<const float> out, std::span<float> in) override {
    const auto all = group_.exchange(rank_, bytes_of(out));
    const auto& next = all[static_cast<std::size_t>((rank_ + 1) % size())];
    MERIDIAN_CHECK(next.size() == in.size_bytes(), "a ring shift of ", next.size(), " bytes into ", in.size_bytes());
    if (!next.empty()) std::memcpy(in.data(), next.data(), next.size());
  }
  std::vector<std::vector<std::byte>> gather(std::span<const std::byte> mine, int root) override {
    MERIDIAN_CHECK(root >= 0 && root < size(), "root=", root, " size=", size());
    auto all = group_.exchange(rank_, mine);
    if (rank_ != root) all.clear();
    return all;
  }
  std::vector<std::byte> scatter(std::span<const std::vector<std::byte>> parts, int root) override {
    MERIDIAN_CHECK(root >= 0 && root < size() && (rank_ != root || parts.size() == static_cast<std::size_t>(size())),
                   "root=", root, " size=", size(), " parts=", parts.size());
    // The root's parts, each behind its size.
    std::vector<std::byte> bundle;
    if (rank_ == root)
      for (const auto& p : parts) {
        const std::uint64_t n = p.size();
        const auto* b = reinterpret_cast<const std::byte*>(&n);
        bundle.insert(bundle.end(), b, b + sizeof n);
        bundle.insert(bundle.end(), p.begin(), p.end());
      }
    const auto all = group_.exchange(rank_, bundle);
    const auto& from = all[static_cast<std::size_t>(root)];
    std::size_t at = 0;
    for (int r = 0;; ++r) {
      std::uint64_t n = 0;
      MERIDIAN_CHECK(at + sizeof n <= from.size(), "a scatter's bundle of ", from.size(), " bytes ends at part ", r);
      std::memcpy(&n, from.data() + at, sizeof n);
      at += sizeof n;
      if (r == rank_)
        return {from.begin() + static_cast<std::ptrdiff_t>(at), from.begin() + static_cast<std::ptrdiff_t>(at + n)};
      at += n;
    }
  }

 private:
  // data[i] = the sum over ranks, in rank order, of their element offset + i.
  void sum_into(std::span<float> data, const std::vector<std::vector<std::byte>>& all, std::size_t offset) const {
    std::fill(data.begin(), data.end(), 0.0f);
    for (const auto& deposit : all) {
      const auto values = floats_of(deposit, offset, data.size());
      for (std::size_t i = 0; i < data.size(); ++i) data[i] += values[i];
    }
  }

  TurnGroup& group_;
  int rank_;
};

struct TurnGroup::Fiber {
  // The C++ runtime's per-thread record of the exceptions being handled (libstdc++'s and
  // libc++abi's __cxa_eh_globals on x86-64): each fiber keeps its own, so a rank that enters a
  // collective inside a catch block finds its exception there again, whatever the others caught
  // and rethrew meanwhile.
  struct Exceptions {
    void* caught = nullptr;
    unsigned int uncaught = 0;
  };
  static Exceptions& thread_exceptions() { return *reinterpret_cast<Exceptions*>(abi::__cxa_get_globals()); }

  ucontext_t context{};
  std::byte* stack = nullptr;  // null for run()'s caller, which runs on its thread's
  Exceptions exceptions;
  void* fake_stack = nullptr;  // AddressSanitizer's, while switched out
  const void* bottom = nullptr;
  std::size_t bytes = 0;

  Fiber() = default;
  explicit Fiber(bool own_stack) {
    if (!own_stack) return;
    void* mapped = ::mmap(nullptr, kStackBytes + kGuardBytes, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    MERIDIAN_CHECK(mapped != MAP_FAILED, "a turn group's stack of ", kStackBytes, " bytes: ", std::strerror(errno));
    MERIDIAN_CHECK(::mprotect(mapped, kGuardBytes, PROT_NONE) == 0, "a stack's guard page: ", std::strerror(errno));
    stack = static_cast<std::byte*>(mapped) + kGuardBytes;
    bottom = stack;
    bytes = kStackBytes;
  }
  ~Fiber() {
    if (stack != nullptr) ::munmap(stack - kGuardBytes, kStackBytes + kGuardBytes);
  }
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;
};

TurnGroup::TurnGroup(int size)
    : size_(size),
      states_(static_cast<std::size_t>(size), State::Idle),
      deposits_(static_cast<std::size_t>(size)),
      failed_(static_cast<std::size_t>(size), 0),
      caller_(std::make_unique<Fiber>()) {
  MERIDIAN_CHECK(size >= 1, "a turn group of ", size, " ranks");
  for (int r = 0; r < size; ++r) {
    ranks_.push_back(std::make_unique<Rank>(*this, r));
    fibers_.push_back(std::make_unique<Fiber>(true));
  }
}

TurnGroup::~TurnGroup() = default;

void TurnGroup::run(const std::function<void(Communicator&)>& call) {
  MERIDIAN_CHECK(call_ == nullptr && running_ == -1, "a turn group's run() while one is under way");
  call_ = &call;
  std::fill(states_.begin(), states_.end(), State::Running);
  first_error_ = nullptr;
  // Every rank starts afresh: a rank's fiber ends with its call, wherever the turn went then.
  const auto self = reinterpret_cast<std::uintptr_t>(this);
  for (auto& f : fibers_) {
    MERIDIAN_CHECK(::getcontext(&f->context) == 0, "getcontext: ", std::strerror(errno));
    f->context.uc_stack.ss_sp = f->stack;
    f->context.uc_stack.ss_size = kStackBytes;
    f->context.uc_link = nullptr;
    f->exceptions = {};
#ifdef MERIDIAN_ASAN_FIBERS
    // The last run's frames on it never returned: their red zones would poison this run's.
    __asan_unpoison_memory_region(f->stack, kStackBytes);
#endif
    ::makecontext(&f->context, reinterpret_cast<void (*)()>(&TurnGroup::start), 2, static_cast<unsigned>(self >> 32),
                  static_cast<unsigned>(self & 0xffffffffu));
  }
  switch_to(0);
  call_ = nullptr;
  if (first_error_) std::rethrow_exception(std::exchange(first_error_, nullptr));
}

void TurnGroup::start(unsigned high, unsigned low) {
  auto& group = *reinterpret_cast<TurnGroup*>((static_cast<std::uintptr_t>(high) << 32) | low);
  const int rank = group.running_;
  const auto r = static_cast<std::size_t>(rank);
  group.arrived(*group.fibers_[r]);
  try {
    (*group.call_)(*group.ranks_[r]);
  } catch (...) {
    if (!group.first_error_) group.first_error_ = std::current_exception();
  }
  group.states_[r] = State::Done;
  group.leave_to(group.pass_turn(rank));
}

void TurnGroup::switch_to(int next) {
  Fiber& from = fiber(running_);
  Fiber& to = fiber(next);
  previous_ = std::exchange(running_, next);
  from.exceptions = std::exchange(Fiber::thread_exceptions(), to.exceptions);
#ifdef MERIDIAN_ASAN_FIBERS
  __sanitizer_start_switch_fiber(&from.fake_stack, to.bottom, to.bytes);
#endif
  MERIDIAN_CHECK(::swapcontext(&from.context, &to.context) == 0, "swapcontext: ", std::strerror(errno));
  arrived(from);
}

void TurnGroup::leave_to(int next) {
  Fiber& to = fiber(next);
  previous_ = std::exchange(running_, next);
  Fiber::thread_exceptions() = to.exceptions;
#ifdef MERIDIAN_ASAN_FIBERS
  __sanitizer_start_switch_fiber(nullptr, to.bottom, to.bytes);  // this fiber's fake stack goes
#endif
  ::setcontext(&to.context);
  MERIDIAN_CHECK(false, "setcontext returned: ", std::strerror(errno));
  std::abort();
}

void TurnGroup::arrived([[maybe_unused]] Fiber& here) {
#ifdef MERIDIAN_ASAN_FIBERS
  // The stack switched from is run()'s caller's the first time: learn where it lies.
  Fiber& from = fiber(previous_);
  __sanitizer_finish_switch_fiber(here.fake_stack, &from.bottom, &from.bytes);
#endif
}

std::vector<std::vector<std::byte>> TurnGroup::exchange(int rank, std::span<const std::byte> mine) {
  const auto r = static_cast<std::size_t>(rank);
  MERIDIAN_CHECK(states_[r] == State::Running && call_ != nullptr && running_ == rank, "rank ", rank,
                 " entered a collective outside its turn");
  deposits_[r].assign(mine.begin(), mine.end());
  states_[r] = State::Waiting;
  const int next = pass_turn(rank);
  if (next != rank) switch_to(next);
  if (std::exchange(failed_[r], 0) != 0)
    throw make_error(ErrorKind::Peer, "turn group: rank ", rank, " waited in a collective another rank had left");
  return results_;
}

int TurnGroup::pass_turn(int from) {
  for (int i = 1; i <= size_; ++i) {
    const int next = (from + i) % size_;
    if (states_[static_cast<std::size_t>(next)] == State::Running) return next;
  }
  // Nobody can run: the collective under way completes (or fails, a rank gone), or the run ends.
  const bool gone = std::any_of(states_.begin(), states_.end(), [](State s) { return s == State::Done; });
  if (!gone) results_ = deposits_;
  int first = -1;
  for (int r = size_ - 1; r >= 0; --r) {
    const auto i = static_cast<std::size_t>(r);
    if (states_[i] != State::Waiting) continue;
    states_[i] = State::Running;
    failed_[i] = gone ? 1 : 0;
    first = r;  // the lowest waiting rank runs first
  }
  return first;
}

}  // namespace meridian
