// Two sites end to end (tests/sites/two_sites.hpp: `meridian site` processes on loopback against a
// real etcd; ZeRO, the split exchange and the sharded outer state in test_site_shards.cpp): the DiLoCo
// path and the synchronous baseline share one code path, so with inner SGD, H = 1, outer SGD at
// lr 1 without momentum and fp32 deltas, DiLoCo must reproduce the synchronous run step for step.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "tests/sites/two_sites.hpp"

using namespace meridian::testing;
using nlohmann::json;

TEST_CASE("identity: DiLoCo with H = 1, outer lr 1, no momentum, fp32 equals synchronous training") {
  EtcdServer etcd;
  TempDir dir("identity");
  const auto sync = run_sites(dir, write_job(dir, "sync", "algorithm = \"sync\"\n"), etcd);
  const auto diloco = run_sites(
      dir,
      write_job(dir, "diloco",
                "algorithm = \"diloco\"\ninner_steps = 1\nlr = 1.0\nmomentum = 0.0\nnesterov = false\ncodec = \"fp32\"\n"
                "overlap = false\n"),
      etcd);
  // Each DiLoCo site logs the loss of its own half of the global batch; sync logs their mean.
  const auto sync_loss = losses(dir / "sync" / "a" / "metrics.jsonl");
  const auto da = losses(dir / "diloco" / "a" / "metrics.jsonl");
  const auto db = losses(dir / "diloco" / "b" / "metrics.jsonl");
  REQUIRE(sync_loss.size() == 12);
  REQUIRE(da.size() == 12);
  REQUIRE(db.size() == 12);
  for (const auto& [step, loss] : sync_loss) {
    CAPTURE(step);
    // Tolerance: (base - local) / 1 re-rounds the SGD update once per step; the rest is identical.
    CHECK((da.at(step) + db.at(step)) / 2 == doctest::Approx(loss).epsilon(1e-6));
  }
  CHECK(sync.at("a")["final_val_loss"].get<double>() ==
        doctest::Approx(diloco.at("a")["final_val_loss"].get<double>()).epsilon(1e-5));
  // Both algorithms leave every site holding the same weights as its peer.
  CHECK(sync.at("a")["params_hash"] == sync.at("b")["params_hash"]);
  CHECK(diloco.at("a")["params_hash"] == diloco.at("b")["params_hash"]);
  CHECK(diloco.at("a")["version"] == 12);
  CHECK(sync.at("a")["rounds"] == 12);
}

TEST_CASE("the transport carries bytes, nothing else: UCX and ZeroMQ runs end with the same weights") {
  EtcdServer etcd;
  TempDir dir("transports");
  // Without overlap a run is a pure function of its inputs, whatever the timing.
  const std::string outer = "algorithm = \"diloco\"\ninner_steps = 4\ncodec = \"int4\"\noverlap = false\n";
  const auto zmq = run_sites(dir, write_job(dir, "zmq", outer + "[transport]\nkind = \"zmq\"\nchunk_bytes = 4096\n"), etcd);
  const auto ucx = run_sites(dir, write_job(dir, "ucx", outer + "[transport]\nkind = \"ucx\"\nnetwork = \"private\"\nchunk_bytes = 4096\n"), etcd);
  CHECK(zmq.at("a")["version"] == 3);
  CHECK(ucx.at("a")["params_hash"] == zmq.at("a")["params_hash"]);
  CHECK(ucx.at("b")["params_hash"] == zmq.at("b")["params_hash"]);
  CHECK(ucx.at("a")["wan_bytes_sent"] == zmq.at("a")["wan_bytes_sent"]);
}


TEST_CASE("overlap: eager rounds start at the estimate, rebased ones do not, both end with every site on one version") {
  EtcdServer etcd;
  TempDir dir("eager");
  const std::string adamw = "[inner]\nlr = 0.003\nsteps = 64\nbatch_per_replica = 2\n[log]\nevery = 8\neval_every = 0\n"
                            "eval_windows = 16\n";
  const std::string outer = "algorithm = \"diloco\"\ninner_steps = 8\ncodec = \"int8\"\noverlap = true\n";
  const auto eager = run_sites(dir, write_job(dir, "eager", outer + "overlap_update = \"eager\"\n", "", adamw), etcd);
  const auto rebase = run_sites(dir, write_job(dir, "rebase", outer, "", adamw), etcd);  // the default
  for (const auto* run : {&eager, &rebase}) {
    CHECK(run->at("a")["params_hash"] == run->at("b")["params_hash"]);
    CHECK(run->at("a")["rounds"] == 8);
  }
  // Every round but the last starts at the estimate, unless its own commit came first.
  CHECK(eager.at("a")["eager_steps"].get<int>() >= 4);
  CHECK(eager.at("b")["eager_steps"].get<int>() >= 4);
  CHECK(rebase.at("a")["eager_steps"] == 0);
}

TEST_CASE("sparse: sites train on with their unsent residual in their weights and all end on one version") {
  EtcdServer etcd;
  TempDir dir("sparse");
  const std::string adamw = "[inner]\nlr = 0.003\nsteps = 64\nbatch_per_replica = 2\n[log]\nevery = 8\neval_every = 0\n"
                            "eval_windows = 16\n";
  // The density is derived from the byte budget; the end drops each site's residual
  // (OuterState::end_feedback), without which every site would end on its own weights.
  const std::string outer = "algorithm = \"diloco\"\ninner_steps = 8\ncodec = \"sparse\"\n";
  const auto lockstep = run_sites(dir, write_job(dir, "lockstep", outer + "overlap = false\n", "", adamw), etcd);
  const auto overlapped = run_sites(dir, write_job(dir, "overlapped", outer + "overlap = true\n", "", adamw), etcd);
  for (const auto* run : {&lockstep, &overlapped}) {
    CHECK(run->at("a")["params_hash"] == run->at("b")["params_hash"]);
    CHECK(run->at("a")["rounds"] == 8);
    CHECK(run->at("a")["bytes_per_param_round"].get<double>() <= 0.1);
  }
}

// The most steps site a trained past the end of one of its rounds before it applied the version
// that merged that round (rounds of `h` steps from step 0).
std::int64_t max_commit_lag(const std::filesystem::path& events, int h) {
  std::int64_t lag = 0;
  for (const auto& e : read_jsonl(events)) {
    if (e.value("event", "") != "commit_applied" || e["site"] != "a") continue;
    for (const auto& d : e["deltas"])
      if (d["site"] == "a") lag = std::max(lag, e["step"].get<std::int64_t>() - (d["round"].get<std::int64_t>() + 1) * h);
  }
  return lag;
}

TEST_CASE("overlap_steps bounds how far a site trains past a round's end before its commit is applied") {
  EtcdServer etcd;
  TempDir dir("overlap-steps");
  // 100 ms each way between the sites: a commit comes many of the tiny model's steps after a round ends.
  const std::string outer = "algorithm = \"diloco\"\ninner_steps = 8\ncodec = \"int8\"\noverlap = true\n";
  const std::string inner = "[inner]\noptimizer = \"sgd\"\nlr = 0.5\nclip = 0\nbatch_per_replica = 2\nsteps = 48\n"
                            "[log]\nevery = 8\neval_every = 0\neval_windows = 4\n[wan]\nlatency_ms = 100.0\n";
  for (const int tau : {1, 8}) {
    const std::string name = "tau" + std::to_string(tau);
    const auto run =
        run_sites(dir, write_job(dir, name, outer + "overlap_steps = " + std::to_string(tau) + "\n", "", inner), etcd);
    CHECK(run.at("a")["params_hash"] == run.at("b")["params_hash"]);
    const std::int64_t lag = max_commit_lag(dir / name / "a" / "events.jsonl", 8);
    if (tau == 1) CHECK(lag <= 1);
    else CHECK(lag >= 3);  // unbounded, the round's commit comes several steps late
  }
}

TEST_CASE("a resumed job's traffic counts every launch: rounds and WAN bytes go on from the checkpoint") {
  EtcdServer etcd;
  TempDir dir("resumed-traffic");
  const std::string outer = "algorithm = \"diloco\"\ninner_steps = 4\ncodec = \"int8\"\noverlap = false\n";
  const auto steps = [](int n) {
    return "[inner]\noptimizer = \"sgd\"\nlr = 0.5\nclip = 0\nbatch_per_replica = 2\nsteps = " + std::to_string(n) +
           "\n[log]\nevery = 4\neval_every = 0\neval_windows = 4\n";
  };
  const auto first = run_sites(dir, write_job(dir, "job", outer, "", steps(8)), etcd);
  // Each site's journal keeps the record of the version its last checkpoint holds, and none
  // before it: the relaunch recalls it (CommitLog::recall) and holds the next commits to it.
  for (const std::string site : {"a", "b"}) {
    std::set<std::string> records;
    for (const auto& e : std::filesystem::directory_iterator(dir / "job" / site / "delta-journal"))
      if (e.path().extension() == ".record") records.insert(e.path().filename().string());
    CHECK(first.at(site)["version"] == 2);
    CHECK(records == std::set<std::string>{"commit-000000000002.record"});
  }
  // A relaunch starts a fresh control plane, as `meridian launch` does (it wipes its etcd member's
  // data): the job's own state is in the sites' checkpoints.
  EtcdServer fresh;
  const auto second = run_sites(dir, write_job(dir, "job", outer, "", steps(16)), fresh);
  CHECK(first.at("a")["rounds"] == 2);
  CHECK(second.at("a")["rounds"] == 4);
  // Lockstep int8 rounds of one model are the same size: twice the rounds, twice the bytes.
  const double ratio = second.at("a")["wan_bytes_sent"].get<double>() / first.at("a")["wan_bytes_sent"].get<double>();
  CHECK(ratio == doctest::Approx(2.0).epsilon(0.02));
  CHECK(second.at("a")["bytes_per_param_round"].get<double>() ==
        doctest::Approx(first.at("a")["bytes_per_param_round"].get<double>()).epsilon(0.02));
  // The memory ledger tells a resume's peak apart: none in a fresh launch.
  CHECK(first.at("a")["memory"]["resume_peak_rss_bytes"] == 0);
  const auto& memory = second.at("a")["memory"];
  CHECK(memory["resume_peak_rss_bytes"].get<double>() > 0);
  CHECK(memory["resume_peak_rss_bytes"].get<double>() <= memory["peak_rss_bytes"].get<double>());
}

TEST_CASE("dynamic local updates: a site half as fast ends its rounds after half the inner steps") {
  EtcdServer etcd;
  TempDir dir("dynamic");
  const auto run = run_sites(
      // overlap_steps derived: 1. Before a finished site stopped being waited for, b's round after
      // a's end waited for a's delta here in 1 run of 6 (commit_rule's awaited_sites).
      dir, write_job(dir, "dynamic", "algorithm = \"diloco\"\ninner_steps = 4\ndynamic_inner_steps = true\n",
                     "speed = 0.5\n"),
      etcd);
  CHECK(run.at("a")["rounds"] == 3);  // 12 steps in rounds of 4
  CHECK(run.at("b")["rounds"] == 6);  // ... and of 2
  CHECK(run.at("a")["params_hash"] == run.at("b")["params_hash"]);
}

// AdamW, 384 steps, H = 32: DiLoCo exchanges 12 times, streaming 48 times (every 8 steps) plus the
// 3 other fragments at the end.
const std::string kStreamingAdamw = "[inner]\nlr = 0.003\nsteps = 384\nbatch_per_replica = 4\n[log]\nevery = 32\n"
                                    "eval_every = 0\neval_windows = 64\n";
const std::string kDilocoOuter = "algorithm = \"diloco\"\n", kStreamingOuter = "algorithm = \"streaming\"\nfragments = 4\n";

std::filesystem::path write_streaming(const TempDir& dir, const std::string& name, int seed, const std::string& outer) {
  return write_job(dir, name, "inner_steps = 32\ncodec = \"int8\"\n" + outer, "", kStreamingAdamw, seed);
}

TEST_CASE("streaming DiLoCo, P = 4: two sites end on the same weights, a quarter of the bytes per exchange") {
  EtcdServer etcd;
  TempDir dir("streaming");
  // Overlapped, as by default: the protocol's figures.
  const auto diloco = run_sites(dir, write_streaming(dir, "diloco", 5, kDilocoOuter), etcd);
  const auto streaming = run_sites(dir, write_streaming(dir, "streaming", 5, kStreamingOuter), etcd);
  for (const auto* run : {&diloco, &streaming}) {
    CHECK(run->at("a")["params_hash"] == run->at("b")["params_hash"]);
    CHECK(run->at("a")["version"] == run->at("b")["version"]);
  }
  CHECK(diloco.at("a")["rounds"] == 12);
  CHECK(streaming.at("a")["rounds"] == 51);
  CHECK(streaming.at("a")["fragments"] == 4);
  CHECK(streaming.at("a")["version"].get<int>() >= 51);  // every exchange of both sites merged, one fragment a version
  // A fragment of the tiny model is within a few percent of a quarter of it.
  const double ratio =
      streaming.at("a")["bytes_per_exchange"].get<double>() / diloco.at("a")["bytes_per_exchange"].get<double>();
  CHECK(ratio == doctest::Approx(0.25).epsilon(0.05));
  const auto peak = [](const std::map<std::string, json>& run) {
    return std::max(run.at("a")["peak_bytes_in_flight"].get<double>(), run.at("b")["peak_bytes_in_flight"].get<double>());
  };
  CHECK(peak(streaming) / peak(diloco) < 0.6);  // in flight: a fragment or two, against one or two whole models
}

TEST_CASE("streaming DiLoCo, P = 4, without overlap: the loss of DiLoCo over three seeds") {
  EtcdServer etcd;
  TempDir dir("streaming-loss");
  // The loss: overlapped runs differ run to run with the timing of the commits (2.87 to 3.03 for
  // the same DiLoCo job), so the comparison takes runs without overlap, which are pure functions
  // of their inputs, over three seeds (seed to seed, either algorithm's loss moves by ~0.1).
  double dl = 0, sl = 0;
  for (const int seed : {5, 6, 7}) {
    const std::string s = std::to_string(seed);
    dl += run_sites(dir, write_streaming(dir, "diloco-" + s, seed, kDilocoOuter + "overlap = false\n"), etcd)
              .at("a")["final_val_loss"].get<double>() / 3;
    sl += run_sites(dir, write_streaming(dir, "streaming-" + s, seed, kStreamingOuter + "overlap = false\n"), etcd)
              .at("a")["final_val_loss"].get<double>() / 3;
  }
  MESSAGE("mean final validation loss over 3 seeds: DiLoCo ", dl, ", streaming ", sl);
  CHECK(sl == doctest::Approx(dl).epsilon(0.03));
}

TEST_CASE("every site's round refused: each drops it and trains on, none waits for the others for ever") {
  EtcdServer etcd;
  TempDir dir("refused");
  // Both sites' learning rate spikes 300x at step 60 (round 7, steps 56..63): both deltas of round
  // 7 are far past 20x the median norm of the merged ones, so every site refuses both, and no
  // version can merge either. In lockstep each site waited for that version for ever before; now
  // each drops its round as soon as it refuses it. Overlapped, a site trains on past the round's
  // end and drops the round (with those steps) once it sees that no version can come; the other
  // does the same unless the first's next round is announced before it looks again (then a
  // version can come, and its rebase replaces the refused round's progress).
  const auto spiked = [](int steps, int spike_steps) {
    return "[inner]\nlr = 0.0015\nwarmup_steps = 5\nsteps = " + std::to_string(steps) +
           "\nbatch_per_replica = 4\n[log]\nevery = 8\neval_every = 0\neval_windows = 16\n"
           "[guard]\ninject_lr_step = 60\ninject_lr_factor = 300\ninject_lr_steps = " + std::to_string(spike_steps) + "\n";
  };
  const auto outer = [](bool overlap) {
    return std::string("algorithm = \"diloco\"\ninner_steps = 8\ncodec = \"int8\"\noverlap = ") +
           (overlap ? "true" : "false") + "\n";
  };
  for (const bool overlap : {false, true}) {
    CAPTURE(overlap);
    const std::string name = overlap ? "refused-overlap" : "refused";
    const auto ends = run_sites(dir, write_job(dir, name, outer(overlap), "", spiked(120, 1)), etcd);
    int dropping = 0;
    for (const std::string site : {"a", "b"}) {
      CAPTURE(site);
      const auto events = read_jsonl(dir / name / site / "events.jsonl");
      std::set<std::string> refused;
      for (const auto& e : events_of(events, "delta_refused"))
        if (e["number"] == 7) refused.insert(e["peer"].get<std::string>());
      const std::set<std::string> both{"a", "b"};
      CHECK_MESSAGE(refused == both, "refused round 7 of ", refused.size(), " sites");
      for (const auto& e : events_of(events, "commit_applied"))
        for (const auto& d : e["deltas"]) CHECK_MESSAGE(d["round"] != 7, "version ", e["version"], " merged ", d.dump());
      const auto dropped = events_of(events, "round_dropped");
      if (!overlap) REQUIRE(!dropped.empty());
      if (dropped.empty()) continue;
      ++dropping;
      CHECK(dropped[0]["round"] == 7);
      CHECK(dropped[0]["version"] == 7);  // rounds 0..6 merged, one version each
    }
    CHECK(dropping >= 1);  // else no version could have come after version 7
    // The rounds after it merged again, and both sites end on one version.
    CHECK(ends.at("a")["params_hash"] == ends.at("b")["params_hash"]);
    CHECK(ends.at("a")["version"] == ends.at("b")["version"]);
    CHECK(ends.at("a")["version"].get<int>() > 7);
    CHECK(std::isfinite(ends.at("a")["final_val_loss"].get<double>()));
  }

  // Spiked for 40 steps, every site's rounds 7, 8 and 9 are refused: the sites give up there with
  // the input's exit code (no restarts), saying why, rather than drop every round to the end.
  run_sites(dir, write_job(dir, "diverging", outer(false), "", spiked(160, 40)), etcd, {}, 65);
  for (const std::string site : {"a", "b"}) {
    CAPTURE(site);
    std::vector<std::int64_t> dropped, in_a_row;
    for (const auto& e : events_of(read_jsonl(dir / "diverging" / site / "events.jsonl"), "round_dropped")) {
      dropped.push_back(e["round"]);
      in_a_row.push_back(e["in_a_row"]);
    }
    CHECK(dropped == std::vector<std::int64_t>{7, 8, 9});
    CHECK(in_a_row == std::vector<std::int64_t>{1, 2, 3});
    std::ifstream log(dir / ("diverging-" + site + ".log"));
    const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
    CHECK_MESSAGE(text.find("3 rounds in a row") != std::string::npos, text);
  }
}

TEST_CASE("divergence guard across sites: a spiked site rolls back to its version, recovers, and the job ends near a clean run") {
  EtcdServer etcd;
  TempDir dir("guard");
  // AdamW, 240 steps in rounds of 8, without overlap (a run is a pure function of its inputs). The
  // spike hits site a's step 100, inside a round (96..103): its damage is never announced. These
  // batches of 4 windows have spikes of their own, and where they fall depends on the CPU's
  // arithmetic: at lr 3e-3, z 6.5 and gradient norms 14x the median; at 1.5e-3 on an AVX-512
  // machine, a gradient norm 67x the median at step 232. The detector's bounds are raised above
  // those (loss z 10, norms 1000x) and still below the injected spike's (z 13.7): this case is
  // about what the guard does across sites, test_divergence_detector about what it detects.
  const std::string inner = "[inner]\nlr = 0.0015\nwarmup_steps = 5\nsteps = 240\nbatch_per_replica = 4\n"
                            "[log]\nevery = 8\neval_every = 0\neval_windows = 64\n"
                            "[guard]\nacross_sites = true\nwindow = 20\nmin_history = 10\nsnapshot_every = 10\n"
                            "loss_z = 10.0\ngrad_norm_ratio = 1000.0\n";
  // The outer step the case was sized with (a 2-site job would otherwise take the derived ones).
  const std::string outer =
      "algorithm = \"diloco\"\ninner_steps = 8\ncodec = \"int8\"\noverlap = false\nlr = 0.7\nmomentum = 0.9\n"
      "momentum_warmup = 0\n";
  const std::vector<std::string> spike = {"guard.inject_lr_step=100", "guard.inject_lr_factor=300"};
  const auto clean = run_sites(dir, write_job(dir, "clean", outer, "", inner), etcd);
  const auto guarded = run_sites(dir, write_job(dir, "guarded", outer, "", inner), etcd, spike);

  const auto a = read_jsonl(dir / "guarded" / "a" / "events.jsonl");
  const auto b = read_jsonl(dir / "guarded" / "b" / "events.jsonl");
  const auto detected = events_of(a, "divergence_detected");
  REQUIRE(detected.size() == 1);
  CHECK(detected[0]["step"] == 101);  // the spike's update shows in the next step's loss
  const auto rollback = events_of(a, "rollback");
  REQUIRE(rollback.size() == 1);
  MESSAGE("rollback: ", rollback[0].dump());
  CHECK(rollback[0]["from_step"] == 101);
  CHECK(rollback[0]["to_step"] == 102);  // the steps go on: only the weights went back
  CHECK(rollback[0]["to_version"] == 12);  // the version of step 96's round, the newest it held
  CHECK(rollback[0]["discarded_steps"] == 6);
  CHECK(rollback[0]["lr_scale"] == 0.5);
  // The version it went back to is the one every site committed: its hash is the commit's.
  bool found = false;
  for (const auto& e : events_of(a, "commit_applied"))
    if (e["version"] == rollback[0]["to_version"]) found = e["params_hash"] == rollback[0]["params_hash"];
  CHECK(found);
  CHECK(events_of(a, "recovered").size() == 1);
  CHECK(events_of(a, "divergence_gave_up").empty());
  CHECK(events_of(b, "divergence_detected").empty());
  CHECK(events_of(b, "rollback").empty());
  CHECK(events_of(b, "delta_refused").empty());  // nothing of the spike was ever sent

  // Both sites end on one version with the same weights, which every round of both sites reached.
  CHECK(guarded.at("a")["params_hash"] == guarded.at("b")["params_hash"]);
  CHECK(guarded.at("a")["version"] == guarded.at("b")["version"]);
  CHECK(guarded.at("a")["version"] == clean.at("a")["version"]);
  CHECK(guarded.at("a")["rollbacks"] == 1);
  CHECK(guarded.at("a")["lr_scale"] == 0.5);
  CHECK(guarded.at("b")["rollbacks"] == 0);
  const double clean_loss = clean.at("a")["final_val_loss"].get<double>();
  const double guarded_loss = guarded.at("a")["final_val_loss"].get<double>();
  // The stated margin: within 3% of the clean run (measured 3.219 against 3.204, +0.5%).
  MESSAGE("final val loss: clean ", clean_loss, ", spiked and rolled back ", guarded_loss);
  CHECK(std::abs(guarded_loss - clean_loss) < 0.03 * clean_loss);

  // Without the guard (at either site) site a's damaged round (12: steps 96..103) is announced,
  // passes the peers' screen and goes into version 13 on both sites: measured 3.366, +5.1%.
  const auto unguarded =
      run_sites(dir, write_job(dir, "unguarded", outer, "", inner + "enabled = false\n"), etcd, spike);
  MESSAGE("final val loss unguarded: ", unguarded.at("b")["final_val_loss"].get<double>());
  CHECK(unguarded.at("a")["params_hash"] == unguarded.at("b")["params_hash"]);
  const auto merged_damage = [&](const std::string& run) {
    for (const auto& e : events_of(read_jsonl(dir / run / "b" / "events.jsonl"), "commit_applied"))
      for (const auto& d : e["deltas"])
        if (d["site"] == "a" && d["round"] == 12) return true;
    return false;
  };
  CHECK(merged_damage("unguarded"));
  CHECK(unguarded.at("b")["final_val_loss"].get<double>() > 1.03 * clean_loss);
}
