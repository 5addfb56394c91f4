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
 * keys share is skipped.
 *
 * Rows of at least KEY_MSD_MIN_N keys that need three or more passes take
 * one most-significant-digit pass (KEY_MSD_BITS wide) first: a single
 * scatter through memory, then each bucket is LSD-sorted while it sits in
 * cache (every LSD pass over a row bigger than the cache costs a trip
 * through memory; float keys crowd into a few exponents, so the digit is
 * wide enough to split those too). */
#define KEY_RADIX_BITS 8
enum { KEY_MSD_MIN_N = 1 << 17, KEY_MSD_BITS = 11 };
/* One-digit rows from this long are counted, not scattered (n < 2^32).
 * So are rows of keys spanning 9..KEY_COUNT_MAX_BITS bits (int16, float16
 * and bfloat16 rows, int32 token ids) where tmp has room for the counts
 * (n * sizeof(key) >= 4 * 2^bits bytes a count array, so the walk over the
 * buckets costs at most n / 4 steps): one read and one write pass instead
 * of two scatters and a histogram whose repeated buckets wait on each
 * other's stores (1M int32 of 13 bits: 9.2 -> 2.6 ms native; 1M bfloat16 8.5 -> 3.5 ms). */
enum { KEY_COUNT_MIN_N = 64, KEY_COUNT_MAX_BITS = 16 };
#define KEY_DEFINE_RADIX(UT, SUF)                                              \
    /* The counting sort of keys whose bits above the lowest `bits` are all \
     * the same (relative to the row's minimum, or within an MSD bucket),    \
     * the lowest bits less than nb (<= 2^bits),                             \
     * its counts in tmp (tmp_bytes long); returns 0 (nothing done) where   \
     * tmp is too small                                                     \
     * or misaligned for them.  Consecutive keys are counted in separate    \
     * arrays (as many as fit, up to 4) so that a run of one key does not   \
     * wait on its own count's store. */                                    \
    static int key_count_sort_##SUF(UT *a, void *tmp, int64_t tmp_bytes, int64_t n, int bits, \
                                    int64_t nb)                               \
    {                                                                         \
        const int64_t room = tmp_bytes / (4 * nb);                            \
        if (room < 1 || ((uintptr_t)tmp & 3)) return 0;                       \
        const int q = room >= 4 ? 4 : room >= 2 ? 2 : 1;                     \
        uint32_t *c = (uint32_t *)(void *)tmp;                                \
        const UT low = (UT)(((uint64_t)1 << bits) - 1), high = (UT)(a[0] & (UT)~low); \
        memset(c, 0, (size_t)(q * nb) * sizeof(uint32_t));                    \
        int64_t j = 0;                                                        \
        if (q == 4) {                                                         \
            for (; j + 4 <= n; j += 4) {                                      \
                c[a[j] & low]++;                                              \
                c[nb + (a[j + 1] & low)]++;                                   \
                c[2 * nb + (a[j + 2] & low)]++;                               \
                c[3 * nb + (a[j + 3] & low)]++;                               \
            }                                                                 \
        } else if (q == 2) {                                                  \
            for (; j + 2 <= n; j += 2) {                                      \
                c[a[j] & low]++;                                              \
                c[nb + (a[j + 1] & low)]++;                                   \
            }                                                                 \
        }                                                                     \
        for (; j < n; ++j) c[a[j] & low]++;                                   \
        int64_t at = 0;                                                       \
        for (int64_t b = 0; b < nb; ++b) {                                    \
            int64_t m = c[b];                                                 \
            for (int i = 1; i < q; ++i) m += c[i * nb + b];                   \
            for (int64_t i = 0; i < m; ++i) a[at + i] = (UT)(high | (UT)b);   \
            at += m;                                                          \
        }                                                                     \
        return 1;                                                             \
    }                                                                         \
    /* LSD on keys already relative to the row's minimum; returns the       \
     * array holding the result (a or tmp) */                                 \
    static UT *key_lsd_##SUF(UT *a, UT *tmp, int64_t n, int bits)             \
    {                                                                         \
        enum { B = 1 << KEY_RADIX_BITS };                                      \
        enum { PASSES_MAX = (sizeof(UT) * 8 + KEY_RADIX_BITS - 1) / KEY_RADIX_BITS }; \
        int64_t count[PASSES_MAX][B];                                         \
        int passes = (bits + KEY_RADIX_BITS - 1) / KEY_RADIX_BITS;              \
        if (passes > PASSES_MAX) passes = PASSES_MAX;                         \
        if (n < 2 || passes <= 0) return a;                                   \
        if (passes == 1 && n >= KEY_COUNT_MIN_N && n < ((int64_t)1 << 32)) {    \
            /* one digit: the keys themselves are the buckets (above the      \
             * digit every key of the call has the same bits): count them,    \
             * four quarters in lockstep so that repeated keys do not wait    \
             * on one count's store, then write each key count times */       \
            uint32_t c4[4][B];                                                \
            memset(c4, 0, sizeof c4);                                         \
            const int64_t q = n / 4;                                          \
            for (int64_t j = 0; j < q; ++j) {                                 \
                c4[0][a[j] & (B - 1)]++;                                      \
                c4[1][a[q + j] & (B - 1)]++;                                  \
                c4[2][a[2 * q + j] & (B - 1)]++;                              \
                c4[3][a[3 * q + j] & (B - 1)]++;                              \
            }                                                                 \
            for (int64_t j = 4 * q; j < n; ++j) c4[3][a[j] & (B - 1)]++;      \
            const UT high = (UT)(a[0] & ~(UT)(B - 1));                        \
            int64_t at = 0;                                                   \
            for (int b = 0; b < B; ++b) {                                     \
                const int64_t m = (int64_t)c4[0][b] + c4[1][b] + c4[2][b] + c4[3][b];\
                for (int64_t j = 0; j < m; ++j) a[at + j] = (UT)(high | (UT)b);\
                at += m;                                                      \
            }                                                                 \
            return a;                                                         \
        }                                                                     \
        if (bits <= KEY_COUNT_MAX_BITS && n < ((int64_t)1 << 32) &&           \
            key_count_sort_##SUF(a, tmp, n * (int64_t)sizeof(UT), n, bits,     \
                                 (int64_t)1 << bits))                         \
            return a;                                                         \
        memset(count, 0, sizeof(int64_t) * B * (size_t)passes);               \
        for (int64_t j = 0; j < n; ++j)                                       \
            for (int p = 0; p < passes; ++p)                                  \
                count[p][(a[j] >> (p * KEY_RADIX_BITS)) & (B - 1)]++;          \
        UT *from = a, *to = tmp;                                              \
        for (int p = 0; p < passes; ++p) {                                    \
            int64_t *c = count[p], sum = 0;                                   \
            const int shift = p * KEY_RADIX_BITS;                              \
            if (c[(from[0] >> shift) & (B - 1)] == n) continue;               \
            for (int b = 0; b < B; ++b) { const int64_t t = c[b]; c[b] = sum; sum += t; } \
            for (int64_t j = 0; j < n; ++j) to[c[(from[j] >> shift) & (B - 1)]++] = from[j]; \
            UT *t = from; from = to; to = t;                                  \
        }                                                                     \
        return from;                                                          \
    }                                                                         \
    static void key_radix_##SUF(UT *a, UT *tmp, int64_t n, UT lo, int bits)    \
    {                                                                         \
        if (n < 2) return;                                                    \
        const int msd = sizeof(UT) > 1 && n >= KEY_MSD_MIN_N && n < ((int64_t)1 << 32) && \
                        bits > 2 * KEY_RADIX_BITS && bits > KEY_MSD_BITS;     \
        if (!msd) {                                                           \
            for (int64_t j = 0; j < n; ++j) a[j] = (UT)(a[j] - lo);           \
            const UT *res = key_lsd_##SUF(a, tmp, n, bits);                   \
            for (int64_t j = 0; j < n; ++j) a[j] = (UT)(res[j] + lo);         \
            return;                                                           \
        }                                                                     \
        enum { NB = 1 << KEY_MSD_BITS };                                      \
        const int shift = bits - KEY_MSD_BITS, rest = shift;                 \
        uint32_t count[NB];                                                   \
        memset(count, 0, sizeof count);                                       \
        for (int64_t j = 0; j < n; ++j) {                                     \
            const UT k = (UT)(a[j] - lo);                                     \
            a[j] = k;                                                         \
            count[(k >> shift) & (NB - 1)]++;                                 \
        }                                                                     \
        uint32_t sum = 0;                                                     \
        for (int b = 0; b < NB; ++b) { const uint32_t t = count[b]; count[b] = sum; sum += t; } \
        for (int64_t j = 0; j < n; ++j) tmp[count[(a[j] >> shift) & (NB - 1)]++] = a[j]; \
        /* count[b] is now the end of bucket b */                             \
        int64_t start = 0;                                                    \
        for (int b = 0; b < NB; ++b) {                                        \
            const int64_t end = count[b], m = end - start;                    \
            if (m > 0) {                                                      \
                const UT *res = key_lsd_##SUF(tmp + start, a + start, m, rest); \
                for (int64_t j = 0; j < m; ++j) a[start + j] = (UT)(res[j] + lo); \
            }                                                                 \
            start = end;                                                      \
        }                                                                     \
    }
KEY_DEFINE_RADIX(uint8_t, u8)
KEY_DEFINE_RADIX(uint16_t, u16)
KEY_DEFINE_RADIX(uint32_t, u32)
KEY_DEFINE_RADIX(uint64_t, u64)


#endif
