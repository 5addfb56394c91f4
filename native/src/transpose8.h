/*
 * transpose8.h - an 8x8 matrix of 32-bit elements transposed in registers
 * (24 shuffles): the step between "eight rows side by side" and "one row
 * per vector" that the batch kernels (batch_sort.h, short_rows.h) and the
 * vector quicksort's base case (simd_qsort_avx2.h) take.
 */
#ifndef KWK_TRANSPOSE8_H
#define KWK_TRANSPOSE8_H

#if defined(__AVX2__)
#include <immintrin.h>

/* v[j] lane l <- v[l] lane j. */
static inline __attribute__((always_inline)) void kwk_transpose8_epi32(__m256i v[8])
{
    __m256i t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_epi32(v[i], v[i + 1]);
        t[i + 1] = _mm256_unpackhi_epi32(v[i], v[i + 1]);
    }
    /* t0: a0 b0 a1 b1 | a4 b4 a5 b5, t1: a2 b2 a3 b3 | a6 b6 a7 b7, ... */
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_unpacklo_epi64(t[i], t[i + 2]);
        u[i + 1] = _mm256_unpackhi_epi64(t[i], t[i + 2]);
        u[i + 2] = _mm256_unpacklo_epi64(t[i + 1], t[i + 3]);
        u[i + 3] = _mm256_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    /* u[i] (i < 4): column i of rows 0-3 | column i + 4 of rows 0-3 */
    for (int i = 0; i < 4; ++i) {
        v[i] = _mm256_permute2x128_si256(u[i], u[i + 4], 0x20);
        v[i + 4] = _mm256_permute2x128_si256(u[i], u[i + 4], 0x31);
    }
}
#endif

#endif
