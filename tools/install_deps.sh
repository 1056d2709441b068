#!/usr/bin/env bash
# Installs what is missing, and only that (safe to run again; a second run
# installs nothing and takes about a second).
#
#   tools/install_deps.sh           the main job: Debian packages to build sparq
#                                   and its CLI. No Python at all.
#   tools/install_deps.sh --tests   also what the tests need: Debian packages
#                                   (gtest, ONNX's node test data, dpkg-dev and file for
#                                   the .deb test, ccache for the two builds, python3-venv)
#                                   and a virtual environment with the test-only
#                                   Python packages of tools/requirements.txt.
#
# Debian packages come from apt-get, as root or through sudo. Python packages
# go into the virtual environment $SPARQ_VENV (default: .venv in the source
# folder, ignored by git), never into the system's Python, so PEP 668
# ("externally-managed-environment") does not apply. tools/test.sh runs the
# tests with that environment's python.
set -euo pipefail
cd "$(dirname "$0")/.."

tests=0
case "${1:-}" in
  "") ;;
  --tests) tests=1 ;;
  *) echo "usage: tools/install_deps.sh [--tests]" >&2; exit 2 ;;
esac

debs=(cmake g++ make pkg-config
      libonnx-dev libprotobuf-dev protobuf-compiler
      libcli11-dev libyaml-cpp-dev nlohmann-json3-dev zlib1g-dev)
if ((tests)); then
  debs+=(libgtest-dev libgmock-dev libonnx-testdata dpkg-dev file ccache python3 python3-venv)
fi

missing=()
for p in "${debs[@]}"; do
  [[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" == *"install ok installed"* ]] || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "install_deps: need root (or sudo) to apt-get install ${missing[*]}" >&2; exit 1; }
    sudo=(sudo)
  fi
  echo "install_deps: apt-get install ${missing[*]}"
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
((tests)) || exit 0

# The tests' virtual environment. Recreated when it is broken (e.g. made before
# python3-venv was installed, which leaves one without pip); its packages are
# (re)installed when tools/requirements.txt changed since the last install.
venv=${SPARQ_VENV:-$PWD/.venv}
if ! "$venv/bin/python" -m pip --version >/dev/null 2>&1; then
  echo "install_deps: python3 -m venv $venv"
  rm -rf "$venv"
  python3 -m venv "$venv"
fi
stamp="$venv/.sparq-requirements"
if ! cmp -s tools/requirements.txt "$stamp"; then
  echo "install_deps: pip install -r tools/requirements.txt into $venv (PyPI's torch brings CUDA libraries: a few GB, once)"
  PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1 \
    "$venv/bin/python" -m pip install -q -r tools/requirements.txt
  cp tools/requirements.txt "$stamp"
fi
