#!/usr/bin/env bash
# Cross-framework check of `meridian export` + `meridian eval`: a short training run is exported,
# loaded into an independent PyTorch GPT (bench/check_export.py) and scored on the same windows;
# the two losses must agree within 1e-4. PyTorch is required (scripts/setup.sh installs it).
set -euo pipefail
meridian=$1
src=$(cd "$(dirname "$0")/../.." && pwd)
/usr/bin/python3 -c "import torch" || { echo "PyTorch is not installed (scripts/setup.sh installs python3-torch)"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$meridian" train --config "$src/configs/single-site.toml" --set job.run_dir="$work/run" --set inner.steps=30 \
  --set log.eval_every=0 --set checkpoint.every=0 >/dev/null
head -c 200000 "$src/data/tinyshakespeare/input.txt" >"$work/sample.txt"
OMP_NUM_THREADS=1 /usr/bin/python3 "$src/bench/check_export.py" --compare-with-meridian "$meridian" \
  --checkpoint "$work/run" --data "$work/sample.txt"
