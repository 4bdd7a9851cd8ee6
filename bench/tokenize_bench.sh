#!/usr/bin/env bash
# Tokenizer throughput per core: `meridian tokenize` on one thread against tiktoken's npm ports
# (tiktoken: its Rust core compiled to WebAssembly; js-tiktoken: its JavaScript port) on the same
# text, in the same run. Each figure is the median of ROUNDS passes, in MB of text per second;
# every side must give the same token count.
#   bench/tokenize_bench.sh [ENCODING] [FILES...]   (default: cl100k_base, the first 10 Gutenberg books)
# Holds /tmp/meridian-bench.lock, as the other benchmarks do.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/bench_lock.sh
hold_bench_lock "$@"
MERIDIAN=${MERIDIAN:-build/release/sites/meridian}
ROUNDS=${ROUNDS:-3}
ENCODING=${1:-cl100k_base}
shift || true
files=("$@")
[ ${#files[@]} -gt 0 ] || mapfile -t files < <(ls ../shared/data/gutenberg_en/*.txt | grep -v SOURCE | sort | head -10)
ranks=$(mktemp -d)
trap 'rm -rf "$ranks"' EXIT
node tests/tokenizer/js/reference.mjs ranks "$ranks"
bytes=$(cat "${files[@]}" | wc -c)
rates=()
for r in $(seq "$ROUNDS"); do
  line=$(OMP_NUM_THREADS=1 "$MERIDIAN" tokenize --tokenizer "$ranks/$ENCODING.tiktoken" --out "$ranks/out" \
           --shard-tokens 100000000 "${files[@]}" 2>&1 >/dev/null | tail -1)
  seconds=$(sed -n 's/.* in \([0-9.]*\) s on .*/\1/p' <<<"$line")
  tokens=$(sed -n 's/.* documents, \([0-9,]*\) tokens.*/\1/p' <<<"$line" | tr -d ,)
  rates+=("$(awk -v b="$bytes" -v s="$seconds" 'BEGIN { printf "%.3f", b / 1e6 / s }')")
done
m=$(printf '%s\n' "${rates[@]}" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
echo "text: ${#files[@]} files, $bytes bytes, encoding $ENCODING"
# meridian's count includes one end-of-text token per document
echo "meridian tokenize (1 thread): ${rates[*]} MB/s; median $m MB/s; $(( tokens - ${#files[@]} )) tokens"
node tests/tokenizer/js/timing.mjs "$ENCODING" "$ROUNDS" "${files[@]}" | while read -r json; do
  python3 -c "import json,sys; j=json.loads(sys.argv[1]); m=float(sys.argv[2]); print(f\"{j['port']}: median {j['mb_s']:.3f} MB/s; {j['tokens']} tokens; meridian / it: {m / j['mb_s']:.2f}x\")" "$json" "$m"
done
