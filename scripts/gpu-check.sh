#!/usr/bin/env bash
# One pass over meridian's GPU path, made for a short loan of a GPU machine:
#   scripts/gpu-check.sh OUT_DIR
# builds in place (build/gpu-check), then runs the CUDA parity suite (GPT-2's and the Llama
# family's kernels and whole steps), compute-sanitizer's memcheck and racecheck, bench_gpu (GPT-2
# 124M, bf16: tokens/s and MFU), single-site training runs of the reference model and of the
# small Llama on the GPU beside the same runs on the CPU, a two-site DiLoCo job with both sites on
# the GPU, and meridian's Hugging Face directories against transformers itself
# (scripts/hf_transformers_check.py; the machine's image has transformers). Every part has a time limit inside one budget (GPU_CHECK_BUDGET_S, 540 s
# by default), so a hang in one part still leaves the others' results. Without a GPU it builds and
# reports every GPU part skipped, with the reason. OUT_DIR gets three files (the device tool
# returns at most eight): summary.json (every part's status, seconds and figures), report.txt
# (the same for reading, with each failing part's log tail) and logs.tar.gz (every log).
# A machine that cannot fetch packages takes the dependencies from .gpu-deps/deps.tar.xz, made
# beforehand by scripts/gpu-deps.sh.
set -uo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 1 ] || { echo "usage: scripts/gpu-check.sh OUT_DIR" >&2; exit 2; }
mkdir -p "$1" && OUT=$(cd "$1" && pwd) || exit 2
SRC=$(pwd)
BUILD=$SRC/build/gpu-check
WORK=$(mktemp -d /tmp/gpu-check.XXXXXX)
LOGS=$WORK/logs
mkdir -p "$LOGS"
PARTS=$LOGS/parts.jsonl
START=$(date +%s)
BUDGET=${GPU_CHECK_BUDGET_S:-540}
# The training parts' lengths: long enough for the losses to say something.
TRAIN_STEPS=600
DILOCO_STEPS=300

TOOL=gpu-check
report() { python3 "$SRC/scripts/gpu_check_report.py" "$WORK" "$OUT" "$(( $(date +%s) - START ))"; }
source "$SRC/scripts/gpu-common.sh"

# --- the machine and the dependencies ------------------------------------------------------------
probe_machine
ensure_deps

# --- build ---------------------------------------------------------------------------------------
# Only the targets the checks run.
set_cmake_args
SUITE=(test_cuda_kernels test_cuda_llama_kernels test_cuda_attention_cudnn test_cuda_models test_cuda_adamw
       test_cuda_trainer test_cuda_probe test_cuda_check test_chunk_hash test_loss_scale test_nccl_communicator)
# With a GPU the checks after the build need about 200 s of the budget; without one it is the build's.
reserve=200
[ -n "$gpu_reason" ] && reserve=20
not_built="the configure step failed (configure.log)"
if part configure 120 cmake "${cmake_args[@]}"; then
  not_built="the build failed or ran out of time (build.log)"
  # test_nccl_communicator exists only where NCCL was found; the suite reports a missing one.
  targets=(meridian bench_gpu)
  for t in "${SUITE[@]}"; do
    grep -q "/$t.dir\$" "$BUILD/CMakeFiles/TargetDirectories.txt" && targets+=("$t")
  done
  keep_going=(); [ -f "$BUILD/build.ninja" ] && keep_going=(-- -k 0)  # every compile error in one pass
  part build $(( BUDGET - reserve )) cmake --build "$BUILD" -j "$(nproc)" --target "${targets[@]}" "${keep_going[@]}" && not_built=""
fi
BIN=$BUILD/tests
MERIDIAN=$BUILD/sites/meridian

# transformers against meridian's Hugging Face directories: CPU only, it needs just the build.
hf_transformers() {
  if [ -n "$not_built" ]; then
    skip_all "$not_built" hf_transformers
  elif ! python3 -c "import transformers, torch" > /dev/null 2>&1; then
    skip_all "python3 has no transformers (or torch) on this machine" hf_transformers
  else
    OMP_NUM_THREADS=4 part hf_transformers 120 python3 "$SRC/scripts/hf_transformers_check.py" "$MERIDIAN" "$WORK/hf"
  fi
}

GPU_PARTS=(suite memcheck_kernels racecheck_kernels memcheck_llama_kernels racecheck_llama_kernels memcheck_models
           racecheck_models
           memcheck_trainer memcheck_cudnn bench_gpu bench_gpu_tiled bench_gpu_cudnn train_gpu_fp32 train_gpu_bf16
           train_gpu_bf16_cudnn train_cpu_twin
           train_llama_gpu_bf16 train_llama_cpu_twin diloco_2site_gpu)
if [ -n "$not_built" ]; then
  skip_all "$not_built" "${GPU_PARTS[@]}"
  hf_transformers
elif [ -n "$gpu_reason" ]; then
  skip_all "$gpu_reason" "${GPU_PARTS[@]}"
  hf_transformers
else
  # --- the parity suite, alone on the GPU ------------------------------------------------------
  # timeout runs programs, not shell functions: each part is one command line.
  part suite 150 bash -c 'failed=0; for t in "${@:2}"; do echo "=== $t"; "$1/$t" --no-version || failed=1; done
                          exit $failed' suite "$BIN" "${SUITE[@]}"

  # --- throughput, alone on the GPU --------------------------------------------------------------
  part bench_gpu 90 "$BUILD/bench/bench_gpu" --preset gpt2 --precision bf16 --batch 8 --steps 20 --warmup 3
  part bench_gpu_tiled 90 "$BUILD/bench/bench_gpu" --preset gpt2 --precision bf16 --batch 8 --steps 20 --warmup 3 \
    --attention tiled
  part bench_gpu_cudnn 90 "$BUILD/bench/bench_gpu" --preset gpt2 --precision bf16 --batch 8 --steps 20 --warmup 3 \
    --attention cudnn

  # --- the rest side by side: each owns little of the GPU, and the CPU has 16 cores --------------
  # NAME DEVICE PRECISION SITES STEPS [PRESET [ATTENTION]]: the shipped reference job
  # (configs/single-site.toml) or, with several sites, the demo's DiLoCo job (configs/demo.toml),
  # shortened, on DEVICE.
  job_file() {
    local f=$WORK/$1.toml base=single-site
    [ "$4" -gt 1 ] && base=demo
    printf 'include = "%s"\n[job]\nrun_dir = "%s"\n[inner]\nsteps = %d\n[log]\neval_every = %d\neval_windows = 128\n[checkpoint]\nevery = 0\n' \
      "$SRC/configs/$base.toml" "$WORK/runs/$1" "$5" $(( $5 / 2 )) > "$f"
    [ -n "${6:-}" ] && printf '[model]\npreset = "%s"\n' "$6" >> "$f"
    for i in $(seq 1 "$4"); do
      printf '[[site]]\nname = "site%d"\ndevice = "%s"\n' "$i" "$2" >> "$f"
      [ "$2" = cuda ] && printf 'precision = "%s"\n' "$3" >> "$f"
      [ -n "${7:-}" ] && printf 'attention = "%s"\n' "$7" >> "$f"
    done
    echo "$f"
  }
  memcheck=(compute-sanitizer --tool memcheck --leak-check full --error-exitcode 3)
  racecheck=(compute-sanitizer --tool racecheck --error-exitcode 3)
  part memcheck_kernels 300 "${memcheck[@]}" "$BIN/test_cuda_kernels" --no-version &
  part racecheck_kernels 300 "${racecheck[@]}" "$BIN/test_cuda_kernels" --no-version &
  part memcheck_llama_kernels 300 "${memcheck[@]}" "$BIN/test_cuda_llama_kernels" --no-version &
  part racecheck_llama_kernels 300 "${racecheck[@]}" "$BIN/test_cuda_llama_kernels" --no-version &
  part memcheck_models 300 "${memcheck[@]}" "$BIN/test_cuda_models" --no-version &
  part racecheck_models 300 "${racecheck[@]}" "$BIN/test_cuda_models" --no-version &
  part memcheck_trainer 300 "${memcheck[@]}" "$BIN/test_cuda_trainer" --no-version &
  part memcheck_cudnn 300 "${memcheck[@]}" "$BIN/test_cuda_attention_cudnn" --no-version &
  OMP_NUM_THREADS=4 part train_cpu_twin 300 "$MERIDIAN" train --config "$(job_file cpu cpu fp32 1 $TRAIN_STEPS)" &
  part train_gpu_fp32 200 "$MERIDIAN" train --config "$(job_file gpu_fp32 cuda fp32 1 $TRAIN_STEPS)" &
  part train_gpu_bf16 200 "$MERIDIAN" train --config "$(job_file gpu_bf16 cuda bf16 1 $TRAIN_STEPS)" &
  part train_gpu_bf16_cudnn 200 "$MERIDIAN" train \
    --config "$(job_file gpu_bf16_cudnn cuda bf16 1 $TRAIN_STEPS small cudnn)" &
  OMP_NUM_THREADS=4 part train_llama_cpu_twin 300 "$MERIDIAN" train \
    --config "$(job_file llama_cpu cpu fp32 1 $TRAIN_STEPS llama-small)" &
  part train_llama_gpu_bf16 200 "$MERIDIAN" train --config "$(job_file llama_gpu_bf16 cuda bf16 1 $TRAIN_STEPS llama-small)" &
  OMP_NUM_THREADS=2 part diloco_2site_gpu 300 "$MERIDIAN" launch "$(job_file diloco cuda fp32 2 $DILOCO_STEPS)" &
  hf_transformers &
  wait
fi

# --- results -------------------------------------------------------------------------------------
say "collecting results"
report
find "$WORK/runs" \( -name 'summary.json' -o -name 'metrics.jsonl' -o -name 'site.log' -o -name '*.toml' \) \
  -exec cp --parents {} "$LOGS" \; 2>/dev/null
cp "$WORK"/*.toml "$LOGS" 2>/dev/null
tar -C "$WORK" -czf "$OUT/logs.tar.gz" logs
rm -rf "$WORK"
say "done: $OUT/summary.json, $OUT/report.txt, $OUT/logs.tar.gz"
