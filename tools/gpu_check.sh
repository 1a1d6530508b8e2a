#!/usr/bin/env bash
# Whether tern gives the right answers on this machine's GPU, and how fast, in one command: the
# OpenCL test program against the CPU reference, the golden logits on the OpenCL backend (also
# with every prompt through the prefill GEMM), a real model's perplexity on the GPU beside the
# CPU's, and docs/benchmarks.md's bench of the 7B and 1B shapes (pp512 and p16, decode with the
# host's share of a token). Where tools/opencl_tune.sh sweeps the tunables, this checks a build.
#
#   bash tools/gpu_check.sh [OUT_DIR]
#
# Needs build/tern and build/tests/{test_opencl,test_golden,test_golden_arch} (`make check`
# builds them). TERN_OPENCL_OPTIONS applies to every step, so a switch is checked before it joins
# the tunables table: `TERN_OPENCL_OPTIONS=-DATT_KWARP=1 bash tools/gpu_check.sh`.
# PPL_MODEL (default models/SmolLM2-135M-Instruct.Q4_1.gguf): skipped when missing. The bench
# models are made with tern mkmodel where missing (MODEL_7B, MODEL_1B; ~80 s on 16 cores).
# QUICK=1: the attention and tensor-core tests only (a few minutes less), no 7B.
# Every command's output goes to OUT_DIR (default ./gpu-check), a summary to stdout; the exit
# status is the number of failed checks.
set -u
cd "$(dirname "$0")/.."
TERN=${TERN:-build/tern}
TESTS=${TESTS:-build/tests}
OUT=${1:-gpu-check}
PPL_MODEL=${PPL_MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
MODEL_7B=${MODEL_7B:-/tmp/tern-7b-q4km.gguf}
MODEL_1B=${MODEL_1B:-/tmp/tern-1b-q4km.gguf}
mkdir -p "$OUT"
for f in "$TERN" "$TESTS/test_opencl" "$TESTS/test_golden" "$TESTS/test_golden_arch"; do
    if [ ! -x "$f" ]; then
        echo "gpu_check.sh: $f is missing: run make check first" >&2
        exit 1
    fi
done
failed=0
step() { # step NAME PATTERN COMMAND...: run, keep the output, print its exit and matching lines
    local name=$1 pattern=$2
    shift 2
    echo "== $name"
    "$@" >"$OUT/$name.log" 2>&1
    local rc=$?
    [ "$rc" -ne 0 ] && failed=$((failed + 1))
    grep -E -- "$pattern" "$OUT/$name.log" | tail -6 | sed 's/^/   /'
    echo "   exit $rc; $OUT/$name.log"
}
make_model() { # make_model SHAPE FILE
    [ -f "$2" ] || "$TERN" mkmodel --shape "$1" "$2" -t "$(nproc)" \
        --vocab tests/golden/vocab/ggml-vocab-llama-spm.gguf >"$OUT/mkmodel-$1.log" 2>&1 ||
        echo "gpu_check.sh: mkmodel $1 failed (see $OUT/mkmodel-$1.log)" >&2
}

step devices "auto picks|kernel switches" "$TERN" info --devices
if [ -n "${QUICK:-}" ]; then
    step test_opencl_attention "PASSED|FAILED|OpenCL device" env TERN_TEST_FILTER="*attention*" "$TESTS/test_opencl"
    step test_opencl_mma "PASSED|FAILED" env TERN_TEST_FILTER="test_mma_*" "$TESTS/test_opencl"
else
    step test_opencl "PASSED|FAILED|OpenCL device|SKIP" "$TESTS/test_opencl"
fi
step golden "PASSED|FAILED" env TERN_TEST_BACKEND=opencl "$TESTS/test_golden"
step golden_gemm "PASSED|FAILED" env TERN_TEST_BACKEND=opencl TERN_OPENCL_GEMM_MIN_M=2 "$TESTS/test_golden"
step golden_arch "PASSED|FAILED" env TERN_TEST_BACKEND=opencl "$TESTS/test_golden_arch"
if [ -f "$PPL_MODEL" ]; then
    for b in cpu opencl; do
        step "perplexity-$b" "^backend|Final estimate" \
            "$TERN" perplexity -m "$PPL_MODEL" -f tests/data/gpl-3.txt -c 512 --backend "$b"
    done
else
    echo "== perplexity: $PPL_MODEL missing, skipped (bash tools/setup.sh models chat fetches it)"
fi
shapes="llama-1b:$MODEL_1B"
[ -z "${QUICK:-}" ] && shapes="llama-7b:$MODEL_7B $shapes"
for s in $shapes; do
    shape=${s%%:*} file=${s#*:}
    make_model "$shape" "$file"
    for p in 512 16; do
        step "bench-$shape-p$p" "^\| .*\(|on the host|^backend" \
            "$TERN" bench -m "$file" --backend opencl -p "$p" -n 128 -r 3
    done
done
echo "gpu_check.sh: $failed failed; outputs in $OUT"
exit "$failed"
