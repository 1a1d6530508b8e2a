#!/usr/bin/env bash
# The OpenCL backend end to end (docs/opencl.md), on the first OpenCL device (PoCL in CI):
#  - the golden tests (tests/test_golden.c, and tests/test_golden_arch.c's qwen3, gemma2, phi3 and
#    granite) on the OpenCL backend;
#  - the fallbacks: no ICD (an empty OCL_ICD_VENDORS directory) and no runtime library: auto runs
#    on the CPU and says why, --backend opencl exits 1 with one line; kernels that do not build:
#    the same;
#  - tern info --devices;
#  - tern doctor's measurement of an OpenCL run rated against the device's bandwidth.
# Without any OpenCL platform it says SKIP loudly and exits 0.
set -u
BUILD=${BUILD:-build}
cd "$(dirname "$0")/../.."
TERN=$BUILD/tern
MODEL=tests/golden/tiny-q4km.gguf

for f in "$TERN" "$BUILD/tests/test_golden" "$BUILD/tests/test_golden_arch"; do
    if [ ! -x "$f" ]; then
        echo "!!!!!!!! SKIPPED: $f is missing; opencl.sh tested nothing !!!!!!!!"
        exit 0
    fi
done
if "$TERN" info --devices 2>&1 | grep -q "no OpenCL platform"; then
    echo "!!!!!!!! SKIP: no OpenCL platform on this machine; opencl.sh tested nothing !!!!!!!!"
    exit 0
fi

. tests/support/checks.sh
export XDG_CACHE_HOME=$tmp/cache
# PoCL's compiled kernels, for the local-memory check after the golden tests: the suite's shared
# cache (tests/run.sh), else one of our own
export POCL_CACHE_DIR=${POCL_CACHE_DIR:-$tmp/pocl}
# Under AddressSanitizer (make asan): PoCL compiles kernels with LLVM, which keeps allocations
# until exit on purpose; those are not ours. (No C++ is ours either.)
suppress_pocl_leaks
# expect_says DESCRIPTION STATUS PATTERN COMMAND...: exit status STATUS and PATTERN in stdout+stderr.
expect_says() {
    local desc=$1 want=$2 pattern=$3
    shift 3
    "$@" >"$tmp/out" 2>&1
    local got=$?
    if [ "$got" -ne "$want" ]; then
        fail "$desc: exit $got, expected $want"
        sed 's/^/     /' "$tmp/out" | tail -5
    elif ! grep -q -- "$pattern" "$tmp/out"; then
        fail "$desc: no '$pattern' in the output"
        sed 's/^/     /' "$tmp/out" | tail -5
    else
        ok "$desc"
    fi
}
run=(run -m "$MODEL" -p "Once upon a time" -n 4 --temp 0)

# the device's default decode products (f32 on PoCL, int8 with dp4a on NVIDIA) and int8 in
# portable C (DOT8=1: the arithmetic of the dp4a path), that one built as GPUs build it (the
# typed functions inlined into every kernel, the register arrays' loops unrolled; one build)
for dot8 in "" "-DDOT8=1 -DINLINE=1 -DUNROLL=1"; do
    if TERN_TEST_BACKEND=opencl TERN_OPENCL_OPTIONS="$dot8" "$BUILD/tests/test_golden" >"$tmp/golden" 2>&1; then
        ok "golden tests on the OpenCL backend ${dot8:-(default products)}"
    else
        fail "golden tests on the OpenCL backend ${dot8:-(default products)}"
        tail -20 "$tmp/golden"
    fi
done

# the tensor-core prefill forced on (PoCL runs its portable emulation) with the Q4_K product in
# int8 (MMA_I8), every prompt through the GEMM: x's rounding must stay within the golden
# tolerance (the block sums of x as rounded, not of x: the other choice doubled the error)
if TERN_TEST_BACKEND=opencl TERN_OPENCL_MMA=1 TERN_OPENCL_GEMM_MIN_M=2 TERN_OPENCL_OPTIONS="-DMMA_I8=1" \
    "$BUILD/tests/test_golden" >"$tmp/golden" 2>&1; then
    ok "golden tests with the Q4_K prefill on int8 tensor cores (emulated)"
else
    fail "golden tests with the Q4_K prefill on int8 tensor cores (emulated)"
    tail -20 "$tmp/golden"
fi

# Switches that change how decode's steps meet, each with 8-bit products over the golden tests:
# - the residual run by the next product's lead work-groups (NORM_LEAD) wherever a residual is not
#   finished by its product (RES_MAX=0): every architecture's residuals and the products they feed
#   (qwen3's q/k norms, gemma2's branch norms, granite's scales);
# - the FFN in one persistent launch (FFN_GRID: the GLU, a barrier, the down product and its
#   residual): every architecture's FFN with the residual by the launch's last group, and the
#   llama's (Q4_K_M's Q6_K down products) with it over RES_MAX, by slices after a second barrier
#   (golden_arch counts launches against a budget that RES_MAX=0 exceeds without NORM_LEAD).
while IFS='|' read -r g opts what; do
    if TERN_TEST_BACKEND=opencl TERN_OPENCL_OPTIONS="-DDOT8=1 $opts" "$BUILD/tests/$g" </dev/null >"$tmp/golden" 2>&1; then
        ok "$g with $what ($opts)"
    else
        fail "$g with $what ($opts)"
        tail -20 "$tmp/golden"
    fi
done <<'RUNS'
test_golden|-DRES_MAX=0 -DNORM_LEAD=3|the residuals run by the products' lead work-groups
test_golden_arch|-DRES_MAX=0 -DNORM_LEAD=3|the residuals run by the products' lead work-groups
test_golden|-DFFN_GRID=1 -DRES_MAX=0|the FFN in one persistent launch
test_golden_arch|-DFFN_GRID=1|the FFN in one persistent launch
RUNS

if TERN_TEST_BACKEND=opencl "$BUILD/tests/test_golden_arch" >"$tmp/golden_arch" 2>&1; then
    ok "golden tests of qwen3, gemma2, phi3, granite on the OpenCL backend"
else
    fail "golden tests of qwen3, gemma2, phi3, granite on the OpenCL backend"
    tail -20 "$tmp/golden_arch"
fi
# Local memory is per work-group. PoCL (3.1 here) gives each work-group its own copy only of the
# __local arrays a kernel's own body names; when LLVM rewrote a helper that got the same __local
# array in every call to name the kernel's array itself, that array became one static shared by
# all of PoCL's threads (a symbol of type b in the kernel's .so), and work-groups running at once
# overwrote each other's sums (docs/opencl.md). So no compiled kernel may hold such a symbol:
# those compiled since the suite began (tests/run.sh), test_opencl's too, else all in the cache.
if command -v nm >/dev/null && [ -d "$POCL_CACHE_DIR" ]; then
    since=()
    [ -f "${TERN_SUITE_STARTED:-}" ] && since=(-newer "$TERN_SUITE_STARTED")
    find "$POCL_CACHE_DIR" -name '*.so' "${since[@]}" >"$tmp/kernel_objects"
    shared=$(xargs -r nm <"$tmp/kernel_objects" 2>/dev/null | grep -E ' [bB] ' | sort -u)
    if [ ! -s "$tmp/kernel_objects" ]; then
        echo "!!!! the local-memory check skipped: no kernel compiled in this run (PoCL's cache held them all)"
    elif [ -z "$shared" ]; then
        ok "no kernel's local memory is shared between work-groups ($(wc -l <"$tmp/kernel_objects") kernel objects)"
    else
        fail "kernels whose local arrays PoCL made static (shared by its threads): $(echo $shared | head -c 300)"
    fi
fi
expect_says "info --devices lists the devices and the pick" 0 "auto picks:" "$TERN" info --devices
expect_says "forced OpenCL runs" 0 "backend  opencl (" "$TERN" "${run[@]}" --backend opencl

mkdir -p "$tmp/no-icd"
expect_says "no ICD, auto: the CPU with the reason" 0 "auto: no OpenCL platform" \
    env OCL_ICD_VENDORS="$tmp/no-icd" "$TERN" "${run[@]}"
expect_says "no ICD, forced: one line and exit 1" 1 "backend opencl: no OpenCL platform .*; --backend auto falls back to the CPU" \
    env OCL_ICD_VENDORS="$tmp/no-icd" "$TERN" "${run[@]}" --backend opencl
expect_says "no runtime library, auto: the CPU with the reason" 0 "auto: no OpenCL platform (/nonexistent/libOpenCL.so.1 not found)" \
    env TERN_OPENCL_LIBRARY=/nonexistent/libOpenCL.so.1 "$TERN" "${run[@]}"
expect_says "no ICD: info --devices says so" 0 "auto picks: cpu" env OCL_ICD_VENDORS="$tmp/no-icd" "$TERN" info --devices

# TERN_OPENCL_ANY_DEVICE=1 lets auto consider CPU-type devices such as PoCL.
expect_says "kernels that do not build, auto: the CPU with the reason" 0 "auto: the OpenCL kernels do not build" \
    env TERN_OPENCL_ANY_DEVICE=1 TERN_OPENCL_OPTIONS=-DTERN_BROKEN_BUILD "$TERN" "${run[@]}"
expect_says "kernels that do not build, forced: exit 1" 1 "do not build" \
    env TERN_OPENCL_OPTIONS=-DTERN_BROKEN_BUILD "$TERN" "${run[@]}" --backend opencl

# doctor's measurement of an OpenCL run is rated against the device's read kernel, never the
# CPU's bandwidth (an H200's decode over the CPU's read "1204%")
if command -v jq >/dev/null; then
    "$TERN" doctor --json -m "$MODEL" --ctx 1024 --backend opencl --seconds 0.3 >"$tmp/out" 2>"$tmp/err"
    if jq -e '.measurement.ran and (.measurement.backend | startswith("opencl (")) and (.measurement.bandwidth_source | startswith("OpenCL read kernel on ")) and .measurement.bandwidth_threads == 0 and .measurement.bandwidth_gbs > 0 and .measurement.percent > 0' "$tmp/out" >/dev/null; then
        ok "doctor --backend opencl: decode rated against the device's read kernel"
    else
        fail "doctor --backend opencl: not rated against the device's read kernel"
        jq -c .measurement "$tmp/out" 2>/dev/null || tail -5 "$tmp/err"
    fi
fi

finish opencl.sh
