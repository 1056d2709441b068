#!/usr/bin/env bash
# The GPU check in one command (issue 23).
#
#   tools/gpu_check.sh bundle [DIR]   builds a CUDA-enabled Release here (nvcc,
#                                     build-gpu/) and packs a self-contained folder
#                                     (default build-gpu/sparq-gpu) under 48 MiB:
#                                     sparq, libsparq and its non-system libraries,
#                                     sparq_cuda_tests, gpu_bench and run.sh
#   DIR/run.sh [--dry-run]            on the GPU machine: runs the CUDA tests and the
#                                     benchmark, writes $OUT/gpu_results.md and
#                                     $OUT/gpu_check.log (OUT defaults to ./out)
#
# docs/gpu.md says how to use it. Environment: JOBS (build jobs, default 2),
# SPARQ_CUDA_ARCHITECTURES (default "80;90"), SPARQ_GPU_BUILD (the build
# folder, default build-gpu; an existing CUDA build may be reused).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MAX_MIB=48

usage() {
  sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
}

bundle() {
  local build="${SPARQ_GPU_BUILD:-$ROOT/build-gpu}"
  local dest="${1:-$build/sparq-gpu}"
  local jobs="${JOBS:-2}"
  command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ] || { echo "gpu_check: nvcc not found" >&2; exit 2; }
  echo "gpu_check: configuring $build (Release, CUDA ${SPARQ_CUDA_ARCHITECTURES:-80;90})"
  mkdir -p "$build"
  local launcher=()
  if command -v ccache >/dev/null; then  # as tools/test.sh: paths relative to the checkout
    launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
    export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$ROOT}" CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
  fi
  cmake -S "$ROOT" -B "$build" -DCMAKE_BUILD_TYPE=Release -DSPARQ_CUDA=ON -DSPARQ_BUILD_TESTS=ON "${launcher[@]}" \
    -DSPARQ_CUDA_ARCHITECTURES="${SPARQ_CUDA_ARCHITECTURES:-80;90}" >"$build/gpu_check.configure.log" 2>&1 ||
    { tail -30 "$build/gpu_check.configure.log" >&2; exit 1; }
  echo "gpu_check: building sparq, sparq_cuda_tests, gpu_bench (-j$jobs)"
  nice cmake --build "$build" -j"$jobs" --target sparq_cli sparq_cuda_tests gpu_bench

  rm -rf "$dest"
  mkdir -p "$dest/bin" "$dest/lib"
  cp "$build/bin/sparq" "$build/bin/sparq_cuda_tests" "$build/bin/gpu_bench" "$dest/bin/"
  # The non-system libraries sparq needs, under their soname (what the loader looks for).
  local lib
  for lib in $(ldd "$build/bin/sparq" | awk '/=> \// {print $3}'); do
    case "$(basename "$lib")" in
      libsparq.so* | libonnx.so* | libonnx_proto.so* | libprotobuf.so* | libyaml-cpp.so*)
        cp -L "$lib" "$dest/lib/$(basename "$lib")" ;;
    esac
  done
  for lib in $(ldd "$build/bin/sparq_cuda_tests" "$build/bin/gpu_bench" | awk '/=> \// {print $3}' | sort -u); do
    case "$(basename "$lib")" in
      libonnx.so* | libonnx_proto.so* | libprotobuf.so* | libyaml-cpp.so* | libgtest*.so*)
        [ -e "$dest/lib/$(basename "$lib")" ] || cp -L "$lib" "$dest/lib/$(basename "$lib")" ;;
    esac
  done
  strip --strip-unneeded "$dest"/bin/* "$dest"/lib/* 2>/dev/null || true
  cp "$ROOT/tools/gpu_run.sh" "$dest/run.sh"
  cp "$ROOT/tools/make_test_models.py" "$ROOT/tools/gpu_models.py" "$dest/"
  mkdir -p "$dest/models"
  cp "$ROOT/examples/digits/digits_cnn.onnx" "$dest/models/digits_cnn.onnx"
  cp "$ROOT/examples/digits/eval.npz" "$dest/models/digits_cnn.npz"
  chmod +x "$dest/run.sh"
  git -C "$ROOT" log -1 --format='%H %s' >"$dest/COMMIT" 2>/dev/null || echo unknown >"$dest/COMMIT"
  local mib
  mib=$(du -sm "$dest" | cut -f1)
  echo "gpu_check: $dest is ${mib} MiB"
  ls -la "$dest/bin" "$dest/lib"
  if [ "$mib" -ge "$MAX_MIB" ]; then
    echo "gpu_check: the bundle is over ${MAX_MIB} MiB" >&2
    exit 1
  fi
  echo "gpu_check: copy $dest to the GPU machine and run: OUT=/some/dir ./run.sh   (./run.sh --dry-run lists the steps)"
}

case "${1:-}" in
  bundle) shift; bundle "$@" ;;
  *) usage ;;
esac
