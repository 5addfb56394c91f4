/*
 * keys.h - order-preserving unsigned keys for every element type.
 *
 * key(a) < key(b) exactly when torch's ascending comparator puts a before b:
 * -inf < ... < -0.0 == +0.0 < ... < +inf < NaN, every NaN equal.  So -0.0
 * maps to +0.0's key and every NaN to the largest key of its width.  Sorting
 * keys never loses a value: outputs are gathered from the source by index,
 * bits and all.  Descending order is the bitwise NOT of the key (NaN first).
 */
#ifndef KWK_KEYS_H
#define KWK_KEYS_H

#include <stdint.h>
#include <string.h>
#include "../include/kwker.h"

typedef struct {
    int elem_size;   /* bytes per element */
    int key_bits;    /* width of the order key */
    int is_float;    /* has NaN */
} kwk_dtype_info;

static const kwk_dtype_info KWK_DTYPES[KWK_NUM_DTYPES] = {
    [KWK_BOOL] = {1, 8, 0},     [KWK_UINT8] = {1, 8, 0},
    [KWK_INT8] = {1, 8, 0},     [KWK_INT16] = {2, 16, 0},
    [KWK_INT32] = {4, 32, 0},   [KWK_INT64] = {8, 64, 0},
    [KWK_UINT16] = {2, 16, 0},  [KWK_UINT32] = {4, 32, 0},
    [KWK_UINT64] = {8, 64, 0},  [KWK_FLOAT16] = {2, 16, 1},
    [KWK_BFLOAT16] = {2, 16, 1}, [KWK_FLOAT32] = {4, 32, 1},
    [KWK_FLOAT64] = {8, 64, 1},
};

static inline uint64_t kwk_width_mask(int bits)
{
    return bits >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << bits) - 1);
}

/* IEEE binary formats share one rule: NaN -> all ones, -0 -> +0, negative
 * numbers reversed below the positives.  Written without branches so the
 * gather loops vectorise (the only definition: every kernel uses these). */
#define KWK_FLOAT_KEY(UT, b, SIGN, INF)                                       \
    UT a_ = (UT)((b) & (UT)~(UT)(SIGN));                                      \
    UT v_ = (UT)((b) & (UT)((UT)0 - (UT)(a_ != 0))); /* -0 -> +0; a mask,  \
                                 not a select: gcc made that a branch */     \
    UT neg_ = (UT)((UT)0 - (UT)(v_ >> (sizeof(UT) * 8 - 1)));                 \
    UT k_ = (UT)(v_ ^ (UT)(neg_ | (UT)(SIGN)));                               \
    return a_ > (UT)(INF) ? (UT)~(UT)0 : k_;

static inline uint16_t kwk_key_f16(uint16_t b) { KWK_FLOAT_KEY(uint16_t, b, 0x8000u, 0x7C00u) }
static inline uint16_t kwk_key_bf16(uint16_t b) { KWK_FLOAT_KEY(uint16_t, b, 0x8000u, 0x7F80u) }
static inline uint32_t kwk_key_f32(uint32_t b) { KWK_FLOAT_KEY(uint32_t, b, 0x80000000u, 0x7F800000u) }
static inline uint64_t kwk_key_f64(uint64_t b)
{
    KWK_FLOAT_KEY(uint64_t, b, 0x8000000000000000ull, 0x7FF0000000000000ull)
}

#if defined(__AVX2__)
#include <immintrin.h>
/* kwk_key_f32 of eight raw lanes at once (NaN all ones, -0 as +0). */
static inline __m256i kwk_keys8_f32(__m256i b)
{
    const __m256i sign = _mm256_set1_epi32((int)0x80000000u);
    const __m256i a = _mm256_andnot_si256(sign, b);
    const __m256i v = _mm256_andnot_si256(_mm256_cmpeq_epi32(a, _mm256_setzero_si256()), b);
    const __m256i k = _mm256_xor_si256(v, _mm256_or_si256(_mm256_srai_epi32(v, 31), sign));
    return _mm256_or_si256(k, _mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x7F800000)));
}

/* kwk_key_f16 (inf 0x7C00) or kwk_key_bf16 (inf 0x7F80) of sixteen raw
 * 16-bit lanes at once. */
static inline __m256i kwk_keys16_h16(__m256i b, int inf)
{
    const __m256i sign = _mm256_set1_epi16((short)0x8000);
    const __m256i a = _mm256_andnot_si256(sign, b);
    const __m256i v = _mm256_andnot_si256(_mm256_cmpeq_epi16(a, _mm256_setzero_si256()), b);
    const __m256i k = _mm256_xor_si256(v, _mm256_or_si256(_mm256_srai_epi16(v, 15), sign));
    /* a <= 0x7FFF: the signed compare is the unsigned one */
    return _mm256_or_si256(k, _mm256_cmpgt_epi16(a, _mm256_set1_epi16((short)inf)));
}

/* kwk_key_f64 of four raw lanes (AVX2 has no 64-bit arithmetic shift: the
 * sign mask by a compare). */
static inline __m256i kwk_keys4_f64(__m256i b)
{
    const __m256i sign = _mm256_set1_epi64x((long long)0x8000000000000000ull);
    const __m256i a = _mm256_andnot_si256(sign, b);
    const __m256i v = _mm256_andnot_si256(_mm256_cmpeq_epi64(a, _mm256_setzero_si256()), b);
    const __m256i neg = _mm256_cmpgt_epi64(_mm256_setzero_si256(), v);
    const __m256i k = _mm256_xor_si256(v, _mm256_or_si256(neg, sign));
    return _mm256_or_si256(k, _mm256_cmpgt_epi64(a, _mm256_set1_epi64x(0x7FF0000000000000ll)));
}

/* The smallest of lo's lanes and the largest of hi's, as signed 32-bit
 * (64-bit) integers: a row's key range from its running lane extremes. */
static inline void kwk_hminmax32(__m256i lo, __m256i hi, int32_t *klo, int32_t *khi)
{
    int32_t lov[8], hiv[8];
    _mm256_storeu_si256((__m256i *)lov, lo);
    _mm256_storeu_si256((__m256i *)hiv, hi);
    *klo = INT32_MAX;
    *khi = INT32_MIN;
    for (int l = 0; l < 8; ++l) {
        *klo = lov[l] < *klo ? lov[l] : *klo;
        *khi = hiv[l] > *khi ? hiv[l] : *khi;
    }
}
static inline void kwk_hminmax64(__m256i lo, __m256i hi, int64_t *klo, int64_t *khi)
{
    int64_t lov[4], hiv[4];
    _mm256_storeu_si256((__m256i *)lov, lo);
    _mm256_storeu_si256((__m256i *)hiv, hi);
    *klo = INT64_MAX;
    *khi = INT64_MIN;
    for (int l = 0; l < 4; ++l) {
        *klo = lov[l] < *klo ? lov[l] : *klo;
        *khi = hiv[l] > *khi ? hiv[l] : *khi;
    }
}

#if defined(__AVX512F__)
/* kwk_key_f64 of eight lanes. */
static inline __m512i kwk_keys8_f64(__m512i b)
{
    const __m512i sign = _mm512_set1_epi64((long long)0x8000000000000000ull);
    const __m512i a = _mm512_andnot_si512(sign, b);
    const __m512i v = _mm512_maskz_mov_epi64(_mm512_test_epi64_mask(a, a), b);
    const __m512i k = _mm512_xor_si512(v, _mm512_or_si512(_mm512_srai_epi64(v, 63), sign));
    return _mm512_mask_mov_epi64(k, _mm512_cmpgt_epu64_mask(a, _mm512_set1_epi64(0x7FF0000000000000ll)),
                                 _mm512_set1_epi64(-1));
}

/* The flipped keys of a row of len <= 8 64-bit elements (int64, uint64,
 * float64) in lanes 0..len-1, all ones in the others, read from the row
 * itself (*raw: the row's bits, 0 past len): keys just stored one by one
 * and loaded as a vector stall the load (no store forwarding from several
 * stores), which cost the short rows' ranks about a third of their time on
 * AMD Zen 4. */
static inline __m512i kwk_keys8_row64(int dtype, const char *row, int64_t step, int64_t len,
                                      uint64_t flip, __m512i *raw)
{
    const __mmask8 m = (__mmask8)((1u << len) - 1);
    __m512i b;
    if (step == 8) {
        b = _mm512_maskz_loadu_epi64(m, row);
    } else {
        const __m512i at = _mm512_set_epi64(7 * step, 6 * step, 5 * step, 4 * step, 3 * step,
                                            2 * step, step, 0);
        b = _mm512_mask_i64gather_epi64(_mm512_setzero_si512(), m, at, (const void *)row, 1);
    }
    *raw = b;
    if (dtype == KWK_FLOAT64) b = kwk_keys8_f64(b);
    else if (dtype == KWK_INT64) b = _mm512_xor_si512(b, _mm512_set1_epi64((long long)0x8000000000000000ull));
    return _mm512_mask_xor_epi64(_mm512_set1_epi64(-1), m, b, _mm512_set1_epi64((long long)flip));
}

/* The stable ranks of the first len <= 8 keys (kwk_keys8_row64's lanes):
 * lane i's rank counts the lanes j < len before it in (key, lane) order, so
 * lanes 0..len-1 rank 0..len-1 (all-ones lanes past a row sort after it;
 * their own ranks are not used).  *tied: whether two of the len keys are
 * equal. */
static inline __m512i kwk_ranks8_u64(__m512i k, int64_t len, int *tied)
{
    const __m512i one = _mm512_set1_epi64(1);
    const __mmask8 in_row = (__mmask8)((1u << len) - 1);
    __m512i r = _mm512_setzero_si512();
    __mmask8 tie = 0;
    for (int j = 0; j < len; ++j) {
        const __m512i kj = _mm512_permutexvar_epi64(_mm512_set1_epi64(j), k);
        const __mmask8 eq = _mm512_cmpeq_epu64_mask(kj, k);
        const __mmask8 before = _mm512_cmplt_epu64_mask(kj, k) | (eq & (__mmask8)(0xFEu << j));
        tie |= eq & in_row & (__mmask8)~(1u << j);
        r = _mm512_mask_add_epi64(r, before, r, one);
    }
    *tied = tie != 0;
    return r;
}

/* The order of a row of len <= 8 from its ranks (kwk_ranks8_u64): lane p
 * holds the lane whose rank is p, for p < len (the others: garbage). */
static inline __m512i kwk_order8_u64(__m512i r, int64_t len)
{
    const __m512i lane = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0);
    __m512i ord = lane;
    for (int i = 0; i < len; ++i) {
        const __m512i ri = _mm512_permutexvar_epi64(_mm512_set1_epi64(i), r);
        ord = _mm512_mask_mov_epi64(ord, _mm512_cmpeq_epi64_mask(ri, lane), _mm512_set1_epi64(i));
    }
    return ord;
}

/* kwk_keys8_f32 of sixteen lanes. */
static inline __m512i kwk_keys16_f32(__m512i b)
{
    const __m512i sign = _mm512_set1_epi32((int)0x80000000u);
    const __m512i a = _mm512_andnot_si512(sign, b);
    const __m512i v = _mm512_maskz_mov_epi32(_mm512_test_epi32_mask(a, a), b);
    const __m512i k = _mm512_xor_si512(v, _mm512_or_si512(_mm512_srai_epi32(v, 31), sign));
    return _mm512_mask_mov_epi32(k, _mm512_cmpgt_epu32_mask(a, _mm512_set1_epi32(0x7F800000)),
                                 _mm512_set1_epi32(-1));
}
#endif

/* The largest of eight floats holding no NaN (callers test for NaN apart;
 * of two equal zeros either may come back). */
static inline float kwk_hmax8_ps(__m256 m)
{
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_max_ss(h, _mm_movehdup_ps(h)));
}
#endif

/* The key of element `p` of type `dtype` (unaligned-safe loads). */
static inline uint64_t kwk_key_at(int dtype, const char *p)
{
    switch (dtype) {
    case KWK_BOOL: return (uint8_t)(*(const uint8_t *)p != 0);
    case KWK_UINT8: return *(const uint8_t *)p;
    case KWK_INT8: return (uint8_t)(*(const uint8_t *)p ^ 0x80u);
    case KWK_INT16: { uint16_t v; memcpy(&v, p, 2); return (uint16_t)(v ^ 0x8000u); }
    case KWK_UINT16: { uint16_t v; memcpy(&v, p, 2); return v; }
    case KWK_FLOAT16: { uint16_t v; memcpy(&v, p, 2); return kwk_key_f16(v); }
    case KWK_BFLOAT16: { uint16_t v; memcpy(&v, p, 2); return kwk_key_bf16(v); }
    case KWK_INT32: { uint32_t v; memcpy(&v, p, 4); return v ^ 0x80000000u; }
    case KWK_UINT32: { uint32_t v; memcpy(&v, p, 4); return v; }
    case KWK_FLOAT32: { uint32_t v; memcpy(&v, p, 4); return kwk_key_f32(v); }
    case KWK_INT64: { uint64_t v; memcpy(&v, p, 8); return v ^ 0x8000000000000000ull; }
    case KWK_UINT64: { uint64_t v; memcpy(&v, p, 8); return v; }
    case KWK_FLOAT64: { uint64_t v; memcpy(&v, p, 8); return kwk_key_f64(v); }
    default: return 0;
    }
}

/* Fill keys[j] for j < len from a strided row, flipped by `flip` (0 for
 * ascending, the width mask for descending).  Returns min and max keys.  The
 * switch sits outside the loops so each loop is specialised: the minimum and
 * maximum run in the key's own width (KT), and contiguous rows get a loop of
 * their own with a constant step, so that the AVX2 build vectorises them
 * (with 64-bit accumulators for every width, the loops stayed scalar:
 * 1.7-2.5 ns an element for float32 and bfloat16 rows, against 0.2-0.4). */
#define KWK_GATHER_BODY(KT, ES, LOAD)                                         \
    for (int64_t j = 0; j < len; ++j) {                                       \
        const char *p = row + j * (ES);                                       \
        const KT k = (KT)((KT)(LOAD) ^ fl);                                   \
        keys[j] = k;                                                          \
        l = k < l ? k : l;                                                    \
        h = k > h ? k : h;                                                    \
    }
#define KWK_GATHER_LOOP(KT, LOAD)                                             \
    do {                                                                      \
        const KT fl = (KT)flip;                                               \
        KT l = (KT)~(KT)0, h = 0;                                             \
        if (step == (int64_t)KWK_DTYPES[dtype].elem_size) {                   \
            const int64_t es_ = KWK_DTYPES[dtype].elem_size;                  \
            switch (es_) {                                                    \
            case 1: KWK_GATHER_BODY(KT, 1, LOAD) break;                       \
            case 2: KWK_GATHER_BODY(KT, 2, LOAD) break;                       \
            case 4: KWK_GATHER_BODY(KT, 4, LOAD) break;                       \
            default: KWK_GATHER_BODY(KT, 8, LOAD) break;                      \
            }                                                                 \
        } else {                                                              \
            KWK_GATHER_BODY(KT, step, LOAD)                                   \
        }                                                                     \
        lo = l;                                                               \
        hi = h;                                                               \
    } while (0)

static inline void kwk_gather_keys(int dtype, const char *row, int64_t len,
                                   int64_t step, uint64_t flip, uint64_t *keys,
                                   uint64_t *min_key, uint64_t *max_key)
{
    uint64_t lo = ~(uint64_t)0, hi = 0;
    switch (dtype) {
    case KWK_BOOL: KWK_GATHER_LOOP(uint8_t, *(const uint8_t *)p != 0); break;
    case KWK_UINT8: KWK_GATHER_LOOP(uint8_t, *(const uint8_t *)p); break;
    case KWK_INT8: KWK_GATHER_LOOP(uint8_t, *(const uint8_t *)p ^ 0x80u); break;
    case KWK_INT16: KWK_GATHER_LOOP(uint16_t, kwk_key_at(KWK_INT16, p)); break;
    case KWK_UINT16: KWK_GATHER_LOOP(uint16_t, kwk_key_at(KWK_UINT16, p)); break;
    case KWK_FLOAT16: KWK_GATHER_LOOP(uint16_t, kwk_key_at(KWK_FLOAT16, p)); break;
    case KWK_BFLOAT16: KWK_GATHER_LOOP(uint16_t, kwk_key_at(KWK_BFLOAT16, p)); break;
    case KWK_INT32: KWK_GATHER_LOOP(uint32_t, kwk_key_at(KWK_INT32, p)); break;
    case KWK_UINT32: KWK_GATHER_LOOP(uint32_t, kwk_key_at(KWK_UINT32, p)); break;
    case KWK_FLOAT32: KWK_GATHER_LOOP(uint32_t, kwk_key_at(KWK_FLOAT32, p)); break;
    case KWK_INT64: KWK_GATHER_LOOP(uint64_t, kwk_key_at(KWK_INT64, p)); break;
    case KWK_UINT64: KWK_GATHER_LOOP(uint64_t, kwk_key_at(KWK_UINT64, p)); break;
    case KWK_FLOAT64: KWK_GATHER_LOOP(uint64_t, kwk_key_at(KWK_FLOAT64, p)); break;
    default: break;
    }
    *min_key = lo;
    *max_key = hi;
}
#undef KWK_GATHER_LOOP
#undef KWK_GATHER_BODY

/* Copy one element's bytes. */
static inline void kwk_copy_elem(char *dst, const char *src, int size)
{
    switch (size) {
    case 1: *dst = *src; break;
    case 2: memcpy(dst, src, 2); break;
    case 4: memcpy(dst, src, 4); break;
    default: memcpy(dst, src, 8); break;
    }
}

static inline int kwk_bits_for(uint64_t v) /* bits needed to hold v */
{
    /* a count of leading zeros, not a loop of shifts: the loop's 64 steps
     * for a full-range key span were a quarter of a values-only sort's
     * key pass on rows of 64 */
    return v ? 64 - __builtin_clzll(v) : 0;
}

#endif
