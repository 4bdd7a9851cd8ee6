#!/usr/bin/env bash
# What sharding the optimizer's state (ZeRO stage 1, `[parallel] zero_stage = 1`) costs a site's
# step and saves in its memory, against unsharded replicas, at 2 and 4 CPU replicas
# (`meridian site`, loopback, Gloo) on the reference shape (4 layers x 128 channels, T=64, per-replica
# batch 8). For each replica count, ROUNDS rounds alternate the two stages, same program and data.
# Tokens/s comes from the leader's metric lines (first to last logged step: start-up, rendezvous
# and the final evaluation excluded); the memory from summary.json's ledger (the leader's training
# state per parameter, from the buffers it holds, and its peak resident memory).
#   BUILD_DIR=build/release  ROUNDS=3  STEPS=120  REPLICAS="2 4"
# Holds /tmp/meridian-bench.lock, so benchmarks on this machine do not overlap.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build/release} ROUNDS=${ROUNDS:-3} STEPS=${STEPS:-120} REPLICAS=${REPLICAS:-"2 4"}
LOCK=/tmp/meridian-bench.lock
meridian="$BUILD_DIR/sites/meridian"
[ -x "$meridian" ] || { echo "zero_cost.sh: build $meridian first" >&2; exit 1; }
if [ -z "${MERIDIAN_BENCH_LOCKED:-}" ]; then
  echo "zero_cost.sh: waiting for $LOCK" >&2
  exec env MERIDIAN_BENCH_LOCKED=1 flock "$LOCK" "$0" "$@"
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

figures() {  # run_dir -> "tokens/s state_bytes_per_param trainer_bytes_per_param peak_rss_MiB"
  /usr/bin/python3 - "$1" <<'PY'
import json, sys
run = sys.argv[1]
rows = [json.loads(l) for l in open(f"{run}/metrics.jsonl") if '"loss"' in l]
m = json.load(open(f"{run}/summary.json"))["memory"]
print(f"{(rows[-1]['tokens'] - rows[0]['tokens']) / (rows[-1]['time'] - rows[0]['time']):.0f}",
      f"{m['state_bytes_per_param']:.2f}", f"{m['state_bytes']['trainer'] / m['params']:.2f}",
      f"{m['peak_rss_bytes'] / 2**20:.0f}")
PY
}

run() {  # replicas stage round -> figures
  local dir="$work/m$1-z$2-r$3"
  "$meridian" site --config configs/single-site.toml --site local --set job.run_dir="$dir" --set inner.steps="$STEPS" \
    --set replicas.count="$1" --set parallel.zero_stage="$2" --set log.every=10 --set log.eval_every=0 \
    --set log.eval_windows=8 --set checkpoint.every=0 --set replicas.sdc_every=0 >/dev/null
  figures "$dir"
}

median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
for m in $REPLICAS; do
  plain=() sharded=()
  for r in $(seq "$ROUNDS"); do
    read -r t0 s0 tr0 rss0 <<<"$(run "$m" 0 "$r")"
    read -r t1 s1 tr1 rss1 <<<"$(run "$m" 1 "$r")"
    plain+=("$t0") sharded+=("$t1")
    echo "$m replicas, round $r: stage 0 $t0 tokens/s ($s0 B/param held, trainer $tr0, peak RSS $rss0 MiB);" \
         "stage 1 $t1 tokens/s ($s1 B/param held, trainer $tr1, peak RSS $rss1 MiB)"
  done
  p=$(median "${plain[@]}") s=$(median "${sharded[@]}")
  echo "$m replicas, median of $ROUNDS: stage 0 $p tokens/s, stage 1 $s tokens/s," \
       "stage 1 / stage 0 $(awk -v a="$s" -v b="$p" 'BEGIN { printf "%.3f", a / b }')"
done
