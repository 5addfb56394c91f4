/*
 * median_columns.h - median / nanmedian of many short rows that run along a
 * non-last dim (x.median(dim=0) of a (10, H, W) stack, a 3x3 median filter
 * as median(dim=2) of unfolded patches): the rows' elements sit `src_sl`
 * apart while neighbouring rows are adjacent in memory.
 *
 * Eight neighbouring rows are done at once, one per AVX2 float lane: each
 * element's stable rank (how many elements order before it, equal ones by
 * index) is counted with one compare per pair, and the element whose rank is
 * the lower median's, (n-1)/2, gives the value and the index - torch's index
 * too, as median over a dim returns the element at that stable rank
 * (SEMANTICS.md).  Floats compare as numbers, so -0.0 == +0.0 as in torch.
 * A group holding a NaN goes back to the per-row path (median returns the
 * first NaN; nanmedian ranks among the others).  float32 only; the portable
 * target always takes the per-row path.  On AVX-512, batch_median.h's
 * sixteen-rows kernel (bm_f32_columns_median) goes first and hands this
 * file its remainders and its groups holding a NaN for rows of up to
 * MC_MAX_LEN (longer ones go row by row).
 */
#ifndef KWK_MEDIAN_COLUMNS_H
#define KWK_MEDIAN_COLUMNS_H

#include "select_kernels.h"
#if defined(__AVX2__)
#include <immintrin.h>
#endif

/* Rows of at most this many elements are ranked by pairs. */
enum { MC_MAX_LEN = 16 };

/* 1 when median_dim(...) can be served here. */
static int mc_applies(int dtype, int64_t len, int64_t inner, int64_t src_si, int64_t dst_si,
                      const void *values, const int64_t *indices)
{
#if defined(__AVX2__)
    return dtype == KWK_FLOAT32 && len >= 1 && len <= MC_MAX_LEN && inner >= 8 &&
           src_si == 1 && dst_si == 1 && values && indices;
#else
    (void)dtype; (void)len; (void)inner; (void)src_si; (void)dst_si; (void)values; (void)indices;
    return 0;
#endif
}

#if defined(__AVX2__)
/* Eight rows starting at p (element j of lane l at p[j * sl + l]): writes
 * the medians and their indices; returns 0 when a NaN sends them back. */
static int mc_group8(const float *p, int64_t sl, int64_t len, float *val, int64_t *idx)
{
    __m256 x[MC_MAX_LEN];
    __m256i rank[MC_MAX_LEN];
    __m256 nan = _mm256_setzero_ps();
    for (int64_t j = 0; j < len; ++j) {
        x[j] = _mm256_loadu_ps(p + j * sl);
        nan = _mm256_or_ps(nan, _mm256_cmp_ps(x[j], x[j], _CMP_UNORD_Q));
        rank[j] = _mm256_setzero_si256();
    }
    if (_mm256_movemask_ps(nan)) return 0;
    /* pair (i, j), i < j: x_i <= x_j puts i before j, else j before i */
    for (int64_t j = 1; j < len; ++j) {
        for (int64_t i = 0; i < j; ++i) {
            const __m256i le = _mm256_castps_si256(_mm256_cmp_ps(x[i], x[j], _CMP_LE_OQ));
            rank[j] = _mm256_sub_epi32(rank[j], le);                          /* +1 where le */
            rank[i] = _mm256_add_epi32(rank[i], _mm256_add_epi32(le, _mm256_set1_epi32(1)));
        }
    }
    const __m256i want = _mm256_set1_epi32((int)((len - 1) / 2));
    __m256 v = _mm256_setzero_ps();
    __m256i at = _mm256_setzero_si256();
    for (int64_t j = 0; j < len; ++j) {
        const __m256i hit = _mm256_cmpeq_epi32(rank[j], want);
        v = _mm256_blendv_ps(v, x[j], _mm256_castsi256_ps(hit));
        at = _mm256_blendv_epi8(at, _mm256_set1_epi32((int)j), hit);
    }
    _mm256_storeu_ps(val, v);
    _mm256_storeu_si256((__m256i *)idx, _mm256_cvtepi32_epi64(_mm256_castsi256_si128(at)));
    _mm256_storeu_si256((__m256i *)(idx + 4), _mm256_cvtepi32_epi64(_mm256_extracti128_si256(at, 1)));
    return 1;
}
#endif

/* median_dim for the layouts mc_applies() accepts. */
static int mc_median_dim(const void *src, int64_t outer, int64_t len, int64_t inner,
                         int64_t src_so, int64_t src_sl, void *values, int64_t *indices,
                         int64_t dst_so, int ignore_nan)
{
#if defined(__AVX2__)
    const float *x = (const float *)src;
    float *val = (float *)values;
    for (int64_t o = 0; o < outer; ++o) {
        int64_t i = 0;
        for (; i + 8 <= inner; i += 8) {
            if (mc_group8(x + o * src_so + i, src_sl, len, val + o * dst_so + i,
                          indices + o * dst_so + i))
                continue;
            const int st = sk_median_dim_u32(sw_gather_f32, KWK_FLOAT32, x + o * src_so + i, 1, len,
                                             8, src_so, src_sl, 1, val + o * dst_so + i,
                                             indices + o * dst_so + i, dst_so, 1, ignore_nan);
            if (st != KWK_OK) return st;
        }
        if (i < inner) {
            const int st = sk_median_dim_u32(sw_gather_f32, KWK_FLOAT32, x + o * src_so + i, 1, len,
                                             inner - i, src_so, src_sl, 1, val + o * dst_so + i,
                                             indices + o * dst_so + i, dst_so, 1, ignore_nan);
            if (st != KWK_OK) return st;
        }
    }
    return KWK_OK;
#else
    (void)src; (void)outer; (void)len; (void)inner; (void)src_so; (void)src_sl;
    (void)values; (void)indices; (void)dst_so; (void)ignore_nan;
    return KWK_E_DTYPE;
#endif
}

#endif
