// [wan]: the emulated WAN's profiles, links and fault schedule.
#include <doctest/doctest.h>

#include "core/config/wan_profiles.hpp"
#include "tests/support/config_files.hpp"

using namespace meridian;
using namespace meridian::testing;
namespace fs = std::filesystem;

TEST_CASE("[wan]: profiles, per-pair links and the fault schedule") {
  TempDir dir("config");
  const std::string sites = "[[site]]\nname = \"us\"\n[[site]]\nname = \"eu\"\n[[site]]\nname = \"ap\"\n";
  const JobConfig c = load_ok(
      write(dir / "job.toml",
            kData + sites +
                "[wan]\nprofile = \"transatlantic\"\nlatency_ms = 50\njitter = \"uniform\"\n"
                "[[wan.link]]\nsites = [\"us\", \"ap\"]\nprofile = \"transpacific\"\nbandwidth_mbps = 100\n"
                "[[wan.link]]\nsites = [\"eu\", \"ap\"]\nloss = 0\n"
                "[[wan.fault]]\nkind = \"partition\"\nsites = [\"ap\"]\nfrom_s = 30\nto_s = 60.5\n"
                "[[wan.fault]]\nkind = \"bandwidth\"\nsites = [\"us\", \"eu\"]\npair = true\nfrom_s = 0\nto_s = 10\n"
                "bandwidth_mbps = 10\n"));
  const WanLink atlantic = *find_wan_profile("transatlantic");
  const WanLink pacific = *find_wan_profile("transpacific");
  CHECK(c.wan.profile == "transatlantic");
  CHECK(c.wan.link ==
        WanLink{50, atlantic.jitter_ms, WanLink::Jitter::Uniform, atlantic.bandwidth_mbps, atlantic.loss});
  CHECK(c.wan.emulated());
  // A pair's keys go over its profile, else over the default link; the pair reads both ways.
  const WanLink us_ap{pacific.latency_ms, pacific.jitter_ms, pacific.jitter, 100, pacific.loss};
  CHECK(wan_link(c, "us", "ap") == us_ap);
  CHECK(wan_link(c, "ap", "us") == us_ap);
  WanLink eu_ap = c.wan.link;
  eu_ap.loss = 0;
  CHECK(wan_link(c, "ap", "eu") == eu_ap);
  CHECK(wan_link(c, "us", "eu") == c.wan.link);
  REQUIRE(c.wan.faults.size() == 2);
  using Fault = JobConfig::Wan::Fault;
  CHECK(c.wan.faults[0] == Fault{Fault::Kind::Partition, {"ap"}, false, 30, 60.5, 0, 0});
  CHECK(c.wan.faults[1] == Fault{Fault::Kind::Bandwidth, {"us", "eu"}, true, 0, 10, 10, 0});

  // The keys of before: a [wan] of top-level values is the default link, and only they make it emulated.
  const JobConfig plain = load_ok(write(dir / "job.toml", kData + "[wan]\nlatency_ms = 5\nbandwidth_mbps = 100\n"));
  CHECK(plain.wan.link == WanLink{.latency_ms = 5, .bandwidth_mbps = 100});
  CHECK((plain.wan.profile.empty() && plain.wan.links.empty() && plain.wan.faults.empty() && plain.wan.emulated()));
  CHECK_FALSE(load_ok(write(dir / "job.toml", kData)).wan.emulated());
  for (const auto& p : wan_profiles()) {
    CAPTURE(p.name);
    CHECK((p.link.latency_ms > 0 && p.link.bandwidth_mbps > 0));
  }
  CHECK_FALSE(find_wan_profile("moon"));
}

TEST_CASE("[wan] rules name file:line and the key") {
  TempDir dir("config");
  const std::string sites = "[[site]]\nname = \"us\"\n[[site]]\nname = \"eu\"\n";       // lines 1-4
  const std::string fault = "[[wan.fault]]\nkind = \"partition\"\nsites = [\"eu\"]\n";  // lines 5-7
  const std::pair<std::string, std::string> cases[] = {
      {"[wan]\nprofile = \"moon\"\n",
       ":6: wan.profile: expected one of \"same-region\", \"cross-country\", \"transatlantic\", \"transpacific\", "
       "found \"moon\""},
      {"[wan]\nlatency_ms = -1\n", ":6: wan.latency_ms: expected a number >= 0, found -1"},
      {"[wan]\njitter = \"cauchy\"\n", ":6: wan.jitter: expected one of \"normal\", \"uniform\", \"pareto\""},
      {"[wan]\nloss = 1.0\n", ":6: wan.loss: expected a number in [0, 1), found 1"},
      {"[wan.link]\nsites = [\"us\", \"eu\"]\n", ":5: wan.link: expected an array of tables ([[wan.link]]), found"},
      {"[[wan.link]]\nsites = [\"us\", \"mars\"]\n",
       ":6: wan.link[0].sites: expected names of this job's sites (us, eu), found string \"mars\""},
      {"[[wan.link]]\nsites = [\"us\"]\n", ":6: wan.link[0].sites: expected 2 sites (a link joins a pair), found 1"},
      {"[[wan.link]]\nlatency_ms = 5\n",
       ":5: wan.link[0].sites: missing required key (expected an array of site names)"},
      {"[[wan.link]]\nsites = [\"us\", \"eu\"]\nlatncy_ms = 5\n",
       ":7: wan.link[0].latncy_ms: unknown key (did you mean latency_ms?)"},
      {"[[wan.link]]\nsites = [\"us\", \"eu\"]\nbandwidth_mbps = -5\n",
       ":7: wan.link[0].bandwidth_mbps: expected a number >= 0, found -5"},
      {"[[wan.link]]\nsites = [\"us\", \"eu\"]\n[[wan.link]]\nsites = [\"eu\", \"us\"]\n",
       ":7: wan.link[1].sites: the link eu <-> us is given twice (lines 5 and 7)"},
      {fault + "from_s = 60\nto_s = 30\n", ":9: wan.fault[0].to_s: expected a number > from_s = 60, found 30"},
      {fault + "from_s = -1\nto_s = 30\n", ":8: wan.fault[0].from_s: expected a number >= 0, found -1"},
      {fault + "to_s = 30\n", ":5: wan.fault[0].from_s: missing required key"},
      {"[[wan.fault]]\nkind = \"flood\"\nsites = [\"eu\"]\nfrom_s = 0\nto_s = 1\n",
       ":6: wan.fault[0].kind: expected one of \"partition\", \"bandwidth\", \"latency\", found \"flood\""},
      {"[[wan.fault]]\nkind = \"partition\"\nsites = [\"eu\", \"us\"]\nfrom_s = 0\nto_s = 1\n",
       ":7: wan.fault[0].sites: a partition must leave some site on the other side, found every site"},
      {fault + "from_s = 0\nto_s = 1\nbandwidth_mbps = 10\n",
       ":10: wan.fault[0].bandwidth_mbps: only a fault of kind = \"bandwidth\" takes bandwidth_mbps"},
      {fault + "from_s = 0\nto_s = 1\npair = true\n", ":10: wan.fault[0].pair: a partition cuts sites off"},
      {"[[wan.fault]]\nkind = \"bandwidth\"\nsites = [\"eu\"]\nfrom_s = 0\nto_s = 1\n",
       ":5: wan.fault[0].bandwidth_mbps: missing required key (expected a number > 0)"},
      {"[[wan.fault]]\nkind = \"latency\"\nsites = [\"eu\"]\npair = true\nfrom_s = 0\nto_s = 1\nlatency_ms = 9\n",
       ":8: wan.fault[0].pair: pair = true needs exactly 2 sites, found 1"},
      {"[[wan.fault]]\nkind = \"latency\"\nsites = [\"eu\", \"eu\"]\nfrom_s = 0\nto_s = 1\nlatency_ms = 9\n",
       ":7: wan.fault[0].sites: site \"eu\" is named twice"},
      {"[[wan.link]]\nsites = [\"us\", \"eu\", \"us\"]\n", ":6: wan.link[0].sites: site \"us\" is named twice"},
      {"[[wan.fault]]\nkind = \"latency\"\nsites = []\nfrom_s = 0\nto_s = 1\nlatency_ms = 9\n",
       ":7: wan.fault[0].sites: expected a non-empty array of site names, found an empty array"},
  };
  for (const auto& [body, expected] : cases) {
    CAPTURE(body);
    CHECK(only_problem(dir, sites + body + kData).starts_with((dir / "job.toml").string() + expected));
  }
}
