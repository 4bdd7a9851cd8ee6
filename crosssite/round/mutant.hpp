#pragma once
// Deliberate bugs that the protocol simulator must catch (tests/sim/test_protocol_sim.cpp), for the
// checks no seam can skip from outside. A link-time switch: every production binary links
// mutants_off.cpp, where mutant() is false and no setting can change it; the simulator's binaries
// link sim/protocol/mutants.cpp instead, which it sets. Mutations that a seam can make (a forged
// transfer, an overwritten record) are decorators on that seam in sim/protocol, not here.
namespace meridian {

enum class Mutant {
  UnverifiedDeltas,     // a delta's bytes are used without checking its announced digest
  SkipRebase,           // a commit does not rebase the in-flight round onto it
  RebaseWrongFragment,  // a commit rebases fragment 0, not the fragments it changed
  KeepDroppedRound,     // a lost round's progress stays in the weights on a version no commit made
  UnboundedBacklog,     // an overlapped site trains on whatever number of its rounds is unmerged
  KeepLastPart,         // a replica keeps a later copy of a delta's part, not the one its leader judged
  IgnoreVouches,        // a record the others' vouches (or the site's own newest record) contradict is applied
  kCount
};

bool mutant(Mutant m);

}  // namespace meridian
