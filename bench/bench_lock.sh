# Sourced by the benchmarks in bench/: each measures while it holds /tmp/meridian-bench.lock, so
# that no two share this machine's cores. `hold_bench_lock "$@"` runs the calling script again
# under flock, once: MERIDIAN_BENCH_LOCKED=1 says the lock is held (also by a caller that took it
# for a whole sweep).
BENCH_LOCK=/tmp/meridian-bench.lock
hold_bench_lock() {
  [ -n "${MERIDIAN_BENCH_LOCKED:-}" ] && return 0
  echo "$(basename "$0"): waiting for $BENCH_LOCK" >&2
  exec env MERIDIAN_BENCH_LOCKED=1 flock "$BENCH_LOCK" "$0" "$@"
}
