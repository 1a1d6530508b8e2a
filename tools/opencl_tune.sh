#!/usr/bin/env bash
# A device session's measurements in one command, for a machine with a real GPU (docs/opencl.md,
# "Tuning on a new GPU"): the device, where a 7B prefill and decode spend their time, CLBlast
# against the tiled kernel, and the tiled kernel's tunables swept at the prefill shape.
#
#   bash tools/opencl_tune.sh [MODEL] [OUT_DIR]
#
# MODEL: a 7B-shaped Q4_K_M file (made with tern mkmodel when missing: ~80 s on 16 cores).
# CLBlast is used when libclblast.so.1 loads (set LD_LIBRARY_PATH to an unpacked
# `apt-get download libclblast1` where it is not installed). Every command's output goes to
# OUT_DIR (default ./opencl-tune) and a summary to stdout. With build/tests/test_opencl built
# (make check), each swept setting is also checked for correctness on the device.
set -u
cd "$(dirname "$0")/.."
TERN=${TERN:-build/tern}
MODEL=${1:-/tmp/tern-7b-q4km.gguf}
OUT=${2:-opencl-tune}
mkdir -p "$OUT"
if [ ! -x "$TERN" ]; then
    echo "opencl_tune.sh: $TERN is missing: run make first" >&2
    exit 1
fi
if [ ! -f "$MODEL" ]; then
    "$TERN" mkmodel --shape llama-7b "$MODEL" -t "$(nproc)" \
        --vocab tests/golden/vocab/ggml-vocab-llama-spm.gguf >"$OUT/mkmodel.log" 2>&1 || {
        echo "opencl_tune.sh: mkmodel failed (see $OUT/mkmodel.log)" >&2
        exit 1
    }
fi
step() { # step NAME COMMAND...: run, keep the output, print its last lines
    local name=$1
    shift
    echo "== $name: $*"
    "$@" >"$OUT/$name.log" 2>&1
    echo "   exit $?; $OUT/$name.log"
}
step devices "$TERN" info --devices
step decode_profile env TERN_OPENCL_PROFILE=1 "$TERN" bench -m "$MODEL" --backend opencl -p 16 -n 128 -r 1
step prefill_clblast env TERN_OPENCL_GEMM=clblast TERN_OPENCL_PROFILE=1 \
    "$TERN" bench -m "$MODEL" --backend opencl -p 512 -n 16 -r 2
step prefill_tiled env TERN_OPENCL_GEMM=tiled TERN_OPENCL_PROFILE=1 \
    "$TERN" bench -m "$MODEL" --backend opencl -p 512 -n 16 -r 2
grep -h "^| t=" "$OUT/decode_profile.log" "$OUT/prefill_clblast.log" "$OUT/prefill_tiled.log" | sed 's/^/   /'

step kbench "$TERN" kbench --isa opencl --full
grep -E "^\| \| opencl \|" "$OUT/kbench.log" | sed 's/^/   /'

# The tiled kernel at m = 512 (kbench's prefill rows, GFLOP/s), one build per setting.
# TN x TM is the tile (weight rows x tokens), WN x WM each work-item's share of it; the
# work-group is (TN/WN) * (TM/WM) work-items and needs 128 * (TN + TM) bytes of local memory.
# TUNE_CONFIGS (settings "TN,TM,WN,WM" separated by spaces) replaces the default sweep, and
# TUNE_KERNEL (default gemm) names the kbench family it times.
CONFIGS=${TUNE_CONFIGS:-"64,64,4,4 128,64,8,4 64,128,4,8 128,128,8,8 128,32,8,2 64,64,8,8 128,64,4,8"}
for cfg in $CONFIGS; do
    cfg=${cfg//,/ }
    set -- $cfg
    opts="-DMM_TN=$1 -DMM_TM=$2 -DMM_WN=$3 -DMM_WM=$4"
    name="gemm_tn$1_tm$2_wn$3_wm$4"
    TERN_OPENCL_GEMM=tiled TERN_OPENCL_OPTIONS="$opts" "$TERN" kbench --isa opencl --kernel "${TUNE_KERNEL:-gemm}" --full \
        >"$OUT/$name.log" 2>&1
    echo "== $opts (exit $?):"
    # a fast setting is worth nothing if it is wrong on this device: the kernel tests with it too
    if [ -x build/tests/test_opencl ]; then
        TERN_OPENCL_OPTIONS="$opts" build/tests/test_opencl >"$OUT/$name.test.log" 2>&1 &&
            echo "   test_opencl passed" || echo "   test_opencl FAILED: $OUT/$name.test.log"
    fi
    grep -E "^\| \| opencl \| Q[46]_K \| 7B \| .* \| 512 \|" "$OUT/$name.log" | awk -F'|' '{printf "   %s %s %s GFLOP/s\n", $4, $6, $11}'
done
