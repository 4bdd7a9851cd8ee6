#!/usr/bin/env bash
# Packs meridian's build and run dependencies into one archive for a machine that cannot fetch
# packages (the lent GPU machines reach no registry): scripts/gpu-deps.sh [ARCHIVE]
# (default .gpu-deps/deps.tar.xz, ignored by git). Run it here, after scripts/setup.sh; carry the
# folder to the GPU machine, where scripts/gpu-check.sh unpacks it into / without replacing any
# file that is already there (tar --skip-old-files), so the machine's own newer libraries stay.
# Debian 12 builds need glibc >= 2.36, which every CUDA 13 image has.
set -euo pipefail
cd "$(dirname "$0")/.."
archive=${1:-.gpu-deps/deps.tar.xz}

# The packages of scripts/setup.sh that the build reads (headers, CMake and pkg-config files) or
# the programs load (shared libraries, etcd for `meridian launch`), and pkg-config itself.
roots=(libboost-dev libasio-dev libzmq3-dev cppzmq-dev libucx-dev capnproto libcapnp-dev doctest-dev
       libgloo-dev libtomlplusplus-dev libopenblas-openmp-dev libxxhash-dev libcli11-dev
       nlohmann-json3-dev etcd-server pkgconf
       # The compiler CI uses: GCC 13 follows P2468 (no rewritten operator== where a matching
       # operator!= exists) and rejects Cap'n Proto 0.9.2's headers in C++20; GCC 12 takes them.
       g++-12)
# What any CUDA image already has, newer: the C and C++ runtimes and toolchain, the base system.
# Leaving them out keeps the archive small; --skip-old-files would not replace them anyway.
base='^(<.*>|adduser|cdebconf|debconf|dpkg|tar|passwd|install-info|lib(asan|atomic|lsan|tsan|ubsan|itm|gomp|hwasan|quadmath)[0-9]+|libcc1-0|libgcc-s1|libc6(-dev)?|binutils.*|libbinutils|libctf.*|libgprofng.*|libjansson4|libsframe.*|libc-dev-bin|linux-libc-dev|libstdc\+\+6|libcrypt(1|-dev)|libaudit.*|libcap-ng0|libpam.*|libselinux1|libsemanage.*|libsepol2|libdebian-installer4|libnewt.*|libslang2|libtextwrap1|libtinfo6|libreadline8|readline-common|libpcre2-8-0|liblzma5|libbz2-1.0|zlib1g|libicu.*|icu-devtools|libxml2(-dev)?|libtirpc.*|libnsl.*|rpcsvc-proto|krb5-multidev|libkrb5-dev|comerr-dev|libgssrpc4|libkadm5.*|libkdb5.*)$'

mapfile -t packages < <(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts \
    --no-breaks --no-replaces --no-enhances --no-pre-depends "${roots[@]}" 2>/dev/null |
  grep -v '^ ' | sort -u | grep -Ev "$base")
for p in "${packages[@]}"; do
  dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null | grep -qx installed ||
    { echo "gpu-deps.sh: $p is not installed here; run scripts/setup.sh first" >&2; exit 1; }
done

list=$(mktemp)
trap 'rm -f "$list"' EXIT
# Files and links only (tar adds the folders), without documentation, static archives (but the
# two every link needs), the link-time optimiser or GCC 12's C compiler (C is only CMake's probes,
# which the machine's own gcc answers).
dpkg -L "${packages[@]}" | sort -u |
  grep -Ev '^/usr/share/(doc|man|lintian|bug|info)/|/(lto1|cc1|x86_64-linux-gnu-lto-dump-12)$' | awk '!/\.a$/ || /\/libgcc(_eh)?\.a$/' |
  while read -r f; do [ -f "$f" ] || [ -L "$f" ] && printf '%s\n' "${f#/}"; done > "$list"
# The generic names of OpenBLAS (libopenblas.so, its CMake config) are links through
# /etc/alternatives that the maintainer scripts make, so dpkg -L does not list them: take every
# such link whose end is a packed file, and the alternatives link it passes through.
find /usr/lib/x86_64-linux-gnu /usr/include -maxdepth 3 -type l -lname '/etc/alternatives/*' |
  while read -r link; do
    end=$(readlink -f "$link")
    grep -qxF "${end#/}" "$list" && printf '%s\n%s\n' "${link#/}" "$(readlink "$link" | sed 's|^/||')"
  done >> "$list"

mkdir -p "$(dirname "$archive")"
# cuDNN's headers, for the cuDNN attention's build where the GPU machine has the library only
# (scripts/gpu-common.sh points the build here when it finds no cudnn.h of the machine's own).
cudnn_h=$(ls /usr/local/cuda/include/cudnn*.h /usr/include/cudnn*.h 2>/dev/null || true)
if [ -n "$cudnn_h" ]; then
  mkdir -p "$(dirname "$archive")/cudnn-include"
  cp $cudnn_h "$(dirname "$archive")/cudnn-include/"
fi
tar -C / -cf - --files-from="$list" | xz -T0 -6 > "$archive.tmp"
mv "$archive.tmp" "$archive"
echo "gpu-deps.sh: ${#packages[@]} packages, $(wc -l < "$list") files -> $archive ($(du -h "$archive" | cut -f1))"
