#!/usr/bin/env bash
# Builds sparq's libFuzzer targets in build-fuzz (clang, ASan) and runs each
# for a while. Findings (crash-*, leak-*, oom-*, timeout-*) land in
# build-fuzz/findings/<fuzzer>/.
#
#   tools/run_fuzzers.sh [seconds per fuzzer, default 60] [fuzzer names...]
#
# Needs clang with compiler-rt (Debian: clang libclang-rt-14-dev).
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
build="$root/build-fuzz"
seconds="${1:-60}"
shift || true
fuzzers=("$@")
[ ${#fuzzers[@]} -eq 0 ] && fuzzers=(fuzz_npy fuzz_npz fuzz_recipe fuzz_onnx_loader)
jobs="${SPARQ_FUZZ_BUILD_JOBS:-2}"

# SPARQ_FUZZ_NO_BUILD=1 runs the fuzzers already in build-fuzz without rebuilding.
if [ -z "${SPARQ_FUZZ_NO_BUILD:-}" ]; then
  command -v clang++ >/dev/null || { echo "run_fuzzers: clang++ not found (apt-get install clang)" >&2; exit 2; }
  CC=clang CXX=clang++ cmake -S "$root" -B "$build" -DSPARQ_FUZZ=ON -DSPARQ_BUILD_TESTS=OFF -DSPARQ_CUDA=OFF \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$build" -j"$jobs" --target "${fuzzers[@]}"
fi

# Seeds: small valid files written by sparq's own tests' formats and ONNX's
# backend test models (if installed).
status=0
for fuzzer in "${fuzzers[@]}"; do
  corpus="$build/corpus/$fuzzer"
  findings="$build/findings/$fuzzer"
  mkdir -p "$corpus" "$findings"
  if [ "$fuzzer" = fuzz_onnx_loader ] && [ -d /usr/share/libonnx-testdata/data/node ]; then
    # Prefix each model with the byte that selects shape inference (see the fuzzer).
    i=0
    for model in /usr/share/libonnx-testdata/data/node/*/model.onnx; do
      [ $((i % 8)) -eq 0 ] && { printf '\001'; cat "$model"; } >"$corpus/seed-$i"
      i=$((i + 1))
    done
  fi
  if [ "$fuzzer" = fuzz_recipe ]; then
    # Every bundled recipe, behind the mode byte (0: as is, 1: first line is a --set).
    i=0
    for recipe in "$root"/recipes/*.yaml; do
      { printf '\000'; cat "$recipe"; } >"$corpus/recipe-$i.yaml"
      { printf '\001'; echo 'evaluate.gate.max_drop=2'; cat "$recipe"; } >"$corpus/recipe-set-$i.yaml"
      i=$((i + 1))
    done
  fi
  if { [ "$fuzzer" = fuzz_npy ] || [ "$fuzzer" = fuzz_npz ]; } && command -v python3 >/dev/null && python3 -c 'import numpy' 2>/dev/null; then
    python3 - "$corpus" <<'PY'
import sys, numpy as np
d = sys.argv[1] + '/'
np.save(d + 'f4.npy', np.arange(6, dtype=np.float32).reshape(2, 3))
np.save(d + 'b1.npy', np.array([True, False]))
np.save(d + 'be.npy', np.arange(3, dtype='>i2'))
np.savez(d + 'stored.npz', a=np.arange(4, dtype=np.int64), b=np.float16(1.5))
np.savez_compressed(d + 'deflated.npz', a=np.arange(40, dtype=np.uint8))
PY
  fi
  # Known bad inputs (tests/fuzz/regressions/<fuzzer name without fuzz_>-*) run once first.
  for input in "$root"/tests/fuzz/regressions/"${fuzzer#fuzz_}"-*; do
    [ -e "$input" ] || continue
    if ! (cd "$findings" && "$build/bin/$fuzzer" -rss_limit_mb=4096 -malloc_limit_mb=2048 "$input" \
          >"$findings/regression-$(basename "$input").log" 2>&1); then
      echo "== $fuzzer: regression input $(basename "$input") still fails (log: $findings/regression-$(basename "$input").log)" >&2
      status=1
    fi
  done
  echo "== $fuzzer: ${seconds}s"
  if ! (cd "$findings" && ASAN_OPTIONS=detect_leaks=1 "$build/bin/$fuzzer" -max_total_time="$seconds" \
        -rss_limit_mb=4096 -malloc_limit_mb=2048 -timeout=25 -print_final_stats=1 "$corpus"); then
    echo "== $fuzzer: FOUND A PROBLEM, see $findings" >&2
    status=1
  fi
done
exit $status
