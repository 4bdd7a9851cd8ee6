#pragma once
// The synchronous baseline's side of a site: the other sites' gradients (and loss) of each step as
// they arrive, and their mean over sites once all are here, summed in site order so that every site
// gets the same bits.
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "crosssite/round/cross_site_types.hpp"
#include "transport/link/link.hpp"

namespace meridian {

class GradientInbox {
 public:
  // `link`: where bytes no longer needed go back; `max_held`: steps held per site (an honest
  // peer is at most a few ahead; more would only make this site hold its bytes).
  GradientInbox(Link& link, std::size_t max_held) : link_(link), max_held_(max_held) {}

  // False when refused: the site is too far ahead.
  bool put(const std::string& site, std::int64_t step, std::vector<std::byte> bytes);
  // The first of `sites` (other than `self`) whose gradients of `step` are not here, if any.
  std::optional<std::string> missing(std::int64_t step, const std::vector<std::string>& sites,
                                     const std::string& self) const;
  // Replaces `values` (this site's) by the mean over `sites`, and forgets steps up to `step`.
  // Error(Peer) naming the site whose gradients have another size.
  void mean(std::int64_t step, const std::vector<std::string>& sites, const std::string& self, std::span<float> values);

 private:
  Link& link_;
  std::size_t max_held_;
  std::map<DeltaKey, std::vector<std::byte>> gradients_;  // (site, step)
};

}  // namespace meridian
