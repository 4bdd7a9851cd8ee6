// CrossSite::backlog, the rounds a site may train on with (overlap), on the in-memory control
// plane and simulated network: it counts what the commit rule could still merge, nothing else.
#include <doctest/doctest.h>

#include <chrono>
#include <memory>

#include "core/util/hash.hpp"
#include "crosssite/codec/delta_digest.hpp"
#include "crosssite/control/memory_control_plane.hpp"
#include "crosssite/round/cross_site.hpp"
#include "transport/link/sim_link.hpp"

using namespace meridian;
using namespace std::chrono_literals;

namespace {

class NeverLost final : public KeptLease {
 public:
  bool lost() const override { return false; }
};

struct World {
  ManualClock clock;
  MemoryStore store{clock};
  SimNetwork network{clock, 7};
};

// One incarnation of site `name` of the job {a, b}: its process memory, over `journal` (its disk).
struct Incarnation {
  Incarnation(World& world, const std::string& name, int number, std::shared_ptr<DeltaJournal> journal)
      : name(name),
        control(world.store, world.clock, 100 + static_cast<std::uint64_t>(number)),
        link(world.network.open("sim://" + name + "/" + std::to_string(number))),
        state(std::vector<float>(64, 0.5f), {}, CodecOptions{CodecKind::Fp32}, false),
        cross(options(name, number, std::move(journal)), control, *link, [&world] { return world.clock.now(); }) {
    cross.serve_state(&state);
  }

  static CrossSiteOptions options(const std::string& name, int number, std::shared_ptr<DeltaJournal> journal) {
    CrossSiteOptions o;
    o.job = "job";
    o.site = name;
    o.sites = {"a", "b"};
    o.journal = std::move(journal);
    o.incarnation = static_cast<std::uint64_t>(number);
    o.keep_lease = [](std::int64_t) { return std::make_unique<NeverLost>(); };
    return o;
  }

  void submit(std::int64_t round) {
    std::vector<float> local(state.start().begin(), state.start().end());
    local[0] -= 0.01f;
    auto bytes = state.encode_delta(local);
    const DeltaAnnouncement a{
        name, round, state.version(), 1000, bytes.size(), delta_digest(std::span<const std::byte>(bytes)), false, 0, 1};
    auto hashes = chunk_hashes(bytes, cross.chunk_bytes());
    cross.submit(a, std::move(bytes), std::move(hashes));
  }

  std::string name;
  MemoryControlPlane control;
  std::unique_ptr<Link> link;
  OuterState state;
  CrossSite cross;
};

void join(World& world, Incarnation& a, Incarnation& b) {
  for (int i = 0; i < 100; ++i) {
    const bool a_in = a.cross.poll_join(0ms), b_in = b.cross.poll_join(0ms);
    if (a_in && b_in) return;
    world.clock.advance(0.05);
  }
  FAIL("sites a and b did not join");
}

}  // namespace

TEST_CASE("a round announced and not merged is backlog, and not once a restart without its disk withdrew it") {
  World world;
  auto b = std::make_unique<Incarnation>(world, "b", 1, std::make_shared<MemoryDeltaJournal>());
  auto a = std::make_unique<Incarnation>(world, "a", 1, std::make_shared<MemoryDeltaJournal>());
  join(world, *a, *b);
  a->submit(a->cross.next_round());
  a->cross.poll_commit(a->state, 0ms);
  CHECK(a->cross.backlog(a->state) == 1);
  // The process dies and comes back with an empty disk: its round's bytes are nowhere, so the
  // round is withdrawn, and a site that waited on it would wait for a version that cannot come.
  a.reset();
  a = std::make_unique<Incarnation>(world, "a", 2, std::make_shared<MemoryDeltaJournal>());
  join(world, *a, *b);
  a->cross.poll_commit(a->state, 0ms);
  CHECK(a->cross.next_round() == 1);
  CHECK(a->cross.backlog(a->state) == 0);
  a->submit(a->cross.next_round());
  a->cross.poll_commit(a->state, 0ms);
  CHECK(a->cross.backlog(a->state) == 1);
}
