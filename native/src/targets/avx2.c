/*
 * The AVX2 target: the same kernels compiled for AVX2/BMI2/FMA, picked at
 * run time only on CPUs that have them (dispatch.c).  No global -mavx2: the
 * instruction set is switched on for this translation unit alone, so the
 * rest of the library runs on any x86-64.
 */
#if defined(__x86_64__) || defined(_M_X64)
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,bmi,bmi2,fma,popcnt"))), apply_to = function)
#elif defined(__GNUC__)
#pragma GCC push_options
#pragma GCC target("avx2,bmi,bmi2,fma,popcnt")
#endif

#define KWK_TABLE kwk_kernels_avx2
#define KWK_TARGET_NAME "avx2"
#include "../kernels_impl.h"

#if defined(__clang__)
#pragma clang attribute pop
#elif defined(__GNUC__)
#pragma GCC pop_options
#endif
#else
/* Not an x86-64 build: nothing to compile here. */
typedef int kwk_avx2_target_unused;
#endif
