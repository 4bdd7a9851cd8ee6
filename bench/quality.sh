#!/usr/bin/env bash
# DiLoCo against the synchronous baseline at equal tokens and global batch (bench/quality.toml),
# every case run with `meridian launch` on this machine. Prints the table of final validation
# losses and gaps, and leaves each run's merged metrics.jsonl (both curves) under $OUT.
#
#   bench/quality.sh                       # the cases of issue 4
#   CASES="2:50:int8" bench/quality.sh     # sites:H:codec, space separated
#   OVERLAP=true bench/quality.sh          # rounds overlapping ([outer] overlap, the default of a job)
#
# Without overlap (the default here) deterministic: the same build gives the same losses on any
# machine of this kind; only the wall times vary. With overlap, timing decides which deltas each
# version merges, so the figures move a little from run to run.
set -euo pipefail
cd "$(dirname "$0")/.."
MERIDIAN=${MERIDIAN:-build/release/sites/meridian}
OUT=${OUT:-runs/quality}
CASES=${CASES:-"2:50:int8 4:20:int8 4:50:int8 2:50:int4 2:50:fp32"}
OVERLAP=${OVERLAP:-false}
mkdir -p "$OUT"

# run NAME SITES ALGORITHM H CODEC -> prints the final validation loss
run() {
  local name=$1 sites=$2 algorithm=$3 h=$4 codec=$5
  local job="$OUT/$name.toml"
  {
    echo "include = \"$(pwd)/bench/quality.toml\""
    printf '[job]\nname = "%s"\nrun_dir = "%s"\n' "$name" "$(pwd)/$OUT/$name"
    printf '[outer]\nalgorithm = "%s"\ninner_steps = %s\ncodec = "%s"\noverlap = %s\n' "$algorithm" "$h" "$codec" "$OVERLAP"
    for i in $(seq 1 "$sites"); do printf '[[site]]\nname = "s%s"\n' "$i"; done
  } > "$job"
  "$MERIDIAN" launch "$job" > "$OUT/$name.log" 2>&1 || { echo "$name failed: see $OUT/$name.log" >&2; exit 1; }
  python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(s["final_val_loss"], s.get("bytes_per_param_round", 0), s.get("reduction_vs_sync", 0), s["wall_s"])' \
    "$OUT/$name/summary.json"
}

declare -A sync_loss
printf '%-22s %10s %10s %8s %14s %12s %8s\n' case val_loss sync_val gap bytes/param/rnd vs_sync wall_s
for c in $CASES; do
  IFS=: read -r sites h codec <<< "$c"
  if [[ -z "${sync_loss[$sites]:-}" ]]; then
    read -r loss _ _ wall < <(run "sync-$sites" "$sites" sync 1 fp32)
    sync_loss[$sites]=$loss
    printf '%-22s %10.4f %10s %8s %14s %12s %8.0f\n' "sync, $sites sites" "$loss" - - 4 1 "$wall"
  fi
  read -r loss bpp red wall < <(run "diloco-$sites-h$h-$codec" "$sites" diloco "$h" "$codec")
  gap=$(python3 -c "print(f'{100 * ($loss / ${sync_loss[$sites]} - 1):+.2f}%')")
  printf '%-22s %10.4f %10.4f %8s %14.3f %12.0f %8.0f\n' "diloco $sites sites H=$h $codec" "$loss" \
    "${sync_loss[$sites]}" "$gap" "$bpp" "$red" "$wall"
done
