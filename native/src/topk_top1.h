/*
 * topk_top1.h - topk with k = 1 of contiguous float32 or bfloat16 rows
 * (argmax-like calls: accuracy@1, greedy decoding, top-1 MoE routing): one
 * pass over the row keeps, per lane, the best key seen and the first
 * position holding it (replaced only by a strictly better key), and the
 * lanes' results give the row's best key and its first position.
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
 * 238 -> 150, 256x1000 51 -> 38, 64x4096 1.07x. */
enum { T1_MAX_LEN = 8192, T1_MAX_LEN_BF16 = 4096 };

/* Whether topk_top1_rows takes the call: k = 1 of contiguous float32 or
 * bfloat16 rows of T1_MIN_LEN..T1_MAX_LEN (the heap branch of torch's
 * topk), on the SIMD targets. */
static inline int t1_applies(int dtype, int64_t len, int64_t k, int64_t src_sl)
{
#if defined(__AVX2__)
    return k == 1 && src_sl == 1 && len >= T1_MIN_LEN &&
           (dtype == KWK_FLOAT32 ? len <= T1_MAX_LEN
                                 : dtype == KWK_BFLOAT16 && len <= T1_MAX_LEN_BF16);
#else
    (void)dtype, (void)len, (void)k, (void)src_sl;
    return 0;
#endif
}

#endif
