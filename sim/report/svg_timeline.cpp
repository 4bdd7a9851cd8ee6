#include "sim/report/svg_timeline.hpp"

#include <cmath>
#include <cstdio>

#include "sim/report/comparison.hpp"

namespace meridian::sim {

namespace {

constexpr const char* kColors[] = {"#43a047", "#fb8c00", "#e53935", "#9e9e9e"};  // by Phase
constexpr int kLeft = 110, kTop = 40, kRow = 22, kGap = 6, kRight = 20;
constexpr std::size_t kMostSegments = 20000;  // above this, draw per-pixel shares instead

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

std::string rect(double x, double y, double w, double h, Phase p) {
  return "<rect x=\"" + num(x) + "\" y=\"" + num(y) + "\" width=\"" + num(w) + "\" height=\"" + num(h) +
         "\" fill=\"" + kColors[static_cast<int>(p)] + "\"/>\n";
}

// A "nice" tick step (1, 2 or 5 x 10^k) giving about `ticks` ticks over `span`.
double tick_step(double span, int ticks) {
  const double raw = span / ticks;
  const double base = std::pow(10, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0})
    if (m * base >= raw) return m * base;
  return 10 * base;
}

}  // namespace

std::string xml_escape(std::string_view text) {
  std::string out;
  for (char c : text) switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  return out;
}

std::string svg_timeline(const Result& r, const std::string& title, int width) {
  const int plot = std::max(100, width - kLeft - kRight);
  const int rows = static_cast<int>(r.sites.size());
  const int height = kTop + rows * (kRow + kGap) + 50;
  const double wall = r.wall_s > 0 ? r.wall_s : 1;
  const double px_per_s = plot / wall;
  std::size_t segments = 0;
  for (const auto& s : r.sites) segments += s.timeline.size();

  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" +
                    std::to_string(width) + "\" height=\"" + std::to_string(height) + "\" font-family=\"sans-serif\" " +
                    "font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  out += "<text x=\"" + std::to_string(kLeft) + "\" y=\"20\" font-size=\"14\">" + xml_escape(title) + "</text>\n";
  for (int i = 0; i < rows; ++i) {
    const SiteResult& site = r.sites[i];
    const double y = kTop + i * (kRow + kGap);
    out += "<text x=\"" + std::to_string(kLeft - 6) + "\" y=\"" + num(y + kRow * 0.7) + "\" text-anchor=\"end\">" +
           xml_escape(site.name) + "</text>\n";
    if (segments <= kMostSegments) {
      for (const auto& seg : site.timeline)
        out += rect(kLeft + seg.t0 * px_per_s, y, (seg.t1 - seg.t0) * px_per_s, kRow, seg.phase);
      continue;
    }
    // One column per pixel, its height split by the share of each phase; equal neighbours merged.
    const auto bins = bin_timeline(site, wall, plot);
    for (std::size_t b = 0; b < bins.size();) {
      std::size_t e = b + 1;
      const auto same = [&](std::size_t k) {
        for (int p = 0; p < 4; ++p)
          if (std::lround(bins[k].share[p] * kRow) != std::lround(bins[b].share[p] * kRow)) return false;
        return true;
      };
      while (e < bins.size() && same(e)) ++e;
      double stacked = 0;
      for (int p = 0; p < 4; ++p) {
        const double h = bins[b].share[p] * kRow;
        if (h <= 0) continue;
        out += rect(kLeft + static_cast<double>(b), y + stacked, static_cast<double>(e - b), h, static_cast<Phase>(p));
        stacked += h;
      }
      b = e;
    }
  }
  // Time axis.
  const double axis_y = kTop + rows * (kRow + kGap) + 4;
  out += "<line x1=\"" + std::to_string(kLeft) + "\" y1=\"" + num(axis_y) + "\" x2=\"" + std::to_string(kLeft + plot) +
         "\" y2=\"" + num(axis_y) + "\" stroke=\"black\"/>\n";
  const double step = tick_step(wall, 6);
  for (double t = 0; t <= wall * (1 + 1e-9); t += step) {
    const double x = kLeft + t * px_per_s;
    out += "<line x1=\"" + num(x) + "\" y1=\"" + num(axis_y) + "\" x2=\"" + num(x) + "\" y2=\"" + num(axis_y + 4) +
           "\" stroke=\"black\"/>\n<text x=\"" + num(x) + "\" y=\"" + num(axis_y + 16) + "\" text-anchor=\"middle\">" +
           xml_escape(human_seconds(t)) + "</text>\n";
  }
  // Legend.
  double lx = kLeft;
  for (int p = 0; p < 4; ++p) {
    out += rect(lx, axis_y + 26, 12, 12, static_cast<Phase>(p));
    out += "<text x=\"" + num(lx + 16) + "\" y=\"" + num(axis_y + 36) + "\">" +
           std::string(to_string(static_cast<Phase>(p))) + "</text>\n";
    lx += 100;
  }
  out += "</svg>\n";
  return out;
}

}  // namespace meridian::sim
