/*
 * avx512_kernels.h - the kernels written for AVX-512 (targets/avx512_kernels.c,
 * the only translation unit compiled with AVX-512 enabled), called from the
 * avx512 target's copy of the AVX2 kernels (targets/avx512.c defines
 * KWK_AVX512_KERNELS).  Each takes validated arguments, like every kernel.
 */
#ifndef KWK_AVX512_KERNELS_H
#define KWK_AVX512_KERNELS_H

#include <stdint.h>

#if defined(__GNUC__)
#define KWK_INTERNAL __attribute__((visibility("hidden")))
#else
#define KWK_INTERNAL
#endif

#endif
