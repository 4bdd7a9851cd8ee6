#include "crosssite/outer/fragments.hpp"

#include <algorithm>
#include <map>
#include <numeric>

#include "core/model/param_layout.hpp"
#include "core/util/error.hpp"

namespace meridian {

FragmentPlan whole_model(std::size_t n) { return {Fragment{{{0, n}}, {}, n}}; }

FragmentPlan plan_fragments(const ParamLayout& layout, int fragments) {
  const auto& views = layout.views();
  if (fragments < 1 || static_cast<std::size_t>(fragments) > views.size())
    throw make_error(ErrorKind::Config, "outer.fragments: expected 1 to ", views.size(),
                     " (the model's tensors), found ", fragments);
  // Equal sizes in order of kind (a layer's tensor's name without its "h.<layer>." or
  // "layers.<layer>." prefix), then of layer: the layers' c_fc matrices one after the other, so
  // they go round the fragments.
  std::map<std::string, std::size_t> kind_rank;
  std::vector<std::size_t> kind(views.size());
  for (std::size_t t = 0; t < views.size(); ++t) {
    const std::string& name = views[t].name;
    const std::string of_layer = views[t].layer < 0 ? name : name.substr(name.find('.', name.find('.') + 1) + 1);
    kind[t] = kind_rank.try_emplace(of_layer, kind_rank.size()).first->second;
  }
  std::vector<std::size_t> order(views.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) {
    return std::pair(views[b].numel, kind[a]) < std::pair(views[a].numel, kind[b]);
  });
  std::vector<int> owner(views.size());
  std::vector<std::size_t> load(fragments, 0);
  for (const auto t : order) {
    const auto f = std::min_element(load.begin(), load.end()) - load.begin();
    owner[t] = static_cast<int>(f);
    load[f] += views[t].numel;
  }
  FragmentPlan plan(fragments);
  for (std::size_t t = 0; t < views.size(); ++t) {
    Fragment& f = plan[owner[t]];
    f.tensors.push_back(views[t].name);
    f.size += views[t].numel;
    if (!f.ranges.empty() && f.ranges.back().offset + f.ranges.back().count == views[t].offset)
      f.ranges.back().count += views[t].numel;
    else
      f.ranges.push_back({views[t].offset, views[t].numel});
  }
  return plan;
}

void gather(const Fragment& f, std::span<const float> flat, std::span<float> out) {
  MERIDIAN_CHECK(out.size() == f.size, "out=", out.size(), " fragment=", f.size);
  std::size_t at = 0;
  for (const auto& r : f.ranges) {
    MERIDIAN_CHECK(r.offset + r.count <= flat.size(), "range end=", r.offset + r.count, " flat=", flat.size());
    std::copy_n(flat.begin() + static_cast<std::ptrdiff_t>(r.offset), r.count, out.begin() + static_cast<std::ptrdiff_t>(at));
    at += r.count;
  }
}

void scatter(const Fragment& f, std::span<const float> in, std::span<float> flat) {
  MERIDIAN_CHECK(in.size() == f.size, "in=", in.size(), " fragment=", f.size);
  std::size_t at = 0;
  for (const auto& r : f.ranges) {
    MERIDIAN_CHECK(r.offset + r.count <= flat.size(), "range end=", r.offset + r.count, " flat=", flat.size());
    std::copy_n(in.begin() + static_cast<std::ptrdiff_t>(at), r.count, flat.begin() + static_cast<std::ptrdiff_t>(r.offset));
    at += r.count;
  }
}

std::int64_t fragment_staleness(std::int64_t version, std::int64_t base_version, int fragments) {
  MERIDIAN_CHECK(fragments >= 1, "fragments=", fragments);
  const std::int64_t versions = version - base_version;
  return versions < 0 ? versions : versions / fragments;
}

int fragment_turn(std::int64_t version, int fragments) {
  MERIDIAN_CHECK(fragments >= 1 && version >= 1, "version=", version, " fragments=", fragments);
  return static_cast<int>((version - 1) % fragments);
}

std::int64_t turn_of(int fragment, std::int64_t from, int fragments) {
  MERIDIAN_CHECK(fragment >= 0 && fragment < fragments && from >= 1, "fragment=", fragment, " from=", from,
                 " fragments=", fragments);
  return from + (fragment - fragment_turn(from, fragments) + fragments) % fragments;
}

}  // namespace meridian
