#!/usr/bin/env bash
# What a site's leader dying costs it: RUNS runs of test_site_shards' "a site's leader killed twice"
# (site a of 3 replicas loses its leader twice, each time restarted at once; 200 steps of DiLoCo in
# lockstep beside site b, outer state whole and sharded; real processes, a real etcd), each run's
# run directories kept (MERIDIAN_KEEP_TEST_DIRS) and read: per configuration, the states site a
# adopted from b instead of applying a version from deltas, the steps those adoptions skipped
# (fast_forward), and each catch-up's milliseconds (a new leader side, from joining to holding the
# job's version). Medians and totals over the runs, then one line per run.
#   BUILD_DIR=build/release  RUNS=8
# Holds /tmp/meridian-bench.lock (MERIDIAN_BENCH_LOCKED=1 when the caller holds it).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build/release} RUNS=${RUNS:-8}
test_bin="$BUILD_DIR/tests/test_site_shards"
[ -x "$test_bin" ] || { echo "leader_takeover.sh: build $test_bin first" >&2; exit 1; }
source bench/bench_lock.sh
hold_bench_lock "$@"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for run in $(seq 1 "$RUNS"); do
  # The test names its directories <tmp>/meridian-leader-kill-<pid>-<n>: the whole state first.
  mkdir -p "$work/$run"
  OMP_NUM_THREADS=1 TMPDIR="$work/$run" MERIDIAN_KEEP_TEST_DIRS=1 "$test_bin" \
    --test-case="a site's leader killed twice mid-run*" > "$work/$run.log" 2>&1 ||
    { tail -20 "$work/$run.log"; echo "leader_takeover.sh: run $run failed" >&2; exit 1; }
done
python3 - "$work" "$RUNS" <<'PY'
import glob, json, os, statistics, sys
work, runs = sys.argv[1], int(sys.argv[2])
rows = {"whole": [], "sharded": []}
for run in range(1, runs + 1):
    dirs = sorted(glob.glob(f"{work}/{run}/meridian-leader-kill-*"), key=lambda d: int(d.rsplit("-", 1)[1]))
    for config, d in zip(("whole", "sharded"), dirs):
        events = [json.loads(l) for l in open(os.path.join(d, "leaderkill", "a", "events.jsonl"))]
        kinds = [e["event"] for e in events]
        rows[config].append({
            "adopted": kinds.count("state_adopted"),
            "skipped": sum(e["step"] - e["from_step"] for e in events if e["event"] == "fast_forward"),
            "catch_up_ms": [e["ms"] for e in events if e["event"] == "caught_up"],
        })
for config, rs in rows.items():
    catch_ups = [ms for r in rs for ms in r["catch_up_ms"]]
    print(f"{config}: {len(rs)} runs, {2 * len(rs)} leaders killed: states adopted {sum(r['adopted'] for r in rs)}, "
          f"steps skipped {sum(r['skipped'] for r in rs)}, catch-ups {len(catch_ups)}: median "
          f"{statistics.median(catch_ups):.0f} ms, range {min(catch_ups):.0f}-{max(catch_ups):.0f} ms"
          if catch_ups else f"{config}: {len(rs)} runs, no catch-up")
    for i, r in enumerate(rs, 1):
        print(f"  run {i}: adopted {r['adopted']}, skipped {r['skipped']}, catch-ups "
              + " ".join(f"{ms:.0f}" for ms in r["catch_up_ms"]))
PY
