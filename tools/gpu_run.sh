#!/usr/bin/env bash
# run.sh of a GPU bundle (made by tools/gpu_check.sh bundle): runs sparq's CUDA
# tests and GPU benchmark on this machine and writes $OUT/gpu_results.md and
# $OUT/gpu_check.log (OUT defaults to ./out).
#
#   ./run.sh             run everything (about 2 minutes on an H200)
#   ./run.sh --dry-run   list the steps; run only what needs no GPU
#
# The CUDA libraries (cuBLASLt, cuSPARSE and its nvJitLink, and cuSPARSELt for
# the 2:4 rows, opened at run time when present) are those of this machine:
# every directory holding one (e.g. inside a Python environment's nvidia
# packages) joins LD_LIBRARY_PATH after the bundle's lib/. The bundle carries
# none of them.
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

PY="${PYTHON:-python3}"
# The backend compared with the CPU: cuda (SPARQ_CHECK_BACKEND=reference tries
# the step on a machine without a GPU).
CHECK_BACKEND="${SPARQ_CHECK_BACKEND:-cuda}"

# Whole models: each FP32, INT8 and FP16, run on the CPU and on $CHECK_BACKEND, the
# outputs compared (a table in $RESULTS); nodes the backend left to the CPU
# are counted from --verbose.
models_step() {
  local dir="$OUT/models" cmp="$OUT/compare"
  mkdir -p "$dir" "$cmp"
  cp "$HERE/models/digits_cnn.onnx" "$dir/digits_cnn.onnx"
  cp "$HERE/models/digits_cnn.npz" "$dir/digits_cnn.npz"
  if "$PY" -c 'import torch, torchvision, onnx, numpy' >/dev/null 2>&1; then
    # The targets' shapes (ResNet-50, EfficientNet-Lite0 with timm, MiniLM-L6 and BERT-base with
    # transformers; random weights) and PyTorch's FP16 times on this GPU; the small test models
    # where those packages are missing.
    local torch_times=()
    [ "$GPU" = 1 ] && torch_times=(--torch-times "$OUT/torch_times.json")
    timeout 420 "$PY" "$HERE/gpu_models.py" "$dir" "${torch_times[@]}" >>"$LOG" 2>&1 ||
      { say "gpu_models.py failed (see the log): the small test models instead"
        timeout 300 "$PY" "$HERE/make_test_models.py" "$dir" >>"$LOG" 2>&1 || say "make_test_models.py failed (see the log)"; }
  else
    say "models: no python3 with torch, torchvision, onnx and numpy: digits_cnn only"
  fi
  local sparq="$HERE/bin/sparq" m name data
  for m in "$dir"/*.onnx; do
    name="$(basename "$m" .onnx)"
    case "$name" in *.int8 | *.fp16) continue ;; esac
    data="$dir/$name.npz"
    [ -f "$data" ] || continue
    timeout 120 "$sparq" calibrate "$m" --data "$data" --method max --samples 8 -o "$dir/$name.scales.json" >>"$LOG" 2>&1 &&
      timeout 120 "$sparq" quantize "$m" --scales "$dir/$name.scales.json" -o "$dir/$name.int8.onnx" >>"$LOG" 2>&1 ||
      say "models: $name: INT8 quantization failed (see the log)"
    # FP16 (float16 rows on the GPU, as written; the CPU lowers it to float32 with float16 roundings).
    [ -f "$dir/$name.scales.json" ] &&
      { timeout 120 "$sparq" quantize "$m" --scales "$dir/$name.scales.json" --precision fp16 -o "$dir/$name.fp16.onnx" \
          >>"$LOG" 2>&1 || say "models: $name: FP16 conversion failed (see the log)"; }
    # Calibration on both backends (KL, the histograms binned on the device
    # on cuda): the tables compared below, with the wall times.
    local b t0 t1
    [ "$CHECK_BACKEND" = cuda ] && for b in cpu cuda; do
      t0=$(date +%s.%N)
      timeout 180 "$sparq" calibrate "$m" --data "$data" --method kl --samples 64 --backend "$b" \
        -o "$cmp/$name.calib.$b.json" >>"$LOG" 2>&1 || say "models: $name: calibrate --backend $b failed (see the log)"
      t1=$(date +%s.%N)
      echo "$t0 $t1" | awk '{printf "%.3f\n", $2 - $1}' >"$cmp/$name.calib.$b.seconds"
    done
    local variant model
    for variant in fp32 int8 fp16; do
      model="$m"
      [ "$variant" = int8 ] && model="$dir/$name.int8.onnx"
      [ "$variant" = fp16 ] && model="$dir/$name.fp16.onnx"
      [ -f "$model" ] || continue
      timeout 120 "$sparq" eval "$model" --inputs "$data" --backend cpu --save-outputs "$cmp/$name.$variant.cpu.npz" \
        >"$cmp/$name.$variant.cpu.txt" 2>&1
      timeout 120 "$sparq" eval "$model" --inputs "$data" --backend "$CHECK_BACKEND" --verbose \
        --save-outputs "$cmp/$name.$variant.$CHECK_BACKEND.npz" >"$cmp/$name.$variant.$CHECK_BACKEND.txt" 2>&1
      echo "sparq eval $name $variant --backend $CHECK_BACKEND: exit $?" >>"$LOG"
    done
  done
  {
    echo "## Whole models: --backend $CHECK_BACKEND vs --backend cpu"
    echo
    "$PY" - "$cmp" "$CHECK_BACKEND" <<'PYEOF' 2>&1
import glob, os, re, sys
try:
    import numpy as np
except ImportError:
    print("(no numpy: outputs not compared)")
    sys.exit(0)
cmp, backend = sys.argv[1], sys.argv[2]
print("| model | precision | output | max abs diff | max rel diff | identical | nodes left to the CPU | throughput (samples/s) | p50 ms (batch 1) |")
print("|---|---|---|---:|---:|---|---:|---:|---:|")
for cpu in sorted(glob.glob(os.path.join(cmp, "*.cpu.npz"))):
    stem = cpu[: -len(".cpu.npz")]
    name, variant = os.path.basename(stem).rsplit(".", 1)
    other = f"{stem}.{backend}.npz"
    log = f"{stem}.{backend}.txt"
    text = open(log).read() if os.path.exists(log) else ""
    on_cpu = sum(1 for line in text.splitlines() if re.match(r"^\s+\S+\s+\S+\s+\S+\s+cpu\s*$", line))
    thr = re.search(r"Throughput\s+([0-9.]+)", text)
    thr = thr.group(1) if thr else "-"
    p50 = re.search(r"Latency per batch\s+p50 ([0-9.]+) ms", text)
    p50 = p50.group(1) if p50 else "-"
    if not os.path.exists(other):
        err = [l for l in text.splitlines() if "error" in l][:1]
        print(f"| {name} | {variant} | - | - | - | FAILED: {err[0] if err else 'no outputs'} | - | - | - |")
        continue
    a, b = np.load(cpu), np.load(other)
    for key in a.files:
        x, y = a[key], b[key] if key in b.files else None
        if y is None or x.shape != y.shape:
            print(f"| {name} | {variant} | {key} | - | - | FAILED: missing or shape differs | {on_cpu} | {thr} | {p50} |")
            continue
        d = np.abs(x.astype(np.float64) - y.astype(np.float64))
        rel = d / np.maximum(1.0, np.abs(x.astype(np.float64)))
        same = bool(np.array_equal(x, y, equal_nan=True)) if x.dtype.kind == "f" else bool(np.array_equal(x, y))
        print(f"| {name} | {variant} | {key} | {np.nanmax(d):.3g} | {np.nanmax(rel):.3g} | {'yes' if same else 'no'} | {on_cpu} | {thr} | {p50} |")
import json
print()
print(f"Calibration (KL, the model's .npz samples, up to 64): --backend {backend} vs --backend cpu")
print()
print("| model | tensors | identical thresholds | max rel threshold diff | cpu s | " + backend + " s |")
print("|---|---:|---:|---:|---:|---:|")
for cpu in sorted(glob.glob(os.path.join(cmp, "*.calib.cpu.json"))):
    name = os.path.basename(cpu)[: -len(".calib.cpu.json")]
    other = os.path.join(cmp, f"{name}.calib.{backend}.json")
    secs = lambda b: (open(os.path.join(cmp, f"{name}.calib.{b}.seconds")).read().strip()
                      if os.path.exists(os.path.join(cmp, f"{name}.calib.{b}.seconds")) else "-")
    if not os.path.exists(other):
        print(f"| {name} | - | FAILED: no table | - | {secs('cpu')} | {secs(backend)} |")
        continue
    ta = {t["name"]: t for t in json.load(open(cpu)).get("tensors", [])}
    tb = {t["name"]: t for t in json.load(open(other)).get("tensors", [])}
    same = sum(1 for k in ta if k in tb and ta[k].get("threshold") == tb[k].get("threshold"))
    rel = max([abs(ta[k]["threshold"] - tb[k]["threshold"]) / max(1e-12, abs(ta[k]["threshold"]))
               for k in ta if k in tb] or [0.0])
    print(f"| {name} | {len(ta)} | {same} | {rel:.3g} | {secs('cpu')} | {secs(backend)} |")
times = os.path.join(os.path.dirname(cmp), "torch_times.json")
if os.path.exists(times):
    import json
    print()
    print("PyTorch FP16 on this GPU, the same random-weight models (ms per batch; tools/gpu_models.py):")
    print()
    print("| model | b1 eager | b1 CUDA graph | b32 eager | b32 CUDA graph |")
    print("|---|---:|---:|---:|---:|")
    for name, t in json.load(open(times)).items():
        cells = [f"{t[b][k]:.2f}" for b in ("b1", "b32") for k in ("eager_ms", "graph_ms")]
        print(f"| {name} | " + " | ".join(cells) + " |")
PYEOF
    echo
  } >>"$RESULTS"
  say "models: compared (see $RESULTS)"
}

have_gpu() {
  [ -e /dev/nvidia0 ] || return 1
  command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1
}

steps=(
  "sparq --version"
  "sparq_cuda_tests (host arithmetic and layouts; every CUDA row against the reference kernels)"
  "gpu_bench (cuBLASLt GEMM f32/tf32/f16/s8, INT8 with int8 out: cuBLASLt + requantize vs the fused kernel,"
  "        cuSPARSE Blocked-ELL f16/s8 and the own f16/s8 WMMA block-sparse kernels (vs cuSPARSE, at 80/90/95%)"
  "        at BERT-base shapes, 2:4 cuSPARSELt vs dense f16 at BERT-base and ResNet-50 b32 shapes (when this"
  "        machine has libcusparseLt); the GPU rows of the kernel speed table (cuda s8/f16, cuda.wmma f16/s8)"
  "        -> \$OUT/kernel_speedups_gpu.csv)"
  "models: digits_cnn (bundled) and, with python3 + torch + torchvision + onnx, ResNet-50, EfficientNet-Lite0"
  "        (with timm), MiniLM-L6 and BERT-base shapes (with transformers; gpu_models.py, random weights; else"
  "        make_test_models.py's small ones); each FP32, INT8 and FP16 (sparq calibrate --method max + sparq"
  "        quantize [--precision fp16]), run by sparq eval --backend cpu and --backend cuda, outputs compared; PyTorch FP16"
  "        eager and CUDA-graph times of the same models beside them; sparq calibrate --method kl"
  "        --backend cpu and --backend cuda (histograms binned on the GPU), tables and times compared"
)
say "sparq GPU check ($(cat "$HERE/COMMIT" 2>/dev/null || echo unknown)) -> $RESULTS"
for s in "${steps[@]}"; do say "  step: $s"; done

GPU=1
if ! have_gpu; then
  GPU=0
  say "no NVIDIA GPU here (/dev/nvidia0 or nvidia-smi missing): skipping the GPU parts"
fi
libdirs="$(timeout 60 find / \( -name 'libcublasLt.so*' -o -name 'libcusparse.so*' -o -name 'libnvJitLink.so*' \
  -o -name 'libcusparseLt.so*' \) -not -path '/proc/*' 2>/dev/null | xargs -r -n1 dirname | sort -u | paste -sd: -)"
export LD_LIBRARY_PATH="$HERE/lib${libdirs:+:$libdirs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
say "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
lt="$(IFS=:; for d in $libdirs; do ls "$d"/libcusparseLt.so* 2>/dev/null; done | head -1)"
say "cuSPARSELt (2:4 rows, gpu_bench's 2:4 rows): ${lt:-not found on this machine (the 2:4 steps skip)}"
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
    echo
  } >"$RESULTS"
  # SPARQ_CHECK_BACKEND=reference (or cpu) tries the whole-model step here.
  [ "$CHECK_BACKEND" != cuda ] && models_step
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

timeout 300 "$HERE/bin/gpu_bench" --speedups "$OUT/kernel_speedups_gpu.csv" >"$OUT/gpu_bench.md" 2>>"$LOG"
rc=$?
{
  echo "## gpu_bench: $(status_of $rc)"
  echo
  cat "$OUT/gpu_bench.md"
  echo
  if [ -f "$OUT/kernel_speedups_gpu.csv" ]; then
    echo "GPU rows of the kernel speed table (\$OUT/kernel_speedups_gpu.csv; append them to"
    echo "bench/kernel_speedups.csv, or name the file as prune.kernel_table / eval --kernel-table, for"
    echo "structure: auto on cuda and the CUDA block-sparse rows, docs/gpu.md):"
    echo
    echo '```'
    cat "$OUT/kernel_speedups_gpu.csv"
    echo '```'
    echo
  fi
} >>"$RESULTS"
say "gpu_bench: $(status_of $rc)"

models_step
say "wrote $RESULTS"
