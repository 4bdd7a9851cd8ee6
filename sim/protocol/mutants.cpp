// Linked into the simulator's binaries as an object file, ahead of the archives, so its mutant()
// is the one they use (crosssite/round/mutants_off.cpp is then never pulled in).
#include "sim/protocol/mutants.hpp"

#include <array>
#include <atomic>

namespace meridian {
namespace {

std::array<std::atomic<bool>, static_cast<std::size_t>(Mutant::kCount)> on{};

}  // namespace

bool mutant(Mutant m) { return on[static_cast<std::size_t>(m)].load(std::memory_order_relaxed); }

void set_mutant(Mutant m, bool enabled) { on[static_cast<std::size_t>(m)].store(enabled, std::memory_order_relaxed); }

}  // namespace meridian
