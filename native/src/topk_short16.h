/*
 * topk_short16.h - topk of many short float32 rows, sixteen rows at a time
 * (AVX-512): MoE routers' top-k of 8..128 experts for thousands of tokens.
 *
 * short_rows.h does the same with eight rows per vector, written for AVX2
 * and kept for the other dtypes and layouts; a profile of 4096 rows of 8
 * (k = 2) split its time about evenly between loading the rows as columns,
 * keeping the lists and writing the outputs, all three eight rows a step.
 * Here each step serves sixteen rows:
 *
 *  1. Sixteen rows are read sixteen columns at a time (a masked load per
 *     row: nothing past a row's end is touched) and transposed in
 *     registers, so that vector j holds element j of each row.
 *  2. Each element becomes a signed key (its magnitude's bits, negated
 *     for a negative float: signed order is the float order, and -0.0
 *     and +0.0 compare equal, as torch compares them; complemented for
 *     the largest), its low `sh` bits replaced by the
 *     column (sh = the bits of len - 1): a word ordered by key, then by
 *     position.  Each lane keeps its m = k + 1 smallest words in order
 *     (each word sinks through the list by 2m min/max).
 *  3. A lane whose m words share their key bits two by two (a true tie,
 *     or two floats within the low sh bits of each other), or whose row
 *     holds a NaN (all NaNs are one value to torch; their bits are not
 *     ordered so), is reported to the caller, which redoes that row in the
 *     order asked for (as short_rows.h's tied rows are).  Otherwise the
 *     first k words are the row's answer, in torch's order and the stable
 *     one alike (SEMANTICS.md: a tie-free selection is unique, sorted).
 *  4. The k positions come from the words' low bits; the values are read
 *     back from the rows by one gather per rank (their exact bits, -0.0
 *     included), and the ranks are written out as rows of k: interleaved
 *     by shuffles for k = 1 and 2, through the same 16x16 transpose
 *     otherwise (rows of up to 32 and k >= 3: the positions transposed to
 *     rows and each row's values picked by a permute of the row, in L1).
 *     Reported rows are written too, then redone.
 *
 * Measured (Intel Xeon, AVX-512, one thread, torch.topk under install(),
 * four inputs cycled, us a call, the eight-rows kernel -> this): 4096x8
 * k = 1 / 2 / 4: 28.9 / 29.7 / 34.7 -> 16.8 / 19.8 / 26.4; 11008x4 k = 2
 * (wanda's 2:4) 70.8 -> 31.5; 4096x16 k = 2 / 8: 42.5 / 62.5 -> 25.0 /
 * 47.2; 4096x64 k = 2 / 8: 131 / 199 -> 94 / 165; 4096x128 k = 8: 349 ->
 * 291 (memory's speed comes near from 32 columns: the rows are read once).
 * Ahead of topk_few.h for k = 2 of rows of 96..128 too (4096x96 / x128:
 * 173 / 207 -> 117 / 148); topk_top1.h stays ahead for k = 1 from 64.
 */
#ifndef KWK_TOPK_SHORT16_H
#define KWK_TOPK_SHORT16_H

#include <stdint.h>
#include "kwker.h"
#include "keys.h"
#include "plain_loads.h"

#if defined(__AVX512F__)
#include <immintrin.h>

enum {
    S16_ROWS = 16,
    S16_MAX_K = 8,
    S16_MAX_LEN = 128, /* sh <= 7 position bits */
};

/* Whether s16_topk takes (the first multiple of sixteen of) this call's
 * rows: float32 rows along the last dim, k + 1 <= len <= S16_MAX_LEN,
 * outputs dense rows of k, row offsets that fit the gathers' int32, and
 * an order that is sorted for tie-free rows (torch's nth_element branch
 * leaves sorted=False rows in introselect order). */
static int s16_applies(int dtype, int64_t rows, int64_t len, int64_t inner, int64_t src_so,
                       int64_t src_sl, int64_t k, int64_t dst_so, int64_t dst_sl,
                       const void *values, const int64_t *indices, int sorted, int order)
{
    if (order == KWK_ORDER_TORCH && !sorted && k > 1 && k * 64 > len) return 0;
    return dtype == KWK_FLOAT32 && rows >= S16_ROWS && inner == 1 && src_sl == 1 && k >= 1 &&
           k <= S16_MAX_K && k < len && len <= S16_MAX_LEN && dst_so == k && dst_sl == 1 &&
           values != NULL && indices != NULL && src_so >= len &&
           src_so <= (INT32_MAX - len) / S16_ROWS;
}

#if defined(__GNUC__)
#define S16_INLINE static inline __attribute__((always_inline))
#else
#define S16_INLINE static inline
#endif

/* The order key of sixteen float32 bit patterns: the magnitude's bits,
 * negated for a negative float (sign and magnitude to two's complement):
 * signed order is float order, and -0.0 and +0.0 are both 0.  *amax keeps
 * the largest magnitude's bits seen per lane: a NaN's lie above the
 * infinity's (S16_INF_BITS). */
enum { S16_INF_BITS = 0x7F800000 };
S16_INLINE __m512i s16_f32_key(__m512i x, __m512i *amax)
{
    const __m512i a = _mm512_and_si512(x, _mm512_set1_epi32(0x7FFFFFFF));
    *amax = _mm512_max_epi32(*amax, a);
    return _mm512_mask_sub_epi32(a, _mm512_movepi32_mask(x), _mm512_setzero_si512(), a);
}

/* r[l] (element j of row l in lane j) -> r[j] (element j of row l in lane
 * l): 4x4 blocks within each 128-bit lane by unpacks, then the blocks
 * moved across lanes by two rounds of 128-bit shuffles. */
S16_INLINE void s16_transpose16(__m512i r[16])
{
    __m512i u[16];
    for (int g = 0; g < 4; ++g) {
        const __m512i t0 = _mm512_unpacklo_epi32(r[4 * g], r[4 * g + 1]);
        const __m512i t1 = _mm512_unpackhi_epi32(r[4 * g], r[4 * g + 1]);
        const __m512i t2 = _mm512_unpacklo_epi32(r[4 * g + 2], r[4 * g + 3]);
        const __m512i t3 = _mm512_unpackhi_epi32(r[4 * g + 2], r[4 * g + 3]);
        /* u[4g + c], 128-bit lane q: rows 4g..4g+3 at column 4q + c */
        u[4 * g] = _mm512_unpacklo_epi64(t0, t2);
        u[4 * g + 1] = _mm512_unpackhi_epi64(t0, t2);
        u[4 * g + 2] = _mm512_unpacklo_epi64(t1, t3);
        u[4 * g + 3] = _mm512_unpackhi_epi64(t1, t3);
    }
    for (int c = 0; c < 4; ++c) {
        const __m512i lo01 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x44);
        const __m512i hi01 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xEE);
        const __m512i lo23 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x44);
        const __m512i hi23 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xEE);
        r[c] = _mm512_shuffle_i32x4(lo01, lo23, 0x88);
        r[4 + c] = _mm512_shuffle_i32x4(lo01, lo23, 0xDD);
        r[8 + c] = _mm512_shuffle_i32x4(hi01, hi23, 0x88);
        r[12 + c] = _mm512_shuffle_i32x4(hi01, hi23, 0xDD);
    }
}

/* Sixteen rows of int32 ranks v[0..k) (lane l: rank p of row l) written as
 * rows of k to out (32-bit elements) and, widened, to out64 (int64): row l
 * at l * k. */
S16_INLINE void s16_write_rows(const __m512i *v, int k, void *out32, int64_t *out64, int wide)
{
    if (k == 1) {
        if (wide) {
            _mm512_storeu_si512((void *)out64, _mm512_cvtepi32_epi64(_mm512_castsi512_si256(v[0])));
            _mm512_storeu_si512((void *)(out64 + 8),
                                _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(v[0], 1)));
        } else {
            _mm512_storeu_si512(out32, v[0]);
        }
        return;
    }
    if (k == 2) {
        /* 64-bit pairs: lo holds rows 0 1 | 4 5 | 8 9 | 12 13, hi the rest */
        const __m512i lo = _mm512_unpacklo_epi32(v[0], v[1]), hi = _mm512_unpackhi_epi32(v[0], v[1]);
        const __m512i a = _mm512_permutex2var_epi64(lo, _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11), hi);
        const __m512i b = _mm512_permutex2var_epi64(lo, _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15), hi);
        if (wide) {
            _mm512_storeu_si512((void *)out64, _mm512_cvtepi32_epi64(_mm512_castsi512_si256(a)));
            _mm512_storeu_si512((void *)(out64 + 8), _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(a, 1)));
            _mm512_storeu_si512((void *)(out64 + 16), _mm512_cvtepi32_epi64(_mm512_castsi512_si256(b)));
            _mm512_storeu_si512((void *)(out64 + 24), _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(b, 1)));
        } else {
            _mm512_storeu_si512(out32, a);
            _mm512_storeu_si512((char *)out32 + 64, b);
        }
        return;
    }
    __m512i r[16];
    for (int p = 0; p < 16; ++p) r[p] = p < k ? v[p] : _mm512_setzero_si512();
    s16_transpose16(r); /* r[l]: row l's ranks in lanes 0..k-1 */
    const __mmask16 m = (__mmask16)((1u << k) - 1);
    for (int l = 0; l < 16; ++l) {
        if (wide)
            _mm512_mask_storeu_epi64(out64 + l * k, (__mmask8)m,
                                     _mm512_cvtepi32_epi64(_mm512_castsi512_si256(r[l])));
        else
            _mm512_mask_storeu_epi32((char *)out32 + 4 * l * k, m, r[l]);
    }
}

/* The lists of one group of sixteen rows (tile: row l at tile + l * so
 * floats): best[0..m) per lane, ascending; *bad gets the lanes whose row
 * holds a NaN.  LARGEST and M are constants in each copy. */
S16_INLINE void s16_select(const float *tile, const float *end, int64_t so, int64_t len, int sh,
                           const int M, const int LARGEST, __m512i *best, __mmask16 *bad)
{
    const __m512i keep = _mm512_set1_epi32((int32_t)~((1u << sh) - 1));
    for (int p = 0; p < M; ++p) best[p] = _mm512_set1_epi32(INT32_MAX);
    __m512i amax = _mm512_setzero_si512();
    for (int64_t c0 = 0; c0 < len; c0 += 16) {
        const int cols = len - c0 < 16 ? (int)(len - c0) : 16;
        const __mmask16 lm = (__mmask16)(cols == 16 ? 0xFFFFu : (1u << cols) - 1);
        __m512i r[16];
        for (int l = 0; l < 16; ++l) r[l] = kwk_loadz_epi32(lm, tile + l * so + c0, end);
        s16_transpose16(r);
        for (int j = 0; j < cols; ++j) {
            const __m512i key = s16_f32_key(r[j], &amax);
            const __m512i col = _mm512_set1_epi32((int32_t)(c0 + j));
            /* (key or ~key) & keep | col */
            __m512i w = LARGEST ? _mm512_ternarylogic_epi32(key, keep, col, 0xAE)
                                : _mm512_ternarylogic_epi32(key, keep, col, 0xEA);
            for (int p = 0; p < M; ++p) {
                const __m512i b = best[p];
                best[p] = _mm512_min_epi32(b, w);
                w = _mm512_max_epi32(b, w);
            }
        }
    }
    *bad = _mm512_cmpgt_epi32_mask(amax, _mm512_set1_epi32(S16_INF_BITS)); /* a NaN */
}

/* One copy per (m, largest): the group loop of s16_topk. */
S16_INLINE int64_t s16_groups(const float *src, int64_t rows, int64_t len, int64_t so, const int K,
                              const int LARGEST, float *values, int64_t *indices, int64_t *redo,
                              int64_t *nredo)
{
    const int M = K + 1;
    const int sh = kwk_bits_for((uint64_t)(len - 1));
    const __m512i low = _mm512_set1_epi32((int32_t)((1u << sh) - 1));
    const __m512i rowoff = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                              _mm512_set1_epi32((int32_t)so));
    const float *const end = (const float *)kwk_plain_end(src, ((rows - 1) * so + len) * 4);
    int64_t g = 0;
    for (; g + S16_ROWS <= rows; g += S16_ROWS) {
        const float *tile = src + g * so;
        __m512i best[S16_MAX_K + 1];
        __mmask16 bad;
        s16_select(tile, end, so, len, sh, M, LARGEST, best, &bad);
        for (int p = 0; p + 1 < M; ++p)
            bad |= _mm512_cmpeq_epi32_mask(_mm512_srai_epi32(best[p], sh),
                                           _mm512_srai_epi32(best[p + 1], sh));
        for (unsigned t = bad; t; t &= t - 1) redo[(*nredo)++] = g + __builtin_ctz(t);
        __m512i pos[16];
        for (int p = 0; p < K; ++p) pos[p] = _mm512_and_si512(best[p], low);
        if (K <= 2 || len > 32) {
            __m512i val[S16_MAX_K];
            for (int p = 0; p < K; ++p)
                val[p] = _mm512_i32gather_epi32(_mm512_add_epi32(rowoff, pos[p]), (const void *)tile, 4);
            s16_write_rows(val, K, values + g * K, NULL, 0);
            s16_write_rows(pos, K, NULL, indices + g * K, 1);
            continue;
        }
        /* rows of at most 32: the positions transposed to rows of k, each
         * row's values picked from the row itself (in L1) by a permute */
        for (int p = K; p < 16; ++p) pos[p] = _mm512_setzero_si512();
        s16_transpose16(pos); /* pos[l]: row l's k positions */
        const __mmask16 km = (__mmask16)((1u << K) - 1);
        const __mmask16 lo = (__mmask16)(len >= 16 ? 0xFFFFu : (1u << len) - 1);
        const __mmask16 hi = (__mmask16)(len <= 16 ? 0 : len >= 32 ? 0xFFFFu : (1u << (len - 16)) - 1);
        for (int l = 0; l < 16; ++l) {
            const float *row = tile + l * so;
            const __m512i a = _mm512_maskz_loadu_epi32(lo, row);
            const __m512i v = len <= 16 ? _mm512_permutexvar_epi32(pos[l], a)
                                        : _mm512_permutex2var_epi32(a, pos[l], _mm512_maskz_loadu_epi32(hi, row + 16));
            _mm512_mask_storeu_epi32(values + (g + l) * K, km, v);
            _mm512_mask_storeu_epi64(indices + (g + l) * K, (__mmask8)km,
                                     _mm512_cvtepi32_epi64(_mm512_castsi512_si256(pos[l])));
        }
    }
    return g;
}

/* topk of the first multiple of sixteen of `rows` float32 rows (row r at
 * src + r * so, len elements; s16_applies), sorted, into values and
 * indices (row r at r * k); the rows with a tie among their first k + 1
 * keys, or a NaN, are appended to redo[*nredo..] for the caller to redo
 * (their outputs hold anything meanwhile).  Returns the rows done. */
static int64_t s16_topk(const float *src, int64_t rows, int64_t len, int64_t so, int64_t k,
                        int largest, float *values, int64_t *indices, int64_t *redo,
                        int64_t *nredo)
{
#define S16_CASE(K)                                                                         \
    case K:                                                                                 \
        return largest ? s16_groups(src, rows, len, so, K, 1, values, indices, redo, nredo) \
                       : s16_groups(src, rows, len, so, K, 0, values, indices, redo, nredo);
    switch (k) {
    S16_CASE(1) S16_CASE(2) S16_CASE(3) S16_CASE(4)
    S16_CASE(5) S16_CASE(6) S16_CASE(7) S16_CASE(8)
    default: return 0;
    }
#undef S16_CASE
}

#endif /* __AVX512F__ */
#endif
