#!/usr/bin/env bash
# The OpenCL program as NVIDIA GPUs build it, compiled here by clang for nvptx64: CI has no NVIDIA
# driver, and PoCL never compiles the inline-PTX paths (DOT8=2, MV_SHFL=1, SYNC=2, MMA=2), so
# without this a mistake there would show first on a GPU. Checks that
#  - the program compiles with NVIDIA's defaults (the tunables' values on an NVIDIA GPU), and
#    with INLINE=1, where no function that takes a weight type may be left as a function;
#  - attention_mma carries its instructions (mma.sync, shfl.sync) and keeps its fragments and
#    accumulators in registers: no local-memory depot, which a loop over a register array that
#    the compiler does not unroll puts there (a silent slowdown; its loops say #pragma unroll);
#  - the products' mma.sync is there (matmul_mma, a function the kernels share in clang's PTX).
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
defaults="-DDOT8=2 -DMV_SHFL=1 -DSYNC=2 -DMMA=2 -DMV_WGS=64 -DMV_ROWS=4 -DMM_TN=128 -DMM_TM=128 -DMM_WN=8 -DMM_WM=8
          -DNORM_WGS=256 -DEW_WGS=64 -DATT_WGS=128 -DATT_MAX_D=256 -DATT_TQ=32 -DMMA_TN=128 -DMMA_TM=64
          -DMMA_WN=32 -DMMA_WM=32 -DFA_WARPS=4"
# OpenCL C has no `asm` keyword in clang; NVIDIA's compiler takes it as GNU C does
if ! clang -cc1 -triple nvptx64-nvidia-nvcl -cl-std=CL1.2 -finclude-default-header -I. -Dasm=__asm__ $defaults \
    -O3 -S -o "$tmp/program.ptx" "$tmp/program.cl" >"$tmp/clang.log" 2>&1; then
    cat "$tmp/clang.log"
    fail "the program does not compile for nvptx64 with NVIDIA's defaults"
else
    ok "the program compiles for nvptx64 with NVIDIA's defaults (files: $(echo $files | wc -w))"
fi
if clang -cc1 -triple nvptx64-nvidia-nvcl -cl-std=CL1.2 -finclude-default-header -I. -Dasm=__asm__ $defaults \
    -DINLINE=1 -O3 -S -o "$tmp/inline.ptx" "$tmp/program.cl" >"$tmp/clang.log" 2>&1 &&
    ! grep -Eq "^\.func +(\(.*\) +)?(matvec_sums|matmul_mma|matmul|unpack_raw)\(" "$tmp/inline.ptx"; then
    ok "with INLINE=1 too, and no function that takes a weight type is left uninlined"
else
    cat "$tmp/clang.log"
    fail "INLINE=1: it does not compile for nvptx64, or a typed function is still called"
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
if grep -q "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" "$tmp/program.ptx"; then
    ok "the products' mma.sync"
else
    fail "no mma.sync of the products in the program"
fi
finish ptx.sh
