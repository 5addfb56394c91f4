/*
 * row_network.h - sort a batch of short rows at once with a sorting network.
 *
 * A row of a few dozen keys costs an insertion sort ~10 ns a key in
 * mispredicted branches.  A sorting network has no data-dependent branch,
 * and run "vertically" - key j of L rows side by side in one vector, each
 * comparator one min and one max over all L rows - it sorts L rows for the
 * price of one (the AVX2 build turns the lane loops into vpminud/vpmaxud).
 *
 * The network is Batcher's odd-even merge sort for the next power of two
 * p >= n, with every comparator that touches a position >= n dropped: think
 * of positions n..p-1 as holding the largest possible key; a comparator
 * (i, j), i < j, leaves such a key at j, so they never move and every
 * comparator touching them is a no-op.
 */
#ifndef KWK_ROW_NETWORK_H
#define KWK_ROW_NETWORK_H

#include <stdint.h>

#include "net_pairs.h"

/* One comparator over L rows: a[l] = min, b[l] = max.  a and b are
 * different keys (rows of the buffer), never overlapping: restrict lets the
 * compiler use vector min/max (it cannot prove that alone). */
#define KWK_DEFINE_NET_SORT(UT, L, SUF)                                       \
    static inline void kwk_net_cmp_##SUF(UT *restrict a, UT *restrict b)     \
    {                                                                         \
        for (int l = 0; l < (L); ++l) {                                       \
            const UT x = a[l], y = b[l];                                      \
            a[l] = x < y ? x : y;                                             \
            b[l] = x < y ? y : x;                                             \
        }                                                                     \
    }                                                                         \
                                                                              \
    /* Sort L rows held as columns: buf[j * L + l] is key j of row l. */     \
    static void kwk_net_sort_##SUF(UT *buf, const kwk_net_pair *pairs, int npairs) \
    {                                                                         \
        for (int c = 0; c < npairs; ++c)                                      \
            kwk_net_cmp_##SUF(buf + pairs[c][0] * (L), buf + pairs[c][1] * (L)); \
    }

#if defined(__AVX2__)
#include <immintrin.h>
/* gcc leaves the lane loop above scalar: the comparators by hand */
static void kwk_net_sort_u32(uint32_t *buf, const kwk_net_pair *pairs, int npairs)
{
    for (int c = 0; c < npairs; ++c) {
        __m256i *a = (__m256i *)(buf + pairs[c][0] * 8), *b = (__m256i *)(buf + pairs[c][1] * 8);
        const __m256i x = _mm256_loadu_si256(a), y = _mm256_loadu_si256(b);
        _mm256_storeu_si256(a, _mm256_min_epu32(x, y));
        _mm256_storeu_si256(b, _mm256_max_epu32(x, y));
    }
}

static void kwk_net_sort_u64(uint64_t *buf, const kwk_net_pair *pairs, int npairs)
{
    /* no unsigned 64-bit min/max in AVX2: a signed compare of the keys with
     * their top bit flipped, then blends */
    const __m256i top = _mm256_set1_epi64x((long long)0x8000000000000000ull);
    for (int c = 0; c < npairs; ++c) {
        __m256i *a = (__m256i *)(buf + pairs[c][0] * 4), *b = (__m256i *)(buf + pairs[c][1] * 4);
        const __m256i x = _mm256_loadu_si256(a), y = _mm256_loadu_si256(b);
        const __m256i gt = _mm256_cmpgt_epi64(_mm256_xor_si256(x, top), _mm256_xor_si256(y, top));
        _mm256_storeu_si256(a, _mm256_blendv_epi8(x, y, gt));
        _mm256_storeu_si256(b, _mm256_blendv_epi8(y, x, gt));
    }
}
#else
KWK_DEFINE_NET_SORT(uint32_t, 8, u32)
KWK_DEFINE_NET_SORT(uint64_t, 4, u64)
#endif
#undef KWK_DEFINE_NET_SORT

#endif
