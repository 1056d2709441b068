#!/usr/bin/env bash
# The README's test command (what CI runs): installs what the tests need and is
# missing (Debian packages, and the test-only Python packages into the virtual
# environment $SPARQ_VENV, default .venv), builds everything (tests, the
# install test, the CUDA backend when nvcc is found) and runs the whole suite
# with that environment's python. Then it runs the unit tests once more under
# AddressSanitizer + UndefinedBehaviorSanitizer: only the gtest binary
# (sparq_tests), built in a second folder, build-asan (-DSPARQ_SANITIZE).
# SPARQ_SANITIZE=0 skips that pass for quick local runs. Both builds go
# through ccache (installed by install_deps --tests; $CCACHE_DIR keeps it). Safe to run again: the second run installs nothing and
# rebuilds only what changed.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install_deps.sh --tests
venv=${SPARQ_VENV:-$PWD/.venv}
jobs=$(nproc)
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  # Paths relative to the checkout: a clone in another folder (CI clones afresh) still hits.
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}" CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DSPARQ_BUILD_TESTS=ON \
  -DSPARQ_CUDA="${SPARQ_CUDA:-AUTO}" -DPython3_EXECUTABLE="$venv/bin/python" "${launcher[@]}"
cmake --build build -j"$jobs"
# The venv first on PATH: tests that call `python3` get its packages too.
PATH="$venv/bin:$PATH" ctest --test-dir build --output-on-failure -j"$jobs"

# The sanitizer pass: one process, leaks reported, any finding fails the run.
if [[ "${SPARQ_SANITIZE:-1}" != 0 ]]; then
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPARQ_SANITIZE=address,undefined \
    -DSPARQ_BUILD_TESTS=ON -DSPARQ_CUDA=OFF "${launcher[@]}"
  cmake --build build-asan -j"$jobs" --target sparq_tests
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 build-asan/bin/sparq_tests
fi
