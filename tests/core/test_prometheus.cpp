// Prometheus text exposition: what PromText writes reads back through a strict parser (names,
// labels and their escapes, NaN and infinities, HELP and TYPE before samples), and the parser
// itself refuses what the format forbids, so a passing scrape test means something.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "core/runlog/prometheus.hpp"
#include "core/util/error.hpp"
#include "tests/support/prom_parser.hpp"

using namespace meridian;
using meridian::testing::parse_prometheus;

TEST_CASE("families, labels with escapes and special values read back exactly") {
  PromText p;
  p.family("meridian_loss", PromText::Type::Gauge, "training loss of the last step\nmean over the group \\ site");
  p.sample(2.4578125, {{"site", "us-east"}});
  p.family("meridian_wan_bytes_sent_total", PromText::Type::Counter, "payload bytes sent to each peer");
  p.sample(1234567890123.0, {{"site", "a"}, {"peer", "eu \"west\"\\1\nx"}});
  p.sample(0, {{"site", "a"}, {"peer", "b"}});
  p.family("meridian_staleness", PromText::Type::Gauge, "versions behind");
  p.sample(NAN);
  p.family("meridian_odd", PromText::Type::Gauge, "infinities");
  p.sample(INFINITY, {{"sign", "+"}});
  p.sample(-INFINITY, {{"sign", "-"}});
  const auto e = parse_prometheus(p.text());
  CHECK(e.types.at("meridian_loss") == "gauge");
  CHECK(e.types.at("meridian_wan_bytes_sent_total") == "counter");
  CHECK(e.help.at("meridian_loss") == "training loss of the last step\\nmean over the group \\\\ site");
  CHECK(e.value("meridian_loss", {{"site", "us-east"}}) == 2.4578125);
  CHECK(e.value("meridian_wan_bytes_sent_total", {{"peer", "eu \"west\"\\1\nx"}}) == 1234567890123.0);
  CHECK(e.value("meridian_wan_bytes_sent_total", {{"peer", "b"}}) == 0);
  CHECK(std::isnan(e.value("meridian_staleness")));
  CHECK(e.value("meridian_odd", {{"sign", "+"}}) == INFINITY);
  CHECK(e.value("meridian_odd", {{"sign", "-"}}) == -INFINITY);
  CHECK(e.samples.size() == 6);
}

TEST_CASE("meridian's own names are invariants: a bad name, a counter without _total, a family twice") {
  PromText p;
  CHECK_THROWS_AS(p.sample(1), InvariantError);
  CHECK_THROWS_AS(p.family("9lives", PromText::Type::Gauge, "x"), InvariantError);
  CHECK_THROWS_AS(p.family("meridian_steps", PromText::Type::Counter, "x"), InvariantError);
  p.family("meridian_steps_total", PromText::Type::Counter, "x");
  CHECK_THROWS_AS(p.sample(1, {{"bad-label", "x"}}), InvariantError);
  CHECK_THROWS_AS(p.family("meridian_steps_total", PromText::Type::Counter, "x"), InvariantError);
}

TEST_CASE("the strict parser refuses what the format forbids") {
  const char* const bad[] = {
      "m 1",                                  // no final newline
      "m{a=\"x\"} 1\nm{a=\"x\"} 2\n",         // a series twice
      "m 1\nn 1\nm{a=\"y\"} 1\n",             // a family's samples not contiguous
      "m 1\n# TYPE m gauge\n",                // TYPE after samples
      "# TYPE m gauge\n# TYPE m gauge\nm 1\n",
      "# TYPE m gauge-ish\nm 1\n",
      "m{a=\"x} 1\n",                         // unterminated label value
      "m{a=\"\\t\"} 1\n",                     // an escape the format does not have
      "m{1a=\"x\"} 1\n",
      "m{a=x} 1\n",
      "m one\n",
      "m 0x10\n",
      "m 1 12.5\n",                           // timestamp not an integer
      "9m 1\n",
      "m\t1\n",
  };
  for (const char* text : bad) {
    CAPTURE(text);
    CHECK_THROWS_AS(parse_prometheus(text), std::runtime_error);
  }
  CHECK_NOTHROW(parse_prometheus("# a comment\n# TYPE m counter\nm{a=\"1\",b=\"\"} 3 1700000000000\n\nx:y 1e-3\n"));
}
