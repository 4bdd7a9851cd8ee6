#pragma once
// Whether a site's copy of its outer state is still the version it holds. Each version's record
// names the hash of its weights (version 0's comes from the weights the process built, never
// from a checkpoint); a whole state is held to it before anything another site will take from the
// copy (a proposal, the outcome of its own proposal, its state served), so that a copy damaged
// since it was applied (silent corruption) never becomes a version for the others. A copy found
// otherwise, here or by the RoundDriver (a version that did not hash right on it), is diverged
// until a peer's state replaces it. A sharded state's part is not judged here: its replicas hash
// their parts together (RoundDriver), against hash_of.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "crosssite/outer/outer_state.hpp"

namespace meridian {

class HeldCopy {
 public:
  HeldCopy(std::string site, std::optional<std::uint64_t> origin_hash);

  // The site holds `version`, whose record names `hash`: applied, adopted or restored.
  void hold(std::int64_t version, std::uint64_t hash) { held_ = {version, hash}; }
  // The hash the weights of `version` give, when it is the version held here.
  std::optional<std::uint64_t> hash_of(std::int64_t version) const;
  // The hash `state` must give: when it is whole and holds the version held here.
  std::optional<std::uint64_t> expected(const OuterState& state) const;
  // Why `state` is not the version it holds, hashing it (empty: it is, or nothing says).
  std::string damage(const OuterState& state) const;

  void diverge() { diverged_ = true; }
  bool diverged() const { return diverged_; }
  void replaced() { diverged_ = false; }  // a peer's state was taken

 private:
  std::string site_;
  std::optional<std::pair<std::int64_t, std::uint64_t>> held_;
  bool diverged_ = false;
};

}  // namespace meridian
