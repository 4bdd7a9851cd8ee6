// Production's side of mutant.hpp: no mutation is ever on. Alone in its file, so that a binary
// that brings its own definition (the simulator's) never pulls this one from the archive.
#include "crosssite/round/mutant.hpp"

namespace meridian {

bool mutant(Mutant) { return false; }

}  // namespace meridian
