/*
 * select_words.h - building blocks of the selection kernels (topk, median):
 * keys at their native width, computed block by block, and the selections
 * that run over them.
 *
 *  - Key gathers: sw_gather_<dtype> turns a (possibly strided) run of
 *    elements into order keys of the dtype's own width (uint8/16/32/64),
 *    branch-free so the compiler vectorises the contiguous case.  Same
 *    order as keys.h (NaN largest, -0 == +0), optionally flipped.
 *  - Streaming selections for topk with small k over long rows: the row is
 *    read once in blocks; a block whose keys are all >= the current k-th
 *    best key is skipped after one (vectorised) comparison, and only the
 *    few keys that beat it are inserted.
 *      * sw_heap_torch: std::partial_sort's heap select, move for move
 *        (libstdc++: make_heap of the first k, an element enters only when
 *        it compares strictly before the heap top, then sort_heap), so the
 *        output is torch's exact order, ties included.
 *      * sw_heap_stable / sw_list_stable: the k smallest (key, index)
 *        pairs.  Elements arrive in index order, so a newcomer equal to the
 *        current k-th key never enters: the skip test is the same strict
 *        comparison.
 *  - Rank selection (median): the element at stable rank r of a key array.
 *    A sorted sample brackets the rank between two keys; one branch-free
 *    pass counts the keys below the bracket and compacts those inside it
 *    (in index order); repeat on the survivors.  Keys equal across the
 *    whole bracket are resolved by index order directly.
 *
 * Everything is static; included by select_kernels.h once per target.
 */
#ifndef KWK_SELECT_WORDS_H
#define KWK_SELECT_WORDS_H

#include <stdint.h>
#include <string.h>
#include "row_io.h"
#include "compress_lut.h"
#include "torch_order.h"
#include "simd_qsort.h"

/* Keys are gathered SW_BLOCK at a time into a small buffer. */
enum { SW_BLOCK = 64 };
/* Sets at most this large are finished by an insertion sort. */
enum { SW_SMALL = 32 };
/* Streaming top-m keeps a sorted list up to this size, a heap above it. */
enum { SW_LIST_MAX = 16 };
/* Lanes of the lane-minimum threshold: m <= SW_LANES. */
enum { SW_LANES = 16 };

/* ------------------------------------------------------------ keys */

/* Keys at each dtype's own width (keys.h defines the float ones). */
static inline uint8_t sk_bool(uint8_t b) { return (uint8_t)(b != 0); }
static inline uint8_t sk_u8(uint8_t b) { return b; }
static inline uint8_t sk_i8(uint8_t b) { return (uint8_t)(b ^ 0x80u); }
static inline uint16_t sk_u16(uint16_t b) { return b; }
static inline uint16_t sk_i16(uint16_t b) { return (uint16_t)(b ^ 0x8000u); }
static inline uint16_t sk_f16(uint16_t b) { return kwk_key_f16(b); }
static inline uint16_t sk_bf16(uint16_t b) { return kwk_key_bf16(b); }
static inline uint32_t sk_u32(uint32_t b) { return b; }
static inline uint32_t sk_i32(uint32_t b) { return b ^ 0x80000000u; }
static inline uint32_t sk_f32(uint32_t b) { return kwk_key_f32(b); }
static inline uint64_t sk_u64(uint64_t b) { return b; }
static inline uint64_t sk_i64(uint64_t b) { return b ^ 0x8000000000000000ull; }
static inline uint64_t sk_f64(uint64_t b) { return kwk_key_f64(b); }

/* out[j] = key(element j) ^ flip for j < n; step in bytes. */
#define SW_DEFINE_GATHER(NAME, UT, KEY)                                       \
    static void NAME(const char *row, int64_t step, int64_t n, UT flip, UT *out) \
    {                                                                         \
        if (step == (int64_t)sizeof(UT)) {                                    \
            for (int64_t j = 0; j < n; ++j) {                                 \
                UT v;                                                         \
                memcpy(&v, row + j * (int64_t)sizeof(UT), sizeof(UT));        \
                out[j] = (UT)(KEY(v) ^ flip);                                 \
            }                                                                 \
        } else {                                                              \
            for (int64_t j = 0; j < n; ++j) {                                 \
                UT v;                                                         \
                memcpy(&v, row + j * step, sizeof(UT));                       \
                out[j] = (UT)(KEY(v) ^ flip);                                 \
            }                                                                 \
        }                                                                     \
    }

SW_DEFINE_GATHER(sw_gather_bool, uint8_t, sk_bool)
SW_DEFINE_GATHER(sw_gather_u8, uint8_t, sk_u8)
SW_DEFINE_GATHER(sw_gather_i8, uint8_t, sk_i8)
SW_DEFINE_GATHER(sw_gather_u16, uint16_t, sk_u16)
SW_DEFINE_GATHER(sw_gather_i16, uint16_t, sk_i16)
SW_DEFINE_GATHER(sw_gather_f16, uint16_t, sk_f16)
SW_DEFINE_GATHER(sw_gather_bf16, uint16_t, sk_bf16)
SW_DEFINE_GATHER(sw_gather_u32, uint32_t, sk_u32)
SW_DEFINE_GATHER(sw_gather_i32, uint32_t, sk_i32)
#if defined(__AVX2__)
SW_DEFINE_GATHER(sw_gather_f32_scalar, uint32_t, sk_f32)
/* float32 keys eight at a time (the scalar key's branches keep the
 * compiler from vectorising it): the selections' block loads of rows in
 * cache, 14-17% of a kthvalue of 10^4-10^5 floats */
static void sw_gather_f32(const char *row, int64_t step, int64_t n, uint32_t flip, uint32_t *out)
{
    int64_t j = 0;
    if (step == 4) {
#if defined(__AVX512F__)
        /* 16 at a time: the threshold topk's key pass, 0.92-0.96x with 8 */
        const __m512i f16 = _mm512_set1_epi32((int)flip);
        for (; j + 16 <= n; j += 16)
            _mm512_storeu_si512(out + j, _mm512_xor_si512(kwk_keys16_f32(_mm512_loadu_si512(row + 4 * j)), f16));
#endif
        const __m256i f = _mm256_set1_epi32((int)flip);
        for (; j + 8 <= n; j += 8) {
            const __m256i b = _mm256_loadu_si256((const __m256i *)(const void *)(row + 4 * j));
            _mm256_storeu_si256((__m256i *)(void *)(out + j), _mm256_xor_si256(kwk_keys8_f32(b), f));
        }
    }
    sw_gather_f32_scalar(row + j * step, step, n - j, flip, out + j);
}
#else
SW_DEFINE_GATHER(sw_gather_f32, uint32_t, sk_f32)
#endif
SW_DEFINE_GATHER(sw_gather_u64, uint64_t, sk_u64)
SW_DEFINE_GATHER(sw_gather_i64, uint64_t, sk_i64)
SW_DEFINE_GATHER(sw_gather_f64, uint64_t, sk_f64)

/* ------------------------------------------------------------ heaps */

/* libstdc++'s max-heap (__adjust_heap / __push_heap / make_heap /
 * sort_heap) over records, under a LESS given as a macro.  KEY: compare by
 * key alone (torch); KI: by (key, index) (stable). */
#define SW_LESS_KEY(a, b) ((a).key < (b).key)
#define SW_LESS_KI(a, b) ((a).key < (b).key || ((a).key == (b).key && (a).idx < (b).idx))

#define SW_DEFINE_HEAP(SUF, LESS)                                             \
    static inline void sw_push_heap_##SUF(kwk_kv *h, int64_t hole, int64_t top, kwk_kv v) \
    {                                                                         \
        int64_t parent = (hole - 1) / 2;                                      \
        while (hole > top && LESS(h[parent], v)) {                            \
            h[hole] = h[parent];                                              \
            hole = parent;                                                    \
            parent = (hole - 1) / 2;                                          \
        }                                                                     \
        h[hole] = v;                                                          \
    }                                                                         \
    static void sw_adjust_heap_##SUF(kwk_kv *h, int64_t hole, int64_t len, kwk_kv v) \
    {                                                                         \
        const int64_t top = hole;                                             \
        int64_t child = hole;                                                 \
        while (child < (len - 1) / 2) {                                       \
            child = 2 * (child + 1);                                          \
            /* the next level's four slots, fetched while this one is       \
             * compared (the descent is bound by load latency) */            \
            if (2 * child + 2 < len) {                                        \
                __builtin_prefetch(h + 2 * child - 1);                        \
                __builtin_prefetch(h + 2 * child + 2);                        \
            }                                                                 \
            child -= (int64_t)(LESS(h[child], h[child - 1])); /* no branch */  \
            h[hole] = h[child];                                               \
            hole = child;                                                     \
        }                                                                     \
        if ((len & 1) == 0 && child == (len - 2) / 2) {                       \
            child = 2 * (child + 1);                                          \
            h[hole] = h[child - 1];                                           \
            hole = child - 1;                                                 \
        }                                                                     \
        sw_push_heap_##SUF(h, hole, top, v);                                  \
    }                                                                         \
    static void sw_make_heap_##SUF(kwk_kv *h, int64_t len)                    \
    {                                                                         \
        if (len < 2) return;                                                  \
        for (int64_t parent = (len - 2) / 2;; --parent) {                     \
            sw_adjust_heap_##SUF(h, parent, len, h[parent]);                  \
            if (parent == 0) return;                                          \
        }                                                                     \
    }                                                                         \
    static void sw_sort_heap_##SUF(kwk_kv *h, int64_t len)                    \
    {                                                                         \
        while (len > 1) {                                                     \
            --len;                                                            \
            kwk_kv v = h[len];                                                \
            h[len] = h[0];                                                    \
            sw_adjust_heap_##SUF(h, 0, len, v);                               \
        }                                                                     \
    }

SW_DEFINE_HEAP(key, SW_LESS_KEY)
SW_DEFINE_HEAP(ki, SW_LESS_KI)

/* Stable insertion sort of records by key (records in index order stay in
 * index order among equal keys). */
static void sw_insertion_sort_kv(kwk_kv *a, int64_t n)
{
    for (int64_t i = 1; i < n; ++i) {
        kwk_kv v = a[i];
        int64_t j = i;
        while (j > 0 && a[j - 1].key > v.key) {
            a[j] = a[j - 1];
            --j;
        }
        a[j] = v;
    }
}

/* Insertion sort of unique words. */
static void sw_sort_words(uint64_t *a, int64_t n)
{
    for (int64_t i = 1; i < n; ++i) {
        uint64_t v = a[i];
        int64_t j = i;
        while (j > 0 && a[j - 1] > v) {
            a[j] = a[j - 1];
            --j;
        }
        a[j] = v;
    }
}

/* h[0..m) = the m smallest of n unique words key << 32 | index, in order,
 * as records (m <= SW_LANES <= n). */
static void sw_smallest_words(const uint64_t *w, int64_t n, int64_t m, kwk_kv *h)
{
    /* a sorted register file b[0..m): each word sinks through it with
     * min/max pairs, no data-dependent branch */
    uint64_t b[SW_LANES];
    for (int64_t i = 0; i < m; ++i) b[i] = ~(uint64_t)0;
    for (int64_t j = 0; j < n; ++j) {
        uint64_t x = w[j];
        for (int64_t i = 0; i < m; ++i) {
            const uint64_t y = b[i];
            b[i] = y < x ? y : x;
            x = y < x ? x : y;
        }
    }
    for (int64_t i = 0; i < m; ++i) {
        h[i].key = b[i] >> 32;
        h[i].idx = (int64_t)(b[i] & 0xFFFFFFFFu);
    }
}

/* -------------------------------------------- streaming selections */

/* ------------------------------------------------- raw-value block skip */

/* For the streaming selections over contiguous float rows: the elements of
 * a block (bit i: element i; n <= SW_BLOCK) whose flipped key may be below
 * thr, decided on the raw values against the threshold's value (no key
 * gather, which costs several times the compare; the caller gathers the
 * keys of the few it returns).  The float compares agree with the key order
 * (NaN largest, -0 == +0): for the largest (flip set) an element can enter
 * when !(v <= t), i.e. v > t or v is NaN; for the smallest when v < t.  A
 * NaN threshold returns every element (the caller compares their keys).
 * AVX2 compares whole vectors: a call that returned a yes/no and then
 * gathered the 64 keys of every block it could not skip, to find the few
 * below thr, spent a third of the streamed heap select's time there
 * (256x32768 float32, k = 32). */
#define SW_DEFINE_BEATS(NAME, UT, FT, SIGN, LOAD, SIMD)                       \
    static uint64_t NAME(const char *row, int64_t n, UT thr, UT flip)         \
    {                                                                         \
        const uint64_t every = n >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << n) - 1); \
        const UT k = (UT)(thr ^ flip);                                        \
        if (k == (UT)~(UT)0) return every;                                    \
        const UT tb = (k & (UT)(SIGN)) ? (UT)(k ^ (UT)(SIGN)) : (UT)~k;       \
        const FT t = LOAD(&tb);                                               \
        SIMD                                                                  \
        uint64_t m = 0;                                                       \
        if (flip) {                                                           \
            for (int64_t j = 0; j < n; ++j)                                   \
                m |= (uint64_t)!(LOAD(row + j * (int64_t)sizeof(UT)) <= t) << j; \
        } else {                                                              \
            for (int64_t j = 0; j < n; ++j)                                   \
                m |= (uint64_t)(LOAD(row + j * (int64_t)sizeof(UT)) < t) << j; \
        }                                                                     \
        return m;                                                             \
    }

static inline float sw_load_f32(const void *p) { float v; memcpy(&v, p, 4); return v; }
static inline double sw_load_f64(const void *p) { double v; memcpy(&v, p, 8); return v; }
static inline float sw_load_bf16(const void *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    const uint32_t w = (uint32_t)h << 16; /* bfloat16 is float32's top half */
    float v;
    memcpy(&v, &w, 4);
    return v;
}

#if defined(__AVX2__)
#include <immintrin.h>
/* A whole block: LANES elements per vector (VT) v = LOADV(row, i) compared with
 * CMP against the threshold vector (v > t or unordered for the largest,
 * v < t ordered for the smallest). */
#define SW_BEATS_SIMD(LANES, VT, SET1, CMP, MOVEMASK, LOADV)                  \
    if (n == SW_BLOCK) {                                                      \
        const int pred_largest = flip != 0;                                   \
        const VT tv = SET1(t);                                                \
        uint64_t m = 0;                                                       \
        if (pred_largest) {                                                   \
            for (int i = 0; i < SW_BLOCK; i += LANES)                         \
                m |= (uint64_t)(unsigned)MOVEMASK(CMP(LOADV(row, i), tv, _CMP_NLE_UQ)) << i; \
        } else {                                                              \
            for (int i = 0; i < SW_BLOCK; i += LANES)                         \
                m |= (uint64_t)(unsigned)MOVEMASK(CMP(LOADV(row, i), tv, _CMP_LT_OQ)) << i; \
        }                                                                     \
        return m;                                                             \
    }
#define SW_LOADV_F32(row, i) _mm256_loadu_ps((const float *)(row + 4 * (i)))
#define SW_LOADV_F64(row, i) _mm256_loadu_pd((const double *)(row + 8 * (i)))
/* bfloat16 widened to the float32 it is the top half of */
#define SW_LOADV_BF16(row, i)                                                 \
    _mm256_castsi256_ps(_mm256_slli_epi32(                                     \
        _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(row + 2 * (i)))), 16))
#define SW_SIMD_F32 SW_BEATS_SIMD(8, __m256, _mm256_set1_ps, _mm256_cmp_ps, _mm256_movemask_ps, SW_LOADV_F32)
#define SW_SIMD_F64 SW_BEATS_SIMD(4, __m256d, _mm256_set1_pd, _mm256_cmp_pd, _mm256_movemask_pd, SW_LOADV_F64)
#define SW_SIMD_BF16 SW_BEATS_SIMD(8, __m256, _mm256_set1_ps, _mm256_cmp_ps, _mm256_movemask_ps, SW_LOADV_BF16)
#else
#define SW_SIMD_F32
#define SW_SIMD_F64
#define SW_SIMD_BF16
#endif
SW_DEFINE_BEATS(sw_beats_f32, uint32_t, float, 0x80000000u, sw_load_f32, SW_SIMD_F32)
SW_DEFINE_BEATS(sw_beats_f64, uint64_t, double, 0x8000000000000000ull, sw_load_f64, SW_SIMD_F64)
SW_DEFINE_BEATS(sw_beats_bf16, uint16_t, float, 0x8000u, sw_load_bf16, SW_SIMD_BF16)
#undef SW_DEFINE_BEATS

/* The same test for contiguous integer rows: with s(x) the raw value as a
 * signed number of its width after flipping the sign bit where the dtype
 * is unsigned (uint8), keys order as s() does, the threshold key's s() is
 * t = key ^ sign bit, and an element may enter when s(v) > t (largest) or
 * s(v) < t (smallest): exactly the keys below thr; no NaN to mind.
 * Without it integer rows took the three passes over gathered keys
 * (topk k = 8 of int64 4x65536: 189 us where float64 took 50; int8 rows
 * with many ties, whose heap fills early, 0.84-0.89x torch).  int8,
 * uint8, int16 and int64 (int32: sw_beats_for_u32). */
#if defined(__AVX2__)
/* SW_BLOCK elements compared with the threshold vector tv (CMPGT: signed
 * compare of the width; X: the raw values' sign flip) into a bit mask */
static inline uint64_t sw_int_block_mask8(const char *row, __m256i tv, __m256i x, int largest)
{
    uint64_t m = 0;
    for (int i = 0; i < SW_BLOCK; i += 32) {
        const __m256i v = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(row + i)), x);
        const __m256i c = largest ? _mm256_cmpgt_epi8(v, tv) : _mm256_cmpgt_epi8(tv, v);
        m |= (uint64_t)(uint32_t)_mm256_movemask_epi8(c) << i;
    }
    return m;
}
/* The 32 lanes of two 16-bit compare results as 32 bits in element order
 * (packs interleaves the 128-bit halves: the permute puts them back). */
static inline uint32_t sw_mask16x2(__m256i ca, __m256i cb)
{
    return (uint32_t)_mm256_movemask_epi8(_mm256_permute4x64_epi64(_mm256_packs_epi16(ca, cb), 0xD8));
}
static inline uint64_t sw_int_block_mask16(const char *row, __m256i tv, int largest)
{
    uint64_t m = 0;
    for (int i = 0; i < SW_BLOCK; i += 32) {
        const __m256i a = _mm256_loadu_si256((const __m256i *)(row + 2 * i));
        const __m256i b = _mm256_loadu_si256((const __m256i *)(row + 2 * i + 32));
        const __m256i ca = largest ? _mm256_cmpgt_epi16(a, tv) : _mm256_cmpgt_epi16(tv, a);
        const __m256i cb = largest ? _mm256_cmpgt_epi16(b, tv) : _mm256_cmpgt_epi16(tv, b);
        m |= (uint64_t)sw_mask16x2(ca, cb) << i;
    }
    return m;
}
static inline uint64_t sw_int_block_mask64(const char *row, __m256i tv, int largest)
{
    uint64_t m = 0;
    for (int i = 0; i < SW_BLOCK; i += 4) {
        const __m256i v = _mm256_loadu_si256((const __m256i *)(row + 8 * i));
        const __m256i c = largest ? _mm256_cmpgt_epi64(v, tv) : _mm256_cmpgt_epi64(tv, v);
        m |= (uint64_t)(unsigned)_mm256_movemask_pd(_mm256_castsi256_pd(c)) << i;
    }
    return m;
}
#define SW_INT_SIMD_8(X) if (n == SW_BLOCK) return sw_int_block_mask8(row, _mm256_set1_epi8((char)t), _mm256_set1_epi8((char)(X)), flip != 0);
#define SW_INT_SIMD_16 if (n == SW_BLOCK) return sw_int_block_mask16(row, _mm256_set1_epi16(t), flip != 0);
#define SW_INT_SIMD_64 if (n == SW_BLOCK) return sw_int_block_mask64(row, _mm256_set1_epi64x(t), flip != 0);
#else
#define SW_INT_SIMD_8(X)
#define SW_INT_SIMD_16
#define SW_INT_SIMD_64
#endif
#define SW_DEFINE_INT_BEATS(NAME, UT, ST, SIGN, X, SIMD)                      \
    static uint64_t NAME(const char *row, int64_t n, UT thr, UT flip)         \
    {                                                                         \
        const ST t = (ST)(UT)((thr ^ flip) ^ (UT)(SIGN));                     \
        SIMD                                                                  \
        uint64_t m = 0;                                                       \
        for (int64_t j = 0; j < n; ++j) {                                     \
            UT b;                                                             \
            memcpy(&b, row + j * (int64_t)sizeof(UT), sizeof(UT));            \
            const ST v = (ST)(UT)(b ^ (UT)(X));                               \
            m |= (uint64_t)(flip ? v > t : v < t) << j;                       \
        }                                                                     \
        return m;                                                             \
    }
SW_DEFINE_INT_BEATS(sw_beats_i8, uint8_t, int8_t, 0x80u, 0, SW_INT_SIMD_8(0))
SW_DEFINE_INT_BEATS(sw_beats_u8, uint8_t, int8_t, 0x80u, 0x80u, SW_INT_SIMD_8(0x80))
SW_DEFINE_INT_BEATS(sw_beats_i16, uint16_t, int16_t, 0x8000u, 0, SW_INT_SIMD_16)
SW_DEFINE_INT_BEATS(sw_beats_i64, uint64_t, int64_t, 0x8000000000000000ull, 0, SW_INT_SIMD_64)
#undef SW_DEFINE_INT_BEATS

/* float16 by the same signed compare, on s(b) = key(b) ^ 0x8000 as an
 * int16 (NaN 0x7FFF, -0 as +0, negatives b ^ 0x7FFF: the key order), made
 * in the vector from the raw bits (no float16 conversion on the AVX2
 * target).  Like every block test it may return more elements than beat
 * thr, never fewer: sw_block's callers compare the keys of those it
 * returns (-0 as +0 only spares them false candidates).  Without it float16 rows took the gathered-key passes: topk
 * k = 8 of 4x65536 138 us against bfloat16's 37. */
static inline int16_t sw_f16_s(uint16_t b) { return (int16_t)(uint16_t)(sk_f16(b) ^ 0x8000u); }
static uint64_t sw_beats_f16(const char *row, int64_t n, uint16_t thr, uint16_t flip)
{
    const int16_t t = (int16_t)(uint16_t)((thr ^ flip) ^ 0x8000u);
#if defined(__AVX2__)
    if (n == SW_BLOCK) {
        const __m256i tv = _mm256_set1_epi16(t), mag = _mm256_set1_epi16(0x7FFF),
                      inf = _mm256_set1_epi16(0x7C00), zero = _mm256_setzero_si256();
        const int largest = flip != 0;
        uint64_t m = 0;
        for (int i = 0; i < SW_BLOCK; i += 32) {
            __m256i c[2];
            for (int h = 0; h < 2; ++h) {
                const __m256i b = _mm256_loadu_si256((const __m256i *)(row + 2 * (i + 16 * h)));
                const __m256i a = _mm256_and_si256(b, mag);
                const __m256i v = _mm256_andnot_si256(_mm256_cmpeq_epi16(a, zero), b);
                __m256i sv = _mm256_xor_si256(v, _mm256_and_si256(_mm256_srai_epi16(v, 15), mag));
                sv = _mm256_blendv_epi8(sv, mag, _mm256_cmpgt_epi16(a, inf)); /* NaN */
                c[h] = largest ? _mm256_cmpgt_epi16(sv, tv) : _mm256_cmpgt_epi16(tv, sv);
            }
            m |= (uint64_t)sw_mask16x2(c[0], c[1]) << i;
        }
        return m;
    }
#endif
    uint64_t m = 0;
    for (int64_t j = 0; j < n; ++j) {
        uint16_t b;
        memcpy(&b, row + 2 * j, 2);
        const int16_t v = sw_f16_s(b);
        m |= (uint64_t)(flip ? v > t : v < t) << j;
    }
    return m;
}
#undef SW_INT_SIMD_8
#undef SW_INT_SIMD_16
#undef SW_INT_SIMD_64
#undef SW_BEATS_SIMD
#undef SW_SIMD_F32
#undef SW_SIMD_F64
#undef SW_SIMD_BF16
#undef SW_LOADV_F32
#undef SW_LOADV_F64
#undef SW_LOADV_BF16

/* The key of one element of a row that has a raw-value block test (the
 * dtypes above, contiguous): computed inline for the few elements a block
 * test returns (a gather call per element cost more than the key). */
static inline uint32_t sw_raw_key_f32(const char *p) { uint32_t b; memcpy(&b, p, 4); return sk_f32(b); }
static inline uint16_t sw_raw_key_bf16(const char *p) { uint16_t b; memcpy(&b, p, 2); return sk_bf16(b); }
static inline uint64_t sw_raw_key_f64(const char *p) { uint64_t b; memcpy(&b, p, 8); return sk_f64(b); }
static inline uint64_t sw_raw_key_i64(const char *p) { uint64_t b; memcpy(&b, p, 8); return sk_i64(b); }
static inline uint16_t sw_raw_key_i16(const char *p) { uint16_t b; memcpy(&b, p, 2); return sk_i16(b); }
static inline uint16_t sw_raw_key_f16(const char *p) { uint16_t b; memcpy(&b, p, 2); return sk_f16(b); }
#define SW_RAW_KEY_u8(p) ((void)(p), (uint8_t)0) /* (8-bit keys: SW_RAW_KEY_BY_u8 below) */
#define SW_RAW_KEY_u16(p) sw_raw_key_bf16(p)
#define SW_RAW_KEY_u32(p) sw_raw_key_f32(p)
#define SW_RAW_KEY_u64(p) sw_raw_key_f64(p)
/* ... and by the block test that found it (int64 and float64 share the width) */
#define SW_RAW_KEY_BY_u8(beats, p) ((beats) == sw_beats_i8 ? sk_i8(*(const uint8_t *)(p)) : sk_u8(*(const uint8_t *)(p)))
#define SW_RAW_KEY_BY_u16(beats, p)                                           \
    ((beats) == sw_beats_i16 ? sw_raw_key_i16(p)                              \
     : (beats) == sw_beats_f16 ? sw_raw_key_f16(p) : sw_raw_key_bf16(p))
#define SW_RAW_KEY_BY_u32(beats, p) SW_RAW_KEY_u32(p)
#define SW_RAW_KEY_BY_u64(beats, p) ((beats) == sw_beats_i64 ? sw_raw_key_i64(p) : sw_raw_key_f64(p))

typedef uint64_t (*sw_beats_fn_u8)(const char *, int64_t, uint8_t, uint8_t);
typedef uint64_t (*sw_beats_fn_u16)(const char *, int64_t, uint16_t, uint16_t);
typedef uint64_t (*sw_beats_fn_u32)(const char *, int64_t, uint32_t, uint32_t);
typedef uint64_t (*sw_beats_fn_u64)(const char *, int64_t, uint64_t, uint64_t);

/* The raw-value block test for a dtype's contiguous rows (step: bytes
 * between elements), or NULL. */
static sw_beats_fn_u8 sw_beats_for_u8(int dtype, int64_t step)
{
    if (step != 1) return NULL;
    return dtype == KWK_INT8 ? sw_beats_i8 : dtype == KWK_UINT8 ? sw_beats_u8 : NULL;
}
static sw_beats_fn_u16 sw_beats_for_u16(int dtype, int64_t step)
{
    if (step != 2) return NULL;
    return dtype == KWK_BFLOAT16 ? sw_beats_bf16
           : dtype == KWK_INT16  ? sw_beats_i16
           : dtype == KWK_FLOAT16 ? sw_beats_f16 : NULL;
}
static sw_beats_fn_u32 sw_beats_for_u32(int dtype, int64_t step)
{
    /* (not int32: its rows keep the candidate passes, which measured
     * faster on distinct keys: topk k = 8 of 256x4096 278 against 468 us
     * streamed, though 1.5-2.1x slower on rows of a few thousand values) */
    return dtype == KWK_FLOAT32 && step == 4 ? sw_beats_f32 : NULL;
}
static sw_beats_fn_u64 sw_beats_for_u64(int dtype, int64_t step)
{
    if (step != 8) return NULL;
    return dtype == KWK_FLOAT64 ? sw_beats_f64 : dtype == KWK_INT64 ? sw_beats_i64 : NULL;
}

/* For each key type: the streaming selections over a row, reading keys
 * through a gather function.  `buf` holds SW_BLOCK keys. */
/* sw_below_<width>: see SW_DEFINE_STREAM.  AVX2 compares a block of 16-
 * or 32-bit keys a vector at a time (unsigned order: both sides' sign bits
 * flipped, then a signed compare); the scalar loop does not vectorise. */
#if defined(__AVX2__)
#include <immintrin.h>
static inline uint64_t sw_below_u32(const uint32_t *buf, int64_t n, uint32_t thr)
{
    if (n != SW_BLOCK) {
        uint64_t m = 0;
        for (int i = 0; i < (int)n; ++i) m |= (uint64_t)(buf[i] < thr) << i;
        return m;
    }
    const __m256i sign = _mm256_set1_epi32((int)0x80000000u);
    const __m256i t = _mm256_set1_epi32((int)(thr ^ 0x80000000u));
    uint64_t m = 0;
    for (int i = 0; i < SW_BLOCK; i += 8) {
        const __m256i v = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(buf + i)), sign);
        m |= (uint64_t)(uint32_t)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(t, v))) << i;
    }
    return m;
}
static inline uint64_t sw_below_u16(const uint16_t *buf, int64_t n, uint16_t thr)
{
    if (n != SW_BLOCK) {
        uint64_t m = 0;
        for (int i = 0; i < (int)n; ++i) m |= (uint64_t)(buf[i] < thr) << i;
        return m;
    }
    const __m256i sign = _mm256_set1_epi16((short)0x8000);
    const __m256i t = _mm256_set1_epi16((short)(thr ^ 0x8000u));
    uint64_t m = 0;
    for (int i = 0; i < SW_BLOCK; i += 32) {
        const __m256i a = _mm256_cmpgt_epi16(t, _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(buf + i)), sign));
        const __m256i b = _mm256_cmpgt_epi16(t, _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(buf + i + 16)), sign));
        /* packs interleaves the two by 128-bit lane: a0 b0 a1 b1 -> a0 a1 b0 b1 */
        const __m256i ab = _mm256_permute4x64_epi64(_mm256_packs_epi16(a, b), 0xD8);
        m |= (uint64_t)(uint32_t)_mm256_movemask_epi8(ab) << i;
    }
    return m;
}
#else
#define sw_below_u32 sw_below_scalar_u32
#define sw_below_u16 sw_below_scalar_u16
#endif
#define sw_below_u8 sw_below_scalar_u8
#define sw_below_u64 sw_below_scalar_u64

#define SW_DEFINE_STREAM(UT, SUF)                                             \
    typedef void (*sw_gather_fn_##SUF)(const char *, int64_t, int64_t, UT, UT *); \
                                                                              \
    /* The block's keys below thr as a bit mask (bit i: buf[i]; SW_BLOCK is   \
     * 64).  In a block that is not skipped a few percent of the keys are     \
     * below thr, at random places: a branch per key mispredicted on each     \
     * of them (60% of the streamed heap select's own time on 32k-wide        \
     * logit rows), and a branch-free list of positions waited on its own     \
     * count.  AVX2 compares whole vectors (sw_below_u16/u32 below). */    \
    static inline uint64_t sw_below_scalar_##SUF(const UT *buf, int64_t n, UT thr) \
    {                                                                         \
        uint64_t m = 0;                                                       \
        if (n == SW_BLOCK) {                                                  \
            for (int i = 0; i < SW_BLOCK; ++i) m |= (uint64_t)(buf[i] < thr) << i;\
        } else {                                                              \
            for (int i = 0; i < (int)n; ++i) m |= (uint64_t)(buf[i] < thr) << i;\
        }                                                                     \
        return m;                                                             \
    }                                                                         \
                                                                              \
    /* The elements j..j+b of a block that may beat thr, as a bit mask,      \
     * their keys in buf: with a raw-value test (beats), keys of those only   \
     * (all of them when many: the first blocks of a row); else every key    \
     * gathered and compared. */                                            \
    static inline uint64_t sw_block_##SUF(sw_gather_fn_##SUF g, sw_beats_fn_##SUF beats, \
                                          const char *row, int64_t step, int64_t j, \
                                          int64_t b, UT thr, UT flip, UT *buf) \
    {                                                                         \
        if (!beats) {                                                         \
            g(row + j * step, step, b, flip, buf);                            \
            return sw_below_##SUF(buf, b, thr);                               \
        }                                                                     \
        const uint64_t below = beats(row + j * step, b, thr, flip);           \
        if (__builtin_popcountll(below) > SW_BLOCK / 8) {                     \
            g(row + j * step, step, b, flip, buf);                            \
        } else {                                                              \
            for (uint64_t c = below; c; c &= c - 1) {                         \
                const int64_t i = __builtin_ctzll(c);                         \
                buf[i] = (UT)(SW_RAW_KEY_BY_##SUF(beats, row + (j + i) * step) ^ flip); \
            }                                                                 \
        }                                                                     \
        return below;                                                         \
    }                                                                         \
                                                                              \
    /* Records of the first k elements (k <= len). */                         \
    static int64_t sw_fill_##SUF(sw_gather_fn_##SUF g, const char *row, int64_t step, \
                                 int64_t k, UT flip, kwk_kv *h, UT *buf)      \
    {                                                                         \
        int64_t j = 0;                                                        \
        while (j < k) {                                                       \
            int64_t b = k - j < SW_BLOCK ? k - j : SW_BLOCK;                  \
            g(row + j * step, step, b, flip, buf);                            \
            for (int64_t i = 0; i < b; ++i) {                                 \
                h[j + i].key = buf[i];                                        \
                h[j + i].idx = j + i;                                         \
            }                                                                 \
            j += b;                                                           \
        }                                                                     \
        return j;                                                             \
    }                                                                         \
                                                                              \
    /* sw_heap_torch (below) for keys of at most 32 bits and indices below    \
     * 2^32: the heap holds words key << 32 | index in h's memory, compared   \
     * by key alone (wemu_adjust_heap: libstdc++'s moves, so the same         \
     * output), then unpacked into the records.  Half the bytes of a record   \
     * heap: a heap of 23592 (grace's 1% of 2.4M) fits in L2, and each        \
     * level of a descent reads one line. */                                  \
    static int sw_heap_torch_words_##SUF(sw_gather_fn_##SUF g, const char *row, int64_t step, \
                                         int64_t len, int64_t k, UT flip, kwk_kv *h, UT *buf, \
                                         sw_beats_fn_##SUF beats, int64_t budget) \
    {                                                                         \
        uint64_t *w = (uint64_t *)h; /* words j < k sit below records j */    \
        int64_t j = 0;                                                        \
        while (j < k) {                                                       \
            const int64_t b = k - j < SW_BLOCK ? k - j : SW_BLOCK;            \
            g(row + j * step, step, b, flip, buf);                            \
            for (int64_t i = 0; i < b; ++i) w[j + i] = (uint64_t)buf[i] << 32 | (uint64_t)(j + i); \
            j += b;                                                           \
        }                                                                     \
        wemu_make_heap(w, k, 32);                                             \
        UT thr = (UT)(w[0] >> 32);                                            \
        wemu_pipe p; /* insertions in flight: the root is final between them */ \
        wemu_pipe_init(&p, w, k, 32);                                         \
        int64_t left = budget < 0 ? INT64_MAX : budget;                       \
        while (j < len) {                                                     \
            const int64_t b = len - j < SW_BLOCK ? len - j : SW_BLOCK;        \
            uint64_t below = sw_block_##SUF(g, beats, row, step, j, b, thr, flip, buf); \
            for (; below; below &= below - 1) {                               \
                const int64_t i = __builtin_ctzll(below); /* thr may fall */  \
                if (buf[i] < thr) {                                           \
                    wemu_pipe_push(&p, (uint64_t)buf[i] << 32 | (uint64_t)(j + i)); \
                    thr = (UT)(w[0] >> 32);                                   \
                    --left;                                                   \
                }                                                             \
            }                                                                 \
            if (left < 0) return 0;                                           \
            j += b;                                                           \
        }                                                                     \
        wemu_pipe_drain(&p);                                                  \
        wemu_sort_heap(w, k, 32);                                             \
        /* last to first: record r overwrites words 2r and 2r + 1, both       \
         * already read (r < 2r), or word r itself (r = 0), read first */     \
        for (int64_t r = k - 1; r >= 0; --r) {                                \
            const uint64_t v = w[r];                                          \
            h[r].key = v >> 32;                                               \
            h[r].idx = (int64_t)(v & 0xFFFFFFFFu);                            \
        }                                                                     \
        return 1;                                                             \
    }                                                                         \
                                                                              \
    /* std::partial_sort(first, first + k, first + len) on (key, index)       \
     * records compared by key: h[0..k) gets torch's output.  0 < k <= len.  \
     * budget >= 0: give up (return 0, h undefined) once more than that many \
     * elements have entered the heap (select_kernels.h sw_heap_budget);     \
     * else 1. */                                                            \
    static int sw_heap_torch_##SUF(sw_gather_fn_##SUF g, const char *row, int64_t step, \
                                   int64_t len, int64_t k, UT flip, kwk_kv *h, UT *buf,  \
                                   sw_beats_fn_##SUF beats, int64_t budget)  \
    {                                                                         \
        if (sizeof(UT) <= 4 && len <= ((int64_t)1 << 32))                     \
            return sw_heap_torch_words_##SUF(g, row, step, len, k, flip, h, buf, beats, budget); \
        int64_t j = sw_fill_##SUF(g, row, step, k, flip, h, buf);             \
        sw_make_heap_key(h, k);                                               \
        UT thr = (UT)h[0].key;                                                \
        int64_t left = budget < 0 ? INT64_MAX : budget;                       \
        while (j < len) {                                                     \
            int64_t b = len - j < SW_BLOCK ? len - j : SW_BLOCK;              \
            uint64_t below = sw_block_##SUF(g, beats, row, step, j, b, thr, flip, buf); \
            {                                                                 \
                for (; below; below &= below - 1) {                           \
                    const int64_t i = __builtin_ctzll(below); /* thr may fall */\
                    if (buf[i] < thr) {                                       \
                        kwk_kv v = {buf[i], j + i};                           \
                        sw_adjust_heap_key(h, 0, k, v);                       \
                        thr = (UT)h[0].key;                                   \
                        --left;                                               \
                    }                                                         \
                }                                                             \
            }                                                                 \
            if (left < 0) return 0;                                           \
            j += b;                                                           \
        }                                                                     \
        sw_sort_heap_key(h, k);                                               \
        return 1;                                                             \
    }                                                                         \
                                                                              \
    /* The m smallest (key, index) records in order, m <= SW_LIST_MAX:        \
     * a sorted list.  0 < m <= len. */                                       \
    static int sw_list_stable_##SUF(sw_gather_fn_##SUF g, const char *row, int64_t step, \
                                    int64_t len, int64_t m, UT flip, kwk_kv *h, UT *buf,  \
                                    sw_beats_fn_##SUF beats, int64_t budget) \
    {                                                                         \
        int64_t j = sw_fill_##SUF(g, row, step, m, flip, h, buf);             \
        sw_insertion_sort_kv(h, m);                                           \
        UT thr = (UT)h[m - 1].key;                                            \
        int64_t left = budget < 0 ? INT64_MAX : budget;                       \
        while (j < len) {                                                     \
            int64_t b = len - j < SW_BLOCK ? len - j : SW_BLOCK;              \
            uint64_t below = sw_block_##SUF(g, beats, row, step, j, b, thr, flip, buf); \
            {                                                                 \
                for (; below; below &= below - 1) {                           \
                    const int64_t i = __builtin_ctzll(below); /* thr may fall */\
                    UT x = buf[i];                                            \
                    if (x < thr) {                                            \
                        int64_t p = m - 1;                                    \
                        while (p > 0 && (UT)h[p - 1].key > x) {               \
                            h[p] = h[p - 1];                                  \
                            --p;                                              \
                        }                                                     \
                        h[p].key = x;                                         \
                        h[p].idx = j + i;                                     \
                        thr = (UT)h[m - 1].key;                               \
                        --left;                                               \
                    }                                                         \
                }                                                             \
            }                                                                 \
            if (left < 0) return 0;                                           \
            j += b;                                                           \
        }                                                                     \
        return 1;                                                             \
    }                                                                         \
                                                                              \
    /* The m smallest (key, index) records, unordered, in a heap.             \
     * 0 < m <= len. */                                                       \
    static int sw_heap_stable_##SUF(sw_gather_fn_##SUF g, const char *row, int64_t step, \
                                    int64_t len, int64_t m, UT flip, kwk_kv *h, UT *buf,  \
                                    sw_beats_fn_##SUF beats, int64_t budget) \
    {                                                                         \
        int64_t j = sw_fill_##SUF(g, row, step, m, flip, h, buf);             \
        sw_make_heap_ki(h, m);                                                \
        UT thr = (UT)h[0].key;                                                \
        int64_t left = budget < 0 ? INT64_MAX : budget;                       \
        while (j < len) {                                                     \
            int64_t b = len - j < SW_BLOCK ? len - j : SW_BLOCK;              \
            uint64_t below = sw_block_##SUF(g, beats, row, step, j, b, thr, flip, buf); \
            {                                                                 \
                for (; below; below &= below - 1) {                           \
                    const int64_t i = __builtin_ctzll(below); /* thr may fall */\
                    if (buf[i] < thr) {                                       \
                        kwk_kv v = {buf[i], j + i};                           \
                        sw_adjust_heap_ki(h, 0, m, v);                        \
                        thr = (UT)h[0].key;                                   \
                        --left;                                               \
                    }                                                         \
                }                                                             \
            }                                                                 \
            if (left < 0) return 0;                                           \
            j += b;                                                           \
        }                                                                     \
        return 1;                                                             \
    }                                                                         \
                                                                              \
    /* Records {key, j} of a whole row, in index order. */                    \
    static void sw_records_##SUF(sw_gather_fn_##SUF g, const char *row, int64_t step, \
                                 int64_t len, UT flip, kwk_kv *kv, UT *buf)   \
    {                                                                         \
        sw_fill_##SUF(g, row, step, len, flip, kv, buf);                      \
    }

SW_DEFINE_STREAM(uint8_t, u8)
SW_DEFINE_STREAM(uint16_t, u16)
SW_DEFINE_STREAM(uint32_t, u32)
SW_DEFINE_STREAM(uint64_t, u64)

/* ------------------------------------------- in-memory top m (small m) */


#if defined(__AVX2__)
#include <immintrin.h>
#endif

/* cand[0..c) = the j < len with key[j] <= t, in index order; returns c. */
#define SW_DEFINE_COMPACT_PORTABLE(UT, SUF)                                   \
    static int64_t sw_compact_le_##SUF(const UT *key, int64_t len, UT t, int64_t *cand) \
    {                                                                         \
        int64_t c = 0;                                                        \
        for (int64_t j = 0; j < len; ++j) {                                   \
            cand[c] = j;                                                      \
            c += key[j] <= t;                                                 \
        }                                                                     \
        return c;                                                             \
    }
#if defined(__AVX2__)
/* One bit a 16-bit lane of a compare result, in lane order (pack to bytes,
 * then movemask; no pext: microcoded on AMD before Zen 3). */
static inline unsigned sw_mask16(__m256i cmp)
{
    return (unsigned)_mm_movemask_epi8(_mm_packs_epi16(_mm256_castsi256_si128(cmp),
                                                       _mm256_extracti128_si256(cmp, 1)));
}

/* The lanes' compare masks, one bit a key, then a loop over the set bits:
 * the threshold leaves a dozen candidates or so in a row of hundreds, and
 * the portable loop's store and count chain cost a cycle or two a key
 * (int64 64 x 1000, k = 8: two thirds of the kernel's time). */
#define SW_COMPACT_BITS(J, MASK)                                              \
    do {                                                                      \
        for (unsigned m_ = (MASK); m_; m_ &= m_ - 1) cand[c++] = (J) + __builtin_ctz(m_); \
    } while (0)

static int64_t sw_compact_le_u8(const uint8_t *key, int64_t len, uint8_t t, int64_t *cand)
{
    const __m256i sign = _mm256_set1_epi8((char)0x80);
    const __m256i tt = _mm256_set1_epi8((char)(t ^ 0x80u));
    int64_t c = 0, j = 0;
    for (; j + 32 <= len; j += 32) {
        const __m256i v = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(const void *)(key + j)), sign);
        SW_COMPACT_BITS(j, ~(unsigned)_mm256_movemask_epi8(_mm256_cmpgt_epi8(v, tt)));
    }
    for (; j < len; ++j) {
        cand[c] = j;
        c += key[j] <= t;
    }
    return c;
}

static int64_t sw_compact_le_u16(const uint16_t *key, int64_t len, uint16_t t, int64_t *cand)
{
    const __m256i sign = _mm256_set1_epi16((short)0x8000);
    const __m256i tt = _mm256_set1_epi16((short)(t ^ 0x8000u));
    int64_t c = 0, j = 0;
    for (; j + 16 <= len; j += 16) {
        const __m256i v = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(const void *)(key + j)), sign);
        const unsigned gt = sw_mask16(_mm256_cmpgt_epi16(v, tt));
        SW_COMPACT_BITS(j, ~gt & 0xFFFFu);
    }
    for (; j < len; ++j) {
        cand[c] = j;
        c += key[j] <= t;
    }
    return c;
}

static int64_t sw_compact_le_u64(const uint64_t *key, int64_t len, uint64_t t, int64_t *cand)
{
    const __m256i sign = _mm256_set1_epi64x((long long)0x8000000000000000ull);
    const __m256i tt = _mm256_set1_epi64x((long long)(t ^ 0x8000000000000000ull));
    int64_t c = 0, j = 0;
    for (; j + 8 <= len; j += 8) {
        const __m256i v0 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(const void *)(key + j)), sign);
        const __m256i v1 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(const void *)(key + j + 4)), sign);
        const unsigned gt = (unsigned)_mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpgt_epi64(v0, tt))) |
                            (unsigned)_mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpgt_epi64(v1, tt))) << 4;
        SW_COMPACT_BITS(j, ~gt & 0xFFu);
    }
    for (; j < len; ++j) {
        cand[c] = j;
        c += key[j] <= t;
    }
    return c;
}

static int64_t sw_compact_le_u32(const uint32_t *key, int64_t len, uint32_t t, int64_t *cand)
{
    /* unsigned x <= t  <=>  !(signed (x ^ sign) > signed (t ^ sign)) */
    const __m256i sign = _mm256_set1_epi32((int)0x80000000u);
    const __m256i tt = _mm256_set1_epi32((int)(t ^ 0x80000000u));
    int64_t c = 0, j = 0;
    for (; j + 8 <= len; j += 8) {
        __m256i v = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(key + j)), sign);
        unsigned mask = ~(unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(v, tt))) & 0xFFu;
        while (mask) {
            cand[c++] = j + __builtin_ctz(mask);
            mask &= mask - 1;
        }
    }
    for (; j < len; ++j) {
        cand[c] = j;
        c += key[j] <= t;
    }
    return c;
}
#undef SW_COMPACT_BITS
#else
SW_DEFINE_COMPACT_PORTABLE(uint8_t, u8)
SW_DEFINE_COMPACT_PORTABLE(uint16_t, u16)
SW_DEFINE_COMPACT_PORTABLE(uint32_t, u32)
SW_DEFINE_COMPACT_PORTABLE(uint64_t, u64)
#endif

/* sw_top_small_<SUF>(key, len, m, h, cand): h[0..m) = the m smallest
 * (key, index) records of key[0..len) in order; 0 < m <= SW_LANES,
 * m <= len; cand holds len indices.  The m-th smallest of SW_LANES lane
 * minima bounds the m-th smallest key from above, so the keys at or below
 * it are all the candidates there are. */
#define SW_DEFINE_TOP_SMALL(UT, SUF)                                          \
    static void sw_top_small_##SUF(const UT *key, int64_t len, int64_t m, kwk_kv *h, \
                                   int64_t *cand)                             \
    {                                                                         \
        /* keys of at most 32 bits travel as words key << 32 | index: one    \
         * integer compare, and no 16-byte record moves */                    \
        const int words = sizeof(UT) <= 4 && len <= (int64_t)UINT32_MAX;      \
        uint64_t w[2 * SW_LANES];                                             \
        if (len <= 2 * SW_LANES) {                                            \
            if (words) {                                                      \
                for (int64_t j = 0; j < len; ++j) w[j] = (uint64_t)key[j] << 32 | (uint64_t)j; \
                sw_smallest_words(w, len, m, h);                              \
                return;                                                       \
            }                                                                 \
            /* wider keys: a sorted list of the m smallest so far, a key   \
             * entering only below its last (keys come in index order, so   \
             * an equal key stays behind: (key, index) order); sorting all  \
             * len 16-byte records took 4096 rows of 8 int64, k = 1, to    \
             * 0.78x torch's time.  Keys and indices in two arrays: moving  \
             * a record with one 16-byte load just after its two 8-byte     \
             * stores stalled on store forwarding at every entry, and in    \
             * rows whose keys fall (sorted rows for the largest) every     \
             * element enters: 4096 sorted rows of 16 float64, k = 1, ran   \
             * at 0.34x torch's time */                                      \
            UT lk[SW_LANES];                                                  \
            int64_t li[SW_LANES];                                             \
            int64_t c = 0;                                                    \
            for (int64_t j = 0; j < len; ++j) {                               \
                const UT x = key[j];                                          \
                int64_t p;                                                    \
                if (c < m) p = c++;                                           \
                else if (x < lk[m - 1]) p = m - 1;                            \
                else continue;                                                \
                for (; p > 0 && lk[p - 1] > x; --p) {                         \
                    lk[p] = lk[p - 1];                                        \
                    li[p] = li[p - 1];                                        \
                }                                                             \
                lk[p] = x;                                                    \
                li[p] = j;                                                    \
            }                                                                 \
            for (int64_t i = 0; i < c; ++i) {                                 \
                h[i].key = lk[i];                                             \
                h[i].idx = li[i];                                             \
            }                                                                 \
            return;                                                           \
        }                                                                     \
        UT mn[SW_LANES];                                                      \
        for (int l = 0; l < SW_LANES; ++l) mn[l] = key[l];                    \
        int64_t j = SW_LANES;                                                 \
        for (; j + SW_LANES <= len; j += SW_LANES)                            \
            for (int l = 0; l < SW_LANES; ++l) mn[l] = key[j + l] < mn[l] ? key[j + l] : mn[l]; \
        for (int l = 0; j < len; ++j, ++l) mn[l] = key[j] < mn[l] ? key[j] : mn[l]; \
        /* t = the m-th smallest lane minimum: the largest one with fewer   \
         * than m minima below it (counted without branches) */               \
        UT below[SW_LANES] = {0};                                             \
        for (int b = 0; b < SW_LANES; ++b) {                                  \
            const UT y = mn[b];                                               \
            for (int a = 0; a < SW_LANES; ++a) below[a] += (UT)(y < mn[a]);   \
        }                                                                     \
        UT t = 0;                                                             \
        for (int a = 0; a < SW_LANES; ++a) {                                  \
            const UT x = (below[a] < (UT)m) ? mn[a] : (UT)0;                  \
            t = x > t ? x : t;                                                \
        }                                                                     \
        const int64_t c = sw_compact_le_##SUF(key, len, t, cand);             \
        /* stable top m of the candidates (c >= m): a sorted list */          \
        if (words && c <= 2 * SW_LANES) {                                     \
            for (int64_t i = 0; i < c; ++i) w[i] = (uint64_t)key[cand[i]] << 32 | (uint64_t)cand[i]; \
            sw_smallest_words(w, c, m, h);                                    \
            return;                                                           \
        }                                                                     \
        if (words) {                                                          \
            for (int64_t i = 0; i < m; ++i) w[i] = (uint64_t)key[cand[i]] << 32 | (uint64_t)cand[i]; \
            sw_sort_words(w, m);                                              \
            uint64_t thr = w[m - 1];                                          \
            for (int64_t i = m; i < c; ++i) {                                 \
                const uint64_t x = (uint64_t)key[cand[i]] << 32 | (uint64_t)cand[i]; \
                if (x < thr) {                                                \
                    int64_t p = m - 1;                                        \
                    while (p > 0 && w[p - 1] > x) {                           \
                        w[p] = w[p - 1];                                      \
                        --p;                                                  \
                    }                                                         \
                    w[p] = x;                                                 \
                    thr = w[m - 1];                                           \
                }                                                             \
            }                                                                 \
            for (int64_t i = 0; i < m; ++i) {                                 \
                h[i].key = w[i] >> 32;                                        \
                h[i].idx = (int64_t)(w[i] & 0xFFFFFFFFu);                     \
            }                                                                 \
            return;                                                           \
        }                                                                     \
        for (int64_t i = 0; i < m; ++i) {                                     \
            h[i].key = key[cand[i]];                                          \
            h[i].idx = cand[i];                                               \
        }                                                                     \
        sw_insertion_sort_kv(h, m);                                           \
        UT thr = (UT)h[m - 1].key;                                            \
        for (int64_t i = m; i < c; ++i) {                                     \
            const UT x = key[cand[i]];                                        \
            if (x < thr) {                                                    \
                int64_t p = m - 1;                                            \
                while (p > 0 && (UT)h[p - 1].key > x) {                       \
                    h[p] = h[p - 1];                                          \
                    --p;                                                      \
                }                                                             \
                h[p] = (kwk_kv){x, cand[i]};                                  \
                thr = (UT)h[m - 1].key;                                       \
            }                                                                 \
        }                                                                     \
    }

/* insertion sort of bare keys (samples, lane minima) */
#define SW_DEFINE_SORT_KEYS(UT, SUF)                                          \
    static void sw_sort_keys_##SUF(UT *a, int64_t n)                          \
    {                                                                         \
        for (int64_t i = 1; i < n; ++i) {                                     \
            UT v = a[i];                                                      \
            int64_t j = i;                                                    \
            while (j > 0 && a[j - 1] > v) {                                   \
                a[j] = a[j - 1];                                              \
                --j;                                                          \
            }                                                                 \
            a[j] = v;                                                         \
        }                                                                     \
    }

SW_DEFINE_SORT_KEYS(uint8_t, u8)
SW_DEFINE_SORT_KEYS(uint16_t, u16)
SW_DEFINE_SORT_KEYS(uint32_t, u32)
SW_DEFINE_SORT_KEYS(uint64_t, u64)
SW_DEFINE_TOP_SMALL(uint8_t, u8)
SW_DEFINE_TOP_SMALL(uint16_t, u16)
SW_DEFINE_TOP_SMALL(uint32_t, u32)
SW_DEFINE_TOP_SMALL(uint64_t, u64)

/* ------------------------------------------------------ rank select */

/* Scratch for sw_rank_*: two (key, index) arrays of n for the survivors
 * and n records for the exact fallback, in bytes for the widest key.  The
 * survivor arrays come from the thread's workspace cache: malloc'd and
 * freed per call they went back to the kernel and were faulted in again
 * (median of 65536 float32: two thirds of the time in the kernel). */
typedef struct {
    void *ka, *kb;      /* survivor keys (ping-pong) */
    int64_t *ia, *ib;   /* survivor indices */
    kwk_kv *kv, *kvtmp; /* fallback records */
    int64_t cap;
    size_t bytes[4];    /* ka, kb, ia, ib as workspace_alloc gave them */
} sw_rank_scratch;

static int sw_rank_scratch_init(sw_rank_scratch *s, int64_t n)
{
    size_t c = (size_t)(n > 0 ? n : 1) + 8; /* + 8: sw_bracket0_u32's vector stores */
    memset(s, 0, sizeof *s);
    s->ka = workspace_alloc(c * 8, &s->bytes[0]);
    s->kb = workspace_alloc(c * 8, &s->bytes[1]);
    s->ia = (int64_t *)workspace_alloc(c * sizeof(int64_t), &s->bytes[2]);
    s->ib = (int64_t *)workspace_alloc(c * sizeof(int64_t), &s->bytes[3]);
    s->cap = n;
    return (s->ka && s->kb && s->ia && s->ib) ? KWK_OK : KWK_E_NOMEM;
}

static void sw_rank_scratch_free(sw_rank_scratch *s)
{
    kwk_ws_give(s->ka, s->bytes[0]);
    kwk_ws_give(s->kb, s->bytes[1]);
    kwk_ws_give(s->ia, s->bytes[2]);
    kwk_ws_give(s->ib, s->bytes[3]);
    free(s->kv);
    free(s->kvtmp);
}

static inline int64_t sw_isqrt(int64_t n)
{
    int64_t r = 0;
    while ((r + 1) * (r + 1) <= n) ++r;
    return r;
}

/* Sample size for a set of m keys: small sets get up to SW_COUNT_MAX
 * samples, ranked by counting; larger ones about sqrt(m), sorted. */
enum { SW_COUNT_MAX = 64 };
/* Long rows are read SW_SRC_BLOCK keys at a time by sw_rank_src. */
enum { SW_SRC_BLOCK = 2048 };
static inline int64_t sw_sample_size(int64_t m)
{
    int64_t s = sw_isqrt(m);
    if (m < 65536) {
        s = s * 3 / 2;
        return s < 32 ? 32 : (s > SW_COUNT_MAX ? SW_COUNT_MAX : s);
    }
    return s > 1024 ? 1024 : s;
}

/* One bracket pass over key[0..m) with implicit indices: returns the
 * number of keys in [lo, lo + span] (copied with their indices, in order,
 * to nk/ni) and sets *below to the number under lo. */
#define SW_DEFINE_BRACKET0_PORTABLE(UT, SUF)                                  \
    static int64_t sw_bracket0_##SUF(const UT *k, int64_t m, UT lo, UT span,   \
                                     UT *nk, int64_t *ni, int64_t *below_out) \
    {                                                                         \
        int64_t below = 0, c = 0;                                             \
        for (int64_t j = 0; j < m; ++j) below += k[j] < lo;                   \
        for (int64_t j = 0; j < m; ++j) {                                     \
            UT x = k[j];                                                      \
            nk[c] = x;                                                        \
            ni[c] = j;                                                        \
            c += (UT)(x - lo) <= span;                                        \
        }                                                                     \
        *below_out = below;                                                   \
        return c;                                                             \
    }
SW_DEFINE_BRACKET0_PORTABLE(uint8_t, u8)
SW_DEFINE_BRACKET0_PORTABLE(uint64_t, u64)
#if defined(__AVX2__)
/* 16-bit keys: the in-bracket and >= lo compares a vector at a time, the
 * keys inside copied by a loop over the mask's bits (a bracket holds a
 * small share of the set); the portable loop's store and count chain was
 * most of a long row's median (bfloat16 4 x 65536 261 -> 156 us).  Not for
 * 64-bit keys: four lanes a compare measured slower than the portable loop
 * (AVX2 target, float64 / int64 rows of 8192..30000 0.68-0.80x), and 8-bit
 * keys are counted (sw_rank_select_u8) wherever the bracket would run. */
#define SW_BRACKET_BITS(J, MASK)                                              \
    do {                                                                      \
        for (unsigned m_ = (MASK); m_; m_ &= m_ - 1) {                        \
            const int64_t at_ = (J) + __builtin_ctz(m_);                      \
            nk[c] = k[at_];                                                   \
            ni[c++] = at_;                                                    \
        }                                                                     \
    } while (0)

static int64_t sw_bracket0_u16(const uint16_t *k, int64_t m, uint16_t lo, uint16_t span, uint16_t *nk,
                               int64_t *ni, int64_t *below_out)
{
    int64_t below = 0, c = 0, j = 0;
    const __m256i vlo = _mm256_set1_epi16((short)lo), vspan = _mm256_set1_epi16((short)span);
    for (; j + 16 <= m; j += 16) {
        const __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(k + j));
        const __m256i d = _mm256_sub_epi16(v, vlo);
        const unsigned in = sw_mask16(_mm256_cmpeq_epi16(_mm256_max_epu16(d, vspan), vspan));
        const unsigned ge = sw_mask16(_mm256_cmpeq_epi16(_mm256_max_epu16(v, vlo), v));
        below += 16 - __builtin_popcount(ge);
        SW_BRACKET_BITS(j, in);
    }
    for (; j < m; ++j) {
        const uint16_t x = k[j];
        nk[c] = x;
        ni[c] = j;
        below += x < lo;
        c += (uint16_t)(x - lo) <= span;
    }
    *below_out = below;
    return c;
}

#undef SW_BRACKET_BITS

/* The same for 32-bit keys, eight at a time: the keys in [lo, lo + span]
 * and their indices packed to the front by one permutation (a compress),
 * the count below lo by a compare.  It stores whole vectors: nk and ni need
 * room for m + 8 entries (sw_rank_scratch_init allocates it).  Rows of
 * few distinct values spend most of their rank select here (native,
 * nanmedian of 1024 rows of 576 with 43% zeros: 2.75-3.0 -> 2.4 ms). */
static int64_t sw_bracket0_u32(const uint32_t *k, int64_t m, uint32_t lo, uint32_t span,
                               uint32_t *nk, int64_t *ni, int64_t *below_out)
{
    int64_t below = 0, c = 0, j = 0;
    const __m256i vlo = _mm256_set1_epi32((int)lo), vspan = _mm256_set1_epi32((int)span);
    __m256i vidx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i eight = _mm256_set1_epi32(8);
    for (; j + 8 <= m && j + 8 <= INT32_MAX; j += 8) {
        const __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(k + j));
        const __m256i in = kwk_in_bracket_u32(v, vlo, vspan);
        const __m256i ge = _mm256_cmpeq_epi32(_mm256_max_epu32(v, vlo), v);   /* v >= lo */
        const unsigned mask = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(in));
        below += 8 - __builtin_popcount((unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(ge)));
        const __m256i perm = kwk_compress_perm8(mask);
        const __m256i pi = _mm256_permutevar8x32_epi32(vidx, perm);
        _mm256_storeu_si256((__m256i *)(void *)(nk + c), _mm256_permutevar8x32_epi32(v, perm));
        _mm256_storeu_si256((__m256i *)(void *)(ni + c),
                            _mm256_cvtepi32_epi64(_mm256_castsi256_si128(pi)));
        _mm256_storeu_si256((__m256i *)(void *)(ni + c + 4),
                            _mm256_cvtepi32_epi64(_mm256_extracti128_si256(pi, 1)));
        vidx = _mm256_add_epi32(vidx, eight);
        c += __builtin_popcount(mask);
    }
    for (; j < m; ++j) {
        const uint32_t x = k[j];
        nk[c] = x;
        ni[c] = j;
        below += x < lo;
        c += (uint32_t)(x - lo) <= span;
    }
    *below_out = below;
    return c;
}
#else
SW_DEFINE_BRACKET0_PORTABLE(uint16_t, u16)
SW_DEFINE_BRACKET0_PORTABLE(uint32_t, u32)
#endif

/* Rearrange a[0..n) so a[k] is the k-th smallest key, with no larger key
 * before it and no smaller after (Hoare partitions around a median of
 * three, which split runs of equal keys evenly; the last few keys
 * insertion-sorted).  kthvalue's samples and survivors (a sort would cost
 * more: only one or two ranks of each are read) and sw_rank's exact finish. */
#define SW_DEFINE_QSELECT(UT, SUF)                                            \
    static void sw_qselect_##SUF(UT *a, int64_t n, int64_t k)                 \
    {                                                                         \
        int64_t lo = 0, hi = n - 1;                                           \
        while (hi - lo > 16) {                                                \
            const int64_t mid = lo + (hi - lo) / 2;                           \
            UT x = a[lo], y = a[mid], z = a[hi], t;                           \
            if (x > y) { t = x; x = y; y = t; }                               \
            if (y > z) { t = y; y = z; z = t; }                               \
            if (x > y) { t = x; x = y; y = t; }                               \
            const UT pivot = y;                                               \
            int64_t i = lo - 1, j = hi + 1;                                   \
            for (;;) {                                                        \
                do ++i; while (a[i] < pivot);                                 \
                do --j; while (a[j] > pivot);                                 \
                if (i >= j) break;                                            \
                t = a[i]; a[i] = a[j]; a[j] = t;                              \
            }                                                                 \
            /* a[lo..j] <= pivot <= a[j+1..hi] */                             \
            if (k <= j) hi = j; else lo = j + 1;                              \
        }                                                                     \
        for (int64_t i = lo + 1; i <= hi; ++i) {                              \
            const UT v = a[i];                                                \
            int64_t j = i;                                                    \
            for (; j > lo && a[j - 1] > v; --j) a[j] = a[j - 1];              \
            a[j] = v;                                                         \
        }                                                                     \
    }
SW_DEFINE_QSELECT(uint8_t, u8)
SW_DEFINE_QSELECT(uint16_t, u16)
SW_DEFINE_QSELECT(uint32_t, u32)
SW_DEFINE_QSELECT(uint64_t, u64)

/* sw_rank through the vector quicksort's partitions (simd_qsort.h's
 * simd_select_32/_64, AVX-512 or AVX2): 32- and 64-bit keys of rows of
 * SW_SMALL..SW_SELECT_MAX, copied to the scratch and selected by rank
 * alone, then the index: the (r - #smaller)-th key equal to the selected
 * one, in index order.  The sampled bracket below costs a sample sort and
 * two passes whatever the row.  Measured (torch.median(x, 1), ns/el,
 * bracket -> select): AVX-512 float32 1024x576 1.68 -> 0.97 (43% zeros
 * 0.95 -> 0.70), 64x1124 1.27 -> 0.83, 256x5000 0.82 -> 0.62; float64
 * 1024x576 2.45 -> 1.54; rows of 90% zeros 0.49 -> 0.63 (the bracket's
 * split takes such a run at once).  The AVX2 target's quicksort (four
 * 64-bit or eight 32-bit lanes, no compress) partitions at about half the
 * speed, so it selects rows of up to 4096 only (same machine,
 * KWKER_TARGET=avx2, float32, us, bracket -> select, min of 3 alternating
 * runs: 256x576 240 -> 151, 64x1124 90 -> 69, 32x2048 69 -> 58, 16x4096
 * 58 -> 54, 8x8192 0.98x, 1x20000 0.80x, 1x65536 0.77x).
 * SW_RANK_NOT_TAKEN where it does not apply. */
#if defined(__AVX512F__)
enum { SW_RANK_NOT_TAKEN = -2, SW_SELECT_MAX = 1 << 16 };
#else
enum { SW_RANK_NOT_TAKEN = -2, SW_SELECT_MAX = 1 << 12 };
#endif
#define SW_RANK_SELECT_NONE(UT, SUF)                                          \
    static inline int64_t sw_rank_select_##SUF(const UT *key, int64_t n, int64_t r, \
                                               sw_rank_scratch *s)            \
    {                                                                         \
        (void)key, (void)n, (void)r, (void)s;                                 \
        return SW_RANK_NOT_TAKEN;                                             \
    }

/* 8- and 16-bit keys: rank r by counting.  A histogram of the keys (of
 * their high bytes for 16-bit keys, then of the low bytes of the keys in
 * rank r's bucket) gives the key v at rank r and the number below it; the
 * index is then the (r - #below)-th key equal to v, in index order.  Two
 * or three passes and no sample: the sampled bracket's sample rank (ns^2
 * compares) was most of a short row's time.  Measured (torch.median(x, -1)
 * of 65536 elements, fresh inputs, us, sampled bracket (its first pass
 * vectorised) -> counting, min of 3 alternating runs, AMD Zen 4): uint8
 * rows of 256 / 1000 / 4096 / 16384 / 65536 186 -> 62, 98 -> 36, 66 -> 31,
 * 60 -> 30, 37 -> 31; int16 206 -> 135, 103 -> 83, but 69 -> 75, 58 -> 72,
 * 40 -> 73 (bfloat16 alike): three scalar passes lose to the bracket's
 * vector passes on long rows, so 16-bit rows count up to SW_HIST_MAX_U16. */
enum { SW_HIST_MIN = 64, SW_HIST_MAX_U16 = 2048 };

/* Four histograms h[4][256 or more] (independent increments), bins
 * 0..255 summed into h[0]. */
#define SW_HISTOGRAM(h, n, BIN)                                               \
    do {                                                                      \
        memset(h, 0, sizeof h);                                               \
        int64_t j_ = 0;                                                       \
        for (; j_ + 4 <= (n); j_ += 4) {                                      \
            ++h[0][BIN(j_)];                                                  \
            ++h[1][BIN(j_ + 1)];                                              \
            ++h[2][BIN(j_ + 2)];                                              \
            ++h[3][BIN(j_ + 3)];                                              \
        }                                                                     \
        for (; j_ < (n); ++j_) ++h[0][BIN(j_)];                               \
        for (int b_ = 0; b_ < 256; ++b_) h[0][b_] += h[1][b_] + h[2][b_] + h[3][b_]; \
    } while (0)

/* The bin holding rank *r of a histogram (*r then a rank within it). */
static inline int sw_hist_bin(const uint32_t *h, int64_t *r)
{
    int b = 0;
    for (; b < 255 && *r >= (int64_t)h[b]; ++b) *r -= h[b];
    return b;
}

#define SW_DEFINE_NTH_EQUAL(UT, SUF)                                          \
    /* The index of the t-th (from 0) key equal to v in key[0..n): blocks  \
     * of 64 counted (a vector loop) until the block holding it, which is    \
     * scanned (a frequent v costs no mispredicted branch a key). */        \
    static int64_t sw_nth_equal_##SUF(const UT *key, int64_t n, UT v, int64_t t) \
    {                                                                         \
        int64_t j = 0;                                                        \
        for (; j + 64 <= n; j += 64) {                                        \
            int c = 0;                                                        \
            for (int q = 0; q < 64; ++q) c += key[j + q] == v;                \
            if (t < c) break;                                                 \
            t -= c;                                                           \
        }                                                                     \
        for (; j < n; ++j)                                                    \
            if (key[j] == v && t-- == 0) return j;                            \
        return -1;                                                            \
    }
SW_DEFINE_NTH_EQUAL(uint8_t, u8)
SW_DEFINE_NTH_EQUAL(uint16_t, u16)

static inline int64_t sw_rank_select_u8(const uint8_t *key, int64_t n, int64_t r, sw_rank_scratch *s)
{
    (void)s;
    if (n < SW_HIST_MIN || n > (int64_t)UINT32_MAX) return SW_RANK_NOT_TAKEN;
    uint32_t h[4][256];
#define SW_BIN8(j) key[j]
    SW_HISTOGRAM(h, n, SW_BIN8);
#undef SW_BIN8
    const int v = sw_hist_bin(h[0], &r);
    return sw_nth_equal_u8(key, n, (uint8_t)v, r);
}

static inline int64_t sw_rank_select_u16(const uint16_t *key, int64_t n, int64_t r, sw_rank_scratch *s)
{
    (void)s;
    if (n < SW_HIST_MIN || n > SW_HIST_MAX_U16) return SW_RANK_NOT_TAKEN;
    uint32_t h[4][256];
#define SW_BIN_HI(j) (key[j] >> 8)
    SW_HISTOGRAM(h, n, SW_BIN_HI);
#undef SW_BIN_HI
    const int hi = sw_hist_bin(h[0], &r);
    /* the low bytes of the keys in bucket hi, the others counted in a
     * spare bin 256 (no branch: bucket hi can hold any share of the keys) */
    uint32_t lo[4][257];
#define SW_LOW_BIN(j) ((key[j] >> 8) == hi ? key[j] & 0xFF : 256)
    SW_HISTOGRAM(lo, n, SW_LOW_BIN);
#undef SW_LOW_BIN
    const int b = sw_hist_bin(lo[0], &r);
    return sw_nth_equal_u16(key, n, (uint16_t)(hi << 8 | b), r);
}
#if defined(KWK_HAVE_SIMD_QSORT) && (defined(__AVX512F__) || defined(__AVX2__))
/* The index of the t-th (from 0) key equal to v, a vector of keys at a
 * time (one by one, a frequent v - a row of 43% zeros - cost a
 * mispredicted branch every other key).  The t-th set bit of a vector's
 * mask: by pdep where AVX-512 is (every such CPU has a fast one), else by
 * clearing the lowest t bits (pdep is microcoded on AMD before Zen 3). */
static inline int sw_nth_set_bit(unsigned m, int64_t t)
{
#if defined(__AVX512F__)
    return __builtin_ctz(_pdep_u32(1u << t, m));
#else
    for (; t > 0; --t) m &= m - 1;
    return __builtin_ctz(m);
#endif
}
#if defined(__AVX512F__)
#define SW_EQ_MASK_32(p, v) _mm512_cmpeq_epi32_mask(_mm512_loadu_si512((const void *)(p)), \
                                                     _mm512_set1_epi32((int)(v)))
#define SW_EQ_MASK_64(p, v) _mm512_cmpeq_epi64_mask(_mm512_loadu_si512((const void *)(p)), \
                                                     _mm512_set1_epi64((long long)(v)))
#define SW_LANES_32 16
#define SW_LANES_64 8
#else
#define SW_EQ_MASK_32(p, v)                                                   \
    (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(      \
        _mm256_loadu_si256((const __m256i *)(p)), _mm256_set1_epi32((int)(v)))))
#define SW_EQ_MASK_64(p, v)                                                   \
    (unsigned)_mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpeq_epi64(      \
        _mm256_loadu_si256((const __m256i *)(p)), _mm256_set1_epi64x((long long)(v)))))
#define SW_LANES_32 8
#define SW_LANES_64 4
#endif
#define SW_DEFINE_RANK_SELECT(UT, SUF, S)                                     \
    static inline int64_t sw_rank_select_##SUF(const UT *key, int64_t n, int64_t r, \
                                               sw_rank_scratch *s)            \
    {                                                                         \
        /* (short rows of 32-bit keys: sw_rank_core's packed words) */      \
        if (n <= (S == 64 ? 1 : SW_SMALL) || n > SW_SELECT_MAX || s->cap < n) \
            return SW_RANK_NOT_TAKEN;                                         \
        UT *c = (UT *)s->ka;                                                  \
        memcpy(c, key, (size_t)n * sizeof(UT));                               \
        const UT v = simd_select_##S(c, n, r);                                \
        int64_t below = 0;                                                    \
        for (int64_t j = 0; j < n; ++j) below += key[j] < v;                  \
        int64_t t = r - below, j = 0;                                         \
        for (; j + SW_LANES_##S <= n; j += SW_LANES_##S) {                    \
            const unsigned m = SW_EQ_MASK_##S(key + j, v);                    \
            const int cnt = __builtin_popcount(m);                            \
            if (t < cnt) return j + sw_nth_set_bit(m, t);                     \
            t -= cnt;                                                         \
        }                                                                     \
        for (; j < n; ++j)                                                    \
            if (key[j] == v && t-- == 0) return j;                            \
        return SW_RANK_NOT_TAKEN; /* not reached: rank r holds v */           \
    }
SW_DEFINE_RANK_SELECT(uint32_t, u32, 32)
SW_DEFINE_RANK_SELECT(uint64_t, u64, 64)
#undef SW_EQ_MASK_32
#undef SW_EQ_MASK_64
#undef SW_LANES_32
#undef SW_LANES_64
#undef SW_DEFINE_RANK_SELECT
#else
SW_RANK_SELECT_NONE(uint32_t, u32)
SW_RANK_SELECT_NONE(uint64_t, u64)
#endif
#undef SW_RANK_SELECT_NONE

/* sw_rank_<SUF>(key, n, r, scratch): the index j whose (key[j], j) has
 * rank r (0 <= r < n) among all (key, index) pairs; -1 when out of memory.
 * key[] is left untouched. */
#define SW_DEFINE_RANK(UT, SUF)                                               \
    /* [*lo, *hi]: keys bracketing rank r of m from a sample of ns keys     \
     * (reordered), widened by about 2 sigma, doubled after each miss. */     \
    static void sw_bounds_##SUF(UT *sample, int64_t ns, int64_t r, int64_t m, int misses, \
                                UT *lo_out, UT *hi_out)                       \
    {                                                                         \
        const int64_t centre = (int64_t)(((double)r + 0.5) * (double)ns / (double)m); \
        const int64_t margin = (sw_isqrt(ns) + 1) << misses;                  \
        const int64_t a = centre - margin, b = centre + margin;               \
        UT lo = 0, hi = (UT)~(UT)0;                                           \
        if (ns <= SW_COUNT_MAX) {                                             \
            /* order statistics a and b of the sample by counting */          \
            UT la = 0, hb = 0;                                                \
            int32_t below[SW_COUNT_MAX] = {0};                                \
            for (int64_t q = 0; q < ns; ++q) {                                \
                const UT y = sample[q];                                       \
                for (int64_t i = 0; i < ns; ++i) below[i] += y < sample[i];   \
            }                                                                 \
            for (int64_t i = 0; i < ns; ++i) {                                \
                const UT x = sample[i];                                       \
                la = (below[i] <= a && x > la) ? x : la;                      \
                hb = (below[i] <= b && x > hb) ? x : hb;                      \
            }                                                                 \
            if (a > 0) lo = la;                                               \
            if (b < ns - 1) hi = hb;                                          \
        } else {                                                              \
            sw_sort_keys_##SUF(sample, ns);                                   \
            if (a > 0) lo = sample[a];                                        \
            if (b < ns - 1) hi = sample[b];                                   \
        }                                                                     \
        *lo_out = lo;                                                         \
        *hi_out = hi;                                                         \
    }                                                                         \
                                                                              \
    /* The split at the sample's rank-r key v (sw_rank_core, when a bracket  \
     * keeps every key): 1 with *j_out the index of rank *r when it falls   \
     * among the keys equal to v (the (*r - below)-th of them, in the set's  \
     * order, which is index order); else 0 with the keys on rank *r's side  \
     * of v copied, with their indices, in order, to nk/ni (*c of them) and  \
     * *r made a rank among them. */                                        \
    static int sw_split_done_##SUF(const UT *k, const int64_t *ix, int64_t m, int64_t *r, \
                                   UT *sample, int64_t ns, UT *nk, int64_t *ni, \
                                   int64_t *c, int64_t *j_out)               \
    {                                                                         \
        sw_sort_keys_##SUF(sample, ns);                                       \
        int64_t centre = (int64_t)(((double)*r + 0.5) * (double)ns / (double)m); \
        if (centre > ns - 1) centre = ns - 1;                                 \
        const UT v = sample[centre];                                          \
        int64_t below = 0, equal = 0;                                         \
        for (int64_t j = 0; j < m; ++j) {                                     \
            below += k[j] < v;                                                \
            equal += k[j] == v;                                               \
        }                                                                     \
        if (*r >= below && *r < below + equal) {                              \
            int64_t t = *r - below;                                           \
            for (int64_t j = 0; j < m; ++j)                                   \
                if (k[j] == v && t-- == 0) {                                  \
                    *j_out = ix ? ix[j] : j;                                  \
                    return 1;                                                 \
                }                                                             \
        }                                                                     \
        const int under = *r < below;                                         \
        int64_t n = 0;                                                        \
        for (int64_t j = 0; j < m; ++j) {                                     \
            const UT x = k[j];                                                \
            nk[n] = x;                                                        \
            ni[n] = ix ? ix[j] : j;                                           \
            n += under ? x < v : x > v;                                       \
        }                                                                     \
        if (!under) *r -= below + equal;                                      \
        *c = n;                                                               \
        return 0;                                                             \
    }                                                                         \
                                                                              \
    /* The rank loop on a set (k, ix) of m: ix NULL means index j is j.       \
     * nk/ni and ok/oi: two free buffer pairs (ok/oi may alias k/ix). */      \
    static int64_t sw_rank_core_##SUF(const UT *k, const int64_t *ix, int64_t m, int64_t r, \
                                      UT *nk, int64_t *ni, UT *ok, int64_t *oi, \
                                      sw_rank_scratch *s)                     \
    {                                                                         \
        UT sample[1024];                                                      \
        int misses = 0;                                                       \
        int64_t j_out = -1;                                                   \
        while (m > SW_SMALL) {                                                \
            const int64_t ns = sw_sample_size(m);                             \
            const int64_t stride = m / ns;                                    \
            const int64_t off = (stride >> (1 + misses)) % (stride ? stride : 1); \
            for (int64_t i = 0; i < ns; ++i) sample[i] = k[i * stride + off]; \
            UT lo, hi;                                                        \
            sw_bounds_##SUF(sample, ns, r, m, misses, &lo, &hi);              \
            const UT span = (UT)(hi - lo);                                    \
            int64_t below = 0, c = 0;                                         \
            if (ix) {                                                         \
                for (int64_t j = 0; j < m; ++j) {                             \
                    UT x = k[j];                                              \
                    below += x < lo;                                          \
                    nk[c] = x;                                                \
                    ni[c] = ix[j];                                            \
                    c += (UT)(x - lo) <= span;                                \
                }                                                             \
            } else {                                                          \
                c = sw_bracket0_##SUF(k, m, lo, span, nk, ni, &below);        \
            }                                                                 \
            /* every key inside (a wider bracket keeps them all: few        \
             * distinct keys, or a run of one key at an end of the set, as  \
             * in a row of 43% zeros, padded with NaN): split the set at    \
             * the sample's own rank-r key v instead, counting the keys     \
             * below v and equal to it; rank r is then among the equal      \
             * ones (their index order decides), or the set shrinks to one  \
             * side of v (v is one of its keys: by at least one) */         \
            if (c == m) {                                                     \
                if (sw_split_done_##SUF(k, ix, m, &r, sample, ns, nk, ni, &c, &j_out)) \
                    return j_out;                                             \
            } else {                                                          \
                if (r < below || r >= below + c) { /* missed */               \
                    if (++misses > 2) break;                                  \
                    continue;                                                 \
                }                                                             \
                r -= below;                                                   \
                if (lo == hi) return ni[r]; /* all equal: index order */      \
            }                                                                 \
            misses = 0;                                                       \
            k = nk;                                                           \
            ix = ni;                                                          \
            m = c;                                                            \
            { UT *t = nk; nk = ok; ok = t; }                                  \
            { int64_t *t = ni; ni = oi; oi = t; }                             \
        }                                                                     \
        /* finish (small set) or fall back (missed bracket): exact select */  \
        if (m <= SW_SMALL && sizeof(UT) <= 4 && s->cap <= (int64_t)UINT32_MAX) {   \
            uint64_t w[SW_SMALL];                                             \
            for (int64_t j = 0; j < m; ++j)                                   \
                w[j] = (uint64_t)k[j] << 32 | (uint64_t)(ix ? ix[j] : j);     \
            sw_sort_words(w, m);                                              \
            return (int64_t)(w[r] & 0xFFFFFFFFu);                             \
        }                                                                     \
        if (m <= SW_SMALL) {                                                  \
            kwk_kv small[SW_SMALL];                                           \
            for (int64_t j = 0; j < m; ++j) {                                 \
                small[j].key = k[j];                                          \
                small[j].idx = ix ? ix[j] : j;                                \
            }                                                                 \
            sw_insertion_sort_kv(small, m);                                   \
            return small[r].idx;                                              \
        }                                                                     \
        /* the key at rank r by selecting keys alone (a copy in the free   \
         * buffer), then its index: the (r - #smaller)-th key equal to it, \
         * in the set's order, which is index order */                      \
        memcpy(nk, k, (size_t)m * sizeof(UT));                                \
        sw_qselect_##SUF(nk, m, r);                                           \
        const UT v = nk[r];                                                   \
        int64_t t = r;                                                        \
        for (int64_t j = 0; j < m; ++j) t -= k[j] < v;                        \
        for (int64_t j = 0; j < m; ++j)                                       \
            if (k[j] == v && t-- == 0) return ix ? ix[j] : j;                 \
        return -1; /* unreachable: rank r holds v */                          \
    }                                                                         \
                                                                              \
    static int64_t sw_rank_##SUF(const UT *key, int64_t n, int64_t r, sw_rank_scratch *s) \
    {                                                                         \
        const int64_t j = sw_rank_select_##SUF(key, n, r, s);                \
        if (j != SW_RANK_NOT_TAKEN) return j;                                 \
        return sw_rank_core_##SUF(key, NULL, n, r, (UT *)s->ka, s->ia, (UT *)s->kb, s->ib, s); \
    }                                                                         \
                                                                              \
    /* sw_rank on a row read through a gather function, block by block: no  \
     * key array of the whole row (long rows). */                             \
    static int64_t sw_rank_src_##SUF(void (*g)(const char *, int64_t, int64_t, UT, UT *), \
                                     const char *row, int64_t step, int64_t n, int64_t r, \
                                     sw_rank_scratch *s)                      \
    {                                                                         \
        UT sample[1024], buf[SW_SRC_BLOCK];                                   \
        UT *nk = (UT *)s->ka;                                                 \
        int64_t *ni = s->ia;                                                  \
        for (int misses = 0; misses <= 2; ++misses) {                         \
            const int64_t ns = sw_sample_size(n);                             \
            const int64_t stride = n / ns;                                    \
            const int64_t off = (stride >> (1 + misses)) % (stride ? stride : 1); \
            for (int64_t i = 0; i < ns; ++i)                                  \
                g(row + (i * stride + off) * step, step, 1, (UT)0, &sample[i]); \
            UT lo, hi;                                                        \
            sw_bounds_##SUF(sample, ns, r, n, misses, &lo, &hi);              \
            const UT span = (UT)(hi - lo);                                    \
            int64_t below = 0, c = 0;                                         \
            for (int64_t j0 = 0; j0 < n; j0 += SW_SRC_BLOCK) {                \
                const int64_t b = n - j0 < SW_SRC_BLOCK ? n - j0 : SW_SRC_BLOCK; \
                g(row + j0 * step, step, b, (UT)0, buf);                      \
                int64_t bb = 0;                                               \
                const int64_t cb = sw_bracket0_##SUF(buf, b, lo, span, nk + c, ni + c, &bb); \
                for (int64_t q = c; q < c + cb; ++q) ni[q] += j0; /* block-relative */ \
                c += cb;                                                      \
                below += bb;                                                  \
            }                                                                 \
            if (r < below || r >= below + c || c == n) continue; /* missed */ \
            r -= below;                                                       \
            if (lo == hi) return ni[r];                                       \
            return sw_rank_core_##SUF(nk, ni, c, r, (UT *)s->kb, s->ib, nk, ni, s); \
        }                                                                     \
        /* exact fallback on records of the whole row */                      \
        if (!s->kv) s->kv = (kwk_kv *)malloc((size_t)s->cap * sizeof(kwk_kv)); \
        if (!s->kvtmp) s->kvtmp = (kwk_kv *)malloc((size_t)s->cap * sizeof(kwk_kv)); \
        if (!s->kv || !s->kvtmp) return -1;                                   \
        for (int64_t j0 = 0; j0 < n; j0 += SW_SRC_BLOCK) {                    \
            const int64_t b = n - j0 < SW_SRC_BLOCK ? n - j0 : SW_SRC_BLOCK;  \
            g(row + j0 * step, step, b, (UT)0, buf);                          \
            for (int64_t j = 0; j < b; ++j) {                                 \
                s->kv[j0 + j].key = buf[j];                                   \
                s->kv[j0 + j].idx = j0 + j;                                   \
            }                                                                 \
        }                                                                     \
        kvs_select(s->kv, s->kvtmp, n, r + 1);                                \
        return s->kv[r].idx;                                                  \
    }

SW_DEFINE_RANK(uint8_t, u8)
SW_DEFINE_RANK(uint16_t, u16)
SW_DEFINE_RANK(uint32_t, u32)
SW_DEFINE_RANK(uint64_t, u64)

#endif
