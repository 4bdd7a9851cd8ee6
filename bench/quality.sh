#!/usr/bin/env bash
# DiLoCo against a tuned synchronous baseline at equal tokens and global batch (bench/quality.toml),
# every case run with `meridian launch` on this machine. Prints the table of final validation
# losses and gaps, and leaves each run's merged metrics.jsonl (both curves) under $OUT.
#
#   bench/quality.sh                                  # the default cases below
#   CASES="3:50:int8:eager:adamw" bench/quality.sh    # sites:H:codec:mode:optimizer, space separated
#       mode: lockstep (overlap = false), rebase or eager (overlap = true with that overlap_update)
#       optimizer: adamw or muon (the sync baseline of a muon case trains with muon too)
#   SYNC_LRS="1e-3 1.4e-3 2e-3 3e-3" the baseline's inner lr sweep: each case is compared with the best
#   SEEDS="1 2 3"                     every run once per seed; the table gives the mean and the spread
#   CORPUS=gutenberg                  the first 8 MB of ../shared/data/gutenberg_en instead of tiny shakespeare
#   STEPS=600 OUT=runs/quality
#   SETS="outer.deadline_ms=60000"    more `--set k=v` for every run (space separated). A fixed deadline
#                                     keeps a busy machine's adaptive one from cutting a late site out
#                                     of a lockstep version, which makes the run another run
#
# Lockstep runs are deterministic: the same build gives the same losses on any machine of this
# kind. Overlapped runs are not (timing decides which deltas each version merges): give them seeds.
# Holds /tmp/meridian-bench.lock for the whole sweep, so it does not overlap other benchmarks.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/bench_lock.sh
hold_bench_lock "$@"
MERIDIAN=$(pwd)/${MERIDIAN:-build/release/sites/meridian}
OUT=${OUT:-runs/quality}
CASES=${CASES:-"2:50:int8:lockstep:adamw 3:50:int8:lockstep:adamw 3:50:int8:eager:adamw 3:50:sparse:lockstep:adamw 4:50:int8:lockstep:adamw"}
SYNC_LRS=${SYNC_LRS:-"1e-3 1.4e-3 2e-3 3e-3"}
SEEDS=${SEEDS:-1337}
STEPS=${STEPS:-600}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
DATA=""
if [[ "${CORPUS:-}" == gutenberg ]]; then
  DATA="$OUT/gutenberg.txt"
  # head closing the pipe early fails cat with SIGPIPE, which pipefail would make this script's exit.
  [[ -s "$DATA" ]] || { cat $(ls ../shared/data/gutenberg_en/*.txt | grep -v SOURCE | sort | head -40) | head -c 8000000 > "$DATA" || true; }
  [[ $(stat -c %s "$DATA") == 8000000 ]] || { echo "$DATA: expected 8000000 bytes" >&2; exit 1; }
fi

# run NAME SITES ALGORITHM H CODEC MODE OPTIMIZER SEED [k=v ...] -> prints the final validation loss and bytes
run() {
  local name=$1 sites=$2 algorithm=$3 h=$4 codec=$5 mode=$6 optimizer=$7 seed=$8
  shift 8
  local job="$OUT/$name.toml" overlap=true update=eager
  [[ $mode == lockstep ]] && overlap=false
  [[ $mode == rebase ]] && update=rebase
  {
    echo "include = \"$(pwd)/bench/quality.toml\""
    printf '[job]\nname = "%s"\nrun_dir = "%s"\nseed = %s\n' "$name" "$OUT/$name" "$seed"
    [[ -n "$DATA" ]] && printf '[data]\npath = "%s"\n' "$DATA"
    printf '[inner]\nsteps = %s\noptimizer = "%s"\n' "$STEPS" "$optimizer"
    printf '[outer]\nalgorithm = "%s"\ninner_steps = %s\ncodec = "%s"\noverlap = %s\noverlap_update = "%s"\n' \
      "$algorithm" "$h" "$codec" "$overlap" "$update"
    for i in $(seq 1 "$sites"); do printf '[[site]]\nname = "s%s"\n' "$i"; done
  } > "$job"
  local sets=()
  for kv in ${SETS:-} "$@"; do sets+=(--set "$kv"); done
  "$MERIDIAN" launch "$job" "${sets[@]}" > "$OUT/$name.log" 2>&1 || { echo "$name failed: see $OUT/$name.log" >&2; exit 1; }
  python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(s["final_val_loss"], s.get("bytes_per_param_round") or 4, s.get("reduction_vs_sync") or 1)' \
    "$OUT/$name/summary.json"
}

# mean_spread V... -> "mean spread" (spread: max - min)
mean_spread() { python3 -c 'import sys; v=[float(x) for x in sys.argv[1:]]; print(sum(v)/len(v), max(v)-min(v))' "$@"; }

declare -A best_lr best_loss
tuned_sync() {  # SITES OPTIMIZER: the best of the lr sweep, over the seeds' mean
  local key="$1:$2"
  [[ -n "${best_loss[$key]:-}" ]] && return
  for lr in $SYNC_LRS; do
    local losses=()
    for seed in $SEEDS; do
      read -r loss _ _ < <(run "sync-$1-$2-lr$lr-s$seed" "$1" sync 1 fp32 lockstep "$2" "$seed" "inner.lr=$lr")
      losses+=("$loss")
    done
    read -r mean spread < <(mean_spread "${losses[@]}")
    printf '%-34s %10.4f %8.4f\n' "sync $1 sites $2 lr $lr" "$mean" "$spread"
    if [[ -z "${best_loss[$key]:-}" ]] || python3 -c "import sys; sys.exit(0 if $mean < ${best_loss[$key]} else 1)"; then
      best_loss[$key]=$mean
      best_lr[$key]=$lr
    fi
  done
}

printf '%-34s %10s %8s %10s %8s %10s %10s\n' case val_loss spread tuned_sync gap B/param/rnd vs_sync
for c in $CASES; do
  IFS=: read -r sites h codec mode optimizer <<< "$c"
  tuned_sync "$sites" "$optimizer"
  key="$sites:$optimizer"
  losses=()
  for seed in $SEEDS; do
    # DiLoCo at the tuned baseline's inner lr: a paired comparison on the same tokens.
    read -r loss bpp red < <(run "diloco-$sites-h$h-$codec-$mode-$optimizer-s$seed" "$sites" diloco "$h" "$codec" "$mode" \
      "$optimizer" "$seed" "inner.lr=${best_lr[$key]}")
    losses+=("$loss")
  done
  read -r mean spread < <(mean_spread "${losses[@]}")
  gap=$(python3 -c "print(f'{100 * ($mean / ${best_loss[$key]} - 1):+.2f}%')")
  printf '%-34s %10.4f %8.4f %10.4f %8s %10.3f %10.0f\n' "$sites sites H=$h $codec $mode $optimizer" "$mean" "$spread" \
    "${best_loss[$key]}" "$gap" "$bpp" "$red"
done
