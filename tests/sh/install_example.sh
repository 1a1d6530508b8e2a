#!/usr/bin/env bash
# `make install` into a temporary prefix, then build docs/example.c against the INSTALLED
# library with pkg-config, as a user would, and run it on the tiny golden model.
set -u
BUILD=${BUILD:-build}
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
make --no-print-directory -s install BUILD="$BUILD" PREFIX="$tmp/prefix" >/dev/null || fail "make install"
for f in lib/libtern.a include/tern.h lib/pkgconfig/tern.pc bin/tern; do
    [ -f "$tmp/prefix/$f" ] || fail "installed tree lacks $f"
done
export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig"
# shellcheck disable=SC2046
# Under make asan the library carries sanitizer calls: link with the same compiler and flags.
${CC:-cc} -std=c11 -Wall -Wextra -Werror docs/example.c $(pkg-config --cflags --libs tern) ${LDFLAGS:-} -o "$tmp/example" \
    || fail "the example does not build against the installed library"
out=$("$tmp/example" tests/golden/tiny-q4km.gguf "Once upon a time" 2>&1) || fail "example exited $?: $out"
echo "example: $out"
# Greedy on the tiny random model: the first reference token after this prompt is fixed.
[ "$(wc -c <<<"$out")" -gt 20 ] || fail "the example printed too little"
echo "install + pkg-config example: ok"
