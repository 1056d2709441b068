#!/usr/bin/env bash
# `cpack -G DEB` in the build folder makes a .deb holding the CLI, the library
# (with its SOVERSION link), the headers with sparq/version.h, the CMake and
# pkg-config files and the LICENSE, with Debian dependencies filled in.
set -euo pipefail
build_dir=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "deb test: $*" >&2; exit 1; }
(cd "$build_dir" && cpack -G DEB -B "$work" > "$work/cpack.log" 2>&1) || { cat "$work/cpack.log" >&2; fail "cpack failed"; }
deb=$(find "$work" -maxdepth 1 -name 'sparq_*.deb' -print -quit)
[ -n "$deb" ] || fail "no sparq_*.deb in $work"
contents=$(dpkg-deb -c "$deb")
for f in ./usr/bin/sparq ./usr/include/sparq/version.h ./usr/include/sparq/status.h ./usr/lib/pkgconfig/sparq.pc \
         ./usr/lib/cmake/sparq/sparqConfig.cmake ./usr/share/doc/sparq/LICENSE; do
  grep -q " $f\$" <<< "$contents" || fail "$f is not in $(basename "$deb")"
done
grep -Eq ' ./usr/lib/libsparq\.so\.[0-9]+ -> ' <<< "$contents" || fail "no libsparq.so.<SOVERSION> link in $(basename "$deb")"
[[ "$(dpkg-deb -f "$deb" Depends)" == *libonnx* ]] || fail "Depends lacks libonnx: $(dpkg-deb -f "$deb" Depends)"
echo "deb test: $(basename "$deb"): $(dpkg-deb -f "$deb" Depends)"
