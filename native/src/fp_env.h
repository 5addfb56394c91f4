/*
 * fp_env.h - the calling thread's treatment of subnormal floats.
 *
 * Kernels compare floats as integer keys, which order every bit pattern
 * whatever the floating-point environment.  torch compares them as floats:
 * with subnormals read as zero (x86 DAZ, AArch64 FZ; torch.set_flush_denormal
 * sets DAZ and FTZ) a subnormal then equals zero.  kwk_denormals_flushed
 * reports it so that callers promising torch's results can step aside, and
 * kernels that compare with float instructions (kth_pick's bracket pass)
 * keep to the keys' order when it is set.
 */
#ifndef KWK_FP_ENV_H
#define KWK_FP_ENV_H

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

static inline int kwk_fp_flushes_denormals(void)
{
#if defined(__x86_64__) || defined(__i386__)
    /* MXCSR bit 6: DAZ (denormal inputs are zero); bit 15: FTZ */
    return (_mm_getcsr() & 0x8040u) != 0;
#elif defined(__aarch64__)
    unsigned long fpcr;
    __asm__ volatile("mrs %0, fpcr" : "=r"(fpcr));
    return (fpcr >> 24) & 1u; /* FZ */
#else
    return 0;
#endif
}

#endif
