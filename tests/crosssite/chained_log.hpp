#pragma once
// A commit log read from the in-memory control plane, for the tests of what one site makes of it
// (test_commit_log, test_vouches): records, and versions written as a chain, one of them maybe
// written over by another member.
#include <algorithm>
#include <span>
#include <string>
#include <vector>

#include "core/util/digest.hpp"
#include "crosssite/control/memory_control_plane.hpp"
#include "crosssite/round/commit_log.hpp"

namespace meridian::testing {

inline CommitRecord record(std::int64_t version, const std::string& proposer, std::int64_t round) {
  CommitRecord r;
  r.number = version;
  r.proposer = proposer;
  r.params_hash = 0x1000 + static_cast<std::uint64_t>(round);
  r.entries.push_back(CommitEntry{proposer, round, version - 1, 1.0, {}, 0});
  return r;
}

struct Log {
  ManualClock clock;
  MemoryStore store{clock};
  MemoryControlPlane control{store, clock, 1};
  CommitLog log{"job", 1};
  CrossSiteEvents events;

  void read() { log.read(control, events); }
  std::size_t count(const std::string& kind) const {
    return static_cast<std::size_t>(
        std::count_if(events.begin(), events.end(), [&](const CrossSiteEvent& e) { return e.kind == kind; }));
  }
};

// Versions 1 to `n` of the log as written, each naming the one before it; `forged`: the
// version written over (0: none) by a record of mallory's naming the same previous.
inline std::vector<std::string> chained(int n, int forged = 0) {
  std::vector<std::string> out;
  Digest previous{};
  for (std::int64_t v = 1; v <= n; ++v) {
    auto r = record(v, "a", v - 1);
    r.previous = previous;
    out.push_back(encode(r));
    previous = sha256(std::as_bytes(std::span(out.back().data(), out.back().size())));
  }
  if (forged > 0) {
    auto r = record(forged, "mallory", 99);
    r.previous = decode_commit(out[static_cast<std::size_t>(forged - 1)]).previous;
    out[static_cast<std::size_t>(forged - 1)] = encode(r);
  }
  return out;
}

inline Digest sha(const std::string& bytes) { return sha256(std::as_bytes(std::span(bytes.data(), bytes.size()))); }

inline void write_all(Log& l, const std::vector<std::string>& bytes) {
  for (std::size_t i = 0; i < bytes.size(); ++i)
    REQUIRE(l.control.create_if_absent(l.log.keys().commit(static_cast<std::int64_t>(i + 1)), bytes[i]));
  l.read();
}

}  // namespace meridian::testing
