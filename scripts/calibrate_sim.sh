#!/usr/bin/env bash
# Calibrates `meridian sim` against a real run of the same job file: runs the job with
# `meridian launch`, reads its summary.json and events, gives the simulator what each site spent
# locally (compute per inner step and its spread from round to round, start-up, bookkeeping per
# step), and compares what the
# simulator predicts about the rest -- waiting on other sites for deltas and versions over the
# links -- and so compute utilization and wall time, with what the run did.
#
#   scripts/calibrate_sim.sh [JOB] [STEPS] [--set key=value]...
#     JOB    job file (default configs/demo.toml); STEPS inner steps (default 300)
#     --set  passed to both the real run and the simulator (e.g. the [wan] emulation)
# Prints both sides and the relative errors; exits 1 when utilization or wall time is off by
# more than TOLERANCE (default 0.10). MERIDIAN: the binary (default build/release/sites/meridian).
# REAL_RUN=DIR compares with a run already made (its run_dir, same job, steps and --set) instead.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${MERIDIAN:-build/release/sites/meridian}
JOB=${1:-configs/demo.toml}
STEPS=${2:-300}
shift $(( $# < 2 ? $# : 2 ))
TOLERANCE=${TOLERANCE:-0.10}
OUT=$(mktemp -d /tmp/meridian-calibrate.XXXXXX)
trap 'rm -rf "$OUT"' EXIT

# Every step logged: the spread of the rounds' compute times is measured from the step times.
SETS=(--set "inner.steps=$STEPS" --set "job.run_dir=\"$OUT/real\"" --set log.every=1 "$@")
if [[ -n "${REAL_RUN:-}" ]]; then
  ln -s "$(realpath "$REAL_RUN")" "$OUT/real"
else
  echo "real run: $BIN launch $JOB ${SETS[*]}"
  "$BIN" launch "$JOB" "${SETS[@]}" > "$OUT/launch.log" 2>&1 || { tail -20 "$OUT/launch.log"; exit 1; }
fi

# What each site spent locally, from its summary.json and events.jsonl: compute per inner step;
# start-up (its start to its replicas' first join); and everything else that is neither compute
# nor waiting on other sites (logging, polling links and etcd, the final evaluation and
# checkpoint). The simulator's own evaluation estimate is subtracted from the latter, the rest
# spread over the steps. Waiting on other sites is what the simulator has to predict.
measure() {
python3 - "$OUT/real" "${1:-}" <<'PY'
import json, os, sys
real = json.load(open(os.path.join(sys.argv[1], "summary.json")))
sim = json.load(open(sys.argv[2])) if sys.argv[2] else None
steps, startups, others = [], [], []
for s in real["sites"]:
    events = [json.loads(l) for l in open(os.path.join(sys.argv[1], s["site"], "events.jsonl"))]
    t0 = next(e["time"] for e in events if e.get("event") == "site_start")
    joined = next(e["time"] for e in events if e.get("event") == "joined")
    compute = s["compute_utilization"] * s["wall_s"]
    steps.append(compute / s["steps"])
    startups.append(joined - t0)
    other = s["wall_s"] - compute - s.get("waited_s", 0) - (joined - t0)
    if sim:
        own = next(r for r in sim["results"] if r["algorithm"] == sim["job_algorithm"])
        other -= next(x for x in own["sites"] if x["site"] == s["site"])["overhead_s"] - sum(startups) / len(startups)
    others.append(max(0.0, other) / s["steps"])
# A round's compute from the times between its steps' metric lines, leaving out the first step
# of each round (it follows the previous round's exchange, where the waiting is); each site's
# rounds against its own mean, so that sites of different speeds add no spread.
rounds = []
h = sim["scenario"]["inner_steps"] if sim else 0
for s in real["sites"] if h > 1 else []:
    times = {}
    for l in open(os.path.join(sys.argv[1], s["site"], "metrics.jsonl")):
        m = json.loads(l)
        if "loss" in m and "val_loss" not in m: times[m["step"]] = m["time"]
    own = []
    for r in range(1, s["steps"] // h + 1):
        inner = [times[k] - times[k - 1] for k in range((r - 1) * h + 2, r * h + 1) if k in times and k - 1 in times]
        if len(inner) == h - 1: own.append(sum(inner))
    if own:
        mean = sum(own) / len(own)
        rounds += [x / mean for x in own]
cv = (sum((x - 1) ** 2 for x in rounds) / (len(rounds) - 1)) ** 0.5 if len(rounds) > 1 else 0
print(f"--set sim.step_times_s=[{','.join(f'{x:.6f}' for x in steps)}]"
      f" --set sim.startup_s={sum(startups) / len(startups):.4f}"
      f" --set sim.step_overhead_s={sum(others) / len(others) if sim else 0:.6f}"
      f" --set sim.step_time_cv={cv:.4f}")
PY
}
read -r -a MEASURED <<< "$(measure)"
"$BIN" sim "$JOB" "${SETS[@]}" "${MEASURED[@]}" --out "$OUT/sim" > "$OUT/sim.log"
read -r -a MEASURED <<< "$(measure "$OUT/sim/sim.json")"
echo "measured inputs: ${MEASURED[*]}"
"$BIN" sim "$JOB" "${SETS[@]}" "${MEASURED[@]}" --out "$OUT/sim" > "$OUT/sim.log"

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
    print(f"  {s['site']:10s} real: utilization {s['compute_utilization']:.3f}, wall {s['wall_s']:.1f} s, waited {s.get('waited_s', 0):.1f} s"
          f" | sim: {o['compute_utilization']:.3f}, {o['end_s']:.1f} s, waited {o['wait_s']:.1f} s")
print("within" if ok else "NOT within", f"{100 * tol:.0f}%")
sys.exit(0 if ok else 1)
PY
