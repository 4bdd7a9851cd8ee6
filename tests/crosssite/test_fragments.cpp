#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <vector>

#include "core/model/param_layout.hpp"
#include "core/util/error.hpp"
#include "crosssite/outer/fragments.hpp"

using namespace meridian;

namespace {

ModelConfig model(int layers) {
  ModelConfig c;
  c.n_layer = layers;
  c.n_head = 4;
  c.d_model = 128;
  c.seq_len = 64;
  c.vocab = 256;
  return c;
}

}  // namespace

TEST_CASE("fragments hold every tensor exactly once, are balanced, deterministic, and stride over the layers") {
  for (const int layers : {4, 6, 12}) {
    const auto layout = ParamLayout::of(model(layers));
    for (const int p : {1, 2, 3, 4, 8}) {
      CAPTURE(layers);
      CAPTURE(p);
      const auto plan = plan_fragments(layout, p);
      REQUIRE(plan.size() == static_cast<std::size_t>(p));
      CHECK(plan == plan_fragments(layout, p));
      std::map<std::string, int> owner;
      std::vector<bool> covered(layout.total(), false);
      bool overlap = false;
      std::size_t biggest = 0, smallest = layout.total();
      for (int f = 0; f < p; ++f) {
        std::size_t size = 0;
        for (const auto& r : plan[f].ranges) {
          for (std::size_t j = r.offset; j < r.offset + r.count; ++j) {
            overlap = overlap || covered[j];
            covered[j] = true;
          }
          size += r.count;
        }
        CHECK(size == plan[f].size);
        for (const auto& t : plan[f].tensors) CHECK(owner.emplace(t, f).second);
        biggest = std::max(biggest, plan[f].size);
        smallest = std::min(smallest, plan[f].size);
      }
      CHECK_FALSE(overlap);
      CHECK(owner.size() == layout.views().size());
      CHECK(std::all_of(covered.begin(), covered.end(), [](bool b) { return b; }));
      // Within the largest tensor of the model of the ideal share: LPT's bound, here ~1-12%.
      CHECK(biggest - smallest <= 256 * 128);
      if (p > 1 && layers % p == 0) {
        // The big matrices of layer l go to fragment l mod P: every fragment spans the depth.
        for (int l = 0; l < layers; ++l)
          CHECK(owner.at("h." + std::to_string(l) + ".mlp.c_fc.weight") == l % p);
      }
    }
  }
}

TEST_CASE("one fragment is the whole model, more fragments than tensors is a config error") {
  const auto layout = ParamLayout::of(model(4));
  const auto one = plan_fragments(layout, 1);
  REQUIRE(one.size() == 1);
  CHECK(one[0].ranges == std::vector<FragmentRange>{{0, layout.total()}});
  CHECK(whole_model(layout.total())[0].ranges == one[0].ranges);
  for (const int bad : {0, -1, static_cast<int>(layout.views().size()) + 1}) {
    try {
      plan_fragments(layout, bad);
      FAIL("planned ", bad, " fragments");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::Config);
    }
  }
}

TEST_CASE("gather and scatter move a fragment's values in and out of the flat buffer") {
  const auto plan = plan_fragments(ParamLayout::of(model(4)), 3);
  std::vector<float> flat(ParamLayout::of(model(4)).total());
  for (std::size_t i = 0; i < flat.size(); ++i) flat[i] = static_cast<float>(i);
  std::vector<float> back(flat.size(), -1.0f);
  for (const auto& f : plan) {
    std::vector<float> slice(f.size);
    gather(f, flat, slice);
    CHECK(slice.front() == static_cast<float>(f.ranges.front().offset));
    CHECK(std::is_sorted(slice.begin(), slice.end()));
    scatter(f, slice, back);
  }
  CHECK(back == flat);
}

TEST_CASE("staleness of a fragment's delta: about one in P versions changed its fragment") {
  CHECK(fragment_staleness(5, 5, 4) == 0);
  CHECK(fragment_staleness(5, 2, 4) == 0);
  CHECK(fragment_staleness(5, 1, 4) == 1);
  CHECK(fragment_staleness(13, 1, 4) == 3);
  CHECK(fragment_staleness(3, 4, 4) < 0);  // a base from the future
  for (std::int64_t v = 0; v < 20; ++v)
    for (std::int64_t b = 0; b <= v; ++b) CHECK(fragment_staleness(v, b, 1) == v - b);
}

TEST_CASE("the turn of a version: fragments in order of the versions' numbers") {
  CHECK(fragment_turn(1, 4) == 0);
  CHECK(fragment_turn(4, 4) == 3);
  CHECK(fragment_turn(5, 4) == 0);
  CHECK(fragment_turn(7, 1) == 0);
  CHECK(turn_of(0, 1, 4) == 1);
  CHECK(turn_of(2, 1, 4) == 3);
  CHECK(turn_of(0, 2, 4) == 5);  // its turn passed: the next one
  CHECK(turn_of(1, 6, 4) == 6);
  for (std::int64_t from = 1; from < 12; ++from)
    for (int f = 0; f < 3; ++f) {
      const auto v = turn_of(f, from, 3);
      CHECK((v >= from && v < from + 3 && fragment_turn(v, 3) == f));
    }
  CHECK_THROWS_AS(fragment_turn(0, 4), InvariantError);
}
