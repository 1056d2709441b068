#!/usr/bin/env bash
# The README's test command: install what is missing, build everything (the
# CUDA backend too when nvcc is present), run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install_deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$(nproc)"
ctest --test-dir build --output-on-failure -j"$(nproc)"
