#!/usr/bin/env bash
# A round's cross-site exchange under the emulated WAN, carried by each site's leader alone or split
# across its replicas ([transport] exchange = "leader" | "split"), at M = 1, 2 and 4 replicas per
# site: two sites (`meridian launch`, a local etcd, loopback), the demo's model ("small", 0.8M
# parameters, int8 deltas of ~0.8 MB), DiLoCo in lockstep (overlap = false: each site waits for
# the version its round goes into), H = 4, STEPS inner steps. The WAN: 10 ms one way, 1 Gbit/s a
# direction, and a ceiling of STREAM_MBPS on one flow (one connection), well under the link: a
# leader's one flow per peer runs at that ceiling, a split site's M flows at M times it.
#
# Figures, each the mean of the two sites, then the median over ROUNDS repeats (leader and split
# alternating): a delta's transfer, from its send to its arrival whole at the peer's leader (its
# bytes over the bandwidth the receiving MeasuredLink saw, latency included), and a site's wait per
# round (summary.json's waited_s / rounds: in lockstep, the transfer, the commit through etcd and
# the imbalance between the sites' steps, which grows with the processes sharing the cores).
# And the round's exchange: the wait less the wait of the same job on a link whose one flow fills
# it ("base": the commit through etcd, the sites' imbalance). Ratios: split / leader at each M,
# and each at M against M = 1. Also what each replica put on the WAN (its share of the site's
# bytes), from the last split run at each M.
# SHARD_OUTER=true shards each site's outer state ([parallel] shard_outer): a split exchange then
# sends each delta in parts, each kept by the replica it is for, so the transfer as the receiving
# leader's link sees it is its own part's, and the wait is the figure to compare.
#   BUILD_DIR=build/release  ROUNDS=3  STEPS=16  STREAM_MBPS=8  REPLICAS="1 2 4"  SHARD_OUTER=false
# Holds /tmp/meridian-bench.lock (MERIDIAN_BENCH_LOCKED=1 when the caller holds it).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build/release} ROUNDS=${ROUNDS:-3} STEPS=${STEPS:-16} STREAM_MBPS=${STREAM_MBPS:-8}
REPLICAS=${REPLICAS:-"1 2 4"} SHARD_OUTER=${SHARD_OUTER:-false}
meridian="$BUILD_DIR/sites/meridian"
[ -x "$meridian" ] || { echo "split_exchange.sh: build $meridian first" >&2; exit 1; }
source bench/bench_lock.sh
hold_bench_lock "$@"
export OMP_NUM_THREADS=1  # every replica of both sites shares this machine's cores
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

job() {  # name exchange replicas stream_mbps -> job file
  local file="$work/$1.toml"
  cat >"$file" <<TOML
[job]
name = "$1"
run_dir = "$work/$1"
seed = 7
[model]
preset = "small"
[data]
path = "$PWD/data/tinyshakespeare/input.txt"
[inner]
lr = 3e-3
batch_per_replica = 2
steps = $STEPS
[log]
every = 4
eval_every = 0
eval_windows = 2
[checkpoint]
every = 0
[outer]
algorithm = "diloco"
inner_steps = 4
codec = "int8"
overlap = false
[transport]
exchange = "$2"
[parallel]
shard_outer = $([ "$3" -gt 1 ] && echo "$SHARD_OUTER" || echo false)
[wan]
latency_ms = 10.0
bandwidth_mbps = 1000.0
stream_mbps = $4
[[site]]
name = "a"
replicas = $3
[[site]]
name = "b"
replicas = $3
TOML
  echo "$file"
}

figures() {  # run dir -> "wait transfer": seconds a site waited per round, and a delta's transfer
  # from its send to its arrival whole at the peer's leader (its bytes over the bandwidth the
  # receiver's MeasuredLink saw, latency included: the median over the run); means of the two sites
  /usr/bin/python3 - "$1" <<'PY'
import json, sys
s = [json.load(open(f"{sys.argv[1]}/{site}/summary.json")) for site in "ab"]
wait = sum(x["waited_s"] / x["rounds"] for x in s) / len(s)
peer = {"a": "b", "b": "a"}
# In parts (SHARD_OUTER=true) no delta arrives whole at a leader's link: no transfer to measure.
links = [x["wan_links"][peer[x["site"]]] for x in s]
transfer = (sum(x["wan_bytes_received"] / x["rounds"] * 8 / (l["in_mbps"] * 1e6) for x, l in zip(s, links)) / len(s)
            if all("in_mbps" in l for l in links) else float("nan"))
print(f"{wait:.3f} {transfer:.3f}")
PY
}

shares() {  # run dir -> each replica's WAN bytes as a share of its site's
  /usr/bin/python3 - "$1" <<'PY'
import json, sys
for site in "ab":
    s = json.load(open(f"{sys.argv[1]}/{site}/summary.json"))
    total = s["wan_bytes_sent"]
    own = [s["split"]["link_bytes_sent"]] if "split" in s else [total]
    for line in open(f"{sys.argv[1]}/{site}/events.jsonl"):
        e = json.loads(line)
        if e.get("event") == "replica_done" and e.get("lane"):
            own.append(e["lane"]["bytes_sent"])
    print(f"  site {site}: {total} bytes; per replica " + ", ".join(f"{b / total:.3f}" for b in own))
PY
}

median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
declare -A med
for m in $REPLICAS; do
  declare -A wait=() transfer=()
  for r in $(seq "$ROUNDS"); do
    for mode in leader split base; do
      name="$mode-m$m-r$r"
      # base: the same job on a link whose one flow fills it (1 Gbit/s: the delta in 7 ms), the
      # wait that is not the exchange's (the commit through etcd, the sites' imbalance).
      if [ "$mode" = base ]; then exchange=leader stream=0; else exchange=$mode stream=$STREAM_MBPS; fi
      "$meridian" launch "$(job "$name" "$exchange" "$m" "$stream")" >"$work/$name.log" 2>&1 ||
        { echo "split_exchange.sh: $name failed; its log:" >&2; tail -20 "$work/$name.log" >&2; exit 1; }
      read -r w t < <(figures "$work/$name")
      wait[$mode]+="$w " transfer[$mode]+="$t "
      echo "M=$m round $r $mode: waited $w s per round, a delta's transfer $t s"
    done
  done
  for mode in leader split base; do
    # shellcheck disable=SC2086
    med[wait$mode$m]=$(median ${wait[$mode]}) med[transfer$mode$m]=$(median ${transfer[$mode]})
  done
  echo "M=$m: each replica's share of its site's WAN bytes (split, last round):"
  shares "$work/split-m$m-r$ROUNDS"
done
first=${REPLICAS%% *}
echo "--- seconds, median of $ROUNDS runs, a flow's ceiling $STREAM_MBPS Mbit/s; (x of M=$first)"
for m in $REPLICAS; do
  for what in transfer wait; do
    awk -v m="$m" -v what="$what" -v l="${med[$what"leader"$m]}" -v s="${med[$what"split"$m]}" \
      -v l1="${med[$what"leader"$first]}" -v s1="${med[$what"split"$first]}" \
      'BEGIN { printf "M=%s  %-8s  leader %.3f (x%.2f)  split %.3f (x%.2f)  split/leader %.2f\n", m, what, l, l / l1, s, s / s1, s / l }'
  done
  # The round's exchange: its wait less the base's (the same job where one flow fills the link).
  awk -v m="$m" -v b="${med[waitbase$m]}" -v l="${med[waitleader$m]}" -v s="${med[waitsplit$m]}" \
    -v b1="${med[waitbase$first]}" -v l1="${med[waitleader$first]}" -v s1="${med[waitsplit$first]}" \
    'BEGIN { printf "M=%s  exchange  leader %.3f (x%.2f)  split %.3f (x%.2f)  split/leader %.2f  (base wait %.3f)\n",
             m, l - b, (l - b) / (l1 - b1), s - b, (s - b) / (s1 - b1), (s - b) / (l - b), b }'
done
