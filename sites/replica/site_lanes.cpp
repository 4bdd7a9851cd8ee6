#include "sites/replica/site_lanes.hpp"

#include <algorithm>
#include <cstring>
#include <set>
#include <span>
#include <type_traits>

#include "core/util/error.hpp"
#include "transport/link/stripes.hpp"

namespace meridian {
namespace {

// Bytes, not a wire format: every member runs the same binary on the same machine type.
class Writer {
 public:
  template <class T>
  void put(const T& v) {
    const auto at = out_.size();
    out_.resize(at + sizeof v);
    std::memcpy(out_.data() + at, &v, sizeof v);
  }
  void put(const std::string& s) {
    put(static_cast<std::uint64_t>(s.size()));
    bytes(std::as_bytes(std::span(s.data(), s.size())));
  }
  void bytes(std::span<const std::byte> b) { out_.insert(out_.end(), b.begin(), b.end()); }
  template <class T>
  void operator()(const T& v) {
    put(v);
  }
  std::vector<std::byte>& out() { return out_; }

 private:
  std::vector<std::byte> out_;
};

class Reader {
 public:
  explicit Reader(std::span<const std::byte> in) : in_(in) {}
  template <class T>
  T get() {
    T v{};
    MERIDIAN_CHECK(at_ + sizeof v <= in_.size(), "lane message: ", in_.size(), " bytes, read past ", at_);
    std::memcpy(&v, in_.data() + at_, sizeof v);
    at_ += sizeof v;
    return v;
  }
  std::span<const std::byte> bytes(std::size_t n) {
    MERIDIAN_CHECK(at_ + n <= in_.size(), "lane message: ", in_.size(), " bytes, read past ", at_ + n);
    const auto s = in_.subspan(at_, n);
    at_ += n;
    return s;
  }
  std::string text() {
    const auto b = bytes(get<std::uint64_t>());
    return {reinterpret_cast<const char*>(b.data()), b.size()};
  }
  template <class T>
  void operator()(T& v) {
    if constexpr (std::is_same_v<T, std::string>)
      v = text();
    else
      v = get<T>();
  }

 private:
  std::span<const std::byte> in_;
  std::size_t at_ = 0;
};

// An order's fields, in one list for both ways: `io` is a Writer or a Reader.
template <class Io, class Order>
void order_fields(Io& io, Order& o) {
  io(o.lane);
  io(o.to);
  io(o.transfer_id);
  io(o.tag);
  io(o.index);
  io(o.count);
  io(o.payload_hash);
  io(o.payload_bytes);
  io(o.part_unit);
}

// One member's bytes to every member: the size, then the bytes when there are any.
void broadcast_bytes(Communicator& group, std::vector<std::byte>& bytes, int root) {
  std::uint64_t size = bytes.size();
  group.broadcast(std::as_writable_bytes(std::span(&size, 1)), root);
  bytes.resize(size);
  if (size > 0) group.broadcast(bytes, root);
}

// What a member hands its leader of a stripe its lane received: the bytes, or for a part of a
// delta this replica's state holds, which stays here, its report; nothing for a part it refused
// (false).
constexpr std::uint8_t kStripeBytes = 0, kPartReport = 1;

bool write_stripe(Writer& w, const std::string& from, const std::vector<std::byte>& bytes,
                  const std::map<std::string, std::string>& owner_of_lane, KeptParts& kept) {
  std::optional<Stripe> stripe;
  try {
    stripe = read_stripe(bytes);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::Peer) throw;  // the leader's link refuses it, counted there
  }
  if (!stripe || !stripe->part) {
    w.put(kStripeBytes);
    w.put(from);
    w.put(static_cast<std::uint64_t>(bytes.size()));
    w.bytes(bytes);
    return true;
  }
  const auto owner = owner_of_lane.find(from);
  auto report = kept.keep(owner == owner_of_lane.end() ? from : owner->second, *stripe);
  if (!report) return false;  // not this replica's part: its sender's protocol asks for the delta whole
  w.put(kPartReport);
  w.put(from);
  w.put(stripe->transfer_id);
  w.put(stripe->tag);
  w.put(stripe->index);
  w.put(stripe->count);
  w.put(static_cast<std::uint64_t>(report->size()));
  w.bytes(*report);
  return true;
}

}  // namespace

std::vector<std::string> SiteLanes::open(Communicator& group, bool leader) {
  if (!leader && !lane_) {
    auto site_of = [this](const std::string& address) -> const std::string* {
      const auto it = site_of_lane_.find(address);
      return it == site_of_lane_.end() ? nullptr : &it->second;
    };
    lane_ = std::make_unique<Lane>(make_link_(site_of), stripe_tag_, cut_part_);
  }
  std::string address = lane_ && !leader ? lane_->address() : std::string();
  const auto parts = group.gather(std::as_bytes(std::span(address.data(), address.size())), 0);
  std::vector<std::string> lanes;
  for (std::size_t r = 1; r < parts.size(); ++r)
    lanes.emplace_back(reinterpret_cast<const char*>(parts[r].data()), parts[r].size());
  peers_changed_ = true;  // a member that came since has none of them
  return lanes;
}

void SiteLanes::set_peers(std::map<std::string, std::vector<std::string>> lanes_by_site, std::optional<double> wan_start) {
  peers_changed_ = peers_changed_ || lanes_by_site != peers_ || wan_start != wan_start_;
  peers_ = std::move(lanes_by_site);
  wan_start_ = wan_start;
}

void SiteLanes::sync(Communicator& group, bool leader) {
  if (group.size() < 2) return;
  std::vector<std::byte> message;
  if (leader) {
    Writer w;
    const auto orders = striped_ ? striped_->take_orders() : std::vector<StripeOrder>{};
    w.put(static_cast<std::uint64_t>(orders.size()));
    for (const auto& o : orders) {
      order_fields(w, o);
    }
    w.put(static_cast<std::uint8_t>(peers_changed_));
    if (peers_changed_) {
      w.put(wan_start_.value_or(-1.0));
      w.put(static_cast<std::uint64_t>(peers_.size()));
      for (const auto& [site, lanes] : peers_) {
        w.put(site);
        w.put(static_cast<std::uint64_t>(lanes.size()));
        for (const auto& l : lanes) w.put(l);
      }
      peers_changed_ = false;
    }
    // Nothing to say (no order, no change) is said in the size alone.
    if (!orders.empty() || w.out().size() > sizeof(std::uint64_t) + 1) message = std::move(w.out());
  }
  broadcast_bytes(group, message, 0);
  if (!leader && !message.empty()) carry(message, group.rank());
  gather_stripes(group, leader);
}

void SiteLanes::carry(const std::vector<std::byte>& message, int rank) {
  Reader r(message);
  const auto orders = r.get<std::uint64_t>();
  for (std::uint64_t i = 0; i < orders; ++i) {
    StripeOrder o;
    order_fields(r, o);
    if (o.lane == rank) lane_->carry(o);
  }
  if (r.get<std::uint8_t>() == 0) return;
  const double start = r.get<double>();
  if (start >= 0 && on_start_) on_start_(start);
  std::set<std::string> addresses;
  site_of_lane_.clear();
  owner_of_lane_.clear();
  const auto sites = r.get<std::uint64_t>();
  for (std::uint64_t s = 0; s < sites; ++s) {
    const auto site = r.text();
    const auto n = r.get<std::uint64_t>();
    std::string owner;  // each site's list begins with its own link's address
    for (std::uint64_t l = 0; l < n; ++l) {
      const auto address = r.text();
      if (l == 0) owner = address;
      site_of_lane_[address] = site;
      owner_of_lane_[address] = owner;
      addresses.insert(address);
    }
  }
  lane_->set_peers(std::move(addresses));
}

void SiteLanes::gather_stripes(Communicator& group, bool leader) {
  // Each member's part: its lane's address and what it sent so far (the site's WAN bytes), then
  // its stripes.
  Writer w;
  if (lane_ && leader) {
    // A member that became the leader keeps its lane: what peers that have not read the new list
    // yet send it is its own to put together.
    for (auto& [from, bytes] : lane_->take_stripes())
      if (striped_) striped_->feed(from, bytes);
  } else if (lane_) {
    const auto stripes = lane_->take_stripes();
    w.put(lane_->address());
    w.put(lane_->figures().bytes_sent);
    Writer entries;
    std::uint64_t written = 0;
    for (const auto& [from, bytes] : stripes)
      written += write_stripe(entries, from, bytes, owner_of_lane_, kept_) ? 1 : 0;
    w.put(written);
    w.bytes(entries.out());
  }
  const auto parts = group.gather(w.out(), 0);
  if (!leader) return;
  for (const auto& part : parts) {
    if (part.empty()) continue;
    Reader in(part);
    // Each lane's count is its process's own: a lane that came back (another address) starts
    // again from zero, and what the site sent never shrinks.
    const auto address = in.text();
    const auto sent = in.get<std::uint64_t>();
    auto& seen = lane_sent_[address];
    lanes_sent_ += sent - std::min(seen, sent);
    seen = sent;
    const auto n = in.get<std::uint64_t>();
    for (std::uint64_t i = 0; i < n; ++i) {
      const auto kind = in.get<std::uint8_t>();
      const auto lane = in.text();
      if (kind == kStripeBytes) {
        const auto bytes = in.bytes(in.get<std::uint64_t>());
        if (striped_) striped_->feed(lane, bytes);
        continue;
      }
      const auto id = in.get<std::uint64_t>();
      const auto tag = in.get<std::uint16_t>();
      const auto index = in.get<int>(), count = in.get<int>();
      const auto report = in.bytes(in.get<std::uint64_t>());
      if (striped_) striped_->feed_report(lane, id, tag, index, count, {report.begin(), report.end()});
    }
  }
}

void SiteLanes::hold(std::vector<std::byte> payload) {
  if (lane_) lane_->hold(std::make_shared<const std::vector<std::byte>>(std::move(payload)));
}

nlohmann::json SiteLanes::figures() const {
  if (!lane_) return nlohmann::json::object();
  const auto& f = lane_->figures();
  return {{"address", lane_->address()},        {"stripes_sent", f.stripes_sent},
          {"bytes_sent", f.bytes_sent},         {"stripes_received", f.stripes_received},
          {"bytes_received", f.bytes_received}, {"missing", f.missing},
          {"parts_refused", kept_.refused()}};
}

}  // namespace meridian
