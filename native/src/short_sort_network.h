/*
 * short_sort_network.h - rows of 2..16 32-bit elements (float32, int32,
 * uint32) or 16-bit ones (bfloat16, float16, int16, uint16: widened to
 * 32-bit lanes as they are read, narrowed as they are written) sorted
 * eight at a time by a sorting network, read and written with vector
 * loads and stores (the AVX2 target only; short_rows.h's sr_sort takes
 * every other case and the rows left over here).
 *
 * Element j of eight rows sits in one vector (lane l: row l), as in
 * short_rows.h, but instead of counting each element's rank and scattering
 * it element by element, the vectors themselves are sorted by Batcher's
 * odd-even merge network (19 comparators for 8 elements, 63 for 16), each
 * comparator ordering its two vectors lane by lane by (key, index): the
 * index breaks ties, so the result is the stable order, which is torch's
 * for rows of up to 16 (its std::sort leaves them to an insertion sort).
 * Each position carries the key (signed-compare form, flipped for
 * descending), the element's index and its raw bits (the key alone loses
 * -0.0 and NaN payloads, which the output keeps).
 *
 *  - columns (inner > 1, the sort dim not the last: sorting along dim 0 of
 *    a 12 x 79510 tensor): eight neighbouring rows are eight neighbouring
 *    addresses, so element j of all eight is one load and sorted position
 *    p of all eight one store (two for the int64 indices);
 *  - rows (inner == 1, rows of contiguous elements written back to back):
 *    eight rows become columns and back by 8 x 8 transposes.  Rows are
 *    read whole vectors at a time (see sn_load_rows); each output row
 *    is stored as whole vectors whose lanes past the row's end fall on the
 *    rows after it, written later (in this group, the next, or by
 *    sr_sort's loop for the last few rows), except where a vector would
 *    reach past the call's last row: that one is stored masked (AVX2's
 *    masked stores are slow: one per row cost more than the rest).
 *
 * Each length has its own copy of the code (a switch over n), so that the
 * network's positions are constants and the vectors live in registers or
 * fixed stack slots.
 *
 * On the AVX-512 target, rows from SN_WORDS_MIN_N elements take
 * sn_rows_words_n instead: each position a 64-bit word key << 32 | j, so a
 * comparator is one unsigned minimum and one maximum (below).
 */
#ifndef KWK_SHORT_SORT_NETWORK_H
#define KWK_SHORT_SORT_NETWORK_H

#include <stdint.h>
#include <string.h>
#include "keys.h"
#include "sn_pairs.h"
#include "transpose8.h"

/* The AVX2 and AVX-512 targets (the unrolled copies cost the build ~10-15
 * s per translation unit; the portable one keeps short_rows.h's rank
 * sort).  The AVX-512 target runs these 8-lane kernels as they are: its
 * rank sort, whose emit stores element by element, was 1.5-2.7x slower
 * (ns/el, contiguous rows, rank sort -> network: float32 4096x4 sort
 * 1.68 -> 1.00, argsort 1.86 -> 0.70, 4096x8 1.55 -> 0.86, 65536x7 1.61
 * -> 1.04; int32 4096x8 1.51 -> 0.79; whisper_timing 10x40x1500x7 9.4 ->
 * 6.8 ms, lnets_groupsort 128x256x4 220 -> 108 us). */
#if defined(__AVX2__)
#include <immintrin.h>
#define KWK_HAVE_SORT_NETWORK 1

#define SN_INLINE static inline __attribute__((always_inline))
/* every row length with its own copy of a kernel: X(n) for n in 2..SN_MAX */
#define SN_LENGTHS(X) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15) X(16)
#define SN_UNROLL _Pragma("GCC unroll 64")

/* Sort positions 0..n-1 by (key, index), lane by lane. */
SN_INLINE void sn_network(__m256i *key, __m256i *idx, __m256i *raw, const int n)
{
    SN_UNROLL
    for (int c = SN_AT[n]; c < SN_AT[n + 1]; ++c) {
        const int a = SN_PAIRS[c][0], b = SN_PAIRS[c][1];
        const __m256i ka = key[a], kb = key[b], ia = idx[a], ib = idx[b];
        /* swap where b comes first: kb < ka, or equal keys and ib < ia */
        const __m256i swap = _mm256_or_si256(
            _mm256_cmpgt_epi32(ka, kb),
            _mm256_and_si256(_mm256_cmpeq_epi32(ka, kb), _mm256_cmpgt_epi32(ia, ib)));
        const __m256i ra = raw[a], rb = raw[b];
        key[a] = _mm256_blendv_epi8(ka, kb, swap);
        key[b] = _mm256_blendv_epi8(kb, ka, swap);
        idx[a] = _mm256_blendv_epi8(ia, ib, swap);
        idx[b] = _mm256_blendv_epi8(ib, ia, swap);
        raw[a] = _mm256_blendv_epi8(ra, rb, swap);
        raw[b] = _mm256_blendv_epi8(rb, ra, swap);
    }
}

/* key (signed-compare form) of eight raw elements; flip: all ones for
 * descending (the key's complement) */
SN_INLINE __m256i sn_key(int dtype, __m256i raw, __m256i flip)
{
    const __m256i sign = _mm256_set1_epi32((int)0x80000000u);
    __m256i k;
    if (dtype == KWK_FLOAT32) k = _mm256_xor_si256(kwk_keys8_f32(raw), sign);
    else if (dtype == KWK_UINT32) k = _mm256_xor_si256(raw, sign);
    else if (dtype == KWK_BFLOAT16 || dtype == KWK_FLOAT16)
        /* keys.h's 16-bit keys of the zero-extended bits (the zero upper
         * halves' keys masked off): 0..0xFFFF, a signed compare orders them */
        k = _mm256_and_si256(kwk_keys16_h16(raw, dtype == KWK_BFLOAT16 ? 0x7F80 : 0x7C00),
                             _mm256_set1_epi32(0xFFFF));
    else if (dtype == KWK_INT16) k = _mm256_srai_epi32(_mm256_slli_epi32(raw, 16), 16);
    else k = raw; /* int32: the signed order is the order; uint16: 0..65535 */
    return _mm256_xor_si256(k, flip);
}

/* Eight 16-bit elements (16 bytes) zero-extended to 32-bit lanes, and back. */
SN_INLINE __m256i sn_widen16(const void *p)
{
    return _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
}
SN_INLINE __m128i sn_narrow16(__m256i v)
{
    /* packus: lanes 0-3 | 4-7 in each half; the halves' low qwords joined */
    return _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packus_epi32(v, v), 0x08));
}

/* keys and indices of positions 0..n-1 from their raw bits, then sorted */
SN_INLINE void sn_sort(int dtype, __m256i *key, __m256i *idx, __m256i *raw, const int n, __m256i flip)
{
    SN_UNROLL
    for (int j = 0; j < n; ++j) {
        key[j] = sn_key(dtype, raw[j], flip);
        idx[j] = _mm256_set1_epi32(j);
    }
    sn_network(key, idx, raw, n);
}

/* lanes below `count` all ones */
static inline __m256i sn_lanes_below(int count)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(count), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* Whether the network takes this call's layout (after sr_sort_applies):
 * columns with unit inner strides, or rows of contiguous elements written
 * back to back (the stores past a row's end rely on the next row coming
 * right after it). */
enum { SN_NONE, SN_ROWS, SN_COLUMNS };
static int sn_applies(int dtype, int64_t len, int64_t inner, int64_t src_sl, int64_t src_si,
                      int64_t dst_so, int64_t dst_sl, int64_t dst_si)
{
    if (dtype != KWK_FLOAT32 && dtype != KWK_INT32 && dtype != KWK_UINT32 && dtype != KWK_BFLOAT16 &&
        dtype != KWK_FLOAT16 && dtype != KWK_INT16 && dtype != KWK_UINT16)
        return SN_NONE;
    if (inner == 1) return src_sl == 1 && dst_sl == 1 && dst_so == len ? SN_ROWS : SN_NONE;
    return inner >= 8 && src_si == 1 && dst_si == 1 ? SN_COLUMNS : SN_NONE;
}

/* Sorted position p of eight neighbouring rows to values / indices at d +
 * p * dst_sl (eight consecutive outputs). */
SN_INLINE void sn_store_columns(char *values, int64_t *indices, int64_t d, int64_t dst_sl,
                                const __m256i *raw, const __m256i *idx, const int n, const int es)
{
    if (values) {
        SN_UNROLL
        for (int p = 0; p < n; ++p) {
            char *q = values + (d + p * dst_sl) * es;
            if (es == 2) _mm_storeu_si128((__m128i *)(void *)q, sn_narrow16(raw[p]));
            else _mm256_storeu_si256((__m256i *)(void *)q, raw[p]);
        }
    }
    if (indices) {
        SN_UNROLL
        for (int p = 0; p < n; ++p) {
            int64_t *q = indices + d + p * dst_sl;
            _mm256_storeu_si256((__m256i *)(void *)q, _mm256_cvtepi32_epi64(_mm256_castsi256_si128(idx[p])));
            _mm256_storeu_si256((__m256i *)(void *)(q + 4),
                                _mm256_cvtepi32_epi64(_mm256_extracti128_si256(idx[p], 1)));
        }
    }
}

SN_INLINE void sn_columns_n(int dtype, const char *src, int64_t outer, int64_t done,
                            int64_t src_so, int64_t src_sl, char *values, int64_t *indices,
                            int64_t dst_so, int64_t dst_sl, __m256i flip, const int n, const int es)
{
    __m256i key[SN_MAX], idx[SN_MAX], raw[SN_MAX];
    for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < done; i += 8) {
            const char *s = src + (o * src_so + i) * es;
            SN_UNROLL
            for (int j = 0; j < n; ++j)
                raw[j] = es == 2 ? sn_widen16(s + j * src_sl * 2)
                                 : _mm256_loadu_si256((const __m256i *)(const void *)(s + j * src_sl * 4));
            sn_sort(dtype, key, idx, raw, n, flip);
            sn_store_columns(values, indices, o * dst_so + i, dst_sl, raw, idx, n, es);
        }
}

/* Columns: for each outer o, inner rows i..i+7 (i + 8 <= inner) at once.
 * Returns the number of inner rows done per outer (a multiple of 8); one
 * function per element size, as the rows'. */
#define SN_DEFINE_SORT_COLUMNS(BITS)                                                               \
    static int64_t sn_sort_columns##BITS(int dtype, const void *src, int64_t outer, int n,        \
                                       int64_t inner, int64_t src_so, int64_t src_sl, void *values, \
                                       int64_t *indices, int64_t dst_so, int64_t dst_sl,          \
                                       int descending)                                            \
    {                                                                                              \
        const __m256i flip = _mm256_set1_epi32(descending ? -1 : 0);                              \
        const int64_t done = inner & ~(int64_t)7;                                                  \
        switch (n) {                                                                               \
        SN_LENGTHS(SN_COLUMNS_CASE##BITS)                                                          \
        default: return 0;                                                                         \
        }                                                                                          \
        return done;                                                                               \
    }
/* (BITS / 8: the element size in bytes) */
#define SN_COLUMNS_CASE(N, BITS)                                                                   \
    case N:                                                                                        \
        sn_columns_n(dtype, (const char *)src, outer, done, src_so, src_sl, (char *)values,       \
                     indices, dst_so, dst_sl, flip, N, BITS / 8);                                  \
        break;
#define SN_COLUMNS_CASE32(N) SN_COLUMNS_CASE(N, 32)
#define SN_COLUMNS_CASE16(N) SN_COLUMNS_CASE(N, 16)
SN_DEFINE_SORT_COLUMNS(32)
SN_DEFINE_SORT_COLUMNS(16)
#undef SN_DEFINE_SORT_COLUMNS
#undef SN_COLUMNS_CASE
#undef SN_COLUMNS_CASE32
#undef SN_COLUMNS_CASE16

static int64_t sn_sort_columns(int dtype, const void *src, int64_t outer, int n, int64_t inner,
                               int64_t src_so, int64_t src_sl, void *values, int64_t *indices,
                               int64_t dst_so, int64_t dst_sl, int descending)
{
    return KWK_DTYPES[dtype].elem_size == 2
               ? sn_sort_columns16(dtype, src, outer, n, inner, src_so, src_sl, values, indices,
                                   dst_so, dst_sl, descending)
               : sn_sort_columns32(dtype, src, outer, n, inner, src_so, src_sl, values, indices,
                                   dst_so, dst_sl, descending);
}

/* One output row's n elements from v[0..] (8 lanes a vector), q the
 * row's start and end the output's end: a vector running past the row is
 * stored whole (its overhang lands on later rows, written afterwards)
 * unless it would pass `end`. */
SN_INLINE void sn_store_row32(int32_t *q, const int32_t *end, const __m256i *v, const int n)
{
    SN_UNROLL
    for (int p0 = 0; p0 < n; p0 += 8) {
        if (n - p0 < 8 && end - (q + p0) < 8)
            _mm256_maskstore_epi32((int *)(q + p0), sn_lanes_below(n - p0), v[p0 / 8]);
        else
            _mm256_storeu_si256((__m256i *)(void *)(q + p0), v[p0 / 8]);
    }
}

/* The same for the indices, widened to int64 (4 a vector). */
SN_INLINE void sn_store_row64(int64_t *q, const int64_t *end, const __m256i *v, const int n)
{
    SN_UNROLL
    for (int p0 = 0; p0 < n; p0 += 4) {
        const __m256i w = p0 % 8 ? _mm256_cvtepi32_epi64(_mm256_extracti128_si256(v[p0 / 8], 1))
                                 : _mm256_cvtepi32_epi64(_mm256_castsi256_si128(v[p0 / 8]));
        if (n - p0 < 4 && end - (q + p0) < 4)
            _mm256_maskstore_epi64((long long *)(void *)(q + p0),
                                   _mm256_cvtepi32_epi64(_mm_cmpgt_epi32(_mm_set1_epi32(n - p0), _mm_setr_epi32(0, 1, 2, 3))), w);
        else
            _mm256_storeu_si256((__m256i *)(void *)(q + p0), w);
    }
}

/* The same for 16-bit elements (no 16-bit masked store in AVX2: the
 * vector that would pass `end` goes through a copy). */
SN_INLINE void sn_store_row16(uint16_t *q, const uint16_t *end, const __m256i *v, const int n)
{
    SN_UNROLL
    for (int p0 = 0; p0 < n; p0 += 8) {
        const __m128i w = sn_narrow16(v[p0 / 8]);
        if (n - p0 < 8 && end - (q + p0) < 8) {
            uint16_t t[8];
            _mm_storeu_si128((__m128i *)(void *)t, w);
            memcpy(q + p0, t, (size_t)(n - p0) * sizeof(uint16_t));
        } else {
            _mm_storeu_si128((__m128i *)(void *)(q + p0), w);
        }
    }
}

/* raw[j] lane l = element j of the row at s + l * rs elements, for eight
 * rows of n contiguous elements (8 x 8 transposes).  Rows are read eight
 * elements at a time up to src_end, the end of the call's last row (the
 * lanes past a row's end are never used), masked (32-bit) or through a
 * copy (16-bit) only where a load would pass it: masked loads of memory
 * not yet in cache ran ~3.5x slower than plain ones on AMD Zen 5 (both
 * vpmaskmovd and AVX-512's; no difference in L2), and float32 rows of 7,
 * 600000 of them, took 12.1 ns a row with every row's load masked, 4.8
 * with plain loads (4096 rows, cached: 5.2 -> 4.6). */
SN_INLINE void sn_load_rows(const char *s, int64_t rs, const char *src_end, __m256i *raw,
                            const int n, const int es)
{
    const int nb = (n + 7) / 8;
    SN_UNROLL
    for (int b = 0; b < nb; ++b) {
        const int cols = n - 8 * b < 8 ? n - 8 * b : 8;
        const __m256i m = sn_lanes_below(cols);
        __m256i v[8];
        SN_UNROLL
        for (int l = 0; l < 8; ++l) {
            const char *p = s + (l * rs + 8 * b) * es;
            if (es == 4 && (cols == 8 || src_end - p >= 32)) {
                v[l] = _mm256_loadu_si256((const __m256i *)(const void *)p);
            } else if (es == 4) { /* the call's last row's last elements */
                v[l] = _mm256_maskload_epi32((const int *)(const void *)p, m);
            } else if (cols == 8 || src_end - p >= 16) {
                v[l] = sn_widen16(p);
            } else { /* the call's last row's last elements only: a copy */
                uint16_t t[8] = {0};
                memcpy(t, p, (size_t)cols * sizeof(uint16_t));
                v[l] = sn_widen16(t);
            }
        }
        kwk_transpose8_epi32(v);
        SN_UNROLL
        for (int c = 0; c < 8; ++c) raw[8 * b + c] = v[c];
    }
}

SN_INLINE void sn_rows_n(int dtype, const char *src, int64_t outer, int64_t done,
                         int64_t src_so, char *values, int64_t *indices, __m256i flip,
                         const int n, const int es)
{
    enum { NB = 2 }; /* 8 x 8 blocks per group: n <= 16 */
    __m256i key[SN_MAX], idx[SN_MAX], raw[SN_MAX + 8];
    const int nb = (n + 7) / 8;
    const char *const src_end = src + ((outer - 1) * src_so + n) * es;
    for (int64_t r = 0; r < done; r += 8) {
        sn_load_rows(src + r * src_so * es, src_so, src_end, raw, n, es);
        sn_sort(dtype, key, idx, raw, n, flip);
        /* rows back: row l's lanes of block b in rv[l][b] */
        __m256i rv[8][NB], iv[8][NB];
        SN_UNROLL
        for (int b = 0; b < nb; ++b) {
            __m256i v[8], w[8];
            SN_UNROLL
            for (int c = 0; c < 8; ++c) {
                v[c] = 8 * b + c < n ? raw[8 * b + c] : _mm256_setzero_si256();
                w[c] = 8 * b + c < n ? idx[8 * b + c] : _mm256_setzero_si256();
            }
            kwk_transpose8_epi32(v);
            kwk_transpose8_epi32(w);
            SN_UNROLL
            for (int l = 0; l < 8; ++l) {
                rv[l][b] = v[l];
                iv[l][b] = w[l];
            }
        }
        /* rows written in order: a row's overhang lands on later rows */
        SN_UNROLL
        for (int l = 0; l < 8; ++l) {
            if (values && es == 4)
                sn_store_row32((int32_t *)(void *)values + (r + l) * n, (int32_t *)(void *)values + outer * n,
                               rv[l], n);
            if (values && es == 2)
                sn_store_row16((uint16_t *)(void *)values + (r + l) * n,
                               (uint16_t *)(void *)values + outer * n, rv[l], n);
            if (indices) sn_store_row64(indices + (r + l) * n, indices + outer * n, iv[l], n);
        }
    }
}

#if defined(__AVX512F__)
/* AVX-512, 32- and 16-bit elements: each comparator orders whole (key,
 * position) words, key << 32 | j, eight rows' words in one vector (unsigned 64-bit
 * minimum and maximum: two instructions where sn_network's three compares
 * and six blends order the key, index and raw vectors apart).  Equal keys
 * keep their positions' order (the stable order, torch's for rows of up to
 * 16).  The sorted words go back to rows by 8 x 8 transposes of 64-bit
 * lanes; a row's indices are its words' low halves (stored as the int64
 * output as they are), its values the row's own elements permuted by them
 * (the raw bits: -0.0 and NaN payloads kept). */

/* From this row length (below it the words' fixed costs, two 8 x 8
 * transposes of 64-bit lanes and a permute a row, outweigh the comparators
 * saved).  Measured (tools/ab_builds.py's helpers, both builds in one
 * process, float32 rows of n, kwk_sort in torch's order, time new/old,
 * 2^22 elements streamed / 4096 rows cached, Zen 5): n = 2 1.50 / 1.35,
 * 3 1.00 / 1.05, 4 1.01 / 1.06, 5 0.78 / 0.67, 7 0.77 / 0.59, 8 0.87 /
 * 0.64, 12 0.69 / 0.54, 16 0.68 / 0.51. */
enum { SN_WORDS_MIN_N = 5 };

/* v[j] lane l <- v[l] lane j, 64-bit lanes. */
SN_INLINE void sn_transpose8_epi64(__m512i v[8])
{
    __m512i a[8], b[8];
    for (int i = 0; i < 8; i += 2) {
        a[i] = _mm512_unpacklo_epi64(v[i], v[i + 1]);     /* v_i.0 v_i+1.0 | v_i.2 v_i+1.2 | ... */
        a[i + 1] = _mm512_unpackhi_epi64(v[i], v[i + 1]); /* the odd lanes */
    }
    const __m512i lo2 = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13);
    const __m512i hi2 = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
    for (int i = 0; i < 8; i += 4)
        for (int j = 0; j < 2; ++j) {
            /* b[i + j]: column j (and j + 4) of rows i..i+3; b[i + j + 2]: columns j + 2, j + 6 */
            b[i + j] = _mm512_permutex2var_epi64(a[i + j], lo2, a[i + j + 2]);
            b[i + j + 2] = _mm512_permutex2var_epi64(a[i + j], hi2, a[i + j + 2]);
        }
    for (int c = 0; c < 4; ++c) {
        v[c] = _mm512_shuffle_i64x2(b[c], b[c + 4], 0x44);     /* column c of rows 0-7 */
        v[c + 4] = _mm512_shuffle_i64x2(b[c], b[c + 4], 0xEE); /* column c + 4 */
    }
}

/* A vector of 16 32-bit or 8 64-bit lanes stored at q, whole unless it
 * would pass end (then its lanes before end only: masked stores, like
 * masked loads, ran several times slower into memory not yet in cache). */
SN_INLINE void sn_store512(void *q, const void *end, __m512i v, int es)
{
    const int64_t room = ((const char *)end - (const char *)q) / es;
    if (room >= 64 / es)
        _mm512_storeu_si512(q, v);
    else if (es == 4)
        _mm512_mask_storeu_epi32(q, (__mmask16)((1u << room) - 1u), v);
    else
        _mm512_mask_storeu_epi64(q, (__mmask8)((1u << room) - 1u), v);
}

/* The row of 16-bit values permuted by idx (16 lanes), stored at q: whole
 * unless it would pass end. */
SN_INLINE void sn_store_h16(char *q, const char *end, __m256i v)
{
    const int64_t room = (end - q) / 2;
    if (room >= 16)
        _mm256_storeu_si256((__m256i *)(void *)q, v);
    else
        _mm256_mask_storeu_epi16((void *)q, (__mmask16)((1u << room) - 1u), v);
}

SN_INLINE void sn_rows_words_n(int dtype, const char *src, int64_t outer, int64_t done,
                               int64_t src_so, char *values, int64_t *indices, __m256i flip,
                               const int n, const int es)
{
    __m256i raw[SN_MAX + 8];
    __m512i w[SN_MAX];
    const char *const src_end = src + ((outer - 1) * src_so + n) * es;
    /* (no arithmetic on an output not asked for: its pointer is NULL) */
    const char *const vals_end = values ? values + outer * n * es : NULL;
    const char *const inds_end = indices ? (const char *)(indices + outer * n) : NULL;
    const __m256i sign = _mm256_set1_epi32((int)0x80000000u);
    const __m512i low = _mm512_set1_epi64(0xFFFFFFFFll);
    const int nb = (n + 7) / 8;
    for (int64_t r = 0; r < done; r += 8) {
        sn_load_rows(src + r * src_so * es, src_so, src_end, raw, n, es);
        SN_UNROLL
        for (int j = 0; j < n; ++j) {
            const __m256i k = _mm256_xor_si256(sn_key(dtype, raw[j], flip), sign); /* unsigned order */
            w[j] = _mm512_or_si512(_mm512_slli_epi64(_mm512_cvtepu32_epi64(k), 32),
                                   _mm512_set1_epi64(j));
        }
        SN_UNROLL
        for (int c = SN_AT[n]; c < SN_AT[n + 1]; ++c) {
            const int a = SN_PAIRS[c][0], b = SN_PAIRS[c][1];
            const __m512i lo = _mm512_min_epu64(w[a], w[b]);
            w[b] = _mm512_max_epu64(w[a], w[b]);
            w[a] = lo;
        }
        /* rows back: row l's words of block bl in rv[l][bl] */
        __m512i rv[8][2];
        SN_UNROLL
        for (int bl = 0; bl < nb; ++bl) {
            __m512i v[8];
            SN_UNROLL
            for (int c = 0; c < 8; ++c) v[c] = 8 * bl + c < n ? w[8 * bl + c] : _mm512_setzero_si512();
            sn_transpose8_epi64(v);
            SN_UNROLL
            for (int l = 0; l < 8; ++l) rv[l][bl] = v[l];
        }
        /* rows written in order: a row's overhang lands on later rows */
        SN_UNROLL
        for (int l = 0; l < 8; ++l) {
            const int64_t row = r + l;
            const __m512i a0 = _mm512_and_si512(rv[l][0], low);
            const __m512i a1 = nb == 2 ? _mm512_and_si512(rv[l][1], low) : _mm512_setzero_si512();
            if (indices) {
                int64_t *q = indices + row * n;
                if (nb == 1) {
                    sn_store512(q, inds_end, a0, 8);
                } else {
                    _mm512_storeu_si512((void *)q, a0);
                    sn_store512(q + 8, inds_end, a1, 8);
                }
            }
            if (values && es == 4) {
                const __m512i at = _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi64_epi32(a0)),
                                                      _mm512_cvtepi64_epi32(a1), 1);
                const char *p = src + row * src_so * 4;
                const __m512i own = src_end - p >= 64
                                        ? _mm512_loadu_si512((const void *)p)
                                        : _mm512_maskz_loadu_epi32((__mmask16)((1u << n) - 1u), (const void *)p);
                char *q = values + row * n * 4;
                sn_store512(q, vals_end, _mm512_permutexvar_epi32(at, own), 4);
            }
            if (values && es == 2) {
                const __m256i at = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm512_cvtepi64_epi16(a0)),
                                                           _mm512_cvtepi64_epi16(a1), 1);
                const char *p = src + row * src_so * 2;
                const __m256i own = src_end - p >= 32
                                        ? _mm256_loadu_si256((const __m256i *)(const void *)p)
                                        : _mm256_maskz_loadu_epi16((__mmask16)((1u << n) - 1u), (const void *)p);
                sn_store_h16(values + row * n * 2, vals_end, _mm256_permutexvar_epi16(at, own));
            }
        }
    }
}
#endif

/* Rows: outer rows of n contiguous elements (src_so apart), written back
 * to back, eight at a time.  Returns the number of rows done (a multiple
 * of 8).  (One function per element size: the 32-bit rows' code in one
 * function with the 16-bit ones' measured 0.88-0.95x at 12..16.) */
#define SN_DEFINE_SORT_ROWS(BITS)                                                                  \
    static int64_t sn_sort_rows##BITS(int dtype, const void *src, int64_t outer, int n,           \
                                    int64_t src_so, void *values, int64_t *indices, int descending) \
    {                                                                                              \
        const __m256i flip = _mm256_set1_epi32(descending ? -1 : 0);                              \
        const int64_t done = outer & ~(int64_t)7;                                                  \
        switch (n) {                                                                               \
        SN_LENGTHS(SN_ROWS_CASE##BITS)                                                             \
        default: return 0;                                                                         \
        }                                                                                          \
        return done;                                                                               \
    }
/* (BITS / 8: the element size in bytes) */
#if defined(__AVX512F__)
#define SN_ROWS_CASE(N, BITS)                                                                      \
    case N:                                                                                        \
        if (N >= SN_WORDS_MIN_N)                                                                   \
            sn_rows_words_n(dtype, (const char *)src, outer, done, src_so, (char *)values, indices, flip, N, BITS / 8); \
        else                                                                                       \
            sn_rows_n(dtype, (const char *)src, outer, done, src_so, (char *)values, indices, flip, N, BITS / 8); \
        break;
#else
#define SN_ROWS_CASE(N, BITS)                                                                      \
    case N:                                                                                        \
        sn_rows_n(dtype, (const char *)src, outer, done, src_so, (char *)values, indices, flip, N, BITS / 8); \
        break;
#endif
#define SN_ROWS_CASE32(N) SN_ROWS_CASE(N, 32)
#define SN_ROWS_CASE16(N) SN_ROWS_CASE(N, 16)
SN_DEFINE_SORT_ROWS(32)
SN_DEFINE_SORT_ROWS(16)
#undef SN_DEFINE_SORT_ROWS
#undef SN_ROWS_CASE
#undef SN_ROWS_CASE32
#undef SN_ROWS_CASE16

static int64_t sn_sort_rows(int dtype, const void *src, int64_t outer, int n, int64_t src_so,
                            void *values, int64_t *indices, int descending)
{
    return KWK_DTYPES[dtype].elem_size == 2
               ? sn_sort_rows16(dtype, src, outer, n, src_so, values, indices, descending)
               : sn_sort_rows32(dtype, src, outer, n, src_so, values, indices, descending);
}

#undef SN_LENGTHS
#undef SN_UNROLL
#undef SN_INLINE
#endif /* __AVX2__ */
#endif
