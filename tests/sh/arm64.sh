#!/usr/bin/env bash
# The unit, kernel and golden tests on arm64, under qemu-user: `make arm64` cross-builds
# build-arm64/, then every build-arm64/tests/test_* binary runs on emulated CPUs:
#
#   cortex-a53   ARMv8.0 without dotprod and fp16: the automatic choice is the "neon" table
#   max          every extension qemu has (dotprod, fp16, i8mm, ...): "neon-i8mm"
#
# Which runs: test_golden with the path forced by TERN_ISA, neon on cortex-a53, then neon-i8mm and
# neon-dotprod on max, so the logits of each table are checked. test_kernels (which compares every
# table the CPU has with the reference whatever TERN_ISA says) and test_golden_arch (which runs each
# path the CPU has, ref included, unless TERN_ISA names one) on both CPUs. The others do not depend
# on the table's numbers: max alone. (Every binary under each forced path kept this script over
# 20 minutes of a 2-core CI machine; docs/benchmarks.md, session 32.)
#
# Every run gets TERN_TEST_QEMU=1: qemu-user emulates the CPU, not the kernel, so a test of
# kernel behaviour it does not reproduce may skip on it (/proc/cpuinfo is the host's; RLIMIT_AS
# limits the emulator, whose guest address space is reserved up front, not the guest's mmap).
#
#   bash tests/sh/arm64.sh                  all test binaries
#   bash tests/sh/arm64.sh test_kernels ... only these
#
# Runtime libraries: the binaries link the cross libc (libc6-dev-arm64-cross) and Debian's
# multiarch cmocka (libcmocka0:arm64), which pulls in the multiarch libc6:arm64. qemu runs them
# WITHOUT -L/QEMU_LD_PREFIX: the guest's /lib/ld-linux-aarch64.so.1 and libc.so.6 then both come
# from libc6:arm64. With -L /usr/aarch64-linux-gnu the loader would come from the cross package
# and libc.so.6 from libc6:arm64 (found through ld.so.cache), two glibc builds that do not mix:
# pthread_create never returns. Timings under qemu mean nothing; correctness is what this checks.
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
# Runs go one after the other: two emulated thread pools spinning on the same host cores slow
# each other down far more than twofold. A run that hangs is killed (qemu ignores SIGTERM while
# the guest spins) after RUN_TIMEOUT seconds; test_golden, the longest, takes minutes.
RUN_TIMEOUT=1800

if [ "$BUILD" != build ]; then
    echo "arm64.sh: runs with the default build only (BUILD=$BUILD here); nothing tested"
    exit 0
fi
for tool in aarch64-linux-gnu-gcc qemu-aarch64; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "arm64.sh: FAIL: $tool not found: run 'make deps'"
        exit 1
    fi
done
if [ ! -e /lib/ld-linux-aarch64.so.1 ]; then
    echo "arm64.sh: FAIL: no arm64 libc (/lib/ld-linux-aarch64.so.1): run 'make deps' (libc6:arm64)"
    exit 1
fi
unset QEMU_LD_PREFIX TERN_ISA

if ! make --no-print-directory -j"$(nproc)" arm64; then
    echo "arm64.sh: FAIL: make arm64 failed (see above)"
    exit 1
fi

if [ $# -gt 0 ]; then
    bins=()
    for name in "$@"; do bins+=("build-arm64/tests/$name"); done
else
    bins=(build-arm64/tests/test_*)
fi

# The AT_HWCAP features each emulated CPU reports, which test_kernels compares with its detection
# (qemu-user shows the host's /proc/cpuinfo, so the test cannot read them there).
features_of() {
    case $1 in
        cortex-a53) echo "fp asimd" ;;
        max) echo "fp asimd fphp asimdhp asimddp i8mm" ;;
    esac
}

log=$(mktemp)
trap 'rm -f "$log"' EXIT
failed=()
runs=0
# run BINARY CPU ISA: ISA "auto" leaves TERN_ISA unset.
run() {
    local bin=$1 cpu=$2 isa=$3 name rc start
    name="$(basename "$bin") on $cpu, TERN_ISA=$isa"
    runs=$((runs + 1))
    local vars=(TERN_TEST_QEMU=1 "TERN_TEST_CPU_FEATURES=$(features_of "$cpu")")
    [ "$isa" = auto ] || vars+=("TERN_ISA=$isa")
    start=$(date +%s)
    env "${vars[@]}" timeout -s KILL $RUN_TIMEOUT qemu-aarch64 -cpu "$cpu" "$bin" >"$log" 2>&1
    rc=$?
    if [ $rc -eq 0 ]; then
        echo "ok   $name ($(($(date +%s) - start)) s)"
        return
    fi
    [ $rc -eq 137 ] && echo "(killed after $RUN_TIMEOUT s)" >>"$log"
    echo "FAIL $name: exit $rc; its last output:"
    tail -n 40 "$log" | sed 's/^/    /'
    failed+=("$name")
}

for bin in "${bins[@]}"; do
    case $bin in *.o | *.d) continue ;; esac
    if [ ! -x "$bin" ] || [ -d "$bin" ]; then
        echo "FAIL $bin: not built"
        failed+=("$bin")
        continue
    fi
    if [ "$(basename "$bin")" = test_golden ]; then
        run "$bin" cortex-a53 neon
        run "$bin" max neon-i8mm
        run "$bin" max neon-dotprod
    elif [ "$(basename "$bin")" = test_kernels ] || [ "$(basename "$bin")" = test_golden_arch ]; then
        run "$bin" cortex-a53 auto
        run "$bin" max auto
    else
        run "$bin" max auto
    fi
done

if [ ${#failed[@]} -ne 0 ]; then
    echo "arm64.sh: FAILED ${#failed[@]} of $runs runs:"
    printf '    %s\n' "${failed[@]}"
    exit 1
fi
echo "arm64.sh: all $runs runs passed"
