#pragma once
// LinkFaults (link.hpp) as every link applies them to its own outgoing frames, for tests only: each
// frame draws, in a fixed order (corrupt, duplicate, truncate, then reorder when that is asked for),
// from a generator seeded with LinkFaults::seed, so that a seed gives the same faults whatever the
// link and the payload sizes. What a fault did is counted in Link::Counters.
#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include "core/util/rng.hpp"
#include "transport/chunking/chunker.hpp"
#include "transport/link/link.hpp"

namespace meridian {

// A frame as it goes on the wire: its chunk header, its payload and what owns the bytes that views.
struct WireFrame {
  std::span<const std::byte> header;
  std::span<const std::byte> payload;
  std::shared_ptr<const void> owner;
};

class FaultInjector {
 public:
  explicit FaultInjector(const LinkFaults& faults) : faults_(faults), rng_(faults.seed) {}

  // The frames to put on the wire, in order, for `frames` (owned by `owner`), sent together to one
  // peer: each corrupted (a copy with one byte flipped), truncated (half its payload), duplicated
  // (twice in a row) or reordered (held back and sent right after the next frame) as drawn. The
  // last of `frames` has no next frame here and is never held back: nothing waits for frames that
  // may never come.
  std::vector<WireFrame> wire(std::span<const Frame> frames, const std::shared_ptr<const void>& owner,
                              Link::Counters& counters) {
    std::vector<WireFrame> out;
    out.reserve(frames.size() + 1);
    std::vector<WireFrame> held;  // the copies of a frame held back
    for (std::size_t i = 0; i < frames.size(); ++i) {
      const bool corrupt = rng_.uniform() < faults_.corrupt_probability;
      const bool duplicate = rng_.uniform() < faults_.duplicate_probability;
      const bool truncate = rng_.uniform() < faults_.truncate_probability;
      const bool reorder = faults_.reorder_probability > 0 && rng_.uniform() < faults_.reorder_probability;
      WireFrame w{frames[i].header, frames[i].payload, owner};
      if (corrupt && !w.payload.empty()) {
        auto damaged = std::make_shared<std::vector<std::byte>>(w.payload.begin(), w.payload.end());
        (*damaged)[rng_.below(damaged->size())] ^= std::byte{0xFF};
        w.payload = *damaged;
        w.owner = std::move(damaged);
        ++counters.corrupted;
      }
      if (truncate && !w.payload.empty()) {
        w.payload = w.payload.first(w.payload.size() / 2);
        ++counters.truncated;
      }
      if (duplicate) ++counters.duplicated;
      std::vector<WireFrame> copies(duplicate ? 2 : 1, w);
      if (reorder && held.empty() && i + 1 < frames.size()) {
        held = std::move(copies);
        continue;
      }
      out.insert(out.end(), copies.begin(), copies.end());
      if (!held.empty()) {
        out.insert(out.end(), held.begin(), held.end());
        held.clear();
        ++counters.reordered;
      }
    }
    counters.faults_injected = counters.corrupted + counters.duplicated + counters.truncated + counters.reordered;
    return out;
  }

 private:
  LinkFaults faults_;
  Rng rng_;
};

}  // namespace meridian
