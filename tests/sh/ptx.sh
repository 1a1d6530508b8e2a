#!/usr/bin/env bash
# The OpenCL program as NVIDIA GPUs build it, compiled here by clang for nvptx64: CI has no NVIDIA
# driver, and PoCL never compiles the inline-PTX paths (DOT8=2, MV_SHFL=1, SYNC=2, MMA=2), so
# without this a mistake there would show first on a GPU. Checks that
#  - the program compiles with NVIDIA's defaults (the tunables' values on an NVIDIA GPU; INLINE=1
#    there, so no function that takes a weight type may be left as a function), and with
#    INLINE=0 UNROLL=0;
#  - with MV_WIDE=128 the wide decode products and GLUs (matvec_wide_<type>) are built too;
#  - with FFN_GRID the persistent FFN kernels, their barrier's polls and fences in the PTX;
#  - attention_mma carries its instructions (mma.sync, shfl.sync) and keeps its fragments and
#    accumulators in registers: no local-memory depot, which a loop over a register array that
#    the compiler does not unroll puts there (a silent slowdown; its loops say #pragma unroll);
#  - the products' mma.sync is there (matmul_mma, a function the kernels share in clang's PTX);
#  - decode attention reduces by shfl.sync (attention_warps too, its scores and weights as well),
#    and with ATT_KWARP=1 (the key rows' dots by warps) keeps its 32 partial dots in registers.
# clang is not NVIDIA's compiler (its PTX is not what the driver runs), but both are LLVM and
# unroll the same constant loops. Without clang's NVPTX target it says SKIP loudly and exits 0.
set -u
cd "$(dirname "$0")/../.."
if ! command -v clang >/dev/null || ! clang -print-targets 2>/dev/null | grep -q nvptx64; then
    echo "!!!!!!!! SKIPPED: no clang with the NVPTX target; ptx.sh tested nothing !!!!!!!!"
    exit 0
fi
. tests/support/checks.sh
# the program's files in the runtime's order (kernels/opencl/gen.mk)
files=$(sed -n '/^OPENCL_CL *:=/,/[^\\]$/p' kernels/opencl/gen.mk | sed 's/^OPENCL_CL *:=//; s/\\//g' | tr -s ' \n' ' ')
cat $files >"$tmp/program.cl"
defaults="-DDOT8=2 -DMV_SHFL=1 -DSYNC=2 -DMMA=2 -DMV_WGS=64 -DMV_ROWS=4 -DMV_WIDE=128 -DMM_TN=128 -DMM_TM=128 -DMM_WN=8 -DMM_WM=8
          -DNORM_WGS=256 -DEW_WGS=64 -DATT_WGS=128 -DATT_KG=4 -DATT_KWARP=1 -DATT_WARPS=1 -DATT_MAX_D=256 -DATT_TQ=32
          -DMMA_TN=128 -DMMA_TM=64 -DMMA_WN=32 -DMMA_WM=32 -DFA_WARPS=4 -DINLINE=1 -DUNROLL=1"
# OpenCL C has no `asm` keyword in clang; NVIDIA's compiler takes it as GNU C does
cc1="clang -cc1 -triple nvptx64-nvidia-nvcl -cl-std=CL1.2 -finclude-default-header -I. -Dasm=__asm__ -O3"
if ! $cc1 $defaults -S -o "$tmp/program.ptx" "$tmp/program.cl" >"$tmp/clang.log" 2>&1; then
    cat "$tmp/clang.log"
    fail "the program does not compile for nvptx64 with NVIDIA's defaults"
elif grep -Eq "^\.func +(\(.*\) +)?(matvec_sums|matmul_mma|matmul|unpack_raw)\(" "$tmp/program.ptx"; then
    fail "INLINE=1: a function that takes a weight type is still called"
else
    ok "the program compiles for nvptx64 with NVIDIA's defaults (files: $(echo $files | wc -w)), every typed function inlined"
fi
if $cc1 ${defaults/-DINLINE=1 -DUNROLL=1/-DINLINE=0 -DUNROLL=0} -S -o "$tmp/plain.ptx" "$tmp/program.cl" \
    >"$tmp/clang.log" 2>&1; then
    ok "with INLINE=0 UNROLL=0 too (the CPU devices' choice)"
else
    cat "$tmp/clang.log"
    fail "INLINE=0 UNROLL=0: it does not compile for nvptx64"
fi
if grep -q "^\.entry matvec_wide_q4_k(" "$tmp/program.ptx" && grep -q "^\.entry matvec_glu_wide_q6_k(" "$tmp/program.ptx"; then
    ok "MV_WIDE=128: the wide products and GLUs are built"
else
    fail "MV_WIDE=128: no matvec_wide_q4_k or matvec_glu_wide_q6_k in the PTX"
fi
# FFN_GRID (off by default until measured on a GPU): the FFN's persistent kernels, plain and wide,
# with grid_sync's polls and device-scope fences
if $cc1 $defaults -DFFN_GRID=4 -S -o "$tmp/grid.ptx" "$tmp/program.cl" >"$tmp/clang.log" 2>&1; then
    grid=$(awk 'index($0, ".entry ffn_grid_wide_q4_k_q6_k(") == 1 { on = 1 } on { print } on && /^}/ { exit }' "$tmp/grid.ptx")
    if grep -q "^\.entry ffn_grid_q4_k_q6_k(" "$tmp/grid.ptx" && echo "$grid" | grep -q "nanosleep" &&
        echo "$grid" | grep -q "fence.acq_rel.gpu"; then
        ok "FFN_GRID=4: ffn_grid_q4_k_q6_k and ffn_grid_wide_q4_k_q6_k built, with nanosleep and fence.acq_rel.gpu"
    else
        fail "FFN_GRID=4: no ffn_grid_q4_k_q6_k, or ffn_grid_wide_q4_k_q6_k without nanosleep and fence.acq_rel.gpu"
    fi
else
    cat "$tmp/clang.log"
    fail "FFN_GRID=4: the program does not compile for nvptx64"
fi
# kernel_lines NAME: the PTX of one kernel
kernel_lines() { awk -v k=".entry $1(" 'index($0, k) == 1 { on = 1 } on { print } on && /^}/ { exit }' "$tmp/program.ptx"; }
kernel_lines attention_mma >"$tmp/attention_mma.ptx"
mmas=$(grep -c "mma.sync.aligned" "$tmp/attention_mma.ptx")
if [ "$mmas" -eq 0 ]; then
    fail "attention_mma: missing, or no mma.sync in it"
elif grep -q "__local_depot" "$tmp/attention_mma.ptx"; then
    fail "attention_mma: a local-memory depot (a register array indexed at run time): $(grep -m1 __local_depot "$tmp/attention_mma.ptx")"
else
    ok "attention_mma: $mmas mma.sync, its arrays in registers"
fi
if grep -q "shfl.sync.bfly" "$tmp/attention_mma.ptx"; then
    ok "attention_mma: the row maxima and sums by shfl.sync"
else
    fail "attention_mma: no shfl.sync"
fi
kernel_lines attention >"$tmp/attention.ptx"
if grep -q "shfl.sync.bfly" "$tmp/attention.ptx"; then
    ok "attention (decode): the maxima and sums by shfl.sync"
else
    fail "attention (decode): no shfl.sync (ATT_SHFL with MV_SHFL)"
fi
# attention_warps (ATT_WARPS): its scores, maxima, sums and weights by shuffles
kernel_lines attention_warps >"$tmp/attention_warps.ptx"
if ! grep -q "shfl.sync.idx" "$tmp/attention_warps.ptx" || ! grep -q "shfl.sync.bfly" "$tmp/attention_warps.ptx"; then
    fail "attention_warps: missing, or no shfl.sync.idx and .bfly in it"
else
    ok "attention_warps: the scores, maxima, sums and weights by shfl.sync"
fi
if grep -q "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" "$tmp/program.ptx"; then
    ok "the products' mma.sync"
else
    fail "no mma.sync of the products in the program"
fi
# MMA_I8 (off by default until measured on a GPU): matmul_mma_q4_k on int8 mma.sync
if $cc1 $defaults -DMMA_I8=1 -S -o "$tmp/i8.ptx" "$tmp/program.cl" >"$tmp/clang.log" 2>&1; then
    i8=$(awk 'index($0, ".entry matmul_mma_q4_k(") == 1 { on = 1 } on { print } on && /^}/ { exit }' "$tmp/i8.ptx" |
        grep -c "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32")
    if [ "$i8" -gt 0 ]; then
        ok "MMA_I8=1: matmul_mma_q4_k has $i8 int8 mma.sync"
    else
        fail "MMA_I8=1: no int8 mma.sync in matmul_mma_q4_k"
    fi
else
    cat "$tmp/clang.log"
    fail "MMA_I8=1: the program does not compile for nvptx64"
fi
# The register arrays, with OpenCL's builtins linked (libclc's nvptx64 library: without it every
# vload/vstore on a private array is a call, which alone keeps the array in memory): with the
# GPUs' INLINE=1 UNROLL=1 the decode products, the GEMM and both attentions keep their arrays in
# registers: no local-memory depot. llc lowers exp2 to a libm call that NVIDIA's compiler never
# makes; a stand-in (ex2.approx) is linked for it. Built with MMA_I8=1: matmul_mma_q4_k is then the
# int8 kernel, the other types' products the f16 one.
ver=$(clang --version | sed -n 's/.*version \([0-9]*\).*/\1/p' | head -1)
clc=/usr/lib/clc/nvptx64--nvidiacl.bc
if [ ! -f "$clc" ] || ! command -v "llvm-link-$ver" >/dev/null || ! command -v "opt-$ver" >/dev/null ||
    ! command -v "llc-$ver" >/dev/null; then
    echo "!!!!!!!! SKIPPED: no libclc ($clc) or llvm-$ver tools; the register arrays were not checked !!!!!!!!"
else
    cat >"$tmp/libm.cl" <<'CL'
float exp2f(float x) { float r; __asm__("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x)); return r; }
float expf(float x) { return exp2f(x * 1.4426950408889634f); }
CL
    if $cc1 -emit-llvm-bc -o "$tmp/libm.bc" "$tmp/libm.cl" &&
        $cc1 $defaults -DMMA_I8=1 -emit-llvm-bc -o "$tmp/u.bc" "$tmp/program.cl" &&
        "llvm-link-$ver" --only-needed "$tmp/u.bc" "$clc" -o "$tmp/ul.bc" 2>"$tmp/link.log" &&
        "opt-$ver" -O3 "$tmp/ul.bc" -o "$tmp/uo.bc" && "llvm-link-$ver" "$tmp/uo.bc" "$tmp/libm.bc" -o "$tmp/um.bc" &&
        "llc-$ver" -mcpu=sm_80 -mattr=+ptx70 "$tmp/um.bc" -o "$tmp/unroll.ptx" 2>"$tmp/llc.log"; then
        depots=$(awk '/^\.(visible )?\.?(func|entry)/ { name = $0 } /__local_depot/ && /\.local/ { print name }' \
            "$tmp/unroll.ptx" | sed 's/^\.\(visible \)\?\.\?\(func\|entry\) *//; s/(.*//' |
            grep -E '^(matvec[0-9a-z_]*|matmul_mma_[a-z0-9_]+|attention|attention_mma|attention_warps)$')
        if [ -z "$depots" ]; then
            ok "INLINE=1 UNROLL=1 with the builtins: the products, the GEMM and attention keep their arrays in registers"
        else
            fail "INLINE=1 UNROLL=1: a local-memory depot in $(echo $depots | tr ' ' ',')"
        fi
    else
        cat "$tmp/link.log" "$tmp/llc.log" 2>/dev/null | head -5
        fail "INLINE=1 UNROLL=1: the program does not build with libclc's builtins"
    fi
fi
finish ptx.sh
