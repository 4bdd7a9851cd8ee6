#!/usr/bin/env bash
# What a replica holds of DiLoCo's outer state, whole or sharded ([parallel] shard_outer), and what
# sharding it costs a round: two sites (`meridian launch`, a local etcd, loopback), site a of
# REPLICAS replicas beside site b of 2, the demo's model (PRESET "small", 0.8M parameters), int8 deltas
# with error feedback, DiLoCo in lockstep, H inner steps a round, STEPS in all, ZeRO stage 0 and 3, with the
# outer state whole and sharded, alternating over ROUNDS runs.
#
# Figures from site a's leader (summary.json's memory ledger, the buffers held when training ended):
# the outer state's bytes per parameter (state_bytes.outer), the whole ledger's
# (state_bytes_per_param), and its peak resident memory, at its first join (first_join_peak_rss_bytes:
# what it was built with), at the end and before the final checkpoint
# (training_peak_rss_bytes: training and the rounds' transients), and the first join's time (its
# replica 0's `joined` event: the heal), and what its replica 1 received from the leader in the
# group's channel (versions' means or merged deltas, bytes per parameter); a's tokens/s from its metrics lines, from
# the first round's end to the last step (the rounds' exchanges in it), as a median over the runs,
# and its ratio to the whole state's at the same stage. PER_REPLICA=true: stage 3 writes its
# checkpoints in parts ([checkpoint] per_replica), so the final one gathers nothing. RESUME=true:
# each run is launched again for STEPS more, resuming from its final checkpoint, and the table adds
# site a's leader's peak resident memory when that resume ended (resume_peak_rss_bytes).
#   BUILD_DIR=build/release  ROUNDS=3  STEPS=24  H=4  REPLICAS=4  PRESET=small  PER_REPLICA=false  RESUME=false
# Holds /tmp/meridian-bench.lock (MERIDIAN_BENCH_LOCKED=1 when the caller holds it).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build/release} ROUNDS=${ROUNDS:-3} STEPS=${STEPS:-24} H=${H:-4} REPLICAS=${REPLICAS:-4} PRESET=${PRESET:-small}
PER_REPLICA=${PER_REPLICA:-false} RESUME=${RESUME:-false}
meridian="$BUILD_DIR/sites/meridian"
[ -x "$meridian" ] || { echo "outer_shards.sh: build $meridian first" >&2; exit 1; }
source bench/bench_lock.sh
hold_bench_lock "$@"
export OMP_NUM_THREADS=1  # every replica of both sites shares this machine's cores
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

job() {  # name zero_stage shard_outer [steps] -> job file
  local file="$work/$1.toml"
  cat >"$file" <<TOML
[job]
name = "$1"
run_dir = "$work/$1"
seed = 7
[model]
preset = "$PRESET"
[data]
path = "$PWD/data/tinyshakespeare/input.txt"
[inner]
lr = 3e-3
batch_per_replica = 2
steps = ${4:-$STEPS}
[log]
every = 1
eval_every = 0
eval_windows = 2
[checkpoint]
every = 0
per_replica = $([ "$2" -gt 0 ] && echo "$PER_REPLICA" || echo false)
[outer]
algorithm = "diloco"
inner_steps = $H
codec = "int8"
overlap = false
[parallel]
zero_stage = $2
shard_outer = $3
[[site]]
name = "a"
replicas = $REPLICAS
[[site]]
name = "b"
replicas = 2
TOML
  echo "$file"
}

figures() {  # run dir -> "outer/param ledger/param peak_MiB training_peak_MiB join_ms group/param tokens/s first_join_peak_MiB" of site a's leader
  /usr/bin/python3 - "$1" "$H" <<'PY'
import json, sys
run = sys.argv[1]
m = json.load(open(f"{run}/a/summary.json"))["memory"]
events = [json.loads(l) for l in open(f"{run}/a/events.jsonl")]
join = next(e for e in events if e["event"] == "joined" and e["rank"] == 0)
group = next(e["group_bytes_received"] for e in events if e["event"] == "replica_done" and e["replica"] == 1)
# From the first round's end (step H) to the last step: the rounds' exchanges included.
rows = [json.loads(l) for l in open(f"{run}/a/metrics.jsonl") if '"loss"' in l]
rows = [r for r in rows if r["step"] >= int(sys.argv[2])]
tps = (rows[-1]["tokens"] - rows[0]["tokens"]) / (rows[-1]["time"] - rows[0]["time"])
print(f'{m["state_bytes"]["outer"] / m["params"]:.2f} {m["state_bytes_per_param"]:.2f} '
      f'{m["peak_rss_bytes"] / 2**20:.0f} {m["training_peak_rss_bytes"] / 2**20:.0f} {join["ms"]:.0f} '
      f'{group / m["params"]:.2f} {tps:.0f} {m["first_join_peak_rss_bytes"] / 2**20:.0f}')
PY
}

median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }

declare -A rate=() line=()
for r in $(seq "$ROUNDS"); do
  for stage in 0 3; do
    for shard in false true; do
      name="z$stage-$shard-r$r"
      "$meridian" launch "$(job "$name" "$stage" "$shard")" >"$work/$name.log" 2>&1 ||
        { echo "outer_shards.sh: $name failed; its log:" >&2; tail -20 "$work/$name.log" >&2; exit 1; }
      read -r outer ledger peak training join group tps first < <(figures "$work/$name")
      resumed=-
      if [ "$RESUME" = true ]; then
        "$meridian" launch "$(job "$name" "$stage" "$shard" $((2 * STEPS)))" >"$work/$name-resumed.log" 2>&1 ||
          { echo "outer_shards.sh: $name's resume failed; its log:" >&2; tail -20 "$work/$name-resumed.log" >&2; exit 1; }
        resumed=$(/usr/bin/python3 -c 'import json, sys; print(round(json.load(open(sys.argv[1]))["memory"]["resume_peak_rss_bytes"] / 2**20))' "$work/$name/a/summary.json")
      fi
      rate[$stage$shard]+="$tps " line[$stage$shard]="$outer $ledger $first $peak $training $join $group $resumed"
      echo "round $r, stage $stage, shard_outer $shard: outer $outer B/param, ledger $ledger B/param, peak $peak MiB" \
        "($training MiB before the final checkpoint, $resumed after a resume, $first at its first join), first join $join ms, replica 1 got $group B/param, $tps tokens/s"
    done
  done
done
echo
echo "site a, $REPLICAS replicas, $PRESET, H = $H, $STEPS steps; medians of $ROUNDS runs"
echo "| zero_stage | outer state | outer B/param | ledger B/param | first join peak MiB | peak MiB | training peak MiB | resume peak MiB | first join ms | replica 1's group B/param | tokens/s | against whole |"
for stage in 0 3; do
  # shellcheck disable=SC2086
  whole=$(median ${rate[${stage}false]})
  for shard in false true; do
    # shellcheck disable=SC2086
    tps=$(median ${rate[$stage$shard]})
    read -r outer ledger first peak training join group resumed <<<"${line[$stage$shard]}"
    label=$([ "$shard" = true ] && echo sharded || echo whole)
    echo "| $stage | $label | $outer | $ledger | $first | $peak | $training | $resumed | $join | $group | $tps | $(awk -v a="$tps" -v b="$whole" 'BEGIN {printf "%.3f", a / b}') |"
  done
done
