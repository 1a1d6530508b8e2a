/*
 * CPU feature detection for the kernel dispatch table.
 *
 * x86-64: a feature counts only when the CPU reports it (cpuid) AND the operating system saves
 * the register state it needs on context switches (XCR0 via xgetbv). A kernel using YMM or ZMM
 * registers on an OS that does not save them would see its registers clobbered by other
 * processes, so an unsaved state means "absent" here.
 * AMX needs a third step on Linux: its tile data (8 KiB per thread) is saved only for processes that
 * asked for it (arch_prctl ARCH_REQ_XCOMP_PERM); a tile instruction before that faults (SIGILL). Detection
 * only reads the permission; tern_cpu_request_amx asks for it, when the kernel choice may take the amx path.
 * aarch64 (Linux, Android): the kernel's hardware capability bits (getauxval(AT_HWCAP), and
 * AT_HWCAP2 for i8mm).
 */
#include "kernels/cpu/isa.h"

#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#elif defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif

#if defined(__x86_64__)

/* CPUID.1:ECX */
#define X86_ECX1_FMA (1u << 12)
#define X86_ECX1_OSXSAVE (1u << 27)
#define X86_ECX1_AVX (1u << 28)
#define X86_ECX1_F16C (1u << 29)
/* CPUID.(7,0):EBX / ECX */
#define X86_EBX7_AVX2 (1u << 5)
#define X86_EBX7_AVX512F (1u << 16)
#define X86_EBX7_AVX512BW (1u << 30)
#define X86_EBX7_AVX512VL (1u << 31)
#define X86_ECX7_AVX512VBMI (1u << 1)
#define X86_ECX7_AVX512VNNI (1u << 11)
/* CPUID.(7,0):EDX */
#define X86_EDX7_AMX_BF16 (1u << 22)
#define X86_EDX7_AMX_TILE (1u << 24)
#define X86_EDX7_AMX_INT8 (1u << 25)
/* CPUID.(7,1):EAX */
#define X86_EAX71_AVXVNNI (1u << 4)
/* XCR0: SSE + AVX (YMM upper halves); opmask + ZMM upper halves + ZMM16..31 */
#define XCR0_YMM 0x06u
#define XCR0_ZMM 0xE0u
/* XCR0: XTILECFG (bit 17) + XTILEDATA (bit 18) */
#define XCR0_TILE 0x60000u

/* Linux's arch_prctl codes for extended state permissions (asm/prctl.h) and the tile data feature
 * number, spelled out because older headers lack them. */
#define ARCH_GET_XCOMP_PERM 0x1022
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

/* xgetbv is encoded by hand so that this file needs no -mxsave flag (the library is built
 * without ISA flags; only *_avx2.c files get them). Call only when OSXSAVE is set. */
static uint64_t read_xcr0(void) {
    uint32_t lo, hi;
    __asm__ volatile(".byte 0x0f, 0x01, 0xd0" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

/* Whether this process may use the tile data state (granted by an earlier request). */
static int amx_permission_held(void) {
#if defined(__linux__)
    unsigned long bits = 0;
    return syscall(SYS_arch_prctl, ARCH_GET_XCOMP_PERM, &bits) == 0 && ((bits >> XFEATURE_XTILEDATA) & 1);
#else
    return 0;
#endif
}

static void detect_x86(tern_cpu_features *f) {
    unsigned eax, ebx, ecx, edx;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx))
        return;
    const unsigned ecx1 = ecx;
    if (!(ecx1 & X86_ECX1_OSXSAVE) || !(ecx1 & X86_ECX1_AVX))
        return;
    const uint64_t xcr0 = read_xcr0();
    if ((xcr0 & XCR0_YMM) != XCR0_YMM)
        return; /* no AVX state saved: every feature below is off */
    const int zmm_saved = (xcr0 & XCR0_ZMM) == XCR0_ZMM;

    f->fma = (ecx1 & X86_ECX1_FMA) != 0;
    f->f16c = (ecx1 & X86_ECX1_F16C) != 0;
    if (__get_cpuid_max(0, NULL) < 7)
        return;
    __cpuid_count(7, 0, eax, ebx, ecx, edx);
    const unsigned max_leaf7 = eax;
    f->avx2 = (ebx & X86_EBX7_AVX2) != 0;
    if (zmm_saved) {
        f->avx512f = (ebx & X86_EBX7_AVX512F) != 0;
        f->avx512bw = f->avx512f && (ebx & X86_EBX7_AVX512BW) != 0;
        f->avx512vl = f->avx512f && (ebx & X86_EBX7_AVX512VL) != 0;
        f->avx512vnni = f->avx512f && (ecx & X86_ECX7_AVX512VNNI) != 0;
        f->avx512vbmi = f->avx512f && (ecx & X86_ECX7_AVX512VBMI) != 0;
    }
    if ((xcr0 & XCR0_TILE) == XCR0_TILE) {
        f->amx_tile = (edx & X86_EDX7_AMX_TILE) != 0;
        f->amx_int8 = f->amx_tile && (edx & X86_EDX7_AMX_INT8) != 0;
        f->amx_bf16 = f->amx_tile && (edx & X86_EDX7_AMX_BF16) != 0;
        f->amx_permitted = f->amx_tile && amx_permission_held();
    }
    if (max_leaf7 >= 1) {
        __cpuid_count(7, 1, eax, ebx, ecx, edx);
        f->avxvnni = f->avx2 && (eax & X86_EAX71_AVXVNNI) != 0;
    }
}

#elif defined(__aarch64__)

/* Linux/Android AT_HWCAP and AT_HWCAP2 bits for arm64 (asm/hwcap.h), spelled out here because older
 * libc headers lack some of them (HWCAP2 came with Linux 4.18, I8MM with 5.10). */
#define ARM64_HWCAP_ASIMD (1ul << 1)
#define ARM64_HWCAP_FPHP (1ul << 9)
#define ARM64_HWCAP_ASIMDHP (1ul << 10)
#define ARM64_HWCAP_ASIMDDP (1ul << 20)
#define ARM64_HWCAP2_I8MM (1ul << 13)
#ifndef AT_HWCAP2
#define AT_HWCAP2 26
#endif

static void detect_arm64(tern_cpu_features *f) {
#if defined(__linux__)
    const unsigned long hw = getauxval(AT_HWCAP);
    f->neon = (hw & ARM64_HWCAP_ASIMD) != 0;
    f->dotprod = f->neon && (hw & ARM64_HWCAP_ASIMDDP) != 0;
    f->fp16 = f->neon && (hw & ARM64_HWCAP_FPHP) != 0 && (hw & ARM64_HWCAP_ASIMDHP) != 0;
    /* a kernel without AT_HWCAP2 answers 0: no i8mm */
    f->i8mm = f->neon && (getauxval(AT_HWCAP2) & ARM64_HWCAP2_I8MM) != 0;
#else
    /* Advanced SIMD is part of every ARMv8-A profile; the optional extensions stay off where
     * there is no portable way to ask. */
    f->neon = 1;
#endif
}

#endif

void tern_cpu_features_detect(tern_cpu_features *f) {
    memset(f, 0, sizeof *f);
#if defined(__x86_64__)
    detect_x86(f);
#elif defined(__aarch64__)
    detect_arm64(f);
#endif
}

void tern_cpu_request_amx(tern_cpu_features *f) {
    if (!f->amx_tile || !f->amx_int8 || f->amx_permitted)
        return;
#if defined(__x86_64__) && defined(__linux__)
    /* Granted once for the whole process (every thread, present and later); a kernel without the
     * permission scheme (before 5.16), a seccomp filter, or an alternate signal stack of some thread
     * too small for the tile state refuses it, and amx stays off. */
    f->amx_permitted = syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0 && amx_permission_held();
#endif
}
