#pragma once
// The simulator's side of crosssite/round/mutant.hpp: which deliberate bugs are on. Set before a
// sweep starts (every seed of it runs with the same ones), never while one runs.
#include "crosssite/round/mutant.hpp"

namespace meridian {

void set_mutant(Mutant m, bool on);

// Turns `m` on for its lifetime (a test's scope), off again after.
class MutantOn {
 public:
  explicit MutantOn(Mutant m) : m_(m) { set_mutant(m_, true); }
  ~MutantOn() { set_mutant(m_, false); }
  MutantOn(const MutantOn&) = delete;
  MutantOn& operator=(const MutantOn&) = delete;

 private:
  Mutant m_;
};

}  // namespace meridian
