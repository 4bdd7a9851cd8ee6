#include "intrasite/comm/turn_group.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

namespace meridian {

namespace {

std::span<const std::byte> bytes_of(std::span<const float> values) { return std::as_bytes(values); }

// Rank r's `count` floats of a deposit, from element `offset`.
std::span<const float> floats_of(const std::vector<std::byte>& deposit, std::size_t offset, std::size_t count) {
  MERIDIAN_CHECK(deposit.size() >= (offset + count) * sizeof(float), "a deposit of ", deposit.size(), " bytes read at ",
                 offset, "+", count, " floats");
  return {reinterpret_cast<const float*>(deposit.data()) + offset, count};
}

// The turn often comes back within microseconds (the other rank only combines a collective): a
// short spin spares a sleep and a wake-up, most of a hand-over's cost; then it sleeps.
void await_turn(std::binary_semaphore& turn) {
  for (int i = 0; i < 4000; ++i)
    if (turn.try_acquire()) return;
  turn.acquire();
}

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

TurnGroup::TurnGroup(int size)
    : size_(size),
      states_(static_cast<std::size_t>(size), State::Idle),
      deposits_(static_cast<std::size_t>(size)),
      failed_(static_cast<std::size_t>(size), 0) {
  MERIDIAN_CHECK(size >= 1, "a turn group of ", size, " ranks");
  for (int r = 0; r < size; ++r) {
    ranks_.push_back(std::make_unique<Rank>(*this, r));
    turns_.push_back(std::make_unique<std::binary_semaphore>(0));
  }
  for (int r = 0; r < size; ++r) threads_.emplace_back([this, r] { worker(r); });
}

TurnGroup::~TurnGroup() {
  stopping_ = true;
  for (auto& turn : turns_) turn->release();
  for (auto& t : threads_) t.join();
}

void TurnGroup::run(const std::function<void(Communicator&)>& call) {
  MERIDIAN_CHECK(call_ == nullptr, "a turn group's run() while one is under way");
  call_ = &call;
  std::fill(states_.begin(), states_.end(), State::Running);
  first_error_ = nullptr;
  wake(0);
  await_turn(ended_);
  call_ = nullptr;
  if (first_error_) std::rethrow_exception(std::exchange(first_error_, nullptr));
}

void TurnGroup::worker(int rank) {
  const auto r = static_cast<std::size_t>(rank);
  while (true) {
    await_turn(*turns_[r]);
    if (stopping_) return;
    try {
      (*call_)(*ranks_[r]);
    } catch (...) {
      if (!first_error_) first_error_ = std::current_exception();
    }
    states_[r] = State::Done;
    wake(pass_turn(rank));
  }
}

std::vector<std::vector<std::byte>> TurnGroup::exchange(int rank, std::span<const std::byte> mine) {
  const auto r = static_cast<std::size_t>(rank);
  MERIDIAN_CHECK(states_[r] == State::Running && call_ != nullptr, "rank ", rank,
                 " entered a collective outside a run");
  deposits_[r].assign(mine.begin(), mine.end());
  states_[r] = State::Waiting;
  const int next = pass_turn(rank);
  if (next != rank) {
    wake(next);
    await_turn(*turns_[r]);
  }
  if (std::exchange(failed_[r], 0) != 0)
    throw make_error(ErrorKind::Peer, "turn group: rank ", rank, " waited in a collective another rank had left");
  return results_;
}

void TurnGroup::wake(int next) {
  if (next < 0)
    ended_.release();
  else
    turns_[static_cast<std::size_t>(next)]->release();
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
