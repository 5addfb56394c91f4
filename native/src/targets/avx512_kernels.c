/*
 * The AVX-512 kernels (avx512_kernels.h): this translation unit alone is
 * compiled with AVX-512 F/BW/DQ/VL enabled; they run only when the avx512
 * target was chosen (dispatch.c checks the CPU and the OS first).
 */
#if defined(__x86_64__) || defined(_M_X64)
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx2,bmi,bmi2,fma,popcnt"))), apply_to = function)
#elif defined(__GNUC__)
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx2,bmi,bmi2,fma,popcnt")
#endif

#include "../avx512_kernels.h"

/* No AVX-512 kernel yet: keeps the translation unit non-empty (C11). */
typedef int kwk_avx512_kernels_none_yet;

#if defined(__clang__)
#pragma clang attribute pop
#elif defined(__GNUC__)
#pragma GCC pop_options
#endif
#else
typedef int kwk_avx512_kernels_unused;
#endif
