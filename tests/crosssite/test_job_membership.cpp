// JobMembership's reading of the members: with CURVE, the job's list of keys, not the control
// plane, says who a site is (issue 17).
#include <doctest/doctest.h>

#include <chrono>
#include <memory>
#include <string>

#include "core/util/clock.hpp"
#include "crosssite/control/memory_control_plane.hpp"
#include "crosssite/round/job_membership.hpp"
#include "crosssite/round/records.hpp"
#include "transport/link/curve.hpp"

namespace meridian {
namespace {

using namespace std::chrono_literals;

struct NeverLost final : KeptLease {
  bool lost() const override { return false; }
};

struct Fixture {
  ManualClock clock;
  MemoryStore store{clock};
  MemoryControlPlane control{store, clock, 1};
  RoundKeys keys{"job"};
  CurveKeypair a = make_curve_keypair(), b = make_curve_keypair(), other = make_curve_keypair();

  JobMembership member_a(std::map<std::string, std::string> link_keys) {
    JobMembershipOptions o;
    o.job = "job";
    o.site = "a";
    o.sites = {"a", "b"};
    o.keep_lease = [](std::int64_t) { return std::make_unique<NeverLost>(); };
    o.incarnation = 1;
    o.link_keys = std::move(link_keys);
    return JobMembership(std::move(o), control, curve_address("tcp://10.0.0.1:7100", a.public_key));
  }
  void write_b(const std::string& address) { control.put(keys.member("b"), encode(MemberRecord{"b", address, 7, false})); }
};

TEST_CASE("job membership with CURVE: a record whose address names another key than its site's is not believed") {
  Fixture f;
  JobMembership m = f.member_a({{"a", f.a.public_key}, {"b", f.b.public_key}});
  m.register_site();
  CrossSiteEvents events;

  f.write_b(curve_address("tcp://10.0.0.66:7100", f.other.public_key));  // someone else's key
  m.refresh(events);
  CHECK(m.member("a"));
  CHECK_FALSE(m.member("b"));
  CHECK(m.site_at(curve_address("tcp://10.0.0.66:7100", f.other.public_key)) == nullptr);

  f.write_b("tcp://10.0.0.66:7100");  // no key at all
  m.refresh(events);
  CHECK_FALSE(m.member("b"));

  const std::string good = curve_address("tcp://10.0.0.2:7100", f.b.public_key);
  f.write_b(good);
  const auto change = m.refresh(events);
  REQUIRE(m.member("b"));
  CHECK(*m.site_at(good) == "b");
  CHECK(change.new_addresses);
  CHECK(events.empty());  // its own record stood throughout
}

TEST_CASE("job membership without CURVE: any address a record gives is the site's") {
  Fixture f;
  JobMembership m = f.member_a({});
  m.register_site();
  CrossSiteEvents events;
  f.write_b("tcp://10.0.0.2:7100");
  m.refresh(events);
  CHECK(m.member("b"));
}

}  // namespace
TEST_CASE("job membership: a draining site's record says it announces nothing new, a paused one's too, until taken back") {
  Fixture f;
  JobMembership m = f.member_a({});
  m.register_site();
  const auto record = [&] { return decode_member(*f.control.get(f.keys.member("a"))); };
  CHECK_FALSE(record().paused);
  m.set_announcing(false);  // draining
  m.maintain();
  CHECK(record().paused);
  m.set_announcing(true);
  m.maintain();
  CHECK_FALSE(record().paused);
  m.set_proposing(false);  // pause-outer
  m.maintain();
  CHECK(record().paused);
}

}  // namespace meridian
