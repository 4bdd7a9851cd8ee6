#include "core/report/svg_plot.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace meridian {
namespace {

constexpr const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"};
constexpr int kLeft = 70, kRight = 180, kTop = 40, kBottom = 50;

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string coord(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

}  // namespace

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else if (c == '"') out += "&quot;";
    else if (c == '\'') out += "&#39;";
    else out += c;
  }
  return out;
}

std::vector<double> nice_ticks(double lo, double hi, int target) {
  if (!(hi > lo)) return {lo};
  const double raw = (hi - lo) / std::max(1, target);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * magnitude >= raw) {
      step = m * magnitude;
      break;
    }
  std::vector<double> ticks;
  for (double t = std::ceil(lo / step) * step; t <= hi + step * 1e-9; t += step)
    ticks.push_back(std::abs(t) < step * 1e-9 ? 0.0 : t);
  return ticks;
}

std::string svg_line_plot(const PlotSpec& spec, const std::vector<PlotSeries>& series,
                          const std::vector<PlotMarker>& markers) {
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y0 = x0, y1 = -x0;
  for (const auto& s : series)
    for (const auto& [x, y] : s.points)
      if (std::isfinite(x) && std::isfinite(y)) {
        x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
      }
  const bool empty = !std::isfinite(x0);
  if (empty) x0 = 0, x1 = 1, y0 = 0, y1 = 1;
  if (x1 == x0) x1 = x0 + 1;
  if (y1 == y0) y1 = y0 + 1;
  const double pad = (y1 - y0) * 0.05;
  y0 -= pad, y1 += pad;
  const int w = spec.width, h = spec.height, pw = w - kLeft - kRight, ph = h - kTop - kBottom;
  const auto sx = [&](double x) { return kLeft + (x - x0) / (x1 - x0) * pw; };
  const auto sy = [&](double y) { return kTop + (1 - (y - y0) / (y1 - y0)) * ph; };

  std::string o;
  o += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(w) + "\" height=\"" + std::to_string(h) +
       "\" viewBox=\"0 0 " + std::to_string(w) + " " + std::to_string(h) + "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  o += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  o += "<text x=\"" + std::to_string(w / 2) + "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">" +
       xml_escape(spec.title) + "</text>\n";
  for (double t : nice_ticks(x0, x1)) {
    o += "<line x1=\"" + coord(sx(t)) + "\" y1=\"" + std::to_string(kTop) + "\" x2=\"" + coord(sx(t)) + "\" y2=\"" +
         std::to_string(kTop + ph) + "\" stroke=\"#eee\"/>\n";
    o += "<text x=\"" + coord(sx(t)) + "\" y=\"" + std::to_string(kTop + ph + 16) + "\" text-anchor=\"middle\">" +
         num(t) + "</text>\n";
  }
  for (double t : nice_ticks(y0, y1)) {
    o += "<line x1=\"" + std::to_string(kLeft) + "\" y1=\"" + coord(sy(t)) + "\" x2=\"" + std::to_string(kLeft + pw) +
         "\" y2=\"" + coord(sy(t)) + "\" stroke=\"#eee\"/>\n";
    o += "<text x=\"" + std::to_string(kLeft - 6) + "\" y=\"" + coord(sy(t) + 4) + "\" text-anchor=\"end\">" + num(t) +
         "</text>\n";
  }
  o += "<rect x=\"" + std::to_string(kLeft) + "\" y=\"" + std::to_string(kTop) + "\" width=\"" + std::to_string(pw) +
       "\" height=\"" + std::to_string(ph) + "\" fill=\"none\" stroke=\"#333\"/>\n";
  o += "<text x=\"" + std::to_string(kLeft + pw / 2) + "\" y=\"" + std::to_string(h - 10) + "\" text-anchor=\"middle\">" +
       xml_escape(spec.x_label) + "</text>\n";
  o += "<text transform=\"translate(16," + std::to_string(kTop + ph / 2) + ") rotate(-90)\" text-anchor=\"middle\">" +
       xml_escape(spec.y_label) + "</text>\n";
  for (const auto& m : markers) {
    if (!std::isfinite(m.x) || m.x < x0 || m.x > x1) continue;
    o += "<g><title>" + xml_escape(m.label) + "</title><line x1=\"" + coord(sx(m.x)) + "\" y1=\"" +
         std::to_string(kTop) + "\" x2=\"" + coord(sx(m.x)) + "\" y2=\"" + std::to_string(kTop + ph) +
         "\" stroke=\"#999\" stroke-dasharray=\"3,3\"/>";
    o += "<text transform=\"translate(" + coord(sx(m.x) + 3) + "," + std::to_string(kTop + 4) +
         ") rotate(90)\" font-size=\"10\" fill=\"#666\">" + xml_escape(m.label) + "</text></g>\n";
  }
  for (std::size_t i = 0; i < series.size(); ++i) {
    const auto& s = series[i];
    const std::string color = kColors[i % std::size(kColors)];
    std::string path;
    for (const auto& [x, y] : s.points)
      if (std::isfinite(x) && std::isfinite(y)) path += (path.empty() ? "M" : " L") + coord(sx(x)) + "," + coord(sy(y));
    if (!path.empty())
      o += "<path d=\"" + path + "\" fill=\"none\" stroke=\"" + color + "\" stroke-width=\"1.5\"" +
           (s.dashed ? " stroke-dasharray=\"6,4\"" : "") + "><title>" + xml_escape(s.name) + "</title></path>\n";
    const int ly = kTop + 10 + static_cast<int>(i) * 18;
    o += "<line x1=\"" + std::to_string(kLeft + pw + 12) + "\" y1=\"" + std::to_string(ly) + "\" x2=\"" +
         std::to_string(kLeft + pw + 36) + "\" y2=\"" + std::to_string(ly) + "\" stroke=\"" + color +
         "\" stroke-width=\"2\"" + (s.dashed ? " stroke-dasharray=\"6,4\"" : "") + "/>";
    o += "<text x=\"" + std::to_string(kLeft + pw + 40) + "\" y=\"" + std::to_string(ly + 4) + "\">" +
         xml_escape(s.name) + "</text>\n";
  }
  if (empty)
    o += "<text x=\"" + std::to_string(kLeft + pw / 2) + "\" y=\"" + std::to_string(kTop + ph / 2) +
         "\" text-anchor=\"middle\" fill=\"#999\">no data</text>\n";
  return o + "</svg>\n";
}

}  // namespace meridian
