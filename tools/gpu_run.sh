#!/usr/bin/env bash
# run.sh of a GPU bundle (made by tools/gpu_check.sh bundle): runs sparq's CUDA
# tests and GPU benchmark on this machine and writes $OUT/gpu_results.md and
# $OUT/gpu_check.log (OUT defaults to ./out).
#
#   ./run.sh             run everything (about 2 minutes on an H200)
#   ./run.sh --dry-run   list the steps; run only what needs no GPU
#
# The CUDA libraries (cuBLASLt, cuSPARSE and its nvJitLink) are those of this
# machine: every directory holding one (e.g. inside a Python environment's
# nvidia packages) joins LD_LIBRARY_PATH after the bundle's lib/.
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
OUT="${OUT:-$HERE/out}"
DRY=0
[ "${1:-}" = "--dry-run" ] && DRY=1
mkdir -p "$OUT"
LOG="$OUT/gpu_check.log"
RESULTS="$OUT/gpu_results.md"
: >"$LOG"

say() { echo "$*" | tee -a "$LOG"; }

have_gpu() {
  [ -e /dev/nvidia0 ] || return 1
  command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1
}

steps=(
  "sparq --version"
  "sparq_cuda_tests (host arithmetic and layouts; every CUDA row against the reference kernels)"
  "gpu_bench (cuBLASLt GEMM f32/tf32/f16/s8 and cuSPARSE Blocked-ELL f16/s8 at BERT-base shapes)"
)
say "sparq GPU check ($(cat "$HERE/COMMIT" 2>/dev/null || echo unknown)) -> $RESULTS"
for s in "${steps[@]}"; do say "  step: $s"; done

GPU=1
if ! have_gpu; then
  GPU=0
  say "no NVIDIA GPU here (/dev/nvidia0 or nvidia-smi missing): skipping the GPU parts"
fi
libdirs="$(timeout 60 find / \( -name 'libcublasLt.so*' -o -name 'libcusparse.so*' -o -name 'libnvJitLink.so*' \) -not -path '/proc/*' 2>/dev/null |
  xargs -r -n1 dirname | sort -u | paste -sd: -)"
export LD_LIBRARY_PATH="$HERE/lib${libdirs:+:$libdirs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
say "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
if [ "$DRY" = 1 ] || [ "$GPU" = 0 ]; then
  # What needs no GPU: the host tests of the CUDA backend (the GPU tests skip).
  timeout 120 "$HERE/bin/sparq_cuda_tests" >>"$LOG" 2>&1
  rc=$?
  say "host tests of sparq_cuda_tests (no GPU needed): $([ $rc = 0 ] && echo pass || echo "FAIL ($rc)")"
  if [ "$DRY" = 1 ]; then
    [ "$GPU" = 0 ] && say "--dry-run: the GPU steps would be skipped here"
    exit $rc
  fi
  {
    echo "# sparq GPU check"
    echo
    echo "No GPU on $(hostname): only the host tests ran ($([ $rc = 0 ] && echo pass || echo "FAIL ($rc)"))."
  } >"$RESULTS"
  exit $rc
fi

status_of() { [ "$1" = 0 ] && echo pass || { [ "$1" = 77 ] && echo skipped || echo "FAIL ($1)"; }; }

{
  echo "# sparq GPU check"
  echo
  echo "- commit: $(cat "$HERE/COMMIT" 2>/dev/null || echo unknown)"
  echo "- machine: $(hostname), $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)"
  echo "- date: $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
} >"$RESULTS"

timeout 30 "$HERE/bin/sparq" --version >>"$LOG" 2>&1
say "sparq --version: $(status_of $?)"

timeout 300 "$HERE/bin/sparq_cuda_tests" --gtest_output="xml:$OUT/sparq_cuda_tests.xml" >"$OUT/sparq_cuda_tests.log" 2>&1
rc=$?
cat "$OUT/sparq_cuda_tests.log" >>"$LOG"
{
  echo "## sparq_cuda_tests: $(status_of $rc)"
  echo
  echo '```'
  grep -E '^\[  (PASSED|FAILED|SKIPPED) |^\[==========\]|^\[  FAILED  \]|^\[  SKIPPED \]' "$OUT/sparq_cuda_tests.log" | head -60
  grep -B1 -A3 'Failure' "$OUT/sparq_cuda_tests.log" | head -80
  echo '```'
  echo
} >>"$RESULTS"
say "sparq_cuda_tests: $(status_of $rc)"

timeout 300 "$HERE/bin/gpu_bench" >"$OUT/gpu_bench.md" 2>>"$LOG"
rc=$?
{
  echo "## gpu_bench: $(status_of $rc)"
  echo
  cat "$OUT/gpu_bench.md"
  echo
} >>"$RESULTS"
say "gpu_bench: $(status_of $rc)"
say "wrote $RESULTS"
