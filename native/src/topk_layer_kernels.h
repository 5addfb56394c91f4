/*
 * topk_layer_kernels.h - the k largest of each row written densely, in one
 * call: the TopK activation (kept values, zeros elsewhere, optionally
 * ReLU'd) and the top-k logits filter (scores below the k-th largest
 * replaced by a fill value): the activation with its k kept positions per
 * row (~j where ReLU stops the gradient: the backward's input), the filter
 * with a byte mask of the removed.
 *
 * The k-th largest key T of a row comes from a radix select on order keys
 * (keys.h: -0.0 == +0.0, all NaNs equal and largest): a histogram of the
 * top 8 bits, then the keys of the chosen bucket only, 8 bits at a time,
 * over the row's candidates: on float32 rows of at least 128 * k elements
 * the keys of the blocks of 32 whose maximum reaches the k-th largest
 * block maximum (the kept elements are then written by position into a
 * filled row), else the keys above a sampled bound, or the whole row.  It
 * also counts the G keys above T and the E keys equal to it.  The filter
 * keeps every key >= T (ties all kept, as TopKLogitsWarper).  The
 * activation keeps the keys > T and k - G of those equal to T: all of them
 * when E == k - G; otherwise which ones is torch.topk's choice, and the
 * row's k indices come from impl_topk in torch's order (KWK_ORDER_TORCH,
 * sorted, as the reference calls it).
 */
#include <stdlib.h>
#include <string.h>
#include "keys.h"

#define TL_DIGIT_BITS 8 /* 256 buckets: clearing the counts costs little next to the keys */
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

/* The k-th largest key T of a row of n floats (1 <= k < n), with the
 * counts of keys above and equal to it.  Long rows first guess a lower
 * bound p from a strided sample (its element of rank a little above
 * k * SAMPLE / n, so that p is below T with high probability), keep in one
 * pass only the keys >= p, and select among those; when fewer than k keys
 * pass (an unlucky sample), or for short rows, the radix select runs over
 * all keys. */
#define TL_SAMPLE 1024
#define TL_BLOCK 16 /* elements tested at once for a candidate */

/* Whether any of the TL_BLOCK elements at x is >= t or NaN: the test that
 * lets the candidate pass skip most of a long row.  Written with AVX2
 * where there is AVX2 (the compiler left the scalar loop as 16 compares
 * and branches: the whole layer ran at 1.8 ns an element). */
#if defined(__AVX2__)
#include <immintrin.h>
static inline int tl_block_any_f32(const float *x, float t)
{
    const __m256 tv = _mm256_set1_ps(t);
    __m256 m = _mm256_cmp_ps(_mm256_loadu_ps(x), tv, _CMP_NLT_UQ);
    m = _mm256_or_ps(m, _mm256_cmp_ps(_mm256_loadu_ps(x + 8), tv, _CMP_NLT_UQ));
    return _mm256_movemask_ps(m) != 0;
}
static inline int tl_block_any_f64(const double *x, double t)
{
    const __m256d tv = _mm256_set1_pd(t);
    __m256d m = _mm256_cmp_pd(_mm256_loadu_pd(x), tv, _CMP_NLT_UQ);
    m = _mm256_or_pd(m, _mm256_cmp_pd(_mm256_loadu_pd(x + 4), tv, _CMP_NLT_UQ));
    m = _mm256_or_pd(m, _mm256_cmp_pd(_mm256_loadu_pd(x + 8), tv, _CMP_NLT_UQ));
    m = _mm256_or_pd(m, _mm256_cmp_pd(_mm256_loadu_pd(x + 12), tv, _CMP_NLT_UQ));
    return _mm256_movemask_pd(m) != 0;
}
#else
#define TL_DEFINE_BLOCK_ANY(T, SUF)                                           \
    static inline int tl_block_any_##SUF(const T *x, T t)                     \
    {                                                                         \
        int any = 0;                                                          \
        for (int l = 0; l < TL_BLOCK; ++l) any |= !(x[l] < t); /* >= t or NaN */ \
        return any;                                                           \
    }
TL_DEFINE_BLOCK_ANY(float, f32)
TL_DEFINE_BLOCK_ANY(double, f64)
#undef TL_DEFINE_BLOCK_ANY
#endif
#define TL_DEFINE_THRESHOLD(T, UT, SUF, KEY)                                  \
    static inline UT tl_bits_##SUF(T v)                                       \
    {                                                                         \
        UT b;                                                                 \
        memcpy(&b, &v, sizeof b);                                             \
        return b;                                                             \
    }                                                                         \
    /* the value whose key is `key` (the inverse of KWK_FLOAT_KEY on */    \
    /* keys of values: -0.0 comes back as +0.0, NaN as a NaN) */              \
    static inline T tl_value_##SUF(UT key)                                    \
    {                                                                         \
        const UT sign = (UT)((UT)1 << (8 * sizeof(UT) - 1));                  \
        UT b = (key & sign) ? (UT)(key ^ sign) : (UT)~key;                    \
        T v;                                                                  \
        memcpy(&v, &b, sizeof v);                                             \
        return v;                                                             \
    }                                                                         \
    static UT tl_threshold_##SUF(const T *x, int64_t n, int64_t k, UT *keys, UT *cand, \
                                 int64_t *gt, int64_t *eq)                    \
    {                                                                         \
        const int bits = (int)(8 * sizeof(UT));                               \
        if (n >= 4 * TL_SAMPLE) {                                             \
            const int64_t step = n / TL_SAMPLE;                               \
            for (int64_t i = 0; i < TL_SAMPLE; ++i) keys[i] = KEY(tl_bits_##SUF(x[i * step])); \
            const int64_t expect = k * TL_SAMPLE / n;                         \
            int64_t rank = expect + 3 * sw_isqrt(expect) + 4;                 \
            if (rank > TL_SAMPLE) rank = TL_SAMPLE;                           \
            int64_t g_, e_;                                                   \
            const UT p = tl_kth_largest_##SUF(keys, TL_SAMPLE, rank, bits, cand, &g_, &e_); \
            /* the keys >= p: x >= pf or NaN (pf = p's value; equal */         \
            /* zeros compare equal either way); blocks without one are */     \
            /* skipped by a vectorised test */                                \
            const T pf = tl_value_##SUF(p);                                   \
            int64_t c = 0, j = 0;                                             \
            for (; j + TL_BLOCK <= n; j += TL_BLOCK) {                        \
                if (!tl_block_any_##SUF(x + j, pf)) continue;                \
                for (int l = 0; l < TL_BLOCK; ++l) {                          \
                    const UT key = KEY(tl_bits_##SUF(x[j + l]));              \
                    keys[c] = key;                                            \
                    c += key >= p;                                            \
                }                                                             \
            }                                                                 \
            for (; j < n; ++j) {                                              \
                const UT key = KEY(tl_bits_##SUF(x[j]));                      \
                keys[c] = key;                                                \
                c += key >= p;                                                \
            }                                                                 \
            if (c >= k) return tl_kth_largest_##SUF(keys, c, k, bits, cand, gt, eq); \
        }                                                                     \
        for (int64_t j = 0; j < n; ++j) keys[j] = KEY(tl_bits_##SUF(x[j]));   \
        return tl_kth_largest_##SUF(keys, n, k, bits, cand, gt, eq);          \
    }

/* out = fill where key < cut, x elsewhere; mask = replaced (IEEE's <, as
 * the reference's `x < kth`: NaN on either side removes nothing, zeros of
 * both signs compare equal).  Branch-free, so it vectorises. */
#define TL_DEFINE_FILTER(T, SUF)                                              \
    static void tl_filter_below_##SUF(const T *key, const T *x, int64_t n, T cut, T fill, \
                                      T *out, uint8_t *mask)                  \
    {                                                                         \
        for (int64_t j = 0; j < n; ++j) {                                     \
            const int removed = key[j] < cut;                                 \
            out[j] = removed ? fill : x[j];                                   \
            mask[j] = (uint8_t)removed;                                       \
        }                                                                     \
    }
TL_DEFINE_FILTER(float, f32)
TL_DEFINE_FILTER(double, f64)

/* out[0..n) = v.  A +0.0 fill (the activation's) is a memset: the C
 * library's large-size path (rep stosb) writes whole lines without first
 * reading them, where a vector store loop reads each line of a cold output
 * before writing it. */
#define TL_DEFINE_FILL(T, SUF)                                                \
    static void tl_fill_##SUF(T *out, int64_t n, T v)                         \
    {                                                                         \
        const T zero = 0;                                                     \
        if (memcmp(&v, &zero, sizeof v) == 0) {                               \
            memset(out, 0, (size_t)n * sizeof(T));                            \
            return;                                                           \
        }                                                                     \
        for (int64_t j = 0; j < n; ++j) out[j] = v;                           \
    }
TL_DEFINE_FILL(float, f32)
TL_DEFINE_FILL(double, f64)
#undef TL_DEFINE_FILL

/* A kept position j as the backward reads it: j where the gradient passes
 * (kept, and with ReLU not <= 0; NaN passes), ~j (negative) where ReLU
 * stops it. */
#define TL_KEPT(j, v, relu) ((relu) && (v) <= 0 ? ~(int64_t)(j) : (int64_t)(j))

/* The activation of a row from torch.topk's k indices, which kept holds
 * on entry, as the reference scatters them: zeros elsewhere, the kept
 * values (ReLU'd when relu) there; then kept = those positions ascending
 * (tmp: k words), as TL_KEPT. */
#define TL_DEFINE_SCATTER(T, SUF)                                             \
    static void tl_scatter_kept_##SUF(const T *x, int64_t n, int64_t k, int relu, T *out, \
                                      int64_t *kept, uint64_t *tmp)           \
    {                                                                         \
        tl_fill_##SUF(out, n, (T)0);                                          \
        for (int64_t i = 0; i < k; ++i) {                                     \
            const int64_t j = kept[i];                                        \
            const T v = x[j];                                                 \
            out[j] = relu && v < 0 ? (T)0 : v;                                \
        }                                                                     \
        /* (distinct positions below n: unique words) */                      \
        words_sort_bits((uint64_t *)(void *)kept, tmp, k, 0, kwk_bits_for((uint64_t)(n - 1))); \
        for (int64_t i = 0; i < k; ++i) kept[i] = TL_KEPT(kept[i], x[kept[i]], relu); \
    }
TL_DEFINE_SCATTER(float, f32)
TL_DEFINE_SCATTER(double, f64)
#undef TL_DEFINE_SCATTER

/* One row of one float type: T (type of the values), UT (same-width
 * unsigned), KEY (its order key). */
#define TL_DEFINE_ROW(T, UT, SUF, KEY)                                        \
    static int tl_row_##SUF(const T *x, int64_t n, int64_t k, int mode, T fill, T *out, \
                            uint8_t *mask, int64_t *kept, UT *keys, UT *cand, UT *bmax, \
                            int32_t *cpos, uint64_t *tmp)                    \
    {                                                                         \
        const int relu = mode == KWK_TOPK_DENSE_RELU;                         \
        const int filter = mode == KWK_TOPK_DENSE_FILTER;                     \
        if (k == 0 || k == n) { /* nothing or everything kept */              \
            const int all = k == n;                                           \
            for (int64_t j = 0; j < n; ++j) {                                 \
                const T v = x[j];                                             \
                if (filter) {                                                 \
                    out[j] = all ? v : fill;                                  \
                    mask[j] = (uint8_t)!all;                                  \
                } else {                                                      \
                    out[j] = all ? (relu && v < 0 ? (T)0 : v) : (T)0;         \
                    if (all) kept[j] = TL_KEPT(j, v, relu);                   \
                }                                                             \
            }                                                                 \
            return KWK_OK;                                                    \
        }                                                                     \
        int64_t gt, eq;                                                       \
        UT t;                                                                 \
        /* c >= 0: keys[0..c) (positions cpos, ascending) hold every key >= t */ \
        const int64_t c = tl_candidates_##SUF(x, n, k, bmax, cand, keys, cpos); \
        if (c >= 0)                                                           \
            t = tl_kth_largest_##SUF(keys, c, k, 8 * (int)sizeof(UT), cand, &gt, &eq); \
        else                                                                  \
            t = tl_threshold_##SUF(x, n, k, keys, cand, &gt, &eq);            \
        const int tnan = t == (UT)~(UT)0;                                     \
        /* kept: the keys >= t (the filter: x < t's value removed, which is */ \
        /* the same set unless t is NaN's key: then nothing is removed); */  \
        /* the activation keeps them all when no tie is cut (k of them) */   \
        if (c >= 0 && (filter ? !tnan : eq == k - gt)) {                      \
            tl_fill_##SUF(out, n, filter ? fill : (T)0);                      \
            if (filter) memset(mask, 1, (size_t)n);                           \
            int64_t m = 0;                                                    \
            for (int64_t i = 0; i < c; ++i) {                                 \
                if (keys[i] < t) continue;                                    \
                const int64_t j = cpos[i];                                    \
                const T v = x[j];                                             \
                out[j] = relu && v < 0 ? (T)0 : v;                            \
                if (filter) mask[j] = 0;                                      \
                else kept[m++] = TL_KEPT(j, v, relu);                         \
            }                                                                 \
            return KWK_OK;                                                    \
        }                                                                     \
        if (filter) {                                                         \
            tl_filter_below_##SUF(x, x, n, tl_value_##SUF(t), fill, out, mask); \
            return KWK_OK;                                                    \
        }                                                                     \
        if (eq == k - gt) { /* every key >= t kept (k of them): no tie is cut */ \
            /* key >= t: x >= tf, or x NaN (tf NaN: the NaNs only) */         \
            const T tf = tl_value_##SUF(t);                                   \
            int64_t m = 0;                                                    \
            for (int64_t j = 0; j < n; ++j) {                                 \
                const T v = x[j];                                             \
                const int in = tnan ? v != v : !(v < tf); /* >= tf or NaN */  \
                out[j] = in ? (relu && v < 0 ? (T)0 : v) : (T)0;              \
                if (in) kept[m++] = TL_KEPT(j, v, relu);                      \
            }                                                                 \
            return KWK_OK;                                                    \
        }                                                                     \
        /* a tie cut by k: torch.topk's choice of indices */                  \
        int st = impl_topk(TL_DTYPE_##SUF, x, 1, n, 1, n, 1, 1, k, NULL, kept, k, 1, 1, 1,  \
                           1, KWK_ORDER_TORCH);                               \
        if (st != KWK_OK) return st;                                          \
        tl_scatter_kept_##SUF(x, n, k, relu, out, kept, tmp);                \
        return KWK_OK;                                                        \
    }

#define TL_DTYPE_f32 KWK_FLOAT32
#define TL_DTYPE_f64 KWK_FLOAT64
#define tl_kth_largest_f32 tl_kth_largest_u32
#define tl_kth_largest_f64 tl_kth_largest_u64
TL_DEFINE_THRESHOLD(float, uint32_t, f32, kwk_key_f32)
TL_DEFINE_THRESHOLD(double, uint64_t, f64, kwk_key_f64)
/* Candidates from block maxima (float32 rows, TL_BLOCKS_MIN_PER_K * k
 * blocks or more): one pass takes the largest key of each block of
 * TL_BMAX_BLOCK elements; the k-th largest of those maxima, p, is a key of
 * k different elements, so the row's k largest keys are all >= p; a second
 * look at the blocks whose maximum is >= p (about k of them) collects every
 * key >= p with its position.  The sampled path above reads every cache
 * line of a row of 16384 twice (the strided sample, then the block test)
 * and its layer then rewrites the whole row by compare; here the row is
 * read once and the output is filled, then the few kept elements are
 * written by position.  float64 keeps the sampled path (AVX2 has no
 * unsigned 64-bit maximum for the block pass). */
#define TL_BMAX_BLOCK 32
#define TL_BLOCKS_MIN_PER_K 4

/* bmax[b] = the largest key of elements [32b, 32b + 32), b < nb.  AVX2:
 * the float maximum of the block (NaN aside: max_ps ignores its ordering)
 * and an unordered test; a block holding a NaN has the NaN key (all ones),
 * any other the key of its float maximum (-0.0 and +0.0 share a key). */
static void tl_block_max_f32(const float *x, int64_t nb, uint32_t *bmax)
{
    int64_t b = 0;
#if defined(__AVX2__)
    for (; b < nb; ++b) {
        const float *p = x + b * TL_BMAX_BLOCK;
        const __m256 v0 = _mm256_loadu_ps(p), v1 = _mm256_loadu_ps(p + 8);
        const __m256 v2 = _mm256_loadu_ps(p + 16), v3 = _mm256_loadu_ps(p + 24);
        const __m256 nan = _mm256_or_ps(_mm256_cmp_ps(v0, v1, _CMP_UNORD_Q),
                                        _mm256_cmp_ps(v2, v3, _CMP_UNORD_Q));
        const __m256 m = _mm256_max_ps(_mm256_max_ps(v0, v1), _mm256_max_ps(v2, v3));
        bmax[b] = _mm256_movemask_ps(nan) ? UINT32_MAX
                                          : kwk_key_f32(tl_bits_f32(kwk_hmax8_ps(m)));
    }
#endif
    for (; b < nb; ++b) {
        uint32_t m = 0;
        for (int l = 0; l < TL_BMAX_BLOCK; ++l) {
            const uint32_t key = kwk_key_f32(tl_bits_f32(x[b * TL_BMAX_BLOCK + l]));
            m = key > m ? key : m;
        }
        bmax[b] = m;
    }
}

/* The keys >= p of elements [from, to) into ckeys/cpos from position c;
 * returns the new count (branch-free). */
static inline int64_t tl_collect_f32(const float *x, int64_t from, int64_t to, uint32_t p,
                                     uint32_t *ckeys, int32_t *cpos, int64_t c)
{
    for (int64_t j = from; j < to; ++j) {
        const uint32_t key = kwk_key_f32(tl_bits_f32(x[j]));
        ckeys[c] = key;
        cpos[c] = (int32_t)j;
        c += key >= p;
    }
    return c;
}

/* Every key >= p of the row with its position (ckeys/cpos: room for n),
 * p chosen as above; returns their count (>= k), or -1 when the row has too
 * few blocks for the path (then nothing is written).  bmax: room for
 * n / TL_BMAX_BLOCK keys; scratch: for as many (the radix select's). */
static int64_t tl_candidates_f32(const float *x, int64_t n, int64_t k, uint32_t *bmax,
                                 uint32_t *scratch, uint32_t *ckeys, int32_t *cpos)
{
    const int64_t nb = n / TL_BMAX_BLOCK;
    if (nb < TL_BLOCKS_MIN_PER_K * k || n > INT32_MAX) return -1;
    tl_block_max_f32(x, nb, bmax);
    int64_t g_, e_;
    const uint32_t p = tl_kth_largest_u32(bmax, nb, k, 32, scratch, &g_, &e_);
    int64_t c = 0;
    for (int64_t b = 0; b < nb; ++b)
        if (bmax[b] >= p)
            c = tl_collect_f32(x, b * TL_BMAX_BLOCK, (b + 1) * TL_BMAX_BLOCK, p, ckeys, cpos, c);
    return tl_collect_f32(x, nb * TL_BMAX_BLOCK, n, p, ckeys, cpos, c);
}

/* float64: never (see above). */
static int64_t tl_candidates_f64(const double *x, int64_t n, int64_t k, uint64_t *bmax,
                                 uint64_t *scratch, uint64_t *ckeys, int32_t *cpos)
{
    (void)x, (void)n, (void)k, (void)bmax, (void)scratch, (void)ckeys, (void)cpos;
    return -1;
}

TL_DEFINE_ROW(float, uint32_t, f32, kwk_key_f32)
TL_DEFINE_ROW(double, uint64_t, f64, kwk_key_f64)

static int impl_filter_below(int dtype, const void *key, const void *src, int64_t rows,
                             int64_t len, const void *cutoff, double fill, void *out,
                             uint8_t *mask)
{
    for (int64_t r = 0; r < rows; ++r) {
        const size_t at = (size_t)r * (size_t)len;
        if (dtype == KWK_FLOAT32)
            tl_filter_below_f32((const float *)key + at, (const float *)src + at, len,
                                ((const float *)cutoff)[r], (float)fill, (float *)out + at,
                                mask + at);
        else
            tl_filter_below_f64((const double *)key + at, (const double *)src + at, len,
                                ((const double *)cutoff)[r], fill, (double *)out + at,
                                mask + at);
    }
    return KWK_OK;
}

/* The activation's backward: per row, out = +0.0 but grad at the kept
 * positions j >= 0 (~j: ReLU stops the gradient there, +0.0 stays), as
 * torch.where on the dense mask they stand for; es = 4 or 8 bytes.  Row by
 * row, so each row's zeros are still in cache when its k elements land
 * (the reference's backward, zeros then a scatter, writes the same). */
static int impl_kept_grad(int es, const void *grad, const int64_t *kept, int64_t rows,
                          int64_t len, int64_t k, void *out)
{
    for (int64_t r = 0; r < rows; ++r) {
        const int64_t *kr = kept + r * k;
        const size_t at = (size_t)(r * len) * (size_t)es;
        char *o = (char *)out + at;
        const char *g = (const char *)grad + at;
        memset(o, 0, (size_t)len * (size_t)es);
        for (int64_t i = 0; i < k; ++i)
            if (kr[i] >= 0) memcpy(o + kr[i] * es, g + kr[i] * es, (size_t)es);
    }
    return KWK_OK;
}

/* Rows the activation takes from impl_topk's indices: float32 rows where
 * topk takes the lane threshold (topk_nth.h: rows of up to 32768): two
 * light vector passes over the row (lane maxima, then candidates), where
 * the row kernel's block maxima, key gathering and radix select took more
 * (forward with the filled output and mask, one thread, min of 15:
 * 64x16384 k=32 0.53 -> 0.41 ms, 16x32000 k=50 0.24 -> 0.19 ms; 256x16384
 * k=64, 16 MB read from memory, about 4 ms either way). */
static int tl_by_topk(int dtype, int64_t len, int64_t k, int mode)
{
    return dtype == KWK_FLOAT32 && mode != KWK_TOPK_DENSE_FILTER && k < len &&
           tn_lane_row(k, k + 1, len);
}

/* The activation from torch.topk's own indices (impl_topk, torch's order:
 * the set torch keeps, ties included), written into kept, rows in chunks
 * whose indices stay near 1 MB (still cached when they are scattered). */
static int tl_rows_by_topk(const float *src, int64_t rows, int64_t len, int64_t k, int mode,
                           float *out, int64_t *kept)
{
    const int relu = mode == KWK_TOPK_DENSE_RELU;
    int64_t chunk = ((int64_t)1 << 17) / k;
    if (chunk < 1) chunk = 1;
    if (chunk > rows) chunk = rows;
    uint64_t *tmp = malloc((size_t)k * sizeof(uint64_t));
    if (!tmp) return KWK_E_NOMEM;
    int st = KWK_OK;
    for (int64_t r0 = 0; r0 < rows && st == KWK_OK; r0 += chunk) {
        const int64_t nr = rows - r0 < chunk ? rows - r0 : chunk;
        st = impl_topk(KWK_FLOAT32, src + r0 * len, nr, len, 1, len, 1, 1, k, NULL, kept + r0 * k,
                       k, 1, 1, 1, 1, KWK_ORDER_TORCH);
        for (int64_t r = r0; r < r0 + nr && st == KWK_OK; ++r)
            tl_scatter_kept_f32(src + r * len, len, k, relu, out + r * len, kept + r * k, tmp);
    }
    free(tmp);
    return st;
}

static int impl_topk_dense(int dtype, const void *src, int64_t rows, int64_t len, int64_t k,
                           int mode, double fill, void *out, uint8_t *mask, int64_t *kept)
{
    if (rows == 0 || len == 0) return KWK_OK;
    if (tl_by_topk(dtype, len, k, mode))
        return tl_rows_by_topk(src, rows, len, k, mode, out, kept);
    const size_t es = dtype == KWK_FLOAT32 ? 4 : 8;
    /* a sort's k words of scratch, one row's keys, candidates, block maxima
     * and candidate positions (in that order: each part stays aligned for
     * its type) */
    const size_t nb = (size_t)len / TL_BMAX_BLOCK;
    char *scratch = malloc((size_t)k * 8 + 2 * (size_t)len * es + nb * es + (size_t)len * 4 + 8);
    if (!scratch) return KWK_E_NOMEM;
    uint64_t *tmp = (uint64_t *)(void *)scratch;
    void *keys = scratch + (size_t)k * 8;
    void *cand = (char *)keys + (size_t)len * es;
    void *bmax = (char *)cand + (size_t)len * es;
    int32_t *cpos = (int32_t *)(void *)((char *)bmax + nb * es);
    int st = KWK_OK;
    for (int64_t r = 0; r < rows && st == KWK_OK; ++r) {
        const size_t at = (size_t)r * (size_t)len;
        /* (each mode's own output; the other may be NULL) */
        uint8_t *row_mask = mode == KWK_TOPK_DENSE_FILTER ? mask + at : NULL;
        int64_t *row_kept = mode != KWK_TOPK_DENSE_FILTER && k > 0 ? kept + r * k : NULL;
        if (dtype == KWK_FLOAT32)
            st = tl_row_f32((const float *)src + at, len, k, mode, (float)fill,
                            (float *)out + at, row_mask, row_kept, keys, cand, bmax, cpos, tmp);
        else
            st = tl_row_f64((const double *)src + at, len, k, mode, fill,
                            (double *)out + at, row_mask, row_kept, keys, cand, bmax, cpos, tmp);
    }
    free(scratch);
    return st;
}
