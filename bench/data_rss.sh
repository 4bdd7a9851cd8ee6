#!/usr/bin/env bash
# A replica's resident memory against the size of its corpus: the Gutenberg books of ../shared/data
# tokenized (a BPE of 1,024 tokens that meridian trains on them) into shards of SHARD_TOKENS, then
# `meridian train` of the small model (STEPS steps, one thread) on the first N shards and on the
# first 2N, ROUNDS times each; the figure is the median peak RSS (GNU time's %M) of each, and their
# ratio. The training data stays memory-mapped: only the windows read are paged in.
#   bench/data_rss.sh            (N = 4 shards of 1M tokens, STEPS = 200, ROUNDS = 3)
# Holds /tmp/meridian-bench.lock, as the other benchmarks do.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${MERIDIAN_BENCH_LOCKED:-}" ]; then
  exec env MERIDIAN_BENCH_LOCKED=1 flock /tmp/meridian-bench.lock "$0" "$@"
fi
MERIDIAN=$(realpath "${MERIDIAN:-build/release/sites/meridian}")
N=${N:-4}
SHARD_TOKENS=${SHARD_TOKENS:-1000000}
STEPS=${STEPS:-200}
ROUNDS=${ROUNDS:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mapfile -t books < <(ls ../shared/data/gutenberg_en/[a-z]*.txt | sort)
"$MERIDIAN" tokenizer train --vocab 1024 --out "$work/tokenizer.json" "${books[@]}" > /dev/null
"$MERIDIAN" tokenize --tokenizer "$work/tokenizer.json" --out "$work/data" --shard-tokens "$SHARD_TOKENS" \
  --val-tokens 100000 "${books[@]}" 2> /dev/null
mapfile -t shards < <(ls "$work"/data/train_*.bin | sort)
[ ${#shards[@]} -ge $((2 * N)) ] || { echo "only ${#shards[@]} shards, need $((2 * N))" >&2; exit 1; }
cat > "$work/job.toml" <<TOML
[job]
name = "rss"
[model]
preset = "small"
vocab = 1024
[data]
format = "llmc-bin"
val_path = "$work/data/val_000000.bin"
tokenizer = "$work/tokenizer.json"
[inner]
steps = $STEPS
batch_per_replica = 8
[log]
every = 1000
eval_every = 0
eval_windows = 16
TOML
peak_kb() {  # peak RSS in KB of training on the first $1 shards
  mkdir -p "$work/shards$1"
  for s in "${shards[@]:0:$1}"; do ln -sf "$s" "$work/shards$1/"; done
  rm -rf "$work/run"
  OMP_NUM_THREADS=1 /usr/bin/time -f %M "$MERIDIAN" train --config "$work/job.toml" \
    --set "data.path=\"$work/shards$1/train_*.bin\"" --set "job.run_dir=\"$work/run\"" 2>&1 > /dev/null | tail -1
}
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
declare -A rss
for n in "$N" $((2 * N)); do
  runs=()
  for r in $(seq "$ROUNDS"); do runs+=("$(peak_kb "$n")"); done
  rss[$n]=$(printf '%s\n' "${runs[@]}" | median)
  echo "$n shards ($((n * SHARD_TOKENS)) tokens, $((n * SHARD_TOKENS * 4 / 1000000)) MB as int32 in memory): peak RSS ${runs[*]} KB; median ${rss[$n]} KB"
done
awk -v a="${rss[$N]}" -v b="${rss[$((2 * N))]}" 'BEGIN { printf "doubling the shards: peak RSS x %.3f (%+.1f%%)\n", b / a, 100 * (b / a - 1) }'
