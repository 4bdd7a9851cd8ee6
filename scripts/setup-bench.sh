#!/usr/bin/env bash
# Installs what `make bench` needs beyond the build: Debian's PyTorch (python3-torch 1.13) for the
# system interpreter /usr/bin/python3, used by the reference in bench/pytorch_reference.py and by
# bench/check_export.py. Deliberately not part of scripts/setup.sh: it is ~230 packages and no build
# or test needs it. Idempotent: when torch imports it only runs that import and returns.
set -euo pipefail

PY=/usr/bin/python3
if "$PY" -c "import torch" 2>/dev/null; then
  exit 0
fi

. "$(dirname "$0")/apt-install.sh"
apt_install python3-torch
"$PY" -c "import torch" || { echo "setup-bench.sh: python3-torch installed but 'import torch' still fails" >&2; exit 1; }
echo "setup-bench.sh: done"
