// SVG line plots: round-number ticks, one path per series through its (scaled) points, a legend,
// markers inside the x range only, escaped text, non-finite points skipped, empty input drawn as
// an empty plot that says so.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "core/report/svg_plot.hpp"

using namespace meridian;

namespace {

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("ticks fall on round numbers 1, 2 or 5 x 10^k apart and cover the range") {
  CHECK(nice_ticks(0, 10, 5) == std::vector<double>{0, 2, 4, 6, 8, 10});
  CHECK(nice_ticks(1.63, 5.54, 6) == std::vector<double>{2, 3, 4, 5});
  CHECK(nice_ticks(0, 3e6, 6) == std::vector<double>{0, 5e5, 1e6, 1.5e6, 2e6, 2.5e6, 3e6});
  CHECK(nice_ticks(-1, 1, 4) == std::vector<double>{-1, -0.5, 0, 0.5, 1});
  CHECK(nice_ticks(3, 3) == std::vector<double>{3});
}

TEST_CASE("series become paths with a legend, markers outside the range and non-finite points are left out") {
  PlotSeries a{"us-east", {{0, 5.5}, {100, 3.0}, {200, NAN}, {300, 2.0}}};
  PlotSeries b{"baseline <sync> & co", {{0, 5.4}, {300, 1.9}}, true};
  const auto svg = svg_line_plot({"Loss \"vs\" tokens", "tokens", "loss"}, {a, b},
                                 {{150, "rollback step 65"}, {5000, "outside"}});
  CHECK(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
  CHECK(svg.ends_with("</svg>\n"));
  CHECK(count(svg, "<path ") == 2);
  CHECK(count(svg, " L") == 3);  // 3 finite points on the first path (2 segments) + 2 on the second (1)
  CHECK(count(svg, "stroke-dasharray=\"6,4\"") == 2);  // the baseline's line and its legend entry
  CHECK(svg.find("baseline &lt;sync&gt; &amp; co") != std::string::npos);
  CHECK(svg.find("Loss &quot;vs&quot; tokens") != std::string::npos);
  CHECK(svg.find("rollback step 65") != std::string::npos);
  CHECK(svg.find("outside") == std::string::npos);
  CHECK(svg.find("nan") == std::string::npos);
  CHECK(svg.find("no data") == std::string::npos);
  // The first point maps to the plot's left edge (x 70) and the largest loss near its top.
  CHECK(svg.find("M70.0,") != std::string::npos);
}

TEST_CASE("a plot of nothing is drawn empty and says so") {
  const auto svg = svg_line_plot({"t", "x", "y"}, {PlotSeries{"s", {{1, NAN}}}});
  CHECK(svg.find("no data") != std::string::npos);
  CHECK(count(svg, "<path ") == 0);
  CHECK(xml_escape("a<b>&\"'") == "a&lt;b&gt;&amp;&quot;&#39;");
}
