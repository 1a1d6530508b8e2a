#!/usr/bin/env bash
# make fuzz FUZZ_SECONDS=N: builds every tests/fuzz/fuzz_*.c harness with libFuzzer + ASan + UBSan
# (clang) and runs each for N seconds on a scratch copy of its seed corpus. A crash is copied into
# tests/fuzz/regressions/<harness>/ (commit it: `make test` replays that folder forever after) and
# the run fails.
set -u -o pipefail
SECONDS_EACH=${FUZZ_SECONDS:-30}
OUT=${FUZZ_BUILD:-build-fuzz}
cd "$(dirname "$0")/../.."
make --no-print-directory -s -j"$(nproc)" lib BUILD="$OUT" CC=clang \
    OPT="-O1 -g -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all" || exit 1
status=0
for src in tests/fuzz/fuzz_*.c; do
    name=$(basename "$src" .c)
    target=${name#fuzz_}
    bin="$OUT/fuzz/$name"
    mkdir -p "$OUT/fuzz" "$OUT/fuzz/work-$target" "tests/fuzz/regressions/$target"
    clang -std=c11 -O1 -g -D_GNU_SOURCE -Iinclude -I. -fsanitize=fuzzer,address,undefined \
        -fno-sanitize-recover=all "$src" "$OUT/libtern.a" -lm -ldl -pthread -o "$bin" || { status=1; continue; }
    cp -r "tests/fuzz/corpus/$target/." "$OUT/fuzz/work-$target/" 2>/dev/null
    echo "== fuzzing $target for ${SECONDS_EACH}s"
    if ! "$bin" -max_total_time="$SECONDS_EACH" -rss_limit_mb=2048 -malloc_limit_mb=1024 \
            -artifact_prefix="tests/fuzz/regressions/$target/" "$OUT/fuzz/work-$target" 2>&1 | tail -5; then
        status=1
    fi
    if ls "tests/fuzz/regressions/$target/"crash-* "tests/fuzz/regressions/$target/"leak-* \
          "tests/fuzz/regressions/$target/"oom-* >/dev/null 2>&1; then
        echo "FAIL: $target: new findings in tests/fuzz/regressions/$target/ (fix, then commit them)"
        status=1
    fi
done
exit $status
