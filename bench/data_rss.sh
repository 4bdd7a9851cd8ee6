#!/usr/bin/env bash
# A replica's resident memory against the size of its corpus: the Gutenberg books of ../shared/data
# tokenized (a BPE of 1,024 tokens that meridian trains on them) into shards of SHARD_TOKENS, then
# `meridian train` of the small model (STEPS steps, one thread) on the first N shards and on the
# first 2N, ROUNDS times each. Sampled every 10 ms from /proc: the replica's own memory, its
# anonymous pages plus the pages of the shards it has mapped (the shared libraries' pages, some
# 130 MB of CUDA's and OpenBLAS's that the kernel maps and reclaims with the machine's load, are
# the same whatever the corpus and left out); the figure is the median of the runs' peaks for each,
# and their ratio. The training data stays memory-mapped, and the pages of each window are released
# once read.
#   bench/data_rss.sh            (N = 4 shards of 1M tokens, STEPS = 200, ROUNDS = 3)
# Holds /tmp/meridian-bench.lock, as the other benchmarks do.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/bench_lock.sh
hold_bench_lock "$@"
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
peak_kb() {  # peak of anonymous + shard pages, in KB, of training on the first $1 shards
  mkdir -p "$work/shards$1"
  for s in "${shards[@]:0:$1}"; do ln -sf "$s" "$work/shards$1/"; done
  rm -rf "$work/run"
  OMP_NUM_THREADS=1 "$MERIDIAN" train --config "$work/job.toml" \
    --set "data.path=\"$work/shards$1/train_*.bin\"" --set "job.run_dir=\"$work/run\"" > /dev/null 2>&1 &
  python3 - "$!" "$work/data" <<'PY'
import os, sys, time
pid, data = sys.argv[1], sys.argv[2]
peak = peak_shard = 0
while os.path.exists(f"/proc/{pid}") and open(f"/proc/{pid}/stat").read().split()[2] != "Z":
    try:
        anon = next(int(l.split()[1]) for l in open(f"/proc/{pid}/status") if l.startswith("RssAnon"))
        shard, mapping = 0, ""
        for line in open(f"/proc/{pid}/smaps"):
            parts = line.split()
            if len(parts) >= 5 and "-" in parts[0]:
                mapping = parts[-1] if len(parts) >= 6 else ""
            elif parts and parts[0] == "Rss:" and data in os.path.realpath(mapping or "/"):
                shard += int(parts[1])
        peak, peak_shard = max(peak, anon + shard), max(peak_shard, shard)
    except (OSError, StopIteration):
        break
    time.sleep(0.01)
print(peak, peak_shard)
PY
  wait
}
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
declare -A rss
for n in "$N" $((2 * N)); do
  runs=() shard_runs=()
  for r in $(seq "$ROUNDS"); do
    read -r total shard < <(peak_kb "$n")
    runs+=("$total") shard_runs+=("$shard")
  done
  rss[$n]=$(printf '%s\n' "${runs[@]}" | median)
  echo "$n shards ($((n * SHARD_TOKENS)) tokens, $((n * SHARD_TOKENS * 4 / 1000000)) MB as int32 in memory):" \
       "peak anonymous + shard pages ${runs[*]} KB, median ${rss[$n]} KB; of which shard pages at most ${shard_runs[*]} KB"
done
awk -v a="${rss[$N]}" -v b="${rss[$((2 * N))]}" 'BEGIN { printf "doubling the shards: peak x %.3f (%+.1f%%)\n", b / a, 100 * (b / a - 1) }'
