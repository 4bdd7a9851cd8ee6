#include "crosssite/round/gradient_inbox.hpp"

#include <climits>
#include <cstring>

#include "core/util/error.hpp"
#include "crosssite/outer/delta_mean.hpp"

namespace meridian {

bool GradientInbox::put(const std::string& site, std::int64_t step, std::vector<std::byte> bytes) {
  std::size_t held = 0;
  for (auto it = gradients_.lower_bound({site, INT64_MIN}); it != gradients_.end() && it->first.first == site; ++it)
    ++held;
  if (held >= max_held_) return false;
  gradients_[{site, step}] = std::move(bytes);
  return true;
}

std::optional<std::string> GradientInbox::missing(std::int64_t step, const std::vector<std::string>& sites,
                                                  const std::string& self) const {
  for (const auto& site : sites)
    if (site != self && !gradients_.contains({site, step})) return site;
  return std::nullopt;
}

void GradientInbox::mean(std::int64_t step, const std::vector<std::string>& sites, const std::string& self,
                         std::span<float> values) {
  std::vector<float> own(values.begin(), values.end());
  std::vector<std::vector<float>> copies;
  std::vector<std::span<const float>> views;
  for (const auto& site : sites) {
    if (site == self) {
      views.emplace_back(own);
      continue;
    }
    const auto& bytes = gradients_.at({site, step});
    if (bytes.size() != values.size_bytes())
      throw make_error(ErrorKind::Peer, "site ", site, " sent ", bytes.size(), " bytes of gradients for step ", step,
                       ", expected ", values.size_bytes());
    copies.emplace_back(values.size());
    std::memcpy(copies.back().data(), bytes.data(), bytes.size());
    views.emplace_back(copies.back());
  }
  const std::vector<double> weights(views.size(), 1.0);
  weighted_mean(views, weights, values);
  for (auto it = gradients_.begin(); it != gradients_.end();) {
    if (it->first.second > step) {
      ++it;
      continue;
    }
    link_.recycle(std::move(it->second));
    it = gradients_.erase(it);
  }
}

}  // namespace meridian
