#!/usr/bin/env bash
# Calibrates `meridian sim` against a real run of the same job file: runs the job with
# `meridian launch`, reads its summary.json, gives the simulator what the run measured about
# compute (seconds per inner step, from each site's compute_utilization x wall_s / steps), and
# compares what the simulator predicts about everything else -- waits on other sites, transfers,
# evaluations, so compute utilization and wall time -- with what the run did.
#
#   scripts/calibrate_sim.sh [JOB] [STEPS] [--set key=value]...
#     JOB    job file (default configs/demo.toml); STEPS inner steps (default 300)
#     --set  passed to both the real run and the simulator (e.g. the [wan] emulation)
# Prints both sides and the relative errors; exits 1 when utilization or wall time is off by
# more than TOLERANCE (default 0.10). MERIDIAN: the binary (default build/release/sites/meridian).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${MERIDIAN:-build/release/sites/meridian}
JOB=${1:-configs/demo.toml}
STEPS=${2:-300}
shift $(( $# < 2 ? $# : 2 ))
TOLERANCE=${TOLERANCE:-0.10}
OUT=$(mktemp -d /tmp/meridian-calibrate.XXXXXX)
trap 'rm -rf "$OUT"' EXIT

SETS=(--set "inner.steps=$STEPS" --set "job.run_dir=\"$OUT/real\"" "$@")
echo "real run: $BIN launch $JOB ${SETS[*]}"
"$BIN" launch "$JOB" "${SETS[@]}" > "$OUT/launch.log" 2>&1 || { tail -20 "$OUT/launch.log"; exit 1; }

STEP_S=$(python3 - "$OUT/real/summary.json" <<'PY'
import json, sys
sites = json.load(open(sys.argv[1]))["sites"]
print(sum(s["compute_utilization"] * s["wall_s"] / s["steps"] for s in sites) / len(sites))
PY
)
echo "measured compute per inner step: $STEP_S s"
"$BIN" sim "$JOB" "${SETS[@]}" --set "sim.step_time_s=$STEP_S" --out "$OUT/sim" > "$OUT/sim.log"

python3 - "$OUT/real/summary.json" "$OUT/sim/sim.json" "$TOLERANCE" <<'PY'
import json, sys
real = json.load(open(sys.argv[1]))
sim = json.load(open(sys.argv[2]))
tol = float(sys.argv[3])
own = next(r for r in sim["results"] if r["algorithm"] == sim["job_algorithm"])
sites = real["sites"]
real_util = sum(s["compute_utilization"] for s in sites) / len(sites)
real_site_wall = max(s["wall_s"] for s in sites)
# The launcher's own time (a local etcd member, starting and ending processes) is outside the
# sites' clocks and outside the simulator: shown, not predicted.
overhead = real["wall_s"] - real_site_wall
rows = [("compute utilization (mean of sites)", real_util, own["compute_utilization"]),
        ("wall time of the slowest site (s)", real_site_wall, own["wall_s"])]
print(f"algorithm: {own['algorithm']}; launcher overhead (etcd, processes): {overhead:.1f} s of {real['wall_s']:.1f} s")
print(f"{'':40s} {'real':>10s} {'sim':>10s} {'error':>8s}")
ok = True
for name, r, s in rows:
    err = (s - r) / r
    ok &= abs(err) <= tol
    print(f"{name:40s} {r:10.3f} {s:10.3f} {100 * err:+7.1f}%")
for s in sites:
    o = next(x for x in own["sites"] if x["site"] == s["site"])
    print(f"  {s['site']:12s} real utilization {s['compute_utilization']:.3f} wall {s['wall_s']:.1f} s waited {s.get('waited_s', 0):.1f} s"
          f" | sim {o['compute_utilization']:.3f} wall {o['end_s']:.1f} s waited {o['wait_s']:.1f} s")
print("within" if ok else "NOT within", f"{100 * tol:.0f}%")
sys.exit(0 if ok else 1)
PY
