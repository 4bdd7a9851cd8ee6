#!/usr/bin/env bash
# The references meridian's tokenizers are checked against (tests/tokenizer/test_tokenizer_parity.cpp):
#  - tiktoken's npm ports: OUT_DIR/<encoding>.tiktoken for gpt2, cl100k_base and o200k_base as
#    js-tiktoken ships them, and OUT_DIR/expected.jsonl: per encoding, port and file, its token count
#    and the SHA-256 of its ids. tiktoken (OpenAI's Rust core in WebAssembly, with ranks of its own)
#    encodes tiny shakespeare, OUT_DIR/hard_cases.txt and every Gutenberg book of ../shared/data;
#    js-tiktoken (JavaScript, three times slower) the first two;
#  - Hugging Face's tokenizer in JavaScript, @huggingface/tokenizers: OUT_DIR/gpt2-tokenizer.json
#    (GPT-2's tokenizer.json, rebuilt from the gpt2 ranks) and OUT_DIR/trained-tokenizer.json (what
#    `meridian tokenizer train` makes of the Gutenberg books), and OUT_DIR/hf_expected.jsonl: the same
#    figures for tiny shakespeare, the hard cases and three books.
# scripts/setup.sh installs both npm packages.
#   make_reference.sh MERIDIAN OUT_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
meridian=$1
out=$2
mkdir -p "$out"
for package in js-tiktoken tiktoken; do
  [ -d "$here/js/node_modules/$package" ] || { echo "$package is not installed (scripts/setup.sh installs it)" >&2; exit 1; }
done
python3 "$here/hard_cases.py" > "$out/hard_cases.txt"
node "$here/js/reference.mjs" ranks "$out"
files=("$src/data/tinyshakespeare/input.txt" "$out/hard_cases.txt")
books_dir="$src/../shared/data/gutenberg_en"
# The trained tokenizer's reference is trained on the books: without them there is nothing to check.
[ -d "$books_dir" ] || { echo "make_reference: no Gutenberg books at $books_dir (the project's shared data, beside the checkout)" >&2; exit 1; }
for f in "$books_dir"/*.txt; do [ "$(basename "$f")" = SOURCE.txt ] || files+=("$(cd "$(dirname "$f")" && pwd)/$(basename "$f")"); done
(( ${#files[@]} > 2 )) || { echo "make_reference: $books_dir holds no books (*.txt)" >&2; exit 1; }
: > "$out/expected.jsonl.tmp"
for enc in gpt2 cl100k_base o200k_base; do
  { node "$here/js/reference.mjs" encode tiktoken "$enc" "${files[@]}"
    node "$here/js/reference.mjs" encode js-tiktoken "$enc" "${files[@]:0:2}"; } |
    sed "s/^{/{\"encoding\":\"$enc\",/" >> "$out/expected.jsonl.tmp"
done
mv "$out/expected.jsonl.tmp" "$out/expected.jsonl"

node "$here/js/hf_reference.mjs" gpt2-json "$out/gpt2.tiktoken" "$out/gpt2-tokenizer.json"
books=("${files[@]:2:3}")
"$meridian" tokenizer train --vocab 4096 --out "$out/trained-tokenizer.json" "${files[@]:2}" > /dev/null
: > "$out/hf_expected.jsonl.tmp"
for json in gpt2-tokenizer.json trained-tokenizer.json; do
  node "$here/js/hf_reference.mjs" encode "$out/$json" "${files[@]:0:2}" "${books[@]}" |
    sed "s/^{/{\"tokenizer\":\"$json\",/" >> "$out/hf_expected.jsonl.tmp"
done
mv "$out/hf_expected.jsonl.tmp" "$out/hf_expected.jsonl"
echo "make_reference: $(wc -l < "$out/expected.jsonl") files x tiktoken encodings, $(wc -l < "$out/hf_expected.jsonl") x tokenizer.json in $out"
