#!/usr/bin/env bash
# Runs one libFuzzer program of fuzz/ for a while (docs/security.md: "Every decoder ... is fuzzed").
#   cmake --preset fuzz && cmake --build --preset fuzz -j 2 --target fuzz_<name>
#   fuzz/run.sh <name> [seconds, default 600]
# libFuzzer starts from the kept corpus fuzz/corpus/<name>/ and grows its own under
# build/fuzz/work/<name>/ (not committed); a crash or a broken promise stops it, its input saved
# under build/fuzz/artifacts/<name>/. Such an input, once the decoder is fixed, goes into
# fuzz/corpus/<name>/ (as crash-<what>), where test_fuzz_corpus replays it in every build.
set -euo pipefail
name=${1:?usage: fuzz/run.sh <name> [seconds]}
seconds=${2:-600}
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/build/fuzz/fuzz/fuzz_$name
work=$root/build/fuzz/work/$name
artifacts=$root/build/fuzz/artifacts/$name
mkdir -p "$work" "$artifacts"
# Inputs as long as the format needs: a record, a script of frames or requests, a job file, ...
case $name in
  records) max_len=512 ;;
  ops) max_len=1024 ;;
  etcd | checkpoint | codec) max_len=2048 ;;
  tokenizer) max_len=8192 ;;
  *) max_len=4096 ;;
esac
extra=()
if [ "$name" = chunks ]; then
  # A transfer may reserve up to 64 GiB (kMaxTransferBytes) without touching it; more is a finding.
  # An allocation the system refuses is a bad_alloc, as in production, which the assembler handles.
  extra+=(-malloc_limit_mb=65600)
  export ASAN_OPTIONS=${ASAN_OPTIONS:-allocator_may_return_null=1}
fi
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
export OMP_NUM_THREADS=1
exec "$bin" -max_total_time="$seconds" -rss_limit_mb=2048 -max_len="$max_len" -timeout=10 -print_final_stats=1 \
  -artifact_prefix="$artifacts/" "${extra[@]}" "$work" "$root/fuzz/corpus/$name"
