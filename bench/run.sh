#!/usr/bin/env bash
# `make bench`: training throughput of meridian's CPU trainer (bench/bench_trainer.cpp) and of the same
# model in PyTorch (bench/pytorch_reference.py), measured in the same run, and their ratio: on the
# reference shape (GPT-2 "small") and on the Llama of its size ("llama-small"). See bench/README.md.
#
#   BUILD_DIR=build/release  where bench/bench_trainer was built
#   ROUNDS=3                 alternating meridian / PyTorch invocations; each figure is the median over rounds
#   RUNS=5 STEPS=30          timed runs per invocation and steps per run (each prints its median run)
#   TRANSFER_RUNS=5          rounds of bench_transfer (the cross-site links against bare ZeroMQ and UCX),
#                            run last when it was built; 0 skips it
#
# Holds /tmp/meridian-bench.lock for all timings, so benchmarks on this machine do not overlap. If
# you already hold it, set MERIDIAN_BENCH_LOCKED=1 (flock on the same file again would wait forever).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build/release} ROUNDS=${ROUNDS:-3} RUNS=${RUNS:-5} STEPS=${STEPS:-30}

if [ -z "${MERIDIAN_BENCH_LOCKED:-}" ]; then
  scripts/setup.sh  # PyTorch for /usr/bin/python3 among the rest; a no-op once installed
  [ -x "$BUILD_DIR/bench/bench_trainer" ] || { echo "run.sh: no $BUILD_DIR/bench/bench_trainer; build first" >&2; exit 1; }
fi
source bench/bench_lock.sh
hold_bench_lock "$@"

# Prints the "median N tokens/s" figure of a "<prefix>: median N tokens/s ..." line of stdin.
median_of() { sed -n "s/^$1: median \([0-9.]*\) tokens\/s.*/\1/p"; }
# Median of the numbers on stdin, one a line.
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

# compare PRESET: ROUNDS rounds of meridian then PyTorch on that preset, the medians and their ratio.
compare() {
  local preset=$1 m_all=() p_all=() out m p
  for round in $(seq "$ROUNDS"); do
    echo "--- $preset: round $round/$ROUNDS"
    out=$("$BUILD_DIR/bench/bench_trainer" "$RUNS" "$STEPS" "$preset")
    echo "$out"
    m_all+=("$(median_of training <<<"$out")")
    out=$(/usr/bin/python3 bench/pytorch_reference.py "$RUNS" "$STEPS" --preset "$preset")
    echo "$out"
    p_all+=("$(median_of pytorch <<<"$out")")
  done
  m=$(printf '%s\n' "${m_all[@]}" | median)
  p=$(printf '%s\n' "${p_all[@]}" | median)
  echo "--- $preset"
  echo "meridian: ${m_all[*]} tokens/s (per round); median $m"
  echo "pytorch:  ${p_all[*]} tokens/s (per round); median $p"
  awk -v m="$m" -v p="$p" -v preset="$preset" 'BEGIN { printf "%s: meridian / pytorch: %.2fx\n", preset, m / p }'
}
compare small
compare llama-small

# The inner optimizers' step cost, Muon against AdamW (bench/bench_optimizer.cpp), under the same lock.
if [ -x "$BUILD_DIR/bench/bench_optimizer" ]; then
  echo "--- optimizers"
  "$BUILD_DIR/bench/bench_optimizer" 7 20
fi

# Generation over the KV cache against the whole window again (bench/bench_generate.cpp).
if [ -x "$BUILD_DIR/bench/bench_generate" ]; then
  echo "--- generation"
  "$BUILD_DIR/bench/bench_generate"
fi

# Delta codecs against memcpy of the same buffer (bench/bench_codec.cpp), under the same lock.
if [ -x "$BUILD_DIR/bench/bench_codec" ]; then
  echo "--- codecs"
  "$BUILD_DIR/bench/bench_codec" 7
fi

# etcd requests in plain HTTP, over mutual TLS and with etcd's auth on (bench/bench_etcd.cpp).
if [ -x "$BUILD_DIR/bench/bench_etcd" ]; then
  echo "--- etcd"
  "$BUILD_DIR/bench/bench_etcd" 7 100
fi

# The cross-site links against bare transports (bench/bench_transfer.cpp), under the same lock.
if [ "${TRANSFER_RUNS:-5}" -gt 0 ] && [ -x "$BUILD_DIR/bench/bench_transfer" ]; then
  echo "--- transfer"
  "$BUILD_DIR/bench/bench_transfer" "${TRANSFER_RUNS:-5}"
fi
