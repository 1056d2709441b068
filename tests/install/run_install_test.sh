#!/usr/bin/env bash
# Installs the built sparq into a temporary prefix, then checks the installed
# tree as a user meets it:
#   - the installed `sparq --version` runs without LD_LIBRARY_PATH (its RPATH
#     finds bin/../lib) and prints the version of include/sparq/version.h;
#   - pkg-config finds sparq.pc and a program built with its flags runs;
#   - tests/install/consumer builds with find_package(sparq) and runs.
set -euo pipefail
build_dir=$1
src_dir=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"
fail() { echo "install test: $*" >&2; exit 1; }
cmake --install "$build_dir" --prefix "$prefix" > "$work/install.log"
unset LD_LIBRARY_PATH

# The version, from its one source: the generated header.
header_version=$(sed -n 's/^#define SPARQ_VERSION_STRING "\(.*\)"$/\1/p' "$prefix/include/sparq/version.h")
[ -n "$header_version" ] || fail "no SPARQ_VERSION_STRING in the installed sparq/version.h"

# RPATH: the installed CLI finds the installed library by itself.
out=$("$prefix/bin/sparq" --version) || fail "installed sparq --version failed (RPATH?): $out"
[ "$out" = "sparq $header_version" ] || fail "sparq --version printed '$out', expected 'sparq $header_version'"
# ldd's output is captured first: `ldd | grep -q` under pipefail fails at
# random when grep exits before ldd is done writing (SIGPIPE).
deps=$(ldd "$prefix/bin/sparq")
grep -qF "=> $prefix/bin/../lib/libsparq.so" <<< "$deps" ||
  fail "installed sparq does not load libsparq from $prefix/lib: $(grep sparq <<< "$deps")"

# pkg-config: version, flags, and a program built with them.
libdir=$(dirname "$(find "$prefix" -name sparq.pc -print -quit)")
[ -d "$libdir" ] || fail "no sparq.pc installed"
export PKG_CONFIG_PATH="$libdir"
[ "$(pkg-config --modversion sparq)" = "$header_version" ] || fail "pkg-config --modversion sparq: $(pkg-config --modversion sparq)"
cat > "$work/pc_consumer.cc" <<'CC'
#include <cstdio>
#include <cstring>
#include "sparq/version.h"
int main() {
  std::printf("%s\n", sparq::Version());
  return std::strcmp(sparq::Version(), SPARQ_VERSION_STRING) == 0 ? 0 : 1;
}
CC
# shellcheck disable=SC2046
c++ -std=c++17 "$work/pc_consumer.cc" -o "$work/pc_consumer" $(pkg-config --cflags --libs sparq) \
  -Wl,-rpath,"$(pkg-config --variable=libdir sparq)" || fail "building with pkg-config's flags failed"
"$work/pc_consumer" > /dev/null || fail "the pkg-config consumer failed"

# find_package(sparq).
cmake -S "$src_dir/consumer" -B "$work/build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release > "$work/configure.log"
cmake --build "$work/build" > "$work/build.log"
LD_LIBRARY_PATH="$prefix/lib" "$work/build/consumer" "$work"
echo "install test: sparq $header_version: RPATH, pkg-config and find_package(sparq) work"
