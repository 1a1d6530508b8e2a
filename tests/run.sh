#!/usr/bin/env bash
# Runs every test executable of $BUILD/tests and every tests/sh/*.sh script; prints a summary
# and exits non-zero if any failed.
set -u
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.."
failed=()
total=0

# Runs "$@"; a failure whose output says "LeakSanitizer has encountered a fatal error" (the
# sanitizer runtime's own tracer crashing at exit after the tests passed, an intermittent fault
# of the runtime: google/sanitizers issue 1353) runs it once more. A leak report ("detected
# memory leaks") or any other failure counts at once.
run_test() {
    local log rc
    log=$(mktemp)
    "$@" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    if [ "$rc" -ne 0 ] && grep -q "LeakSanitizer has encountered a fatal error" "$log" &&
        ! grep -q "detected memory leaks" "$log"; then
        echo "(LeakSanitizer's tracer crashed at exit: running it once more)"
        "$@"
        rc=$?
    fi
    rm -f "$log"
    return "$rc"
}
for t in "$BUILD"/tests/test_*; do
    [ -x "$t" ] && [ ! -d "$t" ] || continue
    case "$t" in *.o|*.d) continue ;; esac
    total=$((total + 1))
    echo "== $(basename "$t")"
    if ! run_test "$t"; then failed+=("$(basename "$t")"); fi
done
for s in tests/sh/*.sh; do
    [ -f "$s" ] || continue
    total=$((total + 1))
    echo "== $(basename "$s")"
    if ! run_test env BUILD="$BUILD" bash "$s"; then failed+=("$(basename "$s")"); fi
done
if [ ${#failed[@]} -ne 0 ]; then
    echo "FAILED: ${#failed[@]} of $total: ${failed[*]}"
    exit 1
fi
echo "all $total test programs passed"
