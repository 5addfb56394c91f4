/*
 * topk_top1.h - topk with k = 1 of contiguous float32, bfloat16, int64,
 * uint64 or float64 rows (argmax-like calls: accuracy@1, greedy decoding,
 * top-1 MoE routing): one pass over the row keeps, per lane, the best key
 * seen and the first position holding it (replaced only by a strictly
 * better key), and the lanes' results give the row's best key and its
 * first position.
 *
 * torch takes partial_sort's heap of one when 64 <= len (k * 64 <= len):
 * a later element replaces the kept one only when strictly better, so the
 * first of the best keys wins, which is also the stable answer.  (Below
 * 64 it runs nth_element, whose choice among tied best keys is
 * introselect's: those rows stay with short_rows.h's column kernel, which
 * is faster there anyway, as is the per-row kernel's block skip on rows
 * longer than T1_MAX_LEN.)  Measured (random rows, one thread, us, the
 * kernel before -> this): 4096x64 92 -> 51, 4096x256 288 -> 177, 256x1000
 * 56 -> 36, 256x2048 115 -> 78, 64x8192 75 -> 73; 32x16384 0.97x, 4096x48
 * (nth_element's branch) 0.99x, 4096x8 0.22x.
 *
 * Keys as everywhere (keys.h): -0.0 == +0.0, every NaN equal and largest;
 * largest = 0 reverses the key order (~key), NaN staying last.  The value
 * written is the element's own bits.
 */
#ifndef KWK_TOPK_TOP1_H
#define KWK_TOPK_TOP1_H

#include <stdint.h>
#include <string.h>

#include "keys.h"

/* Keys as keys.h makes them (kwk_key_f32: NaN all ones, -0.0 as +0.0),
 * of a float32's bits or a bfloat16's (shifted up: the float32 it is),
 * reversed (~key) for the smallest, compared unsigned.  Each vector lane's
 * best key and the first position holding it: t1_start on the first
 * vector's bits, t1_step on each later one's (at: its first position),
 * t1_finish: the best key, *at its first position. */
#if defined(__AVX512F__)
enum { T1_W = 16 };
typedef struct { __m512i bk, bi, fl; } t1_lanes;
static inline __m512i t1_vec_f32(const char *row, int64_t at)
{
    return _mm512_loadu_si512((const void *)(row + 4 * at));
}
static inline __m512i t1_vec_bf16(const char *row, int64_t at)
{
    return _mm512_slli_epi32(
        _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)(row + 2 * at))),
        16);
}
static inline void t1_start(t1_lanes *a, __m512i bits, uint32_t flip)
{
    a->fl = _mm512_set1_epi32((int)flip);
    a->bk = _mm512_xor_si512(kwk_keys16_f32(bits), a->fl);
    a->bi = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
}
static inline void t1_step(t1_lanes *a, __m512i bits, int32_t at)
{
    const __m512i k = _mm512_xor_si512(kwk_keys16_f32(bits), a->fl);
    const __mmask16 up = _mm512_cmpgt_epu32_mask(k, a->bk);
    a->bk = _mm512_mask_mov_epi32(a->bk, up, k);
    a->bi = _mm512_mask_add_epi32(a->bi, up, _mm512_set1_epi32(at),
                                  _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11,
                                                    12, 13, 14, 15));
}
static inline uint32_t t1_finish(const t1_lanes *a, int64_t *at)
{
    const uint32_t best = _mm512_reduce_max_epu32(a->bk);
    /* the first position among the lanes holding it */
    *at = (uint32_t)_mm512_mask_reduce_min_epu32(
        _mm512_cmpeq_epi32_mask(a->bk, _mm512_set1_epi32((int)best)), a->bi);
    return best;
}
#elif defined(__AVX2__)
/* (the lanes hold key ^ the sign bit: AVX2 compares signed) */
enum { T1_W = 8 };
typedef struct { __m256i bk, bi, fl; } t1_lanes;
static inline __m256i t1_vec_f32(const char *row, int64_t at)
{
    return _mm256_loadu_si256((const __m256i *)(const void *)(row + 4 * at));
}
static inline __m256i t1_vec_bf16(const char *row, int64_t at)
{
    return _mm256_slli_epi32(
        _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)(row + 2 * at))),
        16);
}
static inline void t1_start(t1_lanes *a, __m256i bits, uint32_t flip)
{
    a->fl = _mm256_set1_epi32((int)(flip ^ 0x80000000u));
    a->bk = _mm256_xor_si256(kwk_keys8_f32(bits), a->fl);
    a->bi = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
}
static inline void t1_step(t1_lanes *a, __m256i bits, int32_t at)
{
    const __m256i k = _mm256_xor_si256(kwk_keys8_f32(bits), a->fl);
    const __m256i up = _mm256_cmpgt_epi32(k, a->bk);
    a->bk = _mm256_blendv_epi8(a->bk, k, up);
    a->bi = _mm256_blendv_epi8(
        a->bi, _mm256_add_epi32(_mm256_set1_epi32(at), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)),
        up);
}
static inline uint32_t t1_finish(const t1_lanes *a, int64_t *at)
{
    int32_t lk[8], li[8];
    _mm256_storeu_si256((__m256i *)(void *)lk, a->bk);
    _mm256_storeu_si256((__m256i *)(void *)li, a->bi);
    int32_t best = lk[0];
    *at = li[0];
    for (int l = 1; l < 8; ++l)
        if (lk[l] > best || (lk[l] == best && li[l] < *at)) {
            best = lk[l];
            *at = li[l];
        }
    return (uint32_t)best ^ 0x80000000u;
}
#endif

static inline uint32_t t1_bits_f32(const char *row, int64_t at)
{
    uint32_t b;
    memcpy(&b, row + 4 * at, sizeof b);
    return b;
}
static inline uint32_t t1_bits_bf16(const char *row, int64_t at)
{
    uint16_t h;
    memcpy(&h, row + 2 * at, sizeof h);
    return (uint32_t)h << 16;
}

/* t1_row_<SUF>(row, n, largest): the first position of the row's best key
 * (n >= 1); one per dtype, so each loop has its own loads. */
#if defined(__AVX2__)
#define T1_LANES_SCAN(SUF)                                                    \
    if (n >= T1_W) {                                                          \
        t1_lanes a;                                                           \
        t1_start(&a, t1_vec_##SUF(row, 0), flip);                             \
        for (i = T1_W; i + T1_W <= n; i += T1_W)                              \
            t1_step(&a, t1_vec_##SUF(row, i), (int32_t)i);                    \
        best = t1_finish(&a, &at);                                            \
    } else
#else
#define T1_LANES_SCAN(SUF)
#endif
#define T1_DEFINE_ROW(SUF)                                                    \
    static int64_t t1_row_##SUF(const char *row, int64_t n, int largest)      \
    {                                                                         \
        const uint32_t flip = largest ? 0u : ~0u;                             \
        uint32_t best;                                                        \
        int64_t at, i;                                                        \
        T1_LANES_SCAN(SUF)                                                    \
        {                                                                     \
            best = kwk_key_f32(t1_bits_##SUF(row, 0)) ^ flip;                 \
            at = 0;                                                           \
            i = 1;                                                            \
        }                                                                     \
        for (; i < n; ++i) { /* the tail, after every lane's positions */     \
            const uint32_t k = kwk_key_f32(t1_bits_##SUF(row, i)) ^ flip;     \
            if (k > best) {                                                   \
                best = k;                                                     \
                at = i;                                                       \
            }                                                                 \
        }                                                                     \
        return at;                                                            \
    }
T1_DEFINE_ROW(f32)
T1_DEFINE_ROW(bf16)
#undef T1_DEFINE_ROW
#undef T1_LANES_SCAN

/* AVX-512, float32 and bfloat16: two cheaper passes first.  Pass one
 * keeps each lane's largest and smallest of the bijective keys k = x ^
 * (x < 0 ? 0x7FFFFFFF : 0) (two instructions a vector, compared signed;
 * the scan above makes keys.h's exact keys, eight, and tracks positions),
 * pass two (the row in L1 by then) finds the first element whose bits are
 * those of the best key, stopping there.  The bijective keys differ from
 * torch's order in two places, both seen in pass one's range: a NaN (its
 * key above +inf's or below -inf's; to torch every NaN is equal and the
 * largest: the answer is the first NaN; for the smallest, pass one takes
 * the least key from -inf's up) and a best key that is a zero
 * (+0.0 and -0.0 have different keys but are equal to torch: pass two
 * then looks for the first zero of either sign).  (The exact scan is not
 * called from here: a second call of it cost the shorter rows' loop its
 * inlining, float32 4096x64 0.85x.)
 * Rows from T1_TWO_PASS_MIN_LEN: shorter ones lost to the per-row cost
 * of the reductions and of pass two's unpredictable exit.  Measured (A/B,
 * one thread, random rows, us, one exact pass -> two): float32 512x768
 * 60.4 -> 50.7, 256x1000 43.0 -> 30.5, 256x2048 81.2 -> 66.5, bfloat16
 * 512x768 57.2 -> 46.0, 256x1000 38.9 -> 31.9, 256x2048 68.8 -> 53.4;
 * 1024x512 alike; 4096x64 / 128 / 256 0.66x / 0.78x / 0.87x (a one-pass
 * version of these keys that tracks positions, six instructions a
 * vector, still lost there: 0.82-0.97x on float32). */
#if defined(__AVX512F__)
/* The first position from 0 whose vector lanes' bits v satisfy PRED(v)
 * (a __mmask16), returned from the enclosing function; the last vector
 * overlaps the one before.  Some position must satisfy it. */
#define T1_FIRST(SUF, PRED)                                                   \
    for (int64_t i = 0;; i += T1_W) {                                         \
        const int64_t at_ = i + T1_W <= n ? i : n - T1_W;                     \
        const __m512i v_ = t1_vec_##SUF(row, at_);                            \
        const __mmask16 e_ = PRED(v_);                                        \
        if (e_) return at_ + __builtin_ctz((unsigned)e_);                     \
    }
#define T1_IS_NAN(v) _mm512_cmpgt_epu32_mask(_mm512_and_si512(v, c), inf)
#define T1_IS_ZERO(v) _mm512_testn_epi32_mask(v, c)
#define T1_IS_BEST(v) _mm512_cmpeq_epi32_mask(v, b)
#define T1_KEY(v) _mm512_ternarylogic_epi32(v, _mm512_srai_epi32(v, 31), c, 0x78)
#define T1_DEFINE_FAST(SUF)                                                   \
    static int64_t t1_fast_##SUF(const char *row, int64_t n, int largest)     \
    {                                                                         \
        const __m512i c = _mm512_set1_epi32(0x7FFFFFFF);                      \
        const __m512i inf = _mm512_set1_epi32(T1_KEY_INF);                    \
        const __m512i minus_inf = _mm512_set1_epi32(T1_KEY_MINUS_INF);        \
        __m512i mx = _mm512_set1_epi32(INT32_MIN), mn = _mm512_set1_epi32(INT32_MAX); \
        int32_t m;                                                            \
        if (largest) {                                                        \
            for (int64_t i = 0;; i += T1_W) {                                 \
                /* the last vector overlaps the one before: max / min do not care */ \
                const int64_t at = i + T1_W <= n ? i : n - T1_W;              \
                const __m512i k = T1_KEY(t1_vec_##SUF(row, at));              \
                mx = _mm512_max_epi32(mx, k);                                 \
                mn = _mm512_min_epi32(mn, k);                                 \
                if (at + T1_W >= n) break;                                    \
            }                                                                 \
            m = _mm512_reduce_max_epi32(mx);                                  \
            if (m > T1_KEY_INF || _mm512_reduce_min_epi32(mn) < T1_KEY_MINUS_INF) \
                T1_FIRST(SUF, T1_IS_NAN) /* a NaN: the largest, its first */  \
        } else {                                                              \
            /* the smallest key from -inf's up: a NaN's key lies above +inf's \
             * or below -inf's, and only an all-NaN row has none other */     \
            for (int64_t i = 0;; i += T1_W) {                                 \
                const int64_t at = i + T1_W <= n ? i : n - T1_W;              \
                const __m512i k = T1_KEY(t1_vec_##SUF(row, at));              \
                mn = _mm512_mask_min_epi32(mn, _mm512_cmpge_epi32_mask(k, minus_inf), mn, k); \
                if (at + T1_W >= n) break;                                    \
            }                                                                 \
            m = _mm512_reduce_min_epi32(mn);                                  \
            if (m > T1_KEY_INF) return 0; /* all NaN: equal, the first */     \
        }                                                                     \
        if (m == 0 || m == -1) T1_FIRST(SUF, T1_IS_ZERO) /* either sign's */  \
        const __m512i b = _mm512_set1_epi32((int)((uint32_t)m ^ (m < 0 ? 0x7FFFFFFFu : 0u))); \
        T1_FIRST(SUF, T1_IS_BEST)                                             \
    }
enum { T1_KEY_INF = 0x7F800000, T1_KEY_MINUS_INF = (int32_t)0x807FFFFF };
enum { T1_TWO_PASS_MIN_LEN = 640 };
T1_DEFINE_FAST(f32)
T1_DEFINE_FAST(bf16)
#undef T1_DEFINE_FAST
#undef T1_FIRST
#undef T1_IS_NAN
#undef T1_IS_ZERO
#undef T1_IS_BEST
#undef T1_KEY
#endif

/* 64-bit keys (int64, uint64, float64): the same scan in 64-bit lanes,
 * keys made per dtype (KEYV on a vector of raw bits, KEY on one).
 * t1_row64_<SUF>(row, n, largest) as t1_row_<SUF>.  Their rows went to the
 * per-row kernel, which has no block skip for 64-bit keys: int64 4096x64
 * took 0.88x torch's time. */
#if defined(__AVX512F__)
enum { T1_W64 = 8 };
#define T1_64_SCAN(KEYV)                                                      \
    if (n >= T1_W64) {                                                        \
        const __m512i fl = _mm512_set1_epi64((long long)flip);                \
        const __m512i iota = _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7);       \
        __m512i bk = _mm512_xor_si512(KEYV(_mm512_loadu_si512((const void *)row)), fl), bi = iota; \
        for (i = T1_W64; i + T1_W64 <= n; i += T1_W64) {                      \
            const __m512i k = _mm512_xor_si512(                               \
                KEYV(_mm512_loadu_si512((const void *)(row + 8 * i))), fl);   \
            const __mmask8 up = _mm512_cmpgt_epu64_mask(k, bk);               \
            bk = _mm512_mask_mov_epi64(bk, up, k);                            \
            bi = _mm512_mask_add_epi64(bi, up, _mm512_set1_epi64(i), iota);   \
        }                                                                     \
        best = _mm512_reduce_max_epu64(bk);                                   \
        at = (int64_t)_mm512_mask_reduce_min_epu64(                           \
            _mm512_cmpeq_epu64_mask(bk, _mm512_set1_epi64((long long)best)), bi); \
    } else
#elif defined(__AVX2__)
/* (the lanes hold key ^ the sign bit: AVX2 compares signed) */
enum { T1_W64 = 4 };
#define T1_64_SCAN(KEYV)                                                      \
    if (n >= T1_W64) {                                                        \
        const __m256i fl = _mm256_set1_epi64x((long long)(flip ^ 0x8000000000000000ull)); \
        const __m256i iota = _mm256_setr_epi64x(0, 1, 2, 3);                  \
        __m256i bk = _mm256_xor_si256(KEYV(_mm256_loadu_si256((const __m256i *)(const void *)row)), fl); \
        __m256i bi = iota;                                                    \
        for (i = T1_W64; i + T1_W64 <= n; i += T1_W64) {                      \
            const __m256i k = _mm256_xor_si256(                               \
                KEYV(_mm256_loadu_si256((const __m256i *)(const void *)(row + 8 * i))), fl); \
            const __m256i up = _mm256_cmpgt_epi64(k, bk);                     \
            bk = _mm256_blendv_epi8(bk, k, up);                               \
            bi = _mm256_blendv_epi8(bi, _mm256_add_epi64(_mm256_set1_epi64x(i), iota), up); \
        }                                                                     \
        int64_t lk[4], li[4];                                                 \
        _mm256_storeu_si256((__m256i *)(void *)lk, bk);                       \
        _mm256_storeu_si256((__m256i *)(void *)li, bi);                       \
        int64_t b = lk[0];                                                    \
        at = li[0];                                                           \
        for (int l = 1; l < 4; ++l)                                           \
            if (lk[l] > b || (lk[l] == b && li[l] < at)) {                    \
                b = lk[l];                                                    \
                at = li[l];                                                   \
            }                                                                 \
        best = (uint64_t)b ^ 0x8000000000000000ull;                           \
    } else
#else
#define T1_64_SCAN(KEYV)
#endif
#define T1_DEFINE_ROW64(SUF, KEYV, KEY)                                       \
    static int64_t t1_row64_##SUF(const char *row, int64_t n, int largest)    \
    {                                                                         \
        const uint64_t flip = largest ? 0u : ~(uint64_t)0;                    \
        uint64_t best, b;                                                     \
        int64_t at, i;                                                        \
        T1_64_SCAN(KEYV)                                                      \
        {                                                                     \
            memcpy(&b, row, 8);                                               \
            best = KEY(b) ^ flip;                                             \
            at = 0;                                                           \
            i = 1;                                                            \
        }                                                                     \
        for (; i < n; ++i) {                                                  \
            memcpy(&b, row + 8 * i, 8);                                       \
            const uint64_t k = KEY(b) ^ flip;                                 \
            if (k > best) {                                                   \
                best = k;                                                     \
                at = i;                                                       \
            }                                                                 \
        }                                                                     \
        return at;                                                            \
    }
#define T1_KEY_I64(b) ((b) ^ 0x8000000000000000ull)
#define T1_KEY_U64(b) (b)
#if defined(__AVX512F__)
#define T1_KEYV_I64(v) _mm512_xor_si512(v, _mm512_set1_epi64((long long)0x8000000000000000ull))
#define T1_KEYV_F64(v) kwk_keys8_f64(v)
#elif defined(__AVX2__)
#define T1_KEYV_I64(v) _mm256_xor_si256(v, _mm256_set1_epi64x((long long)0x8000000000000000ull))
#define T1_KEYV_F64(v) kwk_keys4_f64(v)
#endif
#define T1_KEYV_U64(v) (v)
T1_DEFINE_ROW64(i64, T1_KEYV_I64, T1_KEY_I64)
T1_DEFINE_ROW64(u64, T1_KEYV_U64, T1_KEY_U64)
T1_DEFINE_ROW64(f64, T1_KEYV_F64, kwk_key_f64)
#undef T1_DEFINE_ROW64
#undef T1_64_SCAN
#undef T1_KEY_I64
#undef T1_KEY_U64
#undef T1_KEYV_I64
#undef T1_KEYV_U64
#undef T1_KEYV_F64

/* Where it wins (A/B against the kernels before it, 4096 rows, us): on
 * AVX-512 from 64; on AVX2 from 128 (x64 107 -> 117, x96 162 -> 155, x128
 * 229 -> 192, x256 468 -> 336); the portable loop lost to the threshold
 * kernel at 256x1000 (165 -> 216 us) and is not used. */
#if defined(__AVX512F__)
enum { T1_MIN_LEN = 64 };
#else
enum { T1_MIN_LEN = 128 };
#endif
/* bfloat16 rows from 8192 measured 0.92x (the per-row kernel's block skip
 * reads half the bytes there); to 4096: 4096x64 197 -> 53 us, 4096x256
 * 238 -> 150, 256x1000 51 -> 38, 64x4096 1.07x.  On AVX-512 the two-pass
 * scan (t1_fast_bf16) beats the block skip up to rows of 2^20 (A/B, us,
 * per-row kernel -> two passes: 128x8192 135 -> 106, 32x32000 122 -> 101,
 * 8x128256 117 -> 107, 4x262144 121 -> 95, 1x1M 119 -> 103; 1x8M, whose
 * second pass reads from memory again, 894 -> 1114).  float32 rows past
 * 8192 measured alike or slower in two passes (0.86-0.97x) and stay with
 * the block skip. */
/* 64-bit keys: integer rows at every length (the per-row kernel skips no
 * blocks of them); float64 rows below SW_SKIP_STREAM_MIN, from where the
 * per-row kernel's raw-value block skip wins (A/B, us: int64 4096x64 385 ->
 * 67, 4096x256 869 -> 318, 64x4096 138 -> 54, 1x1M 851 -> 314; float64
 * 4096x64 414 -> 102, 256x1000 153 -> 74, 128x3000 230 -> 112, but 64x4096
 * 60 -> 78, 4x65536 56 -> 75). */
#if defined(__AVX512F__)
enum { T1_MAX_LEN_BF16 = 1 << 20 };
#else
enum { T1_MAX_LEN_BF16 = 4096 };
#endif
enum { T1_MAX_LEN = 8192, T1_MAX_LEN_I64 = INT32_MAX, T1_MAX_LEN_F64 = 4095 };

/* Whether topk_top1_rows takes the call: k = 1 of contiguous float32,
 * bfloat16 or 64-bit rows from T1_MIN_LEN (the heap branch of torch's
 * topk) to the dtype's bound, on the SIMD targets. */
static inline int t1_applies(int dtype, int64_t len, int64_t k, int64_t src_sl)
{
#if defined(__AVX2__)
    if (k != 1 || src_sl != 1 || len < T1_MIN_LEN) return 0;
    switch (dtype) {
    case KWK_FLOAT32: return len <= T1_MAX_LEN;
    case KWK_BFLOAT16: return len <= T1_MAX_LEN_BF16;
    case KWK_INT64:
    case KWK_UINT64: return len <= T1_MAX_LEN_I64;
    case KWK_FLOAT64: return len <= T1_MAX_LEN_F64;
    default: return 0;
    }
#else
    (void)dtype, (void)len, (void)k, (void)src_sl;
    return 0;
#endif
}

#endif
