// Two sites whose replicas share their state (tests/sites/two_sites.hpp: `meridian site` processes on
// loopback against a real etcd): ZeRO stages, the split exchange and the sharded outer state each
// commit what whole, unsharded replicas do, hash for hash, and survive a replica killed mid-run.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>
#include <string>
#include <utility>

#include "core/checkpoint/store.hpp"
#include "core/io/env.hpp"
#include "crosssite/round/delta_journal.hpp"
#include "tests/sites/two_sites.hpp"

using namespace meridian::testing;
using nlohmann::json;

namespace {

// Site b of 2 replicas beside a of `replicas_a`, DiLoCo in lockstep with int8 deltas, `steps`
// inner steps, dead replicas restarted, `more` after the [outer] section; run with one of a's
// replicas killed mid-run: the sites' summaries.
std::map<std::string, json> killed_run(const TempDir& dir, const std::string& name, const std::string& more, int steps,
                                       int replicas_a = 3, const std::vector<int>& victims = {1}) {
  EtcdServer etcd;
  const std::string inner = "[inner]\nlr = 3e-3\nbatch_per_replica = 2\nsteps = " + std::to_string(steps) +
                            "\n[log]\nevery = 4\neval_every = 0\neval_windows = 4\n[replicas]\nrestart = true\n";
  const auto job =
      write_job(dir, name, "algorithm = \"diloco\"\ninner_steps = 4\ncodec = \"int8\"\noverlap = false\n" + more,
                "replicas = 2\n", inner, 5, "replicas = " + std::to_string(replicas_a) + "\n");
  return run_killing_a_replica(dir, job, etcd, victims);
}

}  // namespace

TEST_CASE("ZeRO stages 1 to 3: 2 sites of 2 sharded replicas commit what unsharded ones do, hash for hash, and 4 beside 2 agree") {
  EtcdServer etcd;
  TempDir dir("zero1-sites");
  const std::string inner = "[inner]\nlr = 3e-3\nbatch_per_replica = 2\nsteps = 12\n"
                            "[log]\nevery = 1\neval_every = 0\neval_windows = 4\n";
  const std::string outer = "algorithm = \"diloco\"\ninner_steps = 4\ncodec = \"int8\"\noverlap = false\n";
  // Stages 2 and 3 write their checkpoints in parts, one per replica.
  const auto job = [&](const std::string& name, int stage, int replicas_a, const std::string& more = "") {
    const std::string parts = stage >= 2 ? "[checkpoint]\nper_replica = true\n" : "";
    return write_job(dir, name, outer + "[parallel]\nzero_stage = " + std::to_string(stage) + "\n" + more + parts,
                     "replicas = 2\n", inner, 5, "replicas = " + std::to_string(replicas_a) + "\n");
  };
  const auto plain = run_sites(dir, job("plain", 0, 2), etcd);
  const auto sharded = run_sites(dir, job("sharded", 1, 2), etcd);
  const auto zero2 = run_sites(dir, job("zero2", 2, 2), etcd);
  // Stage 3 with the outer state whole, as asked; left out, it is sharded as the weights are.
  const auto zero3 = run_sites(dir, job("zero3", 3, 2, "shard_outer = false\n"), etcd);
  const auto uneven = run_sites(dir, job("uneven", 3, 4), etcd);
  // At 2 replicas every element's gradient is one sum either way and the norm is added from the
  // same unit sums: the sharded sites train, and so commit, exactly what the unsharded ones do.
  const auto commits = commit_hashes(dir / "plain" / "a" / "events.jsonl", "a");
  CHECK(commits.size() == 3);
  CHECK(commit_hashes(dir / "sharded" / "a" / "events.jsonl", "a") == commits);
  CHECK(commit_hashes(dir / "sharded" / "b" / "events.jsonl", "b") == commits);
  CHECK(sharded.at("a")["params_hash"] == plain.at("a")["params_hash"]);
  CHECK(sharded.at("b")["params_hash"] == plain.at("b")["params_hash"]);
  // Stage 2 reduces the same sums range by range.
  CHECK(commit_hashes(dir / "zero2" / "a" / "events.jsonl", "a") == commits);
  CHECK(zero2.at("a")["params_hash"] == plain.at("a")["params_hash"]);
  CHECK(zero2.at("b")["params_hash"] == plain.at("b")["params_hash"]);
  // Stage 3 gathers each layer's weights for forward and backward, and the whole weights for the
  // round's delta and its commit: the same sums again.
  CHECK(commit_hashes(dir / "zero3" / "a" / "events.jsonl", "a") == commits);
  CHECK(commit_hashes(dir / "zero3" / "b" / "events.jsonl", "b") == commits);
  CHECK(zero3.at("a")["params_hash"] == plain.at("a")["params_hash"]);
  CHECK(zero3.at("b")["params_hash"] == plain.at("b")["params_hash"]);
  // A site of 4 stage-3 replicas beside one of 2 (each cut its own way): one job, one version.
  CHECK(uneven.at("a")["version"] == 3);
  CHECK(commit_hashes(dir / "uneven" / "a" / "events.jsonl", "a") == commit_hashes(dir / "uneven" / "b" / "events.jsonl", "b"));
  CHECK(uneven.at("a")["params_hash"] == uneven.at("b")["params_hash"]);
  CHECK(uneven.at("a")["memory"]["moments_elements"].get<double>() <
        uneven.at("b")["memory"]["moments_elements"].get<double>());  // a quarter against a half
  // Their outer states were sharded by default, cut as the weights are: no round gathered the
  // whole weights, only the final hash did; a whole outer state needs them every round.
  for (const std::string site : {"a", "b"}) {
    CAPTURE(site);
    CHECK(uneven.at(site)["memory"]["whole_weight_gathers"] == 1);
    CHECK(zero3.at(site)["memory"]["whole_weight_gathers"].get<int>() > 3);
  }
  // The trainer holds 16/M bytes per parameter (4 at 4 replicas; stage 2 holds 7), pages where
  // ranges meet aside.
  const auto& memory = uneven.at("a")["memory"];
  CHECK(memory["state_bytes"]["trainer"].get<double>() < 5.5 * memory["params"].get<double>());
  // Each site's final checkpoint: a part per replica, read back whole, the outer state beside it.
  for (const auto& [site, parts] : {std::pair{"a", 4u}, std::pair{"b", 2u}}) {
    CAPTURE(site);
    const auto final_file = dir / "uneven" / site / "checkpoints" / "ckpt-0000000012.mrdn";
    const meridian::Checkpoint whole = meridian::read_checkpoint(meridian::posix_env(), final_file);
    CHECK(whole.get_pod<std::uint64_t>("adamw.parts").front() == parts);
    CHECK(whole.get_pod<float>("adamw.m").size() == uneven.at(site)["memory"]["params"].get<std::size_t>());
  }
}

TEST_CASE("split exchange: each replica carries its share of a delta on its own lane, and the job commits what a leader's exchange does") {
  EtcdServer etcd;
  TempDir dir("split-sites");
  const std::string inner = "[inner]\nlr = 3e-3\nbatch_per_replica = 2\nsteps = 12\n"
                            "[log]\nevery = 1\neval_every = 0\neval_windows = 4\n";
  const std::string outer = "algorithm = \"diloco\"\ninner_steps = 4\ncodec = \"int8\"\noverlap = false\n";
  const auto job = [&](const std::string& name, const std::string& exchange, int replicas_a,
                       const std::string& transport = "") {
    return write_job(dir, name, outer + "[transport]\nexchange = \"" + exchange + "\"\n" + transport, "replicas = 2\n",
                     inner, 5, "replicas = " + std::to_string(replicas_a) + "\n");
  };
  const auto leader = run_sites(dir, job("leader", "leader", 2), etcd);
  const auto split = run_sites(dir, job("split", "split", 2), etcd);
  const auto uneven = run_sites(dir, job("uneven", "split", 3), etcd);
  const auto ucx = run_sites(dir, job("ucx", "split", 2, "kind = \"ucx\"\nnetwork = \"private\"\n"), etcd);
  // The bytes are the same, only who carries them differs: every commit and the final weights agree.
  const auto commits = commit_hashes(dir / "leader" / "a" / "events.jsonl", "a");
  CHECK(commits.size() == 3);
  CHECK(commit_hashes(dir / "split" / "a" / "events.jsonl", "a") == commits);
  CHECK(commit_hashes(dir / "split" / "b" / "events.jsonl", "b") == commits);
  CHECK(split.at("a")["params_hash"] == leader.at("a")["params_hash"]);
  CHECK(split.at("b")["params_hash"] == leader.at("b")["params_hash"]);
  for (const std::string site : {"a", "b"}) {
    CAPTURE(site);
    // Every round's delta went to the peer in 2 stripes and came back together there.
    const auto& s = split.at(site)["split"];
    CHECK(s["lanes"] == 1);
    CHECK(s["striped_sends"] == 3);
    CHECK(s["assembled"] == 3);
    CHECK(s["stripes_refused"] == 0);
    CHECK(split.at(site)["delta_requests"] == 0);
    // The leader put half of the site's delta bytes on the WAN, its replica the other half.
    const double site_bytes = split.at(site)["wan_bytes_sent"].get<double>();
    const double leader_bytes = s["link_bytes_sent"].get<double>();
    CHECK(leader_bytes == doctest::Approx(site_bytes / 2).epsilon(0.02));
    const auto done = events_of(read_jsonl(dir / "split" / site / "events.jsonl"), "replica_done");
    int members = 0;
    for (const auto& e : done) {
      if (e["lane"].empty()) continue;
      ++members;
      CHECK(e["lane"]["stripes_sent"] == 3);
      CHECK(e["lane"]["stripes_received"] == 3);
      CHECK(e["lane"]["missing"] == 0);
      CHECK(e["lane"]["bytes_sent"].get<double>() == doctest::Approx(site_bytes / 2).epsilon(0.02));
    }
    CHECK(members == 1);
  }
  // The lanes are the job's transport: over UCX the same stripes, the same commits.
  CHECK(commit_hashes(dir / "ucx" / "a" / "events.jsonl", "a") == commits);
  CHECK(ucx.at("b")["params_hash"] == leader.at("b")["params_hash"]);
  CHECK(ucx.at("a")["split"]["assembled"] == 3);
  // 3 replicas beside 2: three stripes, one from each of a's replicas, to b's two (two flows into b's
  // leader: from a's leader and a's replica 2).
  CHECK(uneven.at("a")["version"] == 3);
  CHECK(commit_hashes(dir / "uneven" / "a" / "events.jsonl", "a") == commit_hashes(dir / "uneven" / "b" / "events.jsonl", "b"));
  CHECK(uneven.at("a")["params_hash"] == uneven.at("b")["params_hash"]);
  CHECK(uneven.at("a")["split"]["lanes"] == 2);
  CHECK(uneven.at("a")["split"]["striped_sends"] == 3);
  CHECK(uneven.at("b")["split"]["assembled"] == 3);
}

// With the outer state sharded the peers' deltas come in parts, each replica keeping its own: the
// killed replica's parts are gone with it, and its group, re-formed, asks for those deltas whole.
TEST_CASE(
    "split exchange: a replica killed mid-run costs its stripes (or its parts) a re-request, and both sites end on one "
    "version, with the outer state whole and sharded") {
  for (const std::string shard : {"false", "true"}) {
    CAPTURE(shard);
    TempDir dir("split-kill-" + shard);
    const auto summaries = killed_run(
        dir, "splitkill", "[transport]\nexchange = \"split\"\n[parallel]\nshard_outer = " + shard + "\n", 160);
    const auto run = dir / "splitkill";
    const auto& a = summaries.at("a");
    const auto& b = summaries.at("b");
    const auto events = read_jsonl(run / "a" / "events.jsonl");
    REQUIRE_FALSE(events_of(events, "replica_exited").empty());
    CHECK_FALSE(events_of(events, "replica_restarted").empty());
    // Only the killed replica died: none stopped on a broken invariant (exit code 70) on the way.
    for (const auto& e : events_of(events, "replica_exited")) CHECK(e.value("exit_code", 0) != 70);
    // Nothing committed is lost: one chain of versions, and both sites end on its last, with one set
    // of weights. The stripes the dead replica was to send never come; the peer asks for the whole
    // delta again, and while the site re-forms its group it may adopt a peer's state instead.
    CHECK(a["version"] == b["version"]);
    CHECK(a["params_hash"] == b["params_hash"]);
    const auto at_a = commit_hashes(run / "a" / "events.jsonl", "a");
    const auto at_b = commit_hashes(run / "b" / "events.jsonl", "b");
    CHECK(at_a.size() + 8 > static_cast<std::size_t>(a["version"].get<int>()));
    for (const auto& [version, hash] : at_b)
      if (at_a.contains(version)) CHECK(at_a.at(version) == hash);
    // The stripes went on around the failure: nearly every round striped (or cut in parts) and put
    // together (or held in parts) at the peer.
    const bool parts = shard == "true";
    CHECK(a["split"][parts ? "parts_sent" : "striped_sends"].get<int>() >= 30);
    CHECK(b["split"][parts ? "held_in_parts" : "assembled"].get<int>() >= 30);
    CHECK(a["split"]["lanes"] == 2);  // the restarted replica has a lane again
  }
}

TEST_CASE("sharded outer state: each replica keeps its part, and the job commits what whole states do, hash for hash") {
  EtcdServer etcd;
  TempDir dir("outer-shards");
  const std::string inner = "[inner]\nlr = 3e-3\nbatch_per_replica = 2\nsteps = 12\n"
                            "[log]\nevery = 1\neval_every = 0\neval_windows = 4\n";
  const std::string outer = "algorithm = \"diloco\"\ninner_steps = 4\ncodec = \"int8\"\noverlap = false\n";
  const auto job = [&](const std::string& name, const std::string& more, int replicas_a) {
    return write_job(dir, name, outer + more, "replicas = 2\n", inner, 5, "replicas = " + std::to_string(replicas_a) + "\n");
  };
  const std::string shard = "[parallel]\nshard_outer = true\n";
  const auto plain = run_sites(dir, job("plain", "", 2), etcd);
  const auto sharded = run_sites(dir, job("sharded", shard, 2), etcd);
  const auto split3 = run_sites(dir, job("split3", "[transport]\nexchange = \"split\"\n[parallel]\nshard_outer = true\n"
                                                   "zero_stage = 3\n[checkpoint]\nper_replica = true\n", 2), etcd);
  const auto plain4 = run_sites(dir, job("plain4", "", 4), etcd);
  const auto sharded4 = run_sites(dir, job("sharded4", shard, 4), etcd);
  // Overlapped rounds (the default), 3 replicas beside 2: versions come between steps, and a
  // proposal waits for its replicas' hash; the sites end on one version, with one set of weights.
  const auto overlapped = run_sites(
      dir, write_job(dir, "overlapped", "algorithm = \"diloco\"\ninner_steps = 4\ncodec = \"int8\"\n" + shard,
                     "replicas = 2\n", inner, 5, "replicas = 3\n"),
      etcd);
  CHECK(overlapped.at("a")["version"] == overlapped.at("b")["version"]);
  CHECK(overlapped.at("a")["params_hash"] == overlapped.at("b")["params_hash"]);
  CHECK(overlapped.at("a")["version"].get<int>() >= 3);
  // Each replica encodes and previews its part; the parts join to the bytes and the hash a whole
  // state gives: every commit and the final weights agree, with the split exchange and stage 3 too.
  const auto commits = commit_hashes(dir / "plain" / "a" / "events.jsonl", "a");
  CHECK(commits.size() == 3);
  for (const std::string site : {"a", "b"}) {
    CAPTURE(site);
    CHECK(commit_hashes(dir / "sharded" / site / "events.jsonl", site) == commits);
    CHECK(commit_hashes(dir / "split3" / site / "events.jsonl", site) == commits);
    CHECK(sharded.at(site)["params_hash"] == plain.at(site)["params_hash"]);
    CHECK(split3.at(site)["params_hash"] == plain.at(site)["params_hash"]);
    // The first join cut the whole state every replica began with, nothing sent.
    const auto cuts = events_of(read_jsonl(dir / "sharded" / site / "events.jsonl"), "outer_cut");
    REQUIRE(cuts.size() == 1);
    CHECK(cuts[0]["replicas"] == 2);
    CHECK(cuts[0]["moved"] == false);
  }
  // Each site's outer state is sharded: the other's deltas went to it in parts, part i to its
  // replica i, whose parts and reports stand in for the whole at its leader, which never put one
  // together nor asked for one.
  for (const std::string site : {"a", "b"}) {
    CAPTURE(site);
    CHECK(split3.at(site)["split"]["parts_sent"] == 3);
    CHECK(split3.at(site)["split"]["held_in_parts"] == 3);
    CHECK(split3.at(site)["split"]["assembled"] == 0);
    CHECK(split3.at(site)["delta_requests"] == 0);  // none came whole after all
  }
  // Each replica journalled its part of the peer's deltas as it filled it in: the site's journal
  // gives every one of them back whole, the very bytes the peer journalled as its own.
  for (const auto& [site, peer] : {std::pair{"a", "b"}, std::pair{"b", "a"}}) {
    CAPTURE(site);
    const auto here = meridian::FileDeltaJournal(dir / "split3" / site / "delta-journal").load();
    const auto theirs = meridian::FileDeltaJournal(dir / "split3" / peer / "delta-journal").load();
    int rounds = 0;
    for (const auto& [key, bytes] : theirs) {
      if (key.first != peer) continue;
      ++rounds;
      CHECK(here.contains(key));
      if (here.contains(key)) CHECK(here.at(key) == bytes);
    }
    CHECK(rounds == 3);
  }
  // At stage 3 each round read and rewrote the replica's part and mirror of the weights where they
  // lie: the whole weights were gathered only at the end (the final hash), never for a round.
  for (const std::string site : {"a", "b"}) CHECK(split3.at(site)["memory"]["whole_weight_gathers"] == 1);
  // Nor at start-up: each replica was built holding its first parts of the weights, its outer
  // state started from them (cut as the weights are), and its group's first join kept them.
  for (const std::string site : {"a", "b"}) {
    int first_joins = 0;
    for (const auto& j : events_of(read_jsonl(dir / "split3" / site / "events.jsonl"), "joined")) {
      if (j["generation"] != 0) continue;
      ++first_joins;
      CHECK(j["first_parts_kept"] == true);
    }
    CHECK(first_joins == 2);
  }
  // A site of 4 beside one of 2: the same commits as whole states make, and a quarter of the
  // outer state per replica, with a mirror of the next one's quarter: about half of a whole
  // state's (the tiny model is 8.5 units of 4,096 values: the leader's part and mirror are 2 each).
  const auto commits4 = commit_hashes(dir / "plain4" / "a" / "events.jsonl", "a");
  CHECK(commits4.size() == 3);
  CHECK(commit_hashes(dir / "sharded4" / "a" / "events.jsonl", "a") == commits4);
  CHECK(commit_hashes(dir / "sharded4" / "b" / "events.jsonl", "b") == commits4);
  CHECK(sharded4.at("a")["params_hash"] == plain4.at("a")["params_hash"]);
  const double outer_whole = plain4.at("a")["memory"]["state_bytes"]["outer"].get<double>();
  const double outer_part = sharded4.at("a")["memory"]["state_bytes"]["outer"].get<double>();
  CHECK(outer_part == doctest::Approx(outer_whole * 4 / 8.47).epsilon(0.01));
  // What a replica but the leader received in the group's channel: a whole state's the means (4
  // bytes a parameter a version), a sharded one's the blocks of its part and mirror of each
  // merged int8 delta (2 sites x 1 byte x 2/4 a version, about 0.25 of the means; once: a version
  // its site proposed comes without them, every replica having previewed it, unless the group was
  // cut anew in between, and then whole).
  const auto received = [&](const std::string& run) {
    for (const auto& done : events_of(read_jsonl(dir / run / "a" / "events.jsonl"), "replica_done"))
      if (done["replica"] == 1) return done["group_bytes_received"].get<double>();
    FAIL("no replica_done of replica 1 in " << run);
    return 0.0;
  };
  CHECK(received("sharded4") < 0.35 * received("plain4"));
  CHECK(received("sharded4") > 0.1 * received("plain4"));
  // The final checkpoint holds the whole outer state: what a whole state writes, gathered from the
  // parts at the leader, or (split3, [checkpoint] per_replica) in slices, one in each replica's
  // part file, that only the reader joins.
  const auto final_file = [&](const std::string& run) {
    return dir / run / "a" / "checkpoints" / "ckpt-0000000012.mrdn";
  };
  const auto final_of = [&](const std::string& run) {
    return meridian::read_checkpoint(meridian::posix_env(), final_file(run));
  };
  const auto whole = final_of("plain4"), parts = final_of("sharded4");
  const auto whole2 = final_of("plain"), sliced = final_of("split3");
  for (const std::string record : {"outer.global", "outer.start", "outer.momentum", "outer.residual"}) {
    CAPTURE(record);
    CHECK(parts.get_pod<float>(record) == whole.get_pod<float>(record));
    CHECK(sliced.get_pod<float>(record) == whole2.get_pod<float>(record));
  }
  const auto leader_file = meridian::decode_checkpoint(meridian::posix_env().read_all(final_file("split3")), "split3");
  CHECK_FALSE(leader_file.has("outer.global"));
  const auto part_file = meridian::decode_checkpoint(
      meridian::posix_env().read_all(meridian::part_path(final_file("split3"), 0)), "split3 part");
  CHECK(part_file.get_pod<std::uint64_t>("sliced.range").at(2) == whole2.get_pod<float>("outer.global").size());
}

// At stage 3 the weights too are in parts, and each replica (the restarted one included) is built
// holding only its first parts of them, its outer state starting from those.
TEST_CASE(
    "sharded outer state: a replica killed mid-run, its part comes from the mirror, and both sites end on one version, "
    "at ZeRO stages 0 and 3") {
  for (const std::string stage : {"0", "3"}) {
    CAPTURE(stage);
    TempDir dir("outer-shards-kill-" + stage);
    const auto summaries =
        killed_run(dir, "shardkill", "[parallel]\nshard_outer = true\nzero_stage = " + stage + "\n", 120);
    const auto run = dir / "shardkill";
    const auto& a = summaries.at("a");
    const auto& b = summaries.at("b");
    const auto events = read_jsonl(run / "a" / "events.jsonl");
    REQUIRE_FALSE(events_of(events, "replica_exited").empty());
    // The survivors cut the state anew from their parts and the dead replica's mirror, at the
    // version they held: nothing committed is lost, and no older state was taken. (A version
    // committed without this site meanwhile may make it adopt the peer's state, which the peer's
    // replicas put together from their parts.)
    const auto cuts = events_of(events, "outer_cut");
    REQUIRE(cuts.size() >= 2);
    int from_mirror = 0;
    for (const auto& c : cuts) {
      CHECK_FALSE(c.contains("older"));
      from_mirror += c["mirrors"].get<int>();
    }
    CHECK(from_mirror >= 1);
    CHECK(a["version"] == b["version"]);
    CHECK(a["params_hash"] == b["params_hash"]);
    const auto at_a = commit_hashes(run / "a" / "events.jsonl", "a");
    const auto at_b = commit_hashes(run / "b" / "events.jsonl", "b");
    for (const auto& [version, hash] : at_b)
      if (at_a.contains(version)) CHECK(at_a.at(version) == hash);
  }
}

// A group of two that loses one holds the outer state whole on the survivor (a proposal made on
// the parts is forgotten: the protocol simulator's replica deaths found it kept), and cuts it in
// parts again once the new replica has joined.
TEST_CASE(
    "sharded outer state: a site of 2 replicas that loses one goes on with the state whole, then in parts again, and "
    "both sites end on one version") {
  TempDir dir("outer-shards-kill-of-2");
  const auto summaries = killed_run(dir, "shardkill2", "[parallel]\nshard_outer = true\n", 160, 2);
  const auto run = dir / "shardkill2";
  const auto events = read_jsonl(run / "a" / "events.jsonl");
  REQUIRE_FALSE(events_of(events, "replica_exited").empty());
  std::vector<int> groups;  // each cut's group size, in order
  for (const auto& c : events_of(events, "outer_cut")) {
    CHECK_FALSE(c.contains("older"));
    groups.push_back(c["replicas"].get<int>());
  }
  const auto alone = std::find(groups.begin(), groups.end(), 1);
  REQUIRE(alone != groups.end());
  CHECK(std::find(alone, groups.end(), 2) != groups.end());
  const auto& a = summaries.at("a");
  const auto& b = summaries.at("b");
  CHECK(a["version"] == b["version"]);
  CHECK(a["params_hash"] == b["params_hash"]);
  const auto at_a = commit_hashes(run / "a" / "events.jsonl", "a");
  for (const auto& [version, hash] : commit_hashes(run / "b" / "events.jsonl", "b"))
    if (at_a.contains(version)) CHECK(at_a.at(version) == hash);
}

// The leader dies alone, twice: the next replica leads with a CrossSite of its own (registered at
// once on a lease of its own, its journal read back from the site's run directory), and lets go
// of it when the restarted replica, the lowest slot, leads again; leading the second time, it
// builds its leader side anew instead of taking up one whose registration names a dead process.
TEST_CASE(
    "a site's leader killed twice mid-run: another replica leads, then it again, and both sites end on one version") {
  for (const std::string outer : {"", "[parallel]\nshard_outer = true\n"}) {
    CAPTURE(outer);
    TempDir dir("leader-kill");
    const auto summaries = killed_run(dir, "leaderkill", outer, 200, 3, {0, 0});
    const auto run = dir / "leaderkill";
    const auto& a = summaries.at("a");
    const auto& b = summaries.at("b");
    CHECK(a["version"] == b["version"]);
    CHECK(a["params_hash"] == b["params_hash"]);
    const auto events = read_jsonl(run / "a" / "events.jsonl");
    // Each change of leader between groups that met opens a link; a leader that stays in the group
    // lets go of its side. (A generation superseded before its members met never leads. A
    // load-slowed replica evicted and back adds generations, and changes of its own.)
    std::set<std::int64_t> met;
    for (const auto& j : events_of(events, "joined")) met.insert(j["generation"].get<std::int64_t>());
    std::size_t changes = 0, released = 0;
    std::vector<int> before;
    for (const auto& g : events_of(events, "generation")) {
      if (!met.contains(g["number"].get<std::int64_t>())) continue;
      const auto members = g["members"].get<std::vector<int>>();
      if (!before.empty() && members.front() != before.front()) {
        ++changes;
        released += std::find(members.begin(), members.end(), before.front()) != members.end();
      }
      before = members;
    }
    CHECK(changes >= 4);
    CHECK(events_of(events, "link_open").size() == 1 + changes);
    CHECK(events_of(events, "leader_side_released").size() == released);
    CHECK(released >= 2);
    // Every version a holds is b's, and no round of a was merged twice.
    const auto at_a = commit_hashes(run / "a" / "events.jsonl", "a");
    for (const auto& [version, hash] : commit_hashes(run / "b" / "events.jsonl", "b"))
      if (at_a.contains(version)) CHECK(at_a.at(version) == hash);
    std::set<std::int64_t> rounds_of_a;
    for (const auto& c : events_of(read_jsonl(run / "b" / "events.jsonl"), "commit_applied"))
      for (const auto& d : c.value("deltas", json::array()))
        if (d["site"] == "a") CHECK(rounds_of_a.insert(d["round"].get<std::int64_t>()).second);
    CHECK(rounds_of_a.size() >= 40);
  }
}

TEST_CASE(
    "a sharded site resumes from a checkpoint in parts at another replica count: each replica reads its own part, and "
    "the job goes on as from a whole checkpoint") {
  TempDir dir("resume-parts");
  const std::string outer =
      "algorithm = \"diloco\"\ninner_steps = 4\ncodec = \"int8\"\noverlap = false\n"
      "[parallel]\nshard_outer = true\nzero_stage = 1\n";
  const auto launch = [&](const std::string& name, const std::string& checkpoint, int steps, int replicas_a) {
    // Each launch with a control plane of its own, as `meridian launch` starts one.
    EtcdServer etcd;
    const std::string inner = "[inner]\nlr = 3e-3\nbatch_per_replica = 2\nsteps = " + std::to_string(steps) +
                              "\n[log]\nevery = 4\neval_every = 0\neval_windows = 4\n";
    return run_sites(dir,
                     write_job(dir, name, outer + checkpoint, "replicas = 2\n", inner, 5,
                               "replicas = " + std::to_string(replicas_a) + "\n"),
                     etcd);
  };
  const std::string in_parts = "[checkpoint]\nper_replica = true\n";
  launch("whole", "", 8, 2);
  launch("parts", in_parts, 8, 2);
  // Site a comes back with 3 replicas where it wrote its checkpoint with 2.
  const auto whole = launch("whole", "", 16, 3);
  const auto parts = launch("parts", in_parts, 16, 3);
  for (const std::string site : {"a", "b"}) {
    CAPTURE(site);
    CHECK(parts.at(site)["params_hash"] == whole.at(site)["params_hash"]);
    CHECK(parts.at(site)["version"] == 4);
    CHECK(commit_hashes(dir / "parts" / site / "events.jsonl", site) ==
          commit_hashes(dir / "whole" / site / "events.jsonl", site));
    CHECK(parts.at(site)["memory"]["resume_peak_rss_bytes"].get<double>() > 0);
  }
  // Each of a's 3 replicas read its third of the moments and its part and mirror of the outer
  // state from the 2 part files, nobody the whole; the group's cut then moved nothing.
  const auto events = read_jsonl(dir / "parts" / "a" / "events.jsonl");
  const auto resumed = events_of(events, "resumed_parts");
  REQUIRE(resumed.size() == 3);
  const double params = parts.at("a")["memory"]["params"].get<double>();
  double moments = 0;
  for (const auto& r : resumed) {
    CHECK(r["whole"] == false);
    CHECK(r["step"] == 8);
    CHECK(r["moments_elements"].get<double>() < 0.5 * params);
    CHECK(r["outer_elements"].get<double>() < 0.8 * params);
    moments += r["moments_elements"].get<double>();
  }
  CHECK(moments == params);
  const auto cuts = events_of(events, "outer_cut");
  REQUIRE(cuts.size() == 2);  // one per launch
  CHECK(cuts[1]["replicas"] == 3);
  CHECK(cuts[1]["moved"] == false);
}
