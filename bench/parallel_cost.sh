#!/usr/bin/env bash
# What `[parallel]` costs a site's step and saves in its memory, on the reference shape (4 layers x
# 128 channels, T=64, per-replica batch 8), `meridian site` on loopback with Gloo:
#   - zero_stage 1 (the optimizer's state sharded), 2 (the gradients too) and 3 (the weights too)
#     against 0, at 2 and 4 CPU replicas;
#   - recompute "cheap" and "full" against "none", at 1 replica;
#   - memory: the ledger by part and the peak resident memory at the first join and up to the end of training, stages
#     0 to 3 at 4 replicas, on the `medium` preset (10.8M parameters, so that the state shows
#     beside the process's fixed share), a few steps of one sequence each; stages 1 to 3 again
#     with [checkpoint] per_replica (the final checkpoint written in parts). MEMORY_ONLY=1: this alone.
# Each comparison alternates its settings over ROUNDS rounds, same program and data. Tokens/s comes
# from the leader's metric lines (first to last logged step: start-up, rendezvous and the final
# evaluation excluded); the memory from summary.json's ledger (the leader's training state per
# parameter, from the buffers it holds, its activation buffers and its peak resident memory).
#   BUILD_DIR=build/release  ROUNDS=3  STEPS=120  REPLICAS="2 4"  MEMORY_PRESET=medium
# Holds /tmp/meridian-bench.lock, so benchmarks on this machine do not overlap.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build/release} ROUNDS=${ROUNDS:-3} STEPS=${STEPS:-120} REPLICAS=${REPLICAS:-"2 4"}
MEMORY_PRESET=${MEMORY_PRESET:-medium}
meridian="$BUILD_DIR/sites/meridian"
[ -x "$meridian" ] || { echo "parallel_cost.sh: build $meridian first" >&2; exit 1; }
source bench/bench_lock.sh
hold_bench_lock "$@"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

figures() {  # run_dir -> "tokens/s state_bytes_per_param trainer_bytes_per_param peak_rss_MiB activation_MiB"
  /usr/bin/python3 - "$1" <<'PY'
import json, sys
run = sys.argv[1]
rows = [json.loads(l) for l in open(f"{run}/metrics.jsonl") if '"loss"' in l]
m = json.load(open(f"{run}/summary.json"))["memory"]
print(f"{(rows[-1]['tokens'] - rows[0]['tokens']) / (rows[-1]['time'] - rows[0]['time']):.0f}",
      f"{m['state_bytes_per_param']:.2f}", f"{m['state_bytes']['trainer'] / m['params']:.2f}",
      f"{m['peak_rss_bytes'] / 2**20:.0f}", f"{m['activation_bytes'] / 2**20:.1f}")
PY
}

run() {  # replicas stage recompute round -> figures
  local dir="$work/m$1-z$2-$3-r$4"
  "$meridian" site --config configs/single-site.toml --site local --set job.run_dir="$dir" --set inner.steps="$STEPS" \
    --set replicas.count="$1" --set parallel.zero_stage="$2" --set parallel.recompute="$3" --set log.every=10 \
    --set log.eval_every=0 --set log.eval_windows=8 --set checkpoint.every=0 --set replicas.sdc_every=0 >/dev/null
  figures "$dir"
}

median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }

if [ -z "${MEMORY_ONLY:-}" ]; then
for m in $REPLICAS; do
  stage0=() stage1=() stage2=() stage3=()
  for r in $(seq "$ROUNDS"); do
    line="$m replicas, round $r:"
    for z in 0 1 2 3; do
      read -r t held trainer rss _ <<<"$(run "$m" "$z" none "$r")"
      declare -n runs=stage$z
      runs+=("$t")
      line+=" stage $z $t tokens/s ($held B/param held, trainer $trainer, peak RSS $rss MiB);"
    done
    echo "$line"
  done
  p=$(median "${stage0[@]}")
  for z in 1 2 3; do
    declare -n runs=stage$z
    x=$(median "${runs[@]}")
    echo "$m replicas, median of $ROUNDS: stage $z $x tokens/s against stage 0 $p, stage $z / stage 0 $(ratio "$x" "$p")"
  done
done

none=() cheap=() full=()
for r in $(seq "$ROUNDS"); do
  line="1 replica, round $r:"
  for mode in none cheap full; do
    read -r t _ _ rss act <<<"$(run 1 0 "$mode" "$r")"
    declare -n runs=$mode
    runs+=("$t")
    line+=" $mode $t tokens/s (activations $act MiB, peak RSS $rss MiB);"
  done
  echo "$line"
done
n=$(median "${none[@]}")
for mode in cheap full; do
  declare -n runs=$mode
  x=$(median "${runs[@]}")
  echo "recompute $mode, median of $ROUNDS: $x tokens/s against none $n, $mode / none $(ratio "$x" "$n")"
done
fi

for run in 0 1 2 3 1-parts 2-parts 3-parts; do
  z=${run%-parts} parts=false
  [ "$run" = "$z" ] || parts=true
  dir="$work/memory-$run"
  "$meridian" site --config configs/single-site.toml --site local --set job.run_dir="$dir" \
    --set model.preset="$MEMORY_PRESET" --set inner.batch_per_replica=1 --set inner.steps=4 --set replicas.count=4 \
    --set parallel.zero_stage="$z" --set log.every=1 --set log.eval_every=0 --set log.eval_windows=1 \
    --set checkpoint.every=0 --set checkpoint.per_replica="$parts" --set replicas.sdc_every=0 >/dev/null
  /usr/bin/python3 - "$dir" "$run" <<'PY'
import json, sys
m = json.load(open(f"{sys.argv[1]}/summary.json"))["memory"]
parts = ", ".join(f"{k} {v / m['params']:.2f}" for k, v in sorted(m["state_bytes"].items()) if v)
print(f"memory, {m['params']:,} parameters, 4 replicas, stage {sys.argv[2]}: {m['state_bytes_per_param']:.2f} B/param held"
      f" ({parts}); peak RSS at the first join {m['first_join_peak_rss_bytes'] / 2**20:.0f} MiB,"
      f" to the end of training {m['training_peak_rss_bytes'] / 2**20:.0f} MiB,"
      f" with the final checkpoint {m['peak_rss_bytes'] / 2**20:.0f} MiB")
PY
done
