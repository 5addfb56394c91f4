/*
 * word_network.h - short rows of 64-bit words sorted by a bitonic network
 * held in AVX2 registers.
 *
 * A row of n <= KWK_WNET_MAX words is padded with all-ones words to the next
 * power of two N (at least 8), loaded as N/4 vectors of four, and sorted by
 * the bitonic network in its "flipped" form: merging two sorted halves of a
 * block compares element i with the block's mirror element (so every
 * compare-exchange puts the smaller word first, no direction bookkeeping),
 * then half-cleaners at distances s/4 .. 1.  Distances of four elements or
 * more pair whole vectors (compare + two blends); distances 2 and 1 pair
 * lanes of one vector (a lane permute, then one blend picks the minimum for
 * the lower lane and the maximum for the upper: compare, xor, blend).
 *
 * Why: short rows (MoE experts, class scores, 50..128-element attention
 * rows) were sorted by 16-word rank sorts and scalar merges at 10-13 ns per
 * word; the network does the same rows without a branch or a data-dependent
 * load.  A network sorts any words, equal ones too, so the padding needs no
 * care: the n smallest come first.  Words compare unsigned: they are
 * shifted by 2^63 on load (signed compares are all AVX2 has) and back on
 * store.
 */
#ifndef KWK_WORD_NETWORK_H
#define KWK_WORD_NETWORK_H

#include <stdint.h>

enum { KWK_WNET_MAX = 128 };

#if defined(__AVX2__)
#include <immintrin.h>
#define KWK_HAVE_WORD_NETWORK 1

/* m ? y : x per 64-bit lane (the lane's sign bit decides): the double
 * blend is one micro-op where the byte blend takes two or three */
static inline __m256i kwk_wnet_blend(__m256i x, __m256i y, __m256i m)
{
    return _mm256_castpd_si256(_mm256_blendv_pd(_mm256_castsi256_pd(x), _mm256_castsi256_pd(y),
                                                _mm256_castsi256_pd(m)));
}

/* a <= b afterwards (signed 64-bit lanes) */
#define KWK_WNET_CE(a, b)                                                      \
    do {                                                                      \
        const __m256i gt_ = _mm256_cmpgt_epi64((a), (b));                     \
        const __m256i lo_ = kwk_wnet_blend((a), (b), gt_);                     \
        (b) = _mm256_xor_si256(_mm256_xor_si256((a), (b)), lo_);              \
        (a) = lo_;                                                            \
    } while (0)

/* Pairs of lanes inside one vector: PERM maps each lane to its partner,
 * UPPER is all-ones in the lanes that keep the larger word.  A lane takes
 * its partner's word when (partner < own) differs from being the upper
 * lane. */
#define KWK_WNET_LANES(v, PERM, UPPER)                                         \
    do {                                                                      \
        const __m256i p_ = _mm256_permute4x64_epi64((v), (PERM));             \
        const __m256i take_ = _mm256_xor_si256(_mm256_cmpgt_epi64((v), p_), (UPPER)); \
        (v) = kwk_wnet_blend((v), p_, take_);                                  \
    } while (0)

/* lane permutations: reversal (3,2,1,0), halves swapped (2,3,0,1),
 * neighbours swapped (1,0,3,2) */
/* the network's loops have constant bounds: unrolled, the vectors stay in
 * registers (or plain spill slots) instead of an indexed array */
#if defined(__clang__)
#define KWK_WNET_UNROLL _Pragma("clang loop unroll(full)")
#elif defined(__GNUC__)
#define KWK_WNET_UNROLL _Pragma("GCC unroll 32")
#else
#define KWK_WNET_UNROLL
#endif

enum { KWK_WNET_REV = 0x1B, KWK_WNET_HALVES = 0x4E, KWK_WNET_PAIRS = 0xB1 };

static inline __m256i kwk_wnet_upper(int l0, int l1, int l2, int l3)
{
    return _mm256_set_epi64x(-(long long)l3, -(long long)l2, -(long long)l1, -(long long)l0);
}

/* The network depth-first: once the first compare stage of a merge has
 * run, its two halves are independent, so each is finished before the
 * other starts.  The vectors one step touches then fit the sixteen
 * registers (a breadth-first order, stage by stage over all 32 vectors,
 * spills and reloads every vector at every stage: 30% slower at 128). */
#define KWK_WNET_AI static inline __attribute__((always_inline))

/* inside one vector: a bitonic row of 4 sorted (distance 2, then 1) */
KWK_WNET_AI void kwk_wnet_clean1(__m256i *v)
{
    const __m256i up_halves = kwk_wnet_upper(0, 0, 1, 1), up_pairs = kwk_wnet_upper(0, 1, 0, 1);
    KWK_WNET_LANES(v[0], KWK_WNET_HALVES, up_halves);
    KWK_WNET_LANES(v[0], KWK_WNET_PAIRS, up_pairs);
}

/* m vectors holding a row whose halves are to be merged after the mirror
 * stage (each half bitonic, the lower half below the upper): the
 * half-cleaner at distance m/2 vectors, then each half on its own */
#define KWK_WNET_DEFINE_CLEAN(M, HALF)                                         \
    KWK_WNET_AI void kwk_wnet_clean##M(__m256i *v)                              \
    {                                                                         \
        KWK_WNET_UNROLL                                                        \
        for (int i = 0; i < HALF; ++i) KWK_WNET_CE(v[i], v[i + HALF]);         \
        kwk_wnet_clean##HALF(v);                                               \
        kwk_wnet_clean##HALF(v + HALF);                                        \
    }
KWK_WNET_DEFINE_CLEAN(2, 1)
KWK_WNET_DEFINE_CLEAN(4, 2)
KWK_WNET_DEFINE_CLEAN(8, 4)
KWK_WNET_DEFINE_CLEAN(16, 8)

/* one vector sorted: blocks of 2, then the mirror of 4, then pairs */
KWK_WNET_AI void kwk_wnet_sort1(__m256i *v)
{
    const __m256i up_pairs = kwk_wnet_upper(0, 1, 0, 1), up_halves = kwk_wnet_upper(0, 0, 1, 1);
    KWK_WNET_LANES(v[0], KWK_WNET_PAIRS, up_pairs);
    KWK_WNET_LANES(v[0], KWK_WNET_REV, up_halves);
    KWK_WNET_LANES(v[0], KWK_WNET_PAIRS, up_pairs);
}

/* M vectors sorted: both halves sorted, the mirror stage (vector j against
 * vector M-1-j reversed), then each half cleaned */
#define KWK_WNET_DEFINE_SORT(M, HALF)                                          \
    KWK_WNET_AI void kwk_wnet_sort##M(__m256i *v)                               \
    {                                                                         \
        kwk_wnet_sort##HALF(v);                                                \
        kwk_wnet_sort##HALF(v + HALF);                                         \
        KWK_WNET_UNROLL                                                        \
        for (int j = 0; j < HALF; ++j) {                                      \
            __m256i x = v[j];                                                 \
            __m256i y = _mm256_permute4x64_epi64(v[M - 1 - j], KWK_WNET_REV);  \
            KWK_WNET_CE(x, y);                                                 \
            v[j] = x;                                                         \
            v[M - 1 - j] = _mm256_permute4x64_epi64(y, KWK_WNET_REV);          \
        }                                                                     \
        kwk_wnet_clean##HALF(v);                                               \
        kwk_wnet_clean##HALF(v + HALF);                                        \
    }
KWK_WNET_DEFINE_SORT(2, 1)
KWK_WNET_DEFINE_SORT(4, 2)
KWK_WNET_DEFINE_SORT(8, 4)
KWK_WNET_DEFINE_SORT(16, 8)
KWK_WNET_DEFINE_SORT(32, 16)

static inline __attribute__((always_inline)) void kwk_wnet_sort_vectors(__m256i *v, const int nv)
{
    switch (nv) {
    case 2: kwk_wnet_sort2(v); break;
    case 4: kwk_wnet_sort4(v); break;
    case 8: kwk_wnet_sort8(v); break;
    case 16: kwk_wnet_sort16(v); break;
    default: kwk_wnet_sort32(v); break;
    }
}

static inline __attribute__((always_inline)) void kwk_wnet_sort_n(uint64_t *a, int64_t n, const int nv)
{
    const __m256i bias = _mm256_set1_epi64x((long long)0x8000000000000000ull);
    __m256i v[32];
    uint64_t pad[4];
    const int64_t full = n / 4;
    for (int i = 0; i < nv; ++i) {
        if (i < full) {
            v[i] = _mm256_loadu_si256((const __m256i *)(a + 4 * i));
        } else {
            for (int l = 0; l < 4; ++l) pad[l] = 4 * i + l < n ? a[4 * i + l] : UINT64_MAX;
            v[i] = _mm256_loadu_si256((const __m256i *)pad);
        }
        v[i] = _mm256_xor_si256(v[i], bias);
    }
    kwk_wnet_sort_vectors(v, nv);
    for (int i = 0; i < nv; ++i) {
        const __m256i w = _mm256_xor_si256(v[i], bias);
        if (i < full) {
            _mm256_storeu_si256((__m256i *)(a + 4 * i), w);
        } else if (4 * i < n) {
            _mm256_storeu_si256((__m256i *)pad, w);
            for (int l = 0; 4 * i + l < n; ++l) a[4 * i + l] = pad[l];
        }
    }
}

/* Sort a[0..n) ascending, 2 <= n <= KWK_WNET_MAX. */
static void words_network_sort(uint64_t *a, int64_t n)
{
    if (n <= 8) kwk_wnet_sort_n(a, n, 2);
    else if (n <= 16) kwk_wnet_sort_n(a, n, 4);
    else if (n <= 32) kwk_wnet_sort_n(a, n, 8);
    else if (n <= 64) kwk_wnet_sort_n(a, n, 16);
    else kwk_wnet_sort_n(a, n, 32);
}

#undef KWK_WNET_CE
#undef KWK_WNET_LANES
#undef KWK_WNET_AI
#undef KWK_WNET_DEFINE_CLEAN
#undef KWK_WNET_DEFINE_SORT
#endif /* __AVX2__ */

#endif
