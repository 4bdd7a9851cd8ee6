#!/usr/bin/env bash
# Training tokens/s of one site with 1 and with 2 CPU replicas (`meridian site`, loopback, Gloo),
# on the reference shape (4 layers x 128 channels, T=64) with per-replica batch 8: the same
# program and data, run back to back, ROUNDS times alternating. Tokens/s is measured from the
# replica-0 metric lines (tokens and wall time between the first and the last logged step), so
# start-up, rendezvous and the final evaluation are excluded.
#   BUILD_DIR=build/release  ROUNDS=3  STEPS=120
#   SETTINGS="replicas.overlap_allreduce=false"   extra config overrides for both runs
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build/release} ROUNDS=${ROUNDS:-3} STEPS=${STEPS:-120}
meridian="$BUILD_DIR/sites/meridian"
EXTRA=()
for kv in ${SETTINGS:-}; do EXTRA+=(--set "$kv"); done
[ -x "$meridian" ] || { echo "site_scaling.sh: build $meridian first" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

tokens_per_s() {  # run_dir -> tokens/s between the first and last metric lines with a loss
  /usr/bin/python3 - "$1/metrics.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"loss"' in l]
print(f"{(rows[-1]['tokens'] - rows[0]['tokens']) / (rows[-1]['time'] - rows[0]['time']):.0f}")
PY
}

run() {  # replicas round -> tokens/s
  local dir="$work/r$1-$2"
  "$meridian" site --config configs/single-site.toml --site local --set job.run_dir="$dir" --set inner.steps="$STEPS" \
    --set replicas.count="$1" --set log.every=10 --set log.eval_every=0 --set log.eval_windows=8 \
    --set checkpoint.every=0 --set replicas.sdc_every=0 "${EXTRA[@]}" >/dev/null
  tokens_per_s "$dir"
}

one=() two=()
for r in $(seq "$ROUNDS"); do
  one+=("$(run 1 "$r")")
  two+=("$(run 2 "$r")")
  echo "round $r: 1 replica ${one[-1]} tokens/s, 2 replicas ${two[-1]} tokens/s"
done
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
m1=$(median "${one[@]}") m2=$(median "${two[@]}")
echo "site tokens/s, median of $ROUNDS: 1 replica $m1, 2 replicas $m2 (ratio $(awk -v a="$m2" -v b="$m1" 'BEGIN { printf "%.2f", a / b }'))"
