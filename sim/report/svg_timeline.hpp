#pragma once
// The per-site timeline of one simulated run as an SVG image: one row per site, time across,
// coloured by phase (compute, waiting on other sites, down, overhead). Long runs are drawn as
// per-pixel shares of each phase, short ones segment by segment.
#include <string>

#include "sim/des/result.hpp"

namespace meridian::sim {

std::string svg_timeline(const Result& result, const std::string& title, int width = 1200);

// Text made safe inside an XML attribute or element.
std::string xml_escape(std::string_view text);

}  // namespace meridian::sim
