/*
 * The AVX-512 target: the AVX2 kernels plus AVX-512 paths where a kernel
 * has one (guarded by __AVX512F__: in-register compress, 64-bit compares,
 * 16-lane networks), picked at run time only on CPUs (and kernels) that
 * have AVX-512 F/BW/DQ/VL enabled (dispatch.c).  Like avx2.c, the
 * instruction set is switched on for this translation unit alone.
 */
#if defined(__x86_64__) || defined(_M_X64)
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx2,bmi,bmi2,fma,popcnt"))), apply_to = function)
#elif defined(__GNUC__)
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx2,bmi,bmi2,fma,popcnt")
#endif

#define KWK_TABLE kwk_kernels_avx512
#define KWK_TARGET_NAME "avx512"
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
