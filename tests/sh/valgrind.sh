#!/usr/bin/env bash
# Valgrind memcheck on the tern command with the tiny model: `tern info`, `tern run` for a few
# tokens, and a load that fails (a damaged file): no leak, no invalid read or write, no use of
# uninitialised memory. `make valgrind` runs this alone; `make test` runs it with the rest.
# Skipped when valgrind is absent and under the sanitizers (they cannot run together). The CPU
# backend is forced: an OpenCL driver's own allocations are not ours to check.
set -u
BUILD=${BUILD:-build}
cd "$(dirname "$0")/../.."
TERN=$BUILD/tern
MODEL=tests/golden/tiny-q4km.gguf

if ! command -v valgrind >/dev/null; then
    echo "!!!!!!!! SKIPPED: valgrind is not installed; valgrind.sh tested nothing !!!!!!!!"
    exit 0
fi
if [ ! -x "$TERN" ]; then
    echo "!!!!!!!! SKIPPED: $TERN is missing; valgrind.sh tested nothing !!!!!!!!"
    exit 0
fi
if nm "$TERN" 2>/dev/null | grep -q __asan_init; then
    echo "valgrind.sh: skipped under AddressSanitizer (valgrind cannot run a sanitized program)"
    exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
mkdir -p "$tmp/no-icd"
# vg DESC WANT_STATUS ARGS...: tern under memcheck; any error report makes the status 99.
vg() {
    local desc=$1 want=$2
    shift 2
    OCL_ICD_VENDORS=$tmp/no-icd timeout -k 5 300 valgrind -q --leak-check=full --errors-for-leak-kinds=definite,possible \
        --error-exitcode=99 "$TERN" "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
    local rc=$?
    if [ "$rc" -eq "$want" ] && ! grep -q "^==[0-9]*==" "$tmp/err"; then
        echo "ok   $desc"
    else
        echo "FAIL $desc: exit $rc (wanted $want; 99 = memcheck found errors)"
        grep "^==[0-9]*==" "$tmp/err" | head -40 | sed 's/^/     /'
        failures=$((failures + 1))
    fi
}

vg "tern info" 0 info "$MODEL"
vg "tern run, 4 tokens" 0 run --backend cpu -m "$MODEL" -p "Once upon a time" -n 4 -t 2
vg "tern run --chat, 4 tokens" 0 run --backend cpu --chat -m "$MODEL" -p "Hello" -n 4 -t 1
head -c 100000 "$MODEL" >"$tmp/cut.gguf"
vg "tern run on a truncated file" 1 run --backend cpu -m "$tmp/cut.gguf" -p hi -n 4

[ "$failures" -eq 0 ] || { echo "valgrind.sh: $failures failure(s)"; exit 1; }
echo "valgrind.sh: no leak, no invalid access"
