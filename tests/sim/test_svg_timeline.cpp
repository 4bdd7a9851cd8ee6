// The comparison table, the JSON figures and the SVG timeline: written, complete and well-formed.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "sim/des/engine.hpp"
#include "sim/report/comparison.hpp"
#include "sim/report/svg_timeline.hpp"
#include "tests/sim/sim_fixture.hpp"

using namespace meridian;
using namespace meridian::sim;

namespace {

// Well-formed for the XML an SVG writer emits: every element closed in order, attributes quoted,
// no stray '<' or '&' in text. Returns the first problem, or "".
std::string xml_problem(const std::string& x) {
  std::vector<std::string> open;
  std::size_t i = 0;
  while (i < x.size()) {
    if (x[i] == '&') {
      const auto semi = x.find(';', i);
      const std::string entity = x.substr(i, semi == std::string::npos ? 8 : semi - i + 1);
      if (entity != "&amp;" && entity != "&lt;" && entity != "&gt;" && entity != "&quot;" && entity != "&apos;")
        return "bad entity at " + std::to_string(i);
    }
    if (x[i] != '<') {
      if (x[i] == '>') return "stray '>' at " + std::to_string(i);
      ++i;
      continue;
    }
    const auto end = x.find('>', i);
    if (end == std::string::npos) return "unclosed tag at " + std::to_string(i);
    const std::string tag = x.substr(i + 1, end - i - 1);
    if (tag.find('<') != std::string::npos) return "'<' inside a tag at " + std::to_string(i);
    if (std::count(tag.begin(), tag.end(), '"') % 2) return "unbalanced quotes in <" + tag + ">";
    if (tag.starts_with("?")) {
      if (!tag.ends_with("?")) return "bad declaration";
    } else if (tag.starts_with("/")) {
      if (open.empty() || open.back() != tag.substr(1)) return "mismatched </" + tag.substr(1) + ">";
      open.pop_back();
    } else if (!tag.ends_with("/")) {
      open.push_back(tag.substr(0, tag.find(' ')));
    }
    i = end + 1;
  }
  return open.empty() ? "" : "unclosed <" + open.back() + ">";
}

}  // namespace

TEST_CASE("the checker itself tells well-formed from broken XML") {
  CHECK(xml_problem("<a x=\"1\"><b/>t &amp; u</a>") == "");
  CHECK(xml_problem("<a><b></a>") != "");
  CHECK(xml_problem("<a>x & y</a>") != "");
  CHECK(xml_problem("<a x=\"1></a>") != "");
}

TEST_CASE("a short run: one rectangle per segment, site names escaped, axis and legend") {
  Scenario sc = testing::hand_scenario(2, 15e6);
  sc.sites[1].name = "eu<west>&\"1\"";
  const Result r = simulate(sc, Algorithm::Overlap);
  const std::string svg = svg_timeline(r, "demo & co");
  CHECK(xml_problem(svg) == "");
  CHECK(svg.starts_with("<?xml"));
  CHECK(svg.find("eu&lt;west&gt;&amp;&quot;1&quot;") != std::string::npos);
  CHECK(svg.find("demo &amp; co") != std::string::npos);
  std::size_t rects = 0;
  for (auto p = svg.find("<rect"); p != std::string::npos; p = svg.find("<rect", p + 1)) ++rects;
  const std::size_t segments = r.sites[0].timeline.size() + r.sites[1].timeline.size();
  CHECK(rects == 1 + segments + 4);  // background, segments, legend
  for (const char* word : {"compute", "wait", "down", "overhead"}) CHECK(svg.find(word) != std::string::npos);
}

TEST_CASE("a long run is drawn as per-pixel shares, still well-formed and of bounded size") {
  Scenario sc = testing::hand_scenario(3, 15e6);
  sc.steps = 400000;  // 40,000 rounds per site
  const Result r = simulate(sc, Algorithm::Overlap);
  REQUIRE(r.sites[0].timeline.size() > 20000);
  const std::string svg = svg_timeline(r, "long", 800);
  CHECK(xml_problem(svg) == "");
  CHECK(svg.size() < 2'000'000);
}

TEST_CASE("binned timeline: the shares of each bin sum to one and match the totals") {
  const Result r = simulate(testing::hand_scenario(2, 15e6), Algorithm::Overlap);
  const auto bins = bin_timeline(r.sites[0], r.wall_s, 27);
  double compute = 0;
  for (const auto& b : bins) {
    // Site 0 ends before the wall time (site 1's): its last bins are partly or wholly empty.
    if (b.t1 <= r.sites[0].end_s) CHECK(b.share[0] + b.share[1] + b.share[2] + b.share[3] == doctest::Approx(1));
    compute += b.share[0] * (b.t1 - b.t0);
  }
  CHECK(r.sites[0].end_s < r.wall_s);
  CHECK(compute == doctest::Approx(r.sites[0].compute_s));
}

TEST_CASE("the comparison table has a row per algorithm with its figures, JSON carries every site") {
  const Scenario sc = testing::hand_scenario(2, 1e6);
  const std::vector<Result> results{simulate(sc, Algorithm::Diloco), simulate(sc, Algorithm::Overlap)};
  const std::string table = comparison_table(results);
  CHECK(table.find("| diloco | 90.9% |") != std::string::npos);
  CHECK(table.find("| overlap | 99.0% |") != std::string::npos);
  CHECK(table.find("110.0 s") != std::string::npos);
  const auto j = to_json(results[0]);
  CHECK(j["sites"].size() == 2);
  CHECK(j["wall_s"].get<double>() == doctest::Approx(110));
  CHECK(human_bytes(2.5e12) == "2.50 TB");
  CHECK(human_seconds(3 * 86400) == "3.00 d");
  CHECK(human_seconds(0.0421) == "42 ms");
  CHECK(human_seconds(2.5e-5) == "25 us");
  CHECK(human_seconds(0) == "0 us");
}
