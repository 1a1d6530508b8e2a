#!/usr/bin/env bash
# Replays every fuzz seed and every crash ever found (tests/fuzz/regressions/) through the
# harnesses, built with the normal compiler and a plain main, so old crashes stay fixed.
set -u
BUILD=${BUILD:-build}
status=0
for src in tests/fuzz/fuzz_*.c; do
    name=$(basename "$src" .c)
    target=${name#fuzz_}
    bin="$BUILD/fuzz-replay/$name"
    mkdir -p "$BUILD/fuzz-replay"
    ${CC:-cc} -std=c11 -O1 -g -D_GNU_SOURCE -Iinclude -I. ${REPLAY_FLAGS:-} "$src" tests/fuzz/replay_main.c \
        "$BUILD/libtern.a" ${LDFLAGS:-} -lm -ldl -pthread -o "$bin" || { status=1; continue; }
    "$bin" "tests/fuzz/corpus/$target" "tests/fuzz/regressions/$target" || { echo "FAIL: $target"; status=1; }
done
exit $status
