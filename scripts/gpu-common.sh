# Shared by scripts/gpu-check.sh and scripts/gpu-bench.sh, sourced once they have set SRC, BUILD,
# LOGS, PARTS (the file of a JSON line per part), START, BUDGET and TOOL (what their lines begin with),
# and defined `report` (their results so far into OUT):
#   record, part, skip_all   each part of a pass: its status, seconds and detail, within the budget;
#                            after each, `report` again, so that a loan cut short still returns them
#   probe_machine            the machine into $LOGS/machine.log; sets gpu_reason ("" with a GPU) and arch
#   ensure_deps              the build's dependencies, from .gpu-deps/deps.tar.xz where they are missing
#   set_cmake_args           cmake_args: a CUDA build of $SRC in $BUILD on this machine

say() { echo "[$TOOL $(( $(date +%s) - START ))s] $*"; }
seconds_left() { echo $(( BUDGET - ($(date +%s) - START) )); }

# record PART STATUS SECONDS DETAIL (gpu_check_report.py adds each part's figures)
record() {
  python3 - "$@" >> "$PARTS" <<'EOF'
import json, sys
part, status, seconds, detail = sys.argv[1:5]
print(json.dumps({"part": part, "status": status, "seconds": round(float(seconds), 1),
                  "detail": detail, "figures": {}}))
EOF
  say "$1: $2 ${4:+($4)}"
  # Parts run side by side in gpu-check: one report at a time.
  ( flock 9 && report > /dev/null 2>&1 ) 9> "$LOGS/.report.lock"
}

# part NAME LIMIT_S CMD...: runs CMD with its output in $LOGS/NAME.log, within LIMIT_S and what
# is left of the budget; records pass, fail (with the exit status) or timeout. Returns CMD's status.
# PART_MIN_S (10 by default): the least time worth starting it with (a torch.compile cut off
# before its first timed step measures nothing and spends what is left).
part() {
  local name=$1 limit=$2 min=${PART_MIN_S:-10}
  shift 2
  local left=$(( $(seconds_left) - 20 ))
  (( limit > left )) && limit=$left
  if (( limit < min )); then
    record "$name" skipped 0 "budget of ${BUDGET}s: ${left}s left, the part needs at least ${min}s"
    return 125
  fi
  local t0 rc
  t0=$(date +%s.%N)
  timeout -k 10 "$limit" "$@" > "$LOGS/$name.log" 2>&1
  rc=$?
  local dt
  dt=$(python3 -c "import time; print(time.time() - $t0)")
  case $rc in
    0) record "$name" pass "$dt" "" ;;
    124|137) record "$name" timeout "$dt" "stopped after ${limit}s" ;;
    *) record "$name" fail "$dt" "exit status $rc" ;;
  esac
  return $rc
}

skip_all() {  # REASON PART...
  local reason=$1
  shift
  for p in "$@"; do record "$p" skipped 0 "$reason"; done
}

probe_machine() {
  {
    echo "date: $(date -u +%FT%TZ)"; uname -a; nproc; grep -m1 'model name' /proc/cpuinfo
    nvidia-smi 2>&1 | head -20
    nvidia-smi --query-gpu=name,compute_cap,memory.total,driver_version,clocks.max.sm --format=csv 2>&1
    for tool in nvcc g++ cmake ctest python3 compute-sanitizer pkg-config etcd; do
      printf '%s: ' "$tool"; command -v "$tool" || echo "not found"
    done
    PATH=$PATH:/usr/local/cuda/bin nvcc --version 2>&1 | tail -2; g++ --version 2>&1 | head -1; cmake --version 2>&1 | head -1
    git -C "$SRC" log -1 --format='commit %H %s' 2>&1; git -C "$SRC" status --short 2>&1 | head -20
  } > "$LOGS/machine.log" 2>&1
  export PATH=$PATH:/usr/local/cuda/bin
  gpu_reason=""
  if ! command -v nvidia-smi > /dev/null; then
    gpu_reason="no GPU: nvidia-smi is not on this machine (no NVIDIA driver)"
  elif ! nvidia-smi -L > "$LOGS/nvidia-smi-L.log" 2>&1 || ! grep -q '^GPU ' "$LOGS/nvidia-smi-L.log"; then
    gpu_reason="no GPU: nvidia-smi -L says: $(head -c 300 "$LOGS/nvidia-smi-L.log" | tr '\n' ' ')"
  fi
  arch=""
  if [ -z "$gpu_reason" ]; then
    arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
    [[ $arch =~ ^[0-9]+$ ]] || arch=""  # not a compute capability: build for CI's architectures instead
    say "GPU: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1), sm_$arch"
  else
    say "$gpu_reason"
  fi
}

deps_present() {
  [ -f /usr/include/capnp/message.h ] && [ -f /usr/include/gloo/config.h ] && [ -x /usr/bin/etcd ] &&
    command -v pkg-config > /dev/null && command -v g++-12 > /dev/null
}

ensure_deps() {
  if deps_present; then
    record deps pass 0 "installed on this machine"
  elif [ -f "$SRC/.gpu-deps/deps.tar.xz" ] && [ "$(id -u)" -eq 0 ]; then
    # --skip-old-files: the machine's own files (newer C++ runtime and the like) are never replaced.
    part deps 120 bash -c "tar -C / --skip-old-files -xJf '$SRC/.gpu-deps/deps.tar.xz' && ldconfig"
    deps_present || record deps fail 0 "unpacked .gpu-deps/deps.tar.xz, still missing headers, etcd, pkg-config or g++-12"
  else
    record deps fail 0 "missing, and no .gpu-deps/deps.tar.xz to unpack as root (scripts/gpu-deps.sh makes it)"
  fi
}

set_cmake_args() {
  # The device's own architecture when there is a GPU (half the device code to compile), both CI
  # architectures otherwise.
  cmake_args=(-S "$SRC" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DMERIDIAN_CUDA=ON
              -DCMAKE_CUDA_ARCHITECTURES="${arch:-80;90}"
              -DCMAKE_POLICY_VERSION_MINIMUM=3.5)  # Debian's older CMake package files under CMake 4
  command -v ninja > /dev/null && cmake_args+=(-G Ninja)
  # CI's compiler: GCC 13 rejects Cap'n Proto 0.9.2's headers in C++20 (scripts/gpu-deps.sh).
  cmake_args+=(-DCMAKE_CXX_COMPILER=g++-12 -DCMAKE_CUDA_HOST_COMPILER=g++-12)
  # cuDNN, which the cuDNN attention loads at run time: its headers from the toolkit or the system,
  # else PyTorch's wheel, else the copy scripts/gpu-deps.sh carries; its library from the
  # loader's path, else the wheel's folder.
  local cudnn_wheel
  cudnn_wheel=$(python3 -c 'import nvidia.cudnn as m; print(list(m.__path__)[0])' 2>/dev/null)
  if [ ! -f /usr/local/cuda/include/cudnn.h ] && [ ! -f /usr/include/cudnn.h ] &&
     [ ! -f /usr/include/x86_64-linux-gnu/cudnn.h ]; then
    if [ -n "$cudnn_wheel" ] && [ -f "$cudnn_wheel/include/cudnn.h" ]; then
      cmake_args+=(-DMERIDIAN_CUDNN_INCLUDE_DIR="$cudnn_wheel/include")
    elif [ -f "$SRC/.gpu-deps/cudnn-include/cudnn.h" ]; then
      cmake_args+=(-DMERIDIAN_CUDNN_INCLUDE_DIR="$SRC/.gpu-deps/cudnn-include")
    fi
  fi
  if ! ldconfig -p 2>/dev/null | grep -q 'libcudnn\.so\.9' && [ -n "$cudnn_wheel" ] &&
     ls "$cudnn_wheel"/lib/libcudnn.so.9* > /dev/null 2>&1; then
    export LD_LIBRARY_PATH=$cudnn_wheel/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  fi
  # cuDNN compiles some of its engines at run time with NVRTC: the toolkit's, where the loader
  # does not already find one.
  if ! ldconfig -p 2>/dev/null | grep -q 'libnvrtc\.so\.'; then
    local nvrtc
    nvrtc=$(ls /usr/local/cuda/lib64/libnvrtc.so.* /usr/local/cuda/lib/libnvrtc.so.* 2>/dev/null | head -1)
    [ -n "$nvrtc" ] && export LD_LIBRARY_PATH=$(dirname "$nvrtc")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  fi
  # NCCL: the CUDA toolkit's own, else the one PyTorch's wheels bring.
  if [ ! -f /usr/local/cuda/include/nccl.h ] && [ ! -f /usr/include/nccl.h ]; then
    local nccl_dir nccl_lib
    nccl_dir=$(python3 -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__) if nvidia.nccl.__file__ else list(nvidia.nccl.__path__)[0])' 2>/dev/null)
    nccl_lib=$(ls "$nccl_dir"/lib/libnccl.so* 2>/dev/null | head -1)
    if [ -n "$nccl_lib" ]; then
      cmake_args+=(-DMERIDIAN_NCCL_INCLUDE_DIR="$nccl_dir/include" -DMERIDIAN_NCCL_LIBRARY="$nccl_lib")
      export LD_LIBRARY_PATH=$nccl_dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    fi
  fi
}
