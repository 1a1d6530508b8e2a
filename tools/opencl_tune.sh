#!/usr/bin/env bash
# A device session's measurements in one command, for a machine with a real GPU (docs/opencl.md,
# "Running on a GPU"): the device, where a 7B prefill and decode spend their time, CLBlast
# against the tiled kernel, f32 against int8 decode products, the matvec tunables, the first
# token of short prompts through the GEMM and through the products, decode attention's spans and
# parts, the tiled kernel's tunables swept at the prefill shape, and where the tensor cores are
# on, prefill attention on them against attention_tiled and the tensor-core product's tiles swept.
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
# test_opencl runs on device 0 unless told: the first GPU listed, where there is one
GPU=$(sed -n 's/^  device \([0-9]*\): .*(GPU, .*/\1/p' "$OUT/devices.log" | head -1)
export TERN_TEST_OPENCL_DEVICE=${TERN_TEST_OPENCL_DEVICE:-${GPU:-0}}
echo "   test_opencl runs on device $TERN_TEST_OPENCL_DEVICE"
step decode_profile env TERN_OPENCL_PROFILE=1 "$TERN" bench -m "$MODEL" --backend opencl -p 16 -n 128 -r 1
step prefill_clblast env TERN_OPENCL_GEMM=clblast TERN_OPENCL_PROFILE=1 \
    "$TERN" bench -m "$MODEL" --backend opencl -p 512 -n 16 -r 2
step prefill_tiled env TERN_OPENCL_GEMM=tiled TERN_OPENCL_PROFILE=1 \
    "$TERN" bench -m "$MODEL" --backend opencl -p 512 -n 16 -r 2
grep -h "^| t=" "$OUT/decode_profile.log" "$OUT/prefill_clblast.log" "$OUT/prefill_tiled.log" | sed 's/^/   /'

# Registers, stack and spills per kernel, as NVIDIA's assembler makes them of the driver's PTX
# (on NVIDIA the program binary the cache keeps is PTX text): a kernel that spills, or keeps an
# array in a stack frame (a register array indexed at run time), is slow for that alone; so is
# a function the kernels call instead of having it inlined ("Function properties for" a name
# without a kernel's). ptx_report NAME: of the newest cache entry, into $OUT/NAME.log.
ptx_report() {
    local entry
    entry=$(ls -t "${XDG_CACHE_HOME:-$HOME/.cache}"/tern/opencl-*.bin 2>/dev/null | head -1)
    command -v ptxas >/dev/null && command -v python3 >/dev/null && [ -n "$entry" ] &&
        grep -q "^\.target sm_" "$entry" || return 0
    python3 -c 'import sys; d = open(sys.argv[1], "rb").read(); open(sys.argv[2], "wb").write(d[d.find(b".version"):d.rfind(b"}") + 1])' \
        "$entry" "$OUT/$1.ptx"
    local arch
    arch=$(sed -n 's/^\.target \(sm_[0-9a-z]*\).*/\1/p' "$OUT/$1.ptx" | head -1)
    step "$1" ptxas -arch="$arch" -v "$OUT/$1.ptx" -o /dev/null
    awk '/Compiling entry function/ { k = $0; sub(/.*function ./, "", k); sub(/. for.*/, "", k); frame = "" }
         /Function properties for/ { f = $0; sub(/.*for /, "", f); if (f != k) print "   function " f " (not inlined)" }
         /bytes stack frame/ { frame = $0; sub(/^ */, "", frame) }
         /Used [0-9]+ registers/ && k ~ /mma|attention|matvec_(res_)?q[46]_k|matvec3_(rope_)?q4_k|matvec_glu_q4_k/ {
             u = $0; sub(/.*Used/, "Used", u); print "   " k ": " u "; " frame }' "$OUT/$1.log" | sort -u
}
ptx_report ptxas

# The typed bodies inlined into every kernel and the register arrays' loops unrolled (INLINE=1
# UNROLL=1, the GPUs' default) against the compiler's choice (0 0), decode and prefill, and the
# registers of each.
for u in 1 0; do
    o="-DINLINE=$u -DUNROLL=$u"
    step "inline$u" env TERN_OPENCL_OPTIONS="$o" "$TERN" bench -m "$MODEL" --backend opencl -p 16 -n 128 -r 2
    grep -h "^| t=" "$OUT/inline$u.log" | tail -1 | sed 's/^/   /'
    step "inline_prefill$u" env TERN_OPENCL_OPTIONS="$o" "$TERN" bench -m "$MODEL" --backend opencl -p 512 -n 4 -r 2
    grep -h "^| t=" "$OUT/inline_prefill$u.log" | tail -1 | sed 's/^/   /'
    [ "$u" = 0 ] && ptx_report ptxas_plain
done

step kbench "$TERN" kbench --isa opencl --full
grep -E "^\| \| opencl \|" "$OUT/kbench.log" | sed 's/^/   /'

# The decode products: f32 against the device's default (int8 with dp4a on NVIDIA), and the
# matvec tunables with the default products (GEMV GB/s at the 7B shapes).
step decode_f32 env TERN_OPENCL_OPTIONS=-DDOT8=0 "$TERN" bench -m "$MODEL" --backend opencl -p 16 -n 128 -r 2
grep -h "^| t=" "$OUT/decode_f32.log" | tail -1 | sed 's/^/   /'
for o in -DMV_SHFL=0 -DMV_SHFL=1 -DMV_ROWS=2 -DMV_ROWS=8 -DMV_WGS=32 -DMV_WGS=128; do
    TERN_OPENCL_OPTIONS="$o" "$TERN" kbench --isa opencl --kernel q4_k >"$OUT/matvec$o.log" 2>&1
    echo "== $o (exit $?):"
    grep -E "^\| \| opencl \| Q4_K \| 7B \| .* \| 1 \|" "$OUT/matvec$o.log" | awk -F'|' '{printf "   %s %s GB/s\n", $6, $10}'
done

# Time to first token of short prompts: the GEMM from 8 tokens against per-token products up
# to 128 (TERN_OPENCL_GEMM_MIN_M; the default is 129 with dp4a products).
for p in 8 32 128; do
    for mm in 8 1000; do
        TERN_OPENCL_GEMM_MIN_M=$mm "$TERN" bench -m "$MODEL" --backend opencl -p $p -n 4 -r 1 >"$OUT/ttft_p${p}_$mm.log" 2>&1
        grep -h "^| t=" "$OUT/ttft_p${p}_$mm.log" | tail -1 | awk -F'|' -v p=$p -v mm=$mm \
            '{printf "   p=%s GEMM_MIN_M=%s: first token %s ms\n", p, mm, $5}'
    done
done

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

# Decode attention after 512 prompt tokens, where its spans matter: the span length
# (ATT_SPAN_MIN), warps reading the key rows (ATT_KWARP, NVIDIA's shuffles), the kernel of warps
# (ATT_WARPS, with 16 or 32 keys a warp, 8 warps a group; its rows say attention_warps), and where its time goes
# (TERN_ATT_DIAG, results wrong on purpose: 1 no loads of K, 2 no value loop, 3 no merge).
for o in -DATT_SPAN_MIN=32 -DATT_SPAN_MIN=64 -DATT_SPAN_MIN=128 -DATT_SPAN_MIN=256 -DATT_KWARP=1 \
    -DATT_WARPS=1 "-DATT_WARPS=1 -DATT_WK=32" "-DATT_WARPS=1 -DATT_WGS=256" "-DATT_WARPS=1 -DATT_SPAN_MIN=64" \
    -DTERN_ATT_DIAG=1 -DTERN_ATT_DIAG=2 -DTERN_ATT_DIAG=3; do
    step "att$o" env TERN_OPENCL_OPTIONS="$o" TERN_OPENCL_PROFILE=1 \
        "$TERN" bench -m "$MODEL" --backend opencl -p 512 -n 32 -r 1
    grep -h "^| t=" "$OUT/att$o.log" | tail -1 | sed 's/^/   /'
    grep -hE "^ +attention(_warps)? " "$OUT/att$o.log" | sed 's/^/   /'
done

# The tensor-core kernels, where they are on (the backend line says "tensor-core prefill"):
# prefill attention on them (attention_mma, FA_WARPS warps of 16 queries) against
# attention_tiled, then the product's tiles (MMA_TN x MMA_TM, each warp MMA_WN x MMA_WM; the
# work-group is 32 (TN/WN) (TM/WM) work-items and needs BUFS (TN + TM) (64 KP + 16) bytes of local
# memory; a fifth number is MMA_SPLIT, work-items per weight row in the unpacking, a sixth
# MMA_KP, pieces per stage, a seventh MMA_BUFS, the tiles' buffers).
# TUNE_MMA_CONFIGS replaces that sweep's default, as TUNE_CONFIGS does above.
if grep -q "tensor-core prefill" "$OUT/decode_profile.log"; then
    for o in -DMMA_ATT=0 -DMMA_ATT=1 -DFA_WARPS=2 -DFA_WARPS=8 -DMMA_XH=0 -DMMA_XH=1; do
        step "mma_att$o" env TERN_OPENCL_OPTIONS="$o" TERN_OPENCL_PROFILE=1 \
            "$TERN" bench -m "$MODEL" --backend opencl -p 512 -n 16 -r 2
        grep -h "^| t=" "$OUT/mma_att$o.log" | tail -1 | sed 's/^/   /'
        grep -hE "^ +(attention_(mma|tiled)|matmul_mma_q4_k|mma_x_half) " "$OUT/mma_att$o.log" | sed 's/^/   /'
    done
    # the Q4_K product on int8 tensor cores (MMA_I8) against the f16 one
    for o in "-DMMA_I8=0" "-DMMA_I8=1"; do
        step "mma_i8$o" env TERN_OPENCL_OPTIONS="$o" TERN_OPENCL_PROFILE=1 \
            "$TERN" bench -m "$MODEL" --backend opencl -p 512 -n 16 -r 2
        grep -h "^| t=" "$OUT/mma_i8$o.log" | tail -1 | sed 's/^/   /'
        grep -hE "^ +(matmul_mma_q4_k|mma_x8|mma_x_half) " "$OUT/mma_i8$o.log" | sed 's/^/   /'
    done
    # where the product's time goes: each part of a stage left out in turn (TERN_MMA_DIAG, results
    # wrong on purpose; 1 global loads, 2 mma.sync, 3 unpacking and local stores)
    for d in 0 1 2 3; do
        step "mma_diag$d" env TERN_OPENCL_OPTIONS="-DTERN_MMA_DIAG=$d" TERN_OPENCL_PROFILE=1 \
            "$TERN" bench -m "$MODEL" --backend opencl -p 512 -n 4 -r 2
        grep -hE "^ +matmul_mma_q4_k " "$OUT/mma_diag$d.log" | head -1 | sed "s/^/   diag $d: /"
    done
    MMA_CONFIGS=${TUNE_MMA_CONFIGS:-"128,64,32,32 128,64,32,32,1,2,1 128,32,32,32 128,32,32,32,1,2 64,64,32,32
        64,64,32,32,1,2 128,128,32,64 128,128,64,32 64,16,32,16,1,4"}
    for cfg in $MMA_CONFIGS; do
        cfg=${cfg//,/ }
        set -- $cfg
        opts="-DMMA_TN=$1 -DMMA_TM=$2 -DMMA_WN=$3 -DMMA_WM=$4 -DMMA_SPLIT=${5:-1} -DMMA_KP=${6:-1} -DMMA_BUFS=${7:-2}"
        name="mma_tn$1_tm$2_wn$3_wm$4_split${5:-1}_kp${6:-1}_bufs${7:-2}"
        TERN_OPENCL_OPTIONS="$opts" TERN_OPENCL_PROFILE=1 "$TERN" bench -m "$MODEL" --backend opencl -p 512 -n 4 -r 2 \
            >"$OUT/$name.log" 2>&1
        echo "== $opts (exit $?):"
        if [ -x build/tests/test_opencl ]; then
            TERN_TEST_FILTER="test_mma*" TERN_OPENCL_OPTIONS="$opts" build/tests/test_opencl >"$OUT/$name.test.log" 2>&1 &&
                echo "   test_opencl's mma tests passed" || echo "   test_opencl's mma tests FAILED: $OUT/$name.test.log"
        fi
        grep -h "^| t=" "$OUT/$name.log" | tail -1 | sed 's/^/   /'
        grep -hE "^ +matmul_mma_q4_k " "$OUT/$name.log" | head -1 | sed 's/^/   /'
    done
fi

# The tunables table (kernels/opencl/cl_tune_table.c): what the device's build gets today, and a row
# to start from, naming this device; put the values the sweeps above measured faster in it (the
# rows and their order: docs/opencl.md, "Tunables").
echo "== the tunables table: this device's switches today"
grep -h "kernel switches" "$OUT/devices.log" | sed 's/^ */   /'
DEV_NAME=$(sed -n "s/^  device ${TERN_TEST_OPENCL_DEVICE}: \(.*\) (\(GPU\|not a GPU\), \(.*\))\$/\1/p" "$OUT/devices.log")
DEV_VENDOR=$(sed -n "s/^  device ${TERN_TEST_OPENCL_DEVICE}: .* (\(GPU\|not a GPU\), \(.*\))\$/\2/p" "$OUT/devices.log")
echo "   a row: {\"<name>\", \"${DEV_VENDOR:-<vendor>}\", \"${DEV_NAME:-<device>}\", NULL, 1, 256, 32768, \"-DNAME=value ...\"},"
