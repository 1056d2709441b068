#!/usr/bin/env bash
# The README's test command (what CI runs): installs what the tests need and is
# missing (Debian packages, and the test-only Python packages into the virtual
# environment $SPARQ_VENV, default .venv), builds everything (tests, the
# install test, the CUDA scaffold when nvcc is found) and runs the whole suite
# with that environment's python. Safe to run again: the second run installs
# nothing and rebuilds only what changed.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install_deps.sh --tests
venv=${SPARQ_VENV:-$PWD/.venv}
jobs=$(nproc)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DSPARQ_BUILD_TESTS=ON \
  -DSPARQ_CUDA="${SPARQ_CUDA:-AUTO}" -DPython3_EXECUTABLE="$venv/bin/python"
cmake --build build -j"$jobs"
# The venv first on PATH: tests that call `python3` get its packages too.
PATH="$venv/bin:$PATH" ctest --test-dir build --output-on-failure -j"$jobs"
