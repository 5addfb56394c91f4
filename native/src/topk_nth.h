/*
 * topk_nth.h - topk rows in torch's nth_element branch (k * 64 > length),
 * for keys of at most 32 bits: candidates from a sampled threshold, torch's
 * order reproduced on packed words when ties make it show.
 *
 * torch (TopKImpl.h) runs std::nth_element(first, first + k - 1, last) on
 * (value, index) pairs, then std::sort(first, first + k - 1) when sorted.
 * Its output is unique when the k + 1 smallest keys (flipped for largest)
 * are pairwise distinct: the k selected are then the only keys below the
 * (k+1)-th, and sorting them leaves no choice.  Equal keys anywhere among
 * them can show: nth_element decides which of the keys equal to the k-th
 * are taken (a tie at the boundary) and where it leaves every selected
 * element, and std::sort's order of equal keys depends on that arrangement,
 * i.e. on every move made over the whole row.  So a row with any tie among
 * its k + 1 smallest is redone by the word emulation of both algorithms
 * (torch_order.h: wemu_nth_element, wemu_std_sort), on the whole row.
 *
 * Per row:
 *  1. keys gathered at their own width (flipped: smallest = selected);
 *  2. a sample of about 2 sqrt(len) keys, sorted, gives a threshold t
 *     about 3 sigma above the rank k + 1 (and predicts ties: equal sampled
 *     keys below t send the row straight to the emulation);
 *  3. one pass (AVX2: eight keys per compare, the passing lanes' words
 *     key << ibits | index packed out by a permutation table) collects the
 *     candidates, keys <= t, in index order; too few: every key is taken;
 *  4. the m smallest candidate words are sorted (radix / merge sort) and
 *     checked for equal neighbours.
 * The stable order (KWK_ORDER_STABLE) needs no check: the index bits break
 * ties in index order.
 */
#ifndef KWK_TOPK_NTH_H
#define KWK_TOPK_NTH_H

#include <math.h>
#include "row_io.h"
#include "select_words.h"

#if defined(__AVX2__)
#include <immintrin.h>
/* For a 4-bit lane mask: the 32-bit lanes that move two 64-bit words
 * (lanes 2l, 2l + 1 for each set bit l, ascending) to the front. */
static const uint32_t TN_PACK4[16][8] = {
    {0, 0, 0, 0, 0, 0, 0, 0}, {0, 1, 0, 0, 0, 0, 0, 0}, {2, 3, 0, 0, 0, 0, 0, 0},
    {0, 1, 2, 3, 0, 0, 0, 0}, {4, 5, 0, 0, 0, 0, 0, 0}, {0, 1, 4, 5, 0, 0, 0, 0},
    {2, 3, 4, 5, 0, 0, 0, 0}, {0, 1, 2, 3, 4, 5, 0, 0}, {6, 7, 0, 0, 0, 0, 0, 0},
    {0, 1, 6, 7, 0, 0, 0, 0}, {2, 3, 6, 7, 0, 0, 0, 0}, {0, 1, 2, 3, 6, 7, 0, 0},
    {4, 5, 6, 7, 0, 0, 0, 0}, {0, 1, 4, 5, 6, 7, 0, 0}, {2, 3, 4, 5, 6, 7, 0, 0},
    {0, 1, 2, 3, 4, 5, 6, 7}};

/* Eight keys (32-bit lanes) at index j: append the words of those <= t to
 * out + c (up to 8 words written past the new count: the buffer has slack);
 * returns the new count. */
static inline int64_t tn_pack8(__m256i keys, int64_t j, __m256i tsigned, int ibits,
                               uint64_t *out, int64_t c)
{
    const __m256i sign = _mm256_set1_epi32((int)0x80000000u);
    const __m256i gt = _mm256_cmpgt_epi32(_mm256_xor_si256(keys, sign), tsigned);
    const unsigned mask = ~(unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(gt)) & 0xFFu;
    if (!mask) return c;
    const __m128i sh = _mm_cvtsi32_si128(ibits);
    const __m256i idx0 = _mm256_add_epi64(_mm256_set1_epi64x(j), _mm256_setr_epi64x(0, 1, 2, 3));
    const __m256i idx1 = _mm256_add_epi64(idx0, _mm256_set1_epi64x(4));
    const __m256i w0 = _mm256_or_si256(
        _mm256_sll_epi64(_mm256_cvtepu32_epi64(_mm256_castsi256_si128(keys)), sh), idx0);
    const __m256i w1 = _mm256_or_si256(
        _mm256_sll_epi64(_mm256_cvtepu32_epi64(_mm256_extracti128_si256(keys, 1)), sh), idx1);
    const unsigned m0 = mask & 15u, m1 = mask >> 4;
    _mm256_storeu_si256((__m256i *)(out + c),
                        _mm256_permutevar8x32_epi32(w0, _mm256_loadu_si256((const __m256i *)TN_PACK4[m0])));
    c += __builtin_popcount(m0);
    _mm256_storeu_si256((__m256i *)(out + c),
                        _mm256_permutevar8x32_epi32(w1, _mm256_loadu_si256((const __m256i *)TN_PACK4[m1])));
    return c + __builtin_popcount(m1);
}
#endif

/* Slack words after a candidate buffer (tn_pack8 stores whole vectors). */
enum { TN_SLACK = 8 };
/* Sample sizes for the threshold. */
enum { TN_SAMPLE_MIN = 64, TN_SAMPLE_MAX = 1024 };

/* Per key width: candidates, threshold, one row. */
#define TN_DEFINE(UT, SUF)                                                    \
    /* out[0..c) = key[j] << ibits | j for the j < len with key[j] <= t, in  \
     * index order; returns c.  out has len + TN_SLACK words. */              \
    static int64_t tn_compress_##SUF(const UT *key, int64_t len, UT t, int ibits, uint64_t *out) \
    {                                                                         \
        int64_t c = 0, j = 0;                                                 \
        TN_COMPRESS_SIMD_##SUF                                                \
        for (; j < len; ++j) {                                                \
            out[c] = (uint64_t)key[j] << ibits | (uint64_t)j;                 \
            c += key[j] <= t;                                                 \
        }                                                                     \
        return c;                                                             \
    }                                                                         \
                                                                              \
    /* A key t with, very likely, a few more than m keys <= t (the maximum  \
     * key when that would be most of the row).  *dup: the sample holds     \
     * equal keys at or below t (ties among the selected are then likely). */ \
    static UT tn_threshold_##SUF(const UT *key, int64_t len, int64_t m, int *dup) \
    {                                                                         \
        uint64_t s[TN_SAMPLE_MAX], tmp[TN_SAMPLE_MAX];                        \
        int64_t ns = 2 * sw_isqrt(len);                                       \
        ns = ns < TN_SAMPLE_MIN ? TN_SAMPLE_MIN : (ns > TN_SAMPLE_MAX ? TN_SAMPLE_MAX : ns); \
        if (ns > len) ns = len;                                               \
        const int64_t stride = len / ns;                                      \
        for (int64_t i = 0; i < ns; ++i)                                      \
            s[i] = (uint64_t)key[i * stride + stride / 2] << 16 | (uint64_t)i; \
        words_sort_small_or_radix(s, tmp, ns);                                \
        const double p = (double)m / (double)len;                             \
        const double r = p * (double)ns;                                      \
        const int64_t rs = (int64_t)(r + 3.0 * sqrt(r * (1.0 - p)) + 3.0);    \
        const int64_t top = rs < ns ? rs : ns - 1;                            \
        int d = 0;                                                            \
        for (int64_t i = 1; i <= top; ++i) d |= (s[i] >> 16) == (s[i - 1] >> 16); \
        *dup = d;                                                             \
        /* candidates past about 3/4 of the row: take them all */             \
        if (rs >= ns || rs * 4 >= ns * 3) return (UT)~(UT)0;                  \
        return (UT)(s[rs] >> 16);                                             \
    }                                                                         \
                                                                              \
    /* One row: out gets torch's topk (order KWK_ORDER_TORCH) or the stable \
     * one.  key: the row's flipped keys; w, tmp: len + TN_SLACK words. */     \
    static void tn_row_##SUF(const UT *key, int64_t len, int64_t k, int sorted, int torch, \
                             uint64_t *w, uint64_t *tmp, const out_row *out)  \
    {                                                                         \
        const int ibits = len > 1 ? kwk_bits_for((uint64_t)(len - 1)) : 0;    \
        const uint64_t imask = kwk_width_mask(ibits);                         \
        const int64_t m = torch ? (k < len ? k + 1 : len) : k;                \
        int emulate = torch && !sorted;                                       \
        if (!emulate) {                                                       \
            int dup = 0;                                                      \
            const UT t = tn_threshold_##SUF(key, len, m, &dup);               \
            emulate = torch && dup;                                           \
            if (!emulate) {                                                   \
                int64_t c = tn_compress_##SUF(key, len, t, ibits, w);         \
                if (c < m) c = tn_compress_##SUF(key, len, (UT)~(UT)0, ibits, w); \
                int64_t ns = c;                                               \
                if (c > 2 * m + 64) {                                         \
                    words_select(w, tmp, c, m);                               \
                    ns = m;                                                   \
                }                                                             \
                words_sort_bits(w, tmp, ns, 0, ibits + 8 * (int)sizeof(UT));  \
                if (torch)                                                    \
                    for (int64_t j = 1; j < m && !emulate; ++j)               \
                        emulate = (w[j] >> ibits) == (w[j - 1] >> ibits);     \
            }                                                                 \
        }                                                                     \
        if (emulate) {                                                        \
            /* torch's own moves: nth_element over the whole row, then       \
             * std::sort of the first k - 1 */                                \
            for (int64_t j = 0; j < len; ++j) w[j] = (uint64_t)key[j] << ibits | (uint64_t)j; \
            wemu_nth_element(w, k - 1, len, ibits);                           \
            if (sorted) wemu_std_sort(w, k - 1, ibits);                       \
        }                                                                     \
        for (int64_t j = 0; j < k; ++j) emit(out, j, (int64_t)(w[j] & imask)); \
    }

#if defined(__AVX2__)
#define TN_COMPRESS_SIMD_u32                                                  \
    {                                                                         \
        const __m256i ts = _mm256_set1_epi32((int)(t ^ 0x80000000u));         \
        for (; j + 8 <= len; j += 8)                                          \
            c = tn_pack8(_mm256_loadu_si256((const __m256i *)(key + j)), j, ts, ibits, out, c); \
    }
#define TN_COMPRESS_SIMD_u16                                                  \
    {                                                                         \
        const __m256i ts = _mm256_set1_epi32((int)((uint32_t)t ^ 0x80000000u)); \
        for (; j + 8 <= len; j += 8)                                          \
            c = tn_pack8(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(key + j))), j, \
                         ts, ibits, out, c);                                  \
    }
#else
#define TN_COMPRESS_SIMD_u32
#define TN_COMPRESS_SIMD_u16
#endif
#define TN_COMPRESS_SIMD_u8
#define TN_COMPRESS_SIMD_u64

TN_DEFINE(uint8_t, u8)
TN_DEFINE(uint16_t, u16)
TN_DEFINE(uint32_t, u32)
/* never chosen (64-bit keys leave no room for an index in a word): only so
 * the per-width topk loop compiles for every width */
TN_DEFINE(uint64_t, u64)

#undef TN_COMPRESS_SIMD_u32
#undef TN_COMPRESS_SIMD_u16
#undef TN_COMPRESS_SIMD_u8
#undef TN_COMPRESS_SIMD_u64
#undef TN_DEFINE

#endif
