#!/usr/bin/env bash
# Runs every test executable of $BUILD/tests and every tests/sh/*.sh script; prints a summary
# and exits non-zero if any failed.
set -u
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.."
. tests/support/lsan.sh
# One PoCL kernel cache for every program here and for both passes of make test: PoCL compiles
# each kernel of each distinct build once (about a second each on a small guest), and the scripts
# that give tern a private cache through XDG_CACHE_HOME would move PoCL's with it.
export POCL_CACHE_DIR=${POCL_CACHE_DIR:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/pocl/kcache}
# A file as old as this run: opencl.sh checks the kernel objects compiled since (not another
# checkout's, long ago)
TERN_SUITE_STARTED=$(mktemp)
export TERN_SUITE_STARTED
trap 'rm -f "$TERN_SUITE_STARTED"' EXIT
failed=()
times=()
total=0

# Runs "$@", once more when only LeakSanitizer's tracer failed (tests/support/lsan.sh); a
# script's own commands are retried one by one (checks.sh's run), so this is for the rest.
run_test() {
    local log rc
    log=$(mktemp)
    "$@" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    if [ "$rc" -ne 0 ] && lsan_tracer_failed "$log"; then
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
    start=$SECONDS
    if ! run_test "$t"; then failed+=("$(basename "$t")"); fi
    times+=("$((SECONDS - start)) s $(basename "$t")")
done
for s in tests/sh/*.sh; do
    [ -f "$s" ] || continue
    total=$((total + 1))
    echo "== $(basename "$s")"
    start=$SECONDS
    if ! run_test env BUILD="$BUILD" bash "$s"; then failed+=("$(basename "$s")"); fi
    times+=("$((SECONDS - start)) s $(basename "$s")")
done
# CI has a time limit: the slowest programs, so that what grows is seen
printf '%s\n' "${times[@]}" | sort -rn | head -8 | sed 's/^/time: /'

if [ ${#failed[@]} -ne 0 ]; then
    echo "FAILED: ${#failed[@]} of $total: ${failed[*]}"
    exit 1
fi
echo "all $total test programs passed"
