/*
 * key_radix.h - LSD radix sort of bare unsigned keys (no indices).
 *
 * For callers that need only the sorted keys: quantile's order statistics,
 * and values-only sorts whose keys map back to one bit pattern each.
 */
#ifndef KWK_KEY_RADIX_H
#define KWK_KEY_RADIX_H

#include <stdint.h>
#include <string.h>

/* key_radix_<SUF>(a, tmp, n, lo, bits): sort a[0..n) (every key in
 * [lo, lo + 2^bits)) in place; tmp holds n keys.  8-bit digits; a digit all
 * keys share is skipped. */
#define KEY_RADIX_BITS 8
#define KEY_DEFINE_RADIX(UT, SUF)                                              \
    static void key_radix_##SUF(UT *a, UT *tmp, int64_t n, UT lo, int bits)    \
    {                                                                         \
        enum { B = 1 << KEY_RADIX_BITS };                                      \
        enum { PASSES_MAX = (sizeof(UT) * 8 + KEY_RADIX_BITS - 1) / KEY_RADIX_BITS }; \
        int64_t count[PASSES_MAX][B];                                         \
        int passes = (bits + KEY_RADIX_BITS - 1) / KEY_RADIX_BITS;              \
        if (passes > PASSES_MAX) passes = PASSES_MAX;                         \
        memset(count, 0, sizeof(int64_t) * B * (size_t)passes);               \
        for (int64_t j = 0; j < n; ++j) {                                     \
            a[j] = (UT)(a[j] - lo);                                           \
            for (int p = 0; p < passes; ++p)                                  \
                count[p][(a[j] >> (p * KEY_RADIX_BITS)) & (B - 1)]++;          \
        }                                                                     \
        UT *from = a, *to = tmp;                                              \
        for (int p = 0; p < passes; ++p) {                                    \
            int64_t *c = count[p], sum = 0;                                   \
            const int shift = p * KEY_RADIX_BITS;                              \
            if (c[(from[0] >> shift) & (B - 1)] == n) continue;               \
            for (int b = 0; b < B; ++b) { const int64_t t = c[b]; c[b] = sum; sum += t; } \
            for (int64_t j = 0; j < n; ++j) to[c[(from[j] >> shift) & (B - 1)]++] = from[j]; \
            UT *t = from; from = to; to = t;                                  \
        }                                                                     \
        for (int64_t j = 0; j < n; ++j) a[j] = (UT)(from[j] + lo);            \
    }
KEY_DEFINE_RADIX(uint8_t, u8)
KEY_DEFINE_RADIX(uint16_t, u16)
KEY_DEFINE_RADIX(uint32_t, u32)
KEY_DEFINE_RADIX(uint64_t, u64)


#endif
