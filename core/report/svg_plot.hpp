#pragma once
// A line plot as SVG text: axes with round-number ticks, one coloured line per series, a legend,
// and optional vertical markers (events on a timeline). No dependencies; the text is what a
// browser shows, so reports need no plotting library at run or view time.
#include <string>
#include <utility>
#include <vector>

namespace meridian {

struct PlotSeries {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y), in x order; non-finite points are skipped
  bool dashed = false;                            // e.g. a baseline
};

struct PlotMarker {
  double x = 0;
  std::string label;  // shown rotated beside the line, and as its tooltip
};

struct PlotSpec {
  std::string title, x_label, y_label;
  int width = 900, height = 480;
};

std::string svg_line_plot(const PlotSpec& spec, const std::vector<PlotSeries>& series,
                          const std::vector<PlotMarker>& markers = {});

// Ticks at round numbers (1, 2 or 5 x 10^k apart) covering [lo, hi], about `target` of them.
std::vector<double> nice_ticks(double lo, double hi, int target = 6);

// Text safe inside SVG/HTML elements and attribute values.
std::string xml_escape(const std::string& s);

}  // namespace meridian
