#!/usr/bin/env bash
# Installs what sparq's build and tests need and is missing: Debian packages
# (apt-get, as root or through sudo) and the Python packages of the tests and
# tools (pip). Safe to run again: it installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

debs=(cmake g++ make pkg-config python3 python3-pip
      libonnx-dev libonnx-testdata libprotobuf-dev protobuf-compiler
      libcli11-dev libyaml-cpp-dev nlohmann-json3-dev zlib1g-dev
      libgtest-dev libgmock-dev libbenchmark-dev libdnnl-dev)
missing=()
for p in "${debs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "install_deps: apt-get install ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Python: only for tests, interop checks and generating test models.
if ! python3 tools/check_requirements.py tools/requirements.txt 2>/dev/null; then
  echo "install_deps: pip install -r tools/requirements.txt"
  python3 -m pip install -q -r tools/requirements.txt
fi
