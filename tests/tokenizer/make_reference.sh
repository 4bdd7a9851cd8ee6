#!/usr/bin/env bash
# The reference meridian's tiktoken encodings are checked against (tests/tokenizer/
# test_tiktoken_parity.cpp): OUT_DIR/<encoding>.tiktoken for gpt2, cl100k_base and o200k_base, as
# js-tiktoken (tiktoken's npm port; scripts/setup.sh installs it) ships them; OUT_DIR/hard_cases.txt;
# and OUT_DIR/expected.jsonl: per encoding and file, js-tiktoken's token count and the SHA-256 of
# its ids, for tiny shakespeare, the hard cases and every Gutenberg book of ../shared/data.
#   make_reference.sh OUT_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
out=$1
mkdir -p "$out"
[ -d "$here/js/node_modules/js-tiktoken" ] || { echo "js-tiktoken is not installed (scripts/setup.sh installs it)" >&2; exit 1; }
python3 "$here/hard_cases.py" > "$out/hard_cases.txt"
node "$here/js/reference.mjs" ranks "$out"
files=("$src/data/tinyshakespeare/input.txt" "$out/hard_cases.txt")
if [ -d "$src/../shared/data/gutenberg_en" ]; then
  for f in "$src"/../shared/data/gutenberg_en/*.txt; do [ "$(basename "$f")" = SOURCE.txt ] || files+=("$(cd "$(dirname "$f")" && pwd)/$(basename "$f")"); done
fi
: > "$out/expected.jsonl.tmp"
for enc in gpt2 cl100k_base o200k_base; do
  node "$here/js/reference.mjs" encode "$enc" "${files[@]}" | sed "s/^{/{\"encoding\":\"$enc\",/" >> "$out/expected.jsonl.tmp"
done
mv "$out/expected.jsonl.tmp" "$out/expected.jsonl"
echo "make_reference: $(wc -l < "$out/expected.jsonl") files x encodings in $out"
