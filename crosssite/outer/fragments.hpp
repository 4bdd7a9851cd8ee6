#pragma once
// Streaming DiLoCo (Douillard et al. 2025, "Streaming DiLoCo with overlapping communication"):
// the parameters are split into P fragments, each a set of whole tensors of ParamLayout, and each
// exchange moves one fragment, so a site sends 1/P of the model every H/P inner steps instead of
// all of it every H. One commit log serves all fragments: each version changes one fragment (its
// commit record names it; commit_rule.hpp says which), so every invariant of the log (one chain,
// one hash per version over the whole model) is DiLoCo's. P = 1 is DiLoCo: one fragment, the whole model as one range.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace meridian {

class ParamLayout;

struct FragmentRange {
  std::size_t offset = 0;  // into the flat parameter buffer, in elements
  std::size_t count = 0;
  bool operator==(const FragmentRange&) const = default;
};

struct Fragment {
  std::vector<FragmentRange> ranges;  // ascending, disjoint, adjacent tensors merged into one range
  std::vector<std::string> tensors;   // the ParamLayout names it holds, in layout order
  std::size_t size = 0;               // elements: the sum of the ranges
  bool operator==(const Fragment&) const = default;
};

using FragmentPlan = std::vector<Fragment>;

// One fragment holding the whole flat buffer of n values: DiLoCo.
FragmentPlan whole_model(std::size_t n);

// P fragments of whole tensors, balanced by size: tensors in decreasing size (equal sizes by
// kind, then layer) each go to the fragment smallest so far (the lowest index among equals). A
// layer's big matrices are the same size in every layer, so layer l's land in fragment l mod P:
// each fragment strides over the depth, as in the paper, rather than holding a block of adjacent
// layers. Deterministic: every site and replica computes the same plan from the same layout.
// Error(Config) when fragments < 1 or the model has fewer tensors than fragments.
FragmentPlan plan_fragments(const ParamLayout& layout, int fragments);

// Copies fragment f's values out of a flat buffer into a contiguous one (out.size() == f.size), and back.
void gather(const Fragment& f, std::span<const float> flat, std::span<float> out);
void scatter(const Fragment& f, std::span<const float> in, std::span<float> flat);

// The staleness of a delta of one of `fragments` fragments based on `base_version`, merged on top
// of `version`: the commits of its own fragment it missed, estimated as (version - base) / P.
// Commits of other fragments change none of its parameters, and versions take the fragments in
// turn, so a delta P versions old has missed about one commit of its own. An estimate rather than
// a count from the commit log: a site that adopted a peer's state does not hold the log's past,
// and every site must weigh a delta alike. P = 1: version - base. Negative for a base from the future.
std::int64_t fragment_staleness(std::int64_t version, std::int64_t base_version, int fragments);

// Whose turn version `version` (>= 1) is: fragment (version - 1) mod P. The turn is the
// version's number, not a site's step, so sites that joined late, restarted or lost rounds send
// what the next versions take, and every site knows it from the version it holds.
int fragment_turn(std::int64_t version, int fragments);
// The first version from `from` on whose turn `fragment` is.
std::int64_t turn_of(int fragment, std::int64_t from, int fragments);

}  // namespace meridian
