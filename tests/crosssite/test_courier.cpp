// Courier: transfer ids per attempt, and what it tells about senders the link does not list (the
// vouching that lets a member that joined since in, and its bound against forged names).
#include <doctest/doctest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "crosssite/round/courier.hpp"
#include "tests/support/copying_link.hpp"

using namespace meridian;

namespace {

class NullLink : public testing::CopyingLink {
 public:
  using CopyingLink::send;
  std::string address() const override { return "tcp://10.0.0.1:1"; }
  void send(const std::string&, std::uint64_t, std::uint16_t, std::span<const std::byte>) override {}
  std::size_t chunk_bytes() const override { return 1 << 20; }
  std::optional<Received> receive(std::chrono::milliseconds) override { return std::nullopt; }
  void recycle(std::vector<std::byte>) override {}
  Counters counters() const override { return {}; }
  std::map<std::string, std::uint64_t> take_refusals() override { return std::exchange(refusals, {}); }
  std::map<std::string, std::uint64_t> refusals;
};

}  // namespace

TEST_CASE("courier: a sender not listed is looked up once per address, at most 10 reads a second") {
  NullLink link;
  std::map<std::string, std::string> members;  // address -> site, as the control plane has them
  std::map<std::string, std::string> known;    // as this site last read them
  Courier courier(link, [&](const std::string& address) {
    const auto it = known.find(address);
    return it == known.end() ? nullptr : &it->second;
  });
  int reads = 0;
  const auto read_members = [&] { ++reads, known = members; };

  members.emplace("tcp://10.0.0.2:1", "b");  // joined after this site's last read
  CHECK(courier.vouch("tcp://10.0.0.2:1", 0.0, read_members));
  CHECK(reads == 1);
  CHECK(courier.vouch("tcp://10.0.0.2:1", 0.1, read_members));  // known now: no read
  CHECK(reads == 1);

  // A flood of forged names: one read each until the second's budget is spent, then none.
  int admitted = 0;
  for (int i = 0; i < 100; ++i) admitted += courier.vouch(std::string("tcp://6.6.6.6:").append(std::to_string(i)), 0.2, read_members);
  CHECK(admitted == 0);
  CHECK(reads == Courier::kStrangerReads);
  CHECK_FALSE(courier.vouch("tcp://6.6.6.6:0", 5.0, read_members));  // asked about already: no read
  CHECK(reads == Courier::kStrangerReads);
  members.emplace("tcp://10.0.0.3:1", "c");
  CHECK(courier.vouch("tcp://10.0.0.3:1", 5.0, read_members));  // a new second, a new budget
  CHECK(reads == Courier::kStrangerReads + 1);
}

TEST_CASE("courier: refused senders become one link_refused event each, the first at once, then every 10 s") {
  NullLink link;
  Courier courier(link, [](const std::string&) { return nullptr; });
  CrossSiteEvents events;
  courier.report_refusals(100.0, events);
  CHECK(events.empty());  // nothing refused: nothing said, and the next refusal is said at once
  link.refusals = {{"tcp://6.6.6.6:1", 3}, {"tcp://6.6.6.6:2", 1}};
  courier.report_refusals(100.5, events);
  REQUIRE(events.size() == 2);
  CHECK(events[0].kind == "link_refused");
  CHECK(events[0].site == "tcp://6.6.6.6:1");
  CHECK(events[0].number == 3);
  link.refusals = {{"tcp://6.6.6.6:1", 7}};
  courier.report_refusals(105.0, events);
  CHECK(events.size() == 2);  // within 10 s of the last report: kept for the next
  courier.report_refusals(110.5, events);
  REQUIRE(events.size() == 3);
  CHECK(events[2].number == 7);
}
