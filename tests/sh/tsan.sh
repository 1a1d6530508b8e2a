#!/usr/bin/env bash
# docs/example_threads.c under ThreadSanitizer: one model, two contexts created and run on two
# threads at once, sharing the model's weights (tern.h's threading contract), on the CPU and on
# OpenCL, every former environment knob set as a parameter, the log callback installed. The library is built for it with clang -fsanitize=thread in build-tsan
# (its own tree: TSan cannot be mixed with the ASan build); the ASan pass of `make test` runs
# the same script again and skips, the first pass having checked it.
set -u
BUILD=${BUILD:-build}
cd "$(dirname "$0")/../.."
if [ "$BUILD" = build-asan ]; then
    echo "tsan.sh: the ThreadSanitizer build was checked in the first pass"
    exit 0
fi
if ! command -v clang >/dev/null; then
    echo "!!!!!!!! SKIPPED: clang is missing; tsan.sh tested nothing !!!!!!!!"
    exit 0
fi
fail() { echo "FAIL: $*"; exit 1; }
TSAN_FLAGS="-O1 -g -fsanitize=thread"
make --no-print-directory -s -j2 lib BUILD=build-tsan CC=clang OPT="$TSAN_FLAGS" LDFLAGS=-fsanitize=thread \
    || fail "the library does not build under ThreadSanitizer"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
clang -std=c11 -Wall -Wextra -Werror $TSAN_FLAGS -Iinclude docs/example_threads.c build-tsan/libtern.a \
    -lm -ldl -pthread -o "$tmp/example_threads" || fail "docs/example_threads.c does not build"
# On the CPU, then on OpenCL (PoCL in CI: the two contexts share one device and its weights, each
# with its own queue), the compiled program cached in $tmp so that it is built once.
for backend in cpu opencl; do
    out=$(TSAN_OPTIONS="halt_on_error=1 exitcode=66" "$tmp/example_threads" tests/golden/tiny-q4km.gguf \
        "Once upon a time" $backend "$tmp/cache" 2>&1)
    rc=$?
    echo "$out" | tail -20
    if [ $backend = opencl ] && [ "$rc" -eq 1 ] && grep -q "no OpenCL" <<<"$out"; then
        echo "!!!!!!!! SKIPPED: no OpenCL device; tsan.sh tested the CPU only !!!!!!!!"
        break
    fi
    [ "$rc" -eq 0 ] || fail "example_threads ($backend) exited $rc under ThreadSanitizer (66: a data race)"
    grep -q "sharing its weights): the same 16 tokens" <<<"$out" \
        || fail "example_threads ($backend) did not report its runs agreeing"
    echo "tsan.sh: two contexts sharing one model's weights ($backend) from two threads, no race reported"
done
