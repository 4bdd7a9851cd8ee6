#!/usr/bin/env bash
# Installs the Debian packages meridian builds against (see README "Dependencies"), and the npm
# packages the tokenizer's tests compare against (tests/tokenizer/js, from its package-lock.json).
# Idempotent: when everything is present it only runs one dpkg-query and a directory test.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  libboost-dev libasio-dev
  libzmq3-dev cppzmq-dev
  libucx-dev ucx-utils
  capnproto libcapnp-dev
  doctest-dev
  libgloo-dev
  libtomlplusplus-dev
  libopenblas-openmp-dev
  libxxhash-dev
  libssl-dev
  libpcre2-dev
  libcli11-dev
  nlohmann-json3-dev
  etcd-server etcd-client
  python3-torch  # the PyTorch reference the tests compare the models against (tests/torch/)
)

missing=()
while read -r name status; do
  [ "$status" = "installed" ] || missing+=("$name")
done < <(dpkg-query -W -f='${Package} ${db:Status-Status}\n' "${PACKAGES[@]}" 2>/dev/null || true)
# dpkg-query prints nothing for packages it has never heard of; catch those too.
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null | grep -qx installed || {
    [[ " ${missing[*]-} " == *" $p "* ]] || missing+=("$p")
  }
done

. "$(dirname "$0")/apt-install.sh"
if [ ${#missing[@]} -gt 0 ]; then
  apt_install "${missing[@]}"
  echo "setup.sh: done"
fi

# tiktoken's npm port, the reference of tests/tokenizer (Node.js comes with the machine; Debian's otherwise).
js=$(dirname "$0")/../tests/tokenizer/js
if [ ! -d "$js/node_modules/js-tiktoken" ]; then
  command -v npm > /dev/null || apt_install nodejs npm
  (cd "$js" && npm ci --no-audit --no-fund --loglevel=error)
  echo "setup.sh: js-tiktoken installed"
fi
