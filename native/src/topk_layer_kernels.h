/*
 * topk_layer_kernels.h - the k largest of each row written densely, in one
 * call: the TopK activation (kept values, zeros elsewhere, optionally
 * ReLU'd) and the top-k logits filter (scores below the k-th largest
 * replaced by a fill value), each with a byte mask.
 *
 * The k-th largest key T of a row comes from a radix select on order keys
 * (keys.h: -0.0 == +0.0, all NaNs equal and largest): a histogram of the
 * top 11 bits over the row, then the keys of the chosen bucket only, 11
 * bits at a time.  It also counts the G keys above T and the E keys equal
 * to it.  The filter keeps every key >= T (ties all kept, as
 * TopKLogitsWarper).  The activation keeps the keys > T and k - G of those
 * equal to T: all of them when E == k - G; otherwise which ones is
 * torch.topk's choice, and the row's k indices come from impl_topk in
 * torch's order (KWK_ORDER_TORCH, sorted, as the reference calls it).
 */
#include <stdlib.h>
#include <string.h>
#include "keys.h"

#define TL_DIGIT_BITS 11 /* 2048 buckets: 8 KiB of counts stay in L1 */
#define TL_BUCKETS (1 << TL_DIGIT_BITS)

/* Radix select of the k-th largest (1 <= k <= n) of n keys (bits wide);
 * cand is scratch for n keys.  Sets *above (keys > T) and *equal (== T). */
#define TL_DEFINE_SELECT(UT, SUF)                                             \
    static UT tl_kth_largest_##SUF(const UT *keys, int64_t n, int64_t k, int bits, \
                                   UT *cand, int64_t *above, int64_t *equal)  \
    {                                                                         \
        int64_t hist[TL_BUCKETS];                                             \
        const UT *cur = keys;                                                 \
        int64_t m = n, rank = k, gt = 0; /* rank: k-th largest among cur */   \
        UT prefix = 0;                                                        \
        int shift = bits;                                                     \
        while (shift > 0) {                                                   \
            int w = shift < TL_DIGIT_BITS ? shift : TL_DIGIT_BITS;            \
            shift -= w;                                                       \
            const UT dmask = (UT)(((UT)1 << w) - 1);                          \
            memset(hist, 0, sizeof(int64_t) * ((size_t)1 << w));              \
            for (int64_t j = 0; j < m; ++j) hist[(cur[j] >> shift) & dmask]++; \
            int64_t b = (int64_t)dmask, seen = 0;                             \
            while (seen + hist[b] < rank) seen += hist[b--];                  \
            gt += seen;                                                       \
            rank -= seen;                                                     \
            prefix = (UT)(prefix | ((UT)b << shift));                         \
            if (shift == 0) {                                                 \
                *above = gt;                                                  \
                *equal = hist[b];                                             \
                return prefix;                                                \
            }                                                                 \
            int64_t c = 0;                                                    \
            for (int64_t j = 0; j < m; ++j) {                                 \
                cand[c] = cur[j];                                             \
                c += ((cur[j] >> shift) & dmask) == (UT)b;                    \
            }                                                                 \
            cur = cand;                                                       \
            m = c;                                                            \
        }                                                                     \
        *above = gt;                                                          \
        *equal = m;                                                           \
        return prefix;                                                        \
    }

TL_DEFINE_SELECT(uint32_t, u32)
TL_DEFINE_SELECT(uint64_t, u64)

/* One row of one float type: T (type of the values), UT (same-width
 * unsigned), KEY (its order key). */
#define TL_DEFINE_ROW(T, UT, SUF, KEY)                                        \
    static int tl_row_##SUF(const T *x, int64_t n, int64_t k, int mode, T fill, T *out, \
                            uint8_t *mask, UT *keys, UT *cand, T *tvals, int64_t *tidx) \
    {                                                                         \
        if (k == 0 || k == n) { /* nothing or everything kept */              \
            const int all = k == n;                                           \
            for (int64_t j = 0; j < n; ++j) {                                 \
                T v = x[j];                                                   \
                if (mode == KWK_TOPK_DENSE_RELU && v < 0) v = 0;              \
                out[j] = all ? v : (mode == KWK_TOPK_DENSE_FILTER ? fill : (T)0); \
                mask[j] = (uint8_t)(mode == KWK_TOPK_DENSE_FILTER ? !all : all); \
            }                                                                 \
            return KWK_OK;                                                    \
        }                                                                     \
        for (int64_t j = 0; j < n; ++j) {                                     \
            UT b;                                                             \
            memcpy(&b, &x[j], sizeof b);                                      \
            keys[j] = KEY(b);                                                 \
        }                                                                     \
        int64_t gt, eq;                                                       \
        const UT t = tl_kth_largest_##SUF(keys, n, k, (int)(8 * sizeof(UT)), cand, &gt, &eq); \
        if (mode == KWK_TOPK_DENSE_FILTER) {                                  \
            for (int64_t j = 0; j < n; ++j) {                                 \
                const int removed = keys[j] < t;                              \
                out[j] = removed ? fill : x[j];                               \
                mask[j] = (uint8_t)removed;                                   \
            }                                                                 \
            return KWK_OK;                                                    \
        }                                                                     \
        if (eq == k - gt) { /* every key >= t kept: no tie is cut */          \
            for (int64_t j = 0; j < n; ++j) {                                 \
                const int kept = keys[j] >= t;                                \
                T v = x[j];                                                   \
                if (mode == KWK_TOPK_DENSE_RELU && v < 0) v = 0;              \
                out[j] = kept ? v : (T)0;                                     \
                mask[j] = (uint8_t)kept;                                      \
            }                                                                 \
            return KWK_OK;                                                    \
        }                                                                     \
        /* a tie cut by k: torch.topk's choice of indices */                  \
        int st = impl_topk(TL_DTYPE_##SUF, x, 1, n, 1, n, 1, 1, k, tvals, tidx, k, 1, 1, 1, \
                           1, KWK_ORDER_TORCH);                               \
        if (st != KWK_OK) return st;                                          \
        memset(mask, 0, (size_t)n);                                           \
        for (int64_t j = 0; j < n; ++j) out[j] = (T)0;                        \
        for (int64_t i = 0; i < k; ++i) {                                     \
            const int64_t j = tidx[i];                                        \
            T v = x[j];                                                       \
            if (mode == KWK_TOPK_DENSE_RELU && v < 0) v = 0;                  \
            out[j] = v;                                                       \
            mask[j] = 1;                                                      \
        }                                                                     \
        return KWK_OK;                                                        \
    }

#define TL_DTYPE_f32 KWK_FLOAT32
#define TL_DTYPE_f64 KWK_FLOAT64
#define tl_kth_largest_f32 tl_kth_largest_u32
#define tl_kth_largest_f64 tl_kth_largest_u64
TL_DEFINE_ROW(float, uint32_t, f32, kwk_key_f32)
TL_DEFINE_ROW(double, uint64_t, f64, kwk_key_f64)

static int impl_topk_dense(int dtype, const void *src, int64_t rows, int64_t len, int64_t k,
                           int mode, double fill, void *out, uint8_t *mask)
{
    if (rows == 0 || len == 0) return KWK_OK;
    const size_t es = dtype == KWK_FLOAT32 ? 4 : 8;
    /* one row's k indices, keys, candidates and k values (in that order:
     * each part stays aligned for its type) */
    char *scratch = malloc((size_t)k * (8 + es) + 2 * (size_t)len * es + 8);
    if (!scratch) return KWK_E_NOMEM;
    int64_t *tidx = (int64_t *)(void *)scratch;
    void *keys = scratch + (size_t)k * 8;
    void *cand = (char *)keys + (size_t)len * es;
    void *tvals = (char *)cand + (size_t)len * es;
    int st = KWK_OK;
    for (int64_t r = 0; r < rows && st == KWK_OK; ++r) {
        const size_t at = (size_t)r * (size_t)len;
        if (dtype == KWK_FLOAT32)
            st = tl_row_f32((const float *)src + at, len, k, mode, (float)fill,
                            (float *)out + at, mask + at, keys, cand, tvals, tidx);
        else
            st = tl_row_f64((const double *)src + at, len, k, mode, fill,
                            (double *)out + at, mask + at, keys, cand, tvals, tidx);
    }
    free(scratch);
    return st;
}
