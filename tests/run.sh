#!/usr/bin/env bash
# Runs every test executable of $BUILD/tests and every tests/sh/*.sh script; prints a summary
# and exits non-zero if any failed.
set -u
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.."
failed=()
total=0
for t in "$BUILD"/tests/test_*; do
    [ -x "$t" ] && [ ! -d "$t" ] || continue
    case "$t" in *.o|*.d) continue ;; esac
    total=$((total + 1))
    echo "== $(basename "$t")"
    if ! "$t"; then failed+=("$(basename "$t")"); fi
done
for s in tests/sh/*.sh; do
    [ -f "$s" ] || continue
    total=$((total + 1))
    echo "== $(basename "$s")"
    if ! BUILD="$BUILD" bash "$s"; then failed+=("$(basename "$s")"); fi
done
if [ ${#failed[@]} -ne 0 ]; then
    echo "FAILED: ${#failed[@]} of $total: ${failed[*]}"
    exit 1
fi
echo "all $total test programs passed"
