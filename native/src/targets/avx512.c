/*
 * The AVX-512 target: the AVX2 kernels, compiled exactly as in avx2.c, plus
 * the AVX-512 kernels of avx512_kernels.c where a kernel has one (declared
 * in avx512_kernels.h; each call site is under KWK_AVX512_KERNELS).  Picked
 * at run time only on CPUs and OSes with AVX-512 F/BW/DQ/VL (dispatch.c).
 *
 * Why not the whole library compiled for AVX-512: the same kernels built
 * with AVX-512 enabled measured up to 25% slower on short rows (4096x8
 * topk, 8.9 vs 11.1 ns a row: wider auto-vectorised loops and vpmullq
 * where scalar code was faster), so AVX-512 code runs only where a kernel
 * was written for it and measured faster.
 */
#if defined(__x86_64__) || defined(_M_X64)
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,bmi,bmi2,fma,popcnt"))), apply_to = function)
#elif defined(__GNUC__)
#pragma GCC push_options
#pragma GCC target("avx2,bmi,bmi2,fma,popcnt")
#endif

#define KWK_TABLE kwk_kernels_avx512
#define KWK_TARGET_NAME "avx512"
#define KWK_AVX512_KERNELS 1
#include "../avx512_kernels.h"
#include "../kernels_impl.h"

#if defined(__clang__)
#pragma clang attribute pop
#elif defined(__GNUC__)
#pragma GCC pop_options
#endif
#else
/* Not an x86-64 build: nothing to compile here. */
typedef int kwk_avx512_target_unused;
#endif
