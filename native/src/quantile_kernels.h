/*
 * quantile_kernels.h - torch.quantile / torch.nanquantile without a sort.
 *
 * torch sorts every row and then reads two order statistics per q.  Only
 * those statistics matter, so a row with a few q is answered by rank
 * selection (sw_rank: one sampled pass per rank), and a row with many q by
 * one radix sort of its keys.  Everything after the selection repeats
 * torch's arithmetic step by step in the input's own precision, so results
 * are bit-identical:
 *
 *   rank  = q * (n - 1)                  (nanquantile: q * (#non-NaN - 1),
 *                                         negative ranks become 0; quantile:
 *                                         a row holding NaN gets rank n - 1)
 *   rank  = floor / ceil / rint (half to even) for lower / higher / nearest
 *   below = (int64)rank, above = (int64)ceil(rank), w = rank - below
 *   value = lerp(x[below], x[above], w)  (linear; midpoint: w = 0.5)
 *
 * with torch.lerp's formula: |w| < 0.5 ? fma(w, b - a, a)
 *                                      : fma(w - 1, b - a, b).
 *
 * Bits torch leaves to its sort.  The selected element's bits are decided by
 * the order statistic alone, except when the rank lands on a run of equal
 * keys with different bits: +0.0 and -0.0 in one row, or NaNs with different
 * payloads.  Which of those torch's unstable sort puts there is an accident
 * of std::sort, so such calls return KWK_DEFER and the caller asks torch.
 */
#ifndef KWK_QUANTILE_KERNELS_H
#define KWK_QUANTILE_KERNELS_H

#include <math.h>
#include "compress_lut.h"
#include "kth_pick.h"
#include "key_radix.h"
#include "row_network.h"
#include "values_sort.h"
#include "short_sort_network.h"
#if defined(__AVX2__)
#include <immintrin.h>
#endif

/* What a row holds besides ordinary numbers (from its raw bits). */
typedef struct {
    int64_t nnan;
    int pos_zero, neg_zero;   /* +0.0 / -0.0 present */
    int nan_mixed;            /* NaNs with different bits */
    uint64_t nan_bits;        /* the bits of the (first) NaN */
} qk_row_info;

/* Ranks of one q in one row. */
typedef struct {
    int64_t below, above;
    double w;        /* weight, exact in the input's precision */
} qk_ranks;

static int qk_cmp_i64(const void *a, const void *b)
{
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Short arrays (short rows, the ranks of a few q) are insertion-sorted: a
 * radix sort's histograms and a qsort call cost more there. */
enum { QK_INSERTION_MAX = 48 };
#define QK_DEFINE_INSERTION(T, SUF)                                           \
    static void qk_insertion_##SUF(T *a, int64_t n)                           \
    {                                                                         \
        for (int64_t i = 1; i < n; ++i) {                                     \
            const T v = a[i];                                                 \
            int64_t j = i;                                                    \
            for (; j > 0 && a[j - 1] > v; --j) a[j] = a[j - 1];               \
            a[j] = v;                                                         \
        }                                                                     \
    }
QK_DEFINE_INSERTION(uint32_t, u32)
QK_DEFINE_INSERTION(uint64_t, u64)
QK_DEFINE_INSERTION(int64_t, i64)

/* Copy the keys x of buf[0..b) with x - lo <= span, in order, to out and
 * return how many.  out must have room for b + 8 keys: the AVX2 path stores
 * whole vectors (compress: keep the selected lanes, packed to the front). */
static int64_t qk_bracket_u32(const uint32_t *buf, int64_t b, uint32_t lo, uint32_t span,
                              uint32_t *out)
{
    int64_t c = 0, j = 0;
#if defined(__AVX2__)
    const __m256i vlo = _mm256_set1_epi32((int)lo), vspan = _mm256_set1_epi32((int)span);
    for (; j + 8 <= b; j += 8) {
        const __m256i v = _mm256_loadu_si256((const __m256i *)(buf + j));
        const __m256i in = kwk_in_bracket_u32(v, vlo, vspan);
        const unsigned mask = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(in));
        const __m256i perm = kwk_compress_perm8(mask);
        _mm256_storeu_si256((__m256i *)(out + c), _mm256_permutevar8x32_epi32(v, perm));
        c += __builtin_popcount(mask);
    }
#endif
    for (; j < b; ++j) {
        const uint32_t x = buf[j];
        out[c] = x;
        c += (uint32_t)(x - lo) <= span;
    }
    return c;
}

static int64_t qk_bracket_u64(const uint64_t *buf, int64_t b, uint64_t lo, uint64_t span,
                              uint64_t *out)
{
    int64_t c = 0;
    for (int64_t j = 0; j < b; ++j) {
        const uint64_t x = buf[j];
        out[c] = x;
        c += (uint64_t)(x - lo) <= span;
    }
    return c;
}

/* qk_sample_size: kth_pick.h */

/* Sort the row instead of bracketing when its ranks form more than this
 * many runs of consecutive ranks (each run costs a bracket test per key), or
 * when it is shorter than QK_BRACKET_MIN_N (a radix sort of a short row
 * costs less than sampling it), or than QK_SORT_N_PER_GROUP keys per run
 * (below). */
enum { QK_SELECT_MAX_GROUPS = 3, QK_BRACKET_MIN_N = 512 };

/* Rows of keys in memory are sorted whole, not bracketed, up to
 * QK_SORT_N_PER_GROUP keys per group of ranks: each group costs the
 * bracketing a counting and a compress pass over the row, while the vector
 * quicksort costs about the same per key at any of these lengths.  Measured
 * (native, AVX2 target on Zen 3, rows of randn, ns/element, bracket vs
 * sort): float32 one q 1024: 7.7 vs 4.6, 2048: 5.1 vs 6.5; three q (three
 * groups) 1024: 15.1 vs 5.9, 4096: 8.5 vs 6.0, 8192: 7.0 vs 6.5, 16384: 4.7
 * vs 6.6; float64 one q 1024: 12.3 vs 11.7, 2048: 8.0 vs 10.2; three q
 * 4096: 15.9 vs 11.6, 8192: 13.1 vs 11.5. */
enum { QK_SORT_N_PER_GROUP = 1536 };

/* A row's keys sorted whole: the vector quicksort where one is compiled
 * and the keys are wide (values_sort.h: for 32-bit keys of more than 16
 * bits; for 64-bit keys of more than 40 bits, rows it takes), else the
 * radix sort. */
static void qk_sort_keys_u32(uint32_t *key, uint32_t *tmp, int64_t n, uint32_t lo, int bits)
{
    vs_sort_u32(key, tmp, n, lo, bits);
}
static void qk_sort_keys_u64(uint64_t *key, uint64_t *tmp, int64_t n, uint64_t lo, int bits)
{
#if defined(KWK_HAVE_SIMD_QSORT)
    if (bits > 40 && n <= KWK_SIMD_QSORT64_MAX_N) {
        simd_qsort_64(key, n);
        return;
    }
#endif
    key_radix_u64(key, tmp, n, lo, bits);
}

/* Separate rank selections for sorted distinct ranks: a rank next to the
 * previous one costs only a counting pass. */
static int64_t qk_groups(const int64_t *want, int64_t m)
{
    int64_t groups = 0;
    for (int64_t t = 0; t < m; ++t) groups += t == 0 || want[t] != want[t - 1] + 1;
    return groups;
}

/* A whole group of LANES rows (from row (o, i) on) of the network path
 * answered at once where a kernel exists (float32: qk_group8_f32): 1 if
 * it was, 0 to answer them row by row. */
#define QK_GROUP_ARGS                                                          \
    const void *src, int64_t o, int64_t i, int64_t inner, int64_t src_so, int64_t src_si, \
        int64_t step, int64_t len, const kwk_net_pair *pairs, int npairs, const double *q, \
        int64_t nq, void *out, int64_t dst_sq, int64_t dst_so, int64_t dst_si, int mode, \
        int ignore_nan
static int qk_group_u32(QK_GROUP_ARGS);
/* the body of a hook without a kernel */
#define QK_NO_GROUP                                                            \
    (void)src, (void)o, (void)i, (void)inner, (void)src_so, (void)src_si, (void)step, (void)len, \
        (void)pairs, (void)npairs, (void)q, (void)nq, (void)out, (void)dst_sq, (void)dst_so, \
        (void)dst_si, (void)mode, (void)ignore_nan;                          \
    return 0
static int qk_group_u64(QK_GROUP_ARGS) { QK_NO_GROUP; }

/* Keys of the float types: the inverse of kwk_key_f32/f64 for keys that are
 * neither zero nor NaN (those are resolved from qk_row_info). */
#define QK_DEFINE(UT, FT, SUF, LANES, KEY, SIGN, INF, FMA, FLOOR, CEIL, RINT) \
    static UT qk_bits_of_key_##SUF(UT k)                                      \
    {                                                                         \
        return (k & (UT)(SIGN)) ? (UT)(k ^ (UT)(SIGN)) : (UT)~k;              \
    }                                                                         \
                                                                              \
    /* key[j] for the row, and what qk_row_info needs (added to *info), in   \
     * one branch-free pass (NaN bits are compared only when a NaN is        \
     * selected). */                                                          \
    static void qk_gather_##SUF(const char *row, int64_t step, int64_t n, UT *key, \
                                qk_row_info *info)                            \
    {                                                                         \
        /* counts in UT: rows are at most 2^24 long (torch's limit) */         \
        UT nnan = 0, pz = 0, nz = 0;                                          \
        for (int64_t j = 0; j < n; ++j) {                                     \
            UT b;                                                             \
            memcpy(&b, row + j * step, sizeof(UT));                           \
            key[j] = KEY(b);                                                  \
            nnan += (UT)(b & (UT)~(UT)(SIGN)) > (UT)(INF);                    \
            pz += b == 0;                                                     \
            nz += b == (UT)(SIGN);                                            \
        }                                                                     \
        info->nnan += (int64_t)nnan;                                          \
        info->pos_zero |= pz != 0;                                            \
        info->neg_zero |= nz != 0;                                            \
    }                                                                         \
                                                                              \
    /* The NaN bits of a row, and whether they differ. */                     \
    static void qk_nan_bits_##SUF(const char *row, int64_t step, int64_t n, qk_row_info *info) \
    {                                                                         \
        const UT mag = (UT)~(UT)(SIGN);                                       \
        int have = 0;                                                         \
        for (int64_t j = 0; j < n; ++j) {                                     \
            UT b;                                                             \
            memcpy(&b, row + j * step, sizeof(UT));                           \
            if ((UT)(b & mag) <= (UT)(INF)) continue;                         \
            if (!have) { info->nan_bits = b; have = 1; }                      \
            else if (b != (UT)info->nan_bits) { info->nan_mixed = 1; return; } \
        }                                                                     \
    }                                                                         \
                                                                              \
    /* The key at stable rank r + 1, given the key at rank r: the same key if \
     * r + 1 still falls in its run of equal keys, else the next larger. */   \
    /* torch's ranks for q (already in the input's precision). */             \
    static qk_ranks qk_ranks_##SUF(FT q, int64_t n, const qk_row_info *info,  \
                                   int mode, int ignore_nan)                  \
    {                                                                         \
        FT rank;                                                              \
        if (ignore_nan) {                                                     \
            rank = q * (FT)(n - info->nnan - 1);                              \
            if (rank < 0) rank = 0;                                           \
        } else {                                                              \
            rank = info->nnan ? (FT)(n - 1) : q * (FT)(n - 1);                \
        }                                                                     \
        if (mode == KWK_QUANTILE_LOWER) rank = FLOOR(rank);                   \
        else if (mode == KWK_QUANTILE_HIGHER) rank = CEIL(rank);              \
        else if (mode == KWK_QUANTILE_NEAREST) rank = RINT(rank);             \
        qk_ranks r;                                                           \
        r.below = (int64_t)rank;                                              \
        r.above = (int64_t)CEIL(rank);                                        \
        r.w = mode == KWK_QUANTILE_MIDPOINT ? 0.5 : (double)(rank - (FT)r.below); \
        return r;                                                             \
    }                                                                         \
                                                                              \
    static FT qk_lerp_##SUF(FT a, FT b, FT w)                                 \
    {                                                                         \
        const int small = (w < 0 ? -w : w) < (FT)0.5;                         \
        return FMA(small ? w : w - (FT)1, b - a, small ? a : b);              \
    }                                                                         \
                                                                              \
    /* Bits of the element at sorted rank r, given its key.  KWK_DEFER when   \
     * torch's sort decides among equal keys of different bits. */            \
    static int qk_resolve_##SUF(UT key, const qk_row_info *info, UT *bits)    \
    {                                                                         \
        if (key == (UT)~(UT)0) {                                              \
            if (info->nan_mixed) return KWK_DEFER;                            \
            *bits = (UT)info->nan_bits;                                       \
        } else if (key == (UT)(SIGN)) {                                       \
            if (info->pos_zero && info->neg_zero) return KWK_DEFER;           \
            *bits = info->neg_zero ? (UT)(SIGN) : (UT)0;                      \
        } else {                                                              \
            *bits = qk_bits_of_key_##SUF(key);                                \
        }                                                                     \
        return KWK_OK;                                                        \
    }                                                                         \
                                                                              \
    /* got[t] = the key at stable rank want[t] (sorted, distinct, in at most  \
     * QK_SELECT_MAX_GROUPS runs of consecutive ranks) of a row: key[], or    \
     * (key NULL) a long row read through g.  Only keys are needed (equal keys are told apart later by   \
     * qk_resolve), so: one sample brackets each run, one pass over the row   \
     * copies the keys inside each bracket to its share of the scratch and    \
     * counts those below, and a radix sort of each bracket (a few percent of \
     * the row) gives every rank of its run.  A rank outside its bracket (or  \
     * a bracket overflowing its share) is then selected alone by sw_rank_src. */ \
    static int qk_ranks_src_##SUF(sw_gather_fn_##SUF g, const char *row, int64_t step, \
                                  const UT *key, int64_t n, const int64_t *want, int64_t m, \
                                  UT *got, sw_rank_scratch *s)                \
    {                                                                         \
        enum { G = QK_SELECT_MAX_GROUPS };                                    \
        UT sample[QK_SAMPLE_MAX], buf[SW_SRC_BLOCK], lo[G], span[G];          \
        int64_t below[G] = {0}, at_lo[G] = {0}, cnt[G] = {0}, group[2 * G];   \
        int over[G] = {0}, done[2 * G] = {0};                                 \
        int64_t ng = 0;                                                       \
        for (int64_t t = 0; t < m; ++t) {                                     \
            if (t == 0 || want[t] != want[t - 1] + 1) ++ng;                   \
            group[t] = ng - 1;                                                \
        }                                                                     \
        const int64_t cap = n / ng;                                           \
        UT *share = (UT *)s->ka;                                              \
        const int64_t ns = qk_sample_size(n), stride = n / ns;               \
        for (int64_t i = 0; i < ns; ++i) {                                    \
            const int64_t j = i * stride + stride / 2;                        \
            if (key) sample[i] = key[j];                                      \
            else g(row + j * step, step, 1, (UT)0, &sample[i]);               \
        }                                                                     \
        {   /* sorted here (sw_bounds' insertion sort is quadratic) */        \
            UT smin = (UT)~(UT)0, smax = 0;                                   \
            for (int64_t i = 0; i < ns; ++i) {                                \
                smin = sample[i] < smin ? sample[i] : smin;                   \
                smax = sample[i] > smax ? sample[i] : smax;                   \
            }                                                                 \
            key_radix_##SUF(sample, buf, ns, smin, kwk_bits_for((uint64_t)(UT)(smax - smin))); \
        }                                                                     \
        /* a row in memory: its extremes bound the outer brackets (a rank   \
         * near 0 or n - 1 then lands in the run of the row's minimum or      \
         * maximum when that run is long, as ReLU zeros are) */               \
        UT rmin = 0, rmax = (UT)~(UT)0;                                       \
        if (key) {                                                            \
            rmin = rmax = key[0];                                             \
            for (int64_t j = 1; j < n; ++j) {                                 \
                rmin = key[j] < rmin ? key[j] : rmin;                         \
                rmax = key[j] > rmax ? key[j] : rmax;                         \
            }                                                                 \
        }                                                                     \
        for (int64_t t = 0; t < m; ++t) {                                     \
            if (t > 0 && group[t] == group[t - 1]) continue;                  \
            /* sample ranks centre -+ margin around the rank's expected       \
             * place (the sample is sorted) */                                \
            const int64_t centre = (int64_t)(((double)want[t] + 0.5) * (double)ns / (double)n); \
            const int64_t margin = sw_isqrt(ns) + 1;                          \
            const int64_t a = centre - margin, b = centre + margin;           \
            const UT l = a > 0 ? sample[a] : rmin, h = b < ns - 1 ? sample[b] : rmax; \
            lo[group[t]] = l;                                                 \
            span[group[t]] = (UT)(h - l);                                     \
        }                                                                     \
        /* blocks small enough that a share can take several: a block may  \
         * add up to its length to a bracket, which is checked before it.     \
         * (Blocks of SW_SRC_BLOCK would mark every bracket of a short row    \
         * overflowing at once.)  Streamed rows are long: full blocks. */     \
        int64_t block = SW_SRC_BLOCK;                                         \
        while (key && block > 16 && block > cap / 4) block /= 2;              \
        for (int64_t j0 = 0; j0 < n; j0 += block) {                           \
            const int64_t b = n - j0 < block ? n - j0 : block;                \
            const UT *blk = key ? key + j0 : buf;                             \
            if (!key) g(row + j0 * step, step, b, (UT)0, buf);                \
            for (int64_t u = 0; u < ng; ++u) {                                \
                const UT l = lo[u];                                           \
                UT bl = 0, el = 0; /* at most SW_SRC_BLOCK: fit any UT */     \
                for (int64_t j = 0; j < b; ++j) {                             \
                    bl += blk[j] < l;                                         \
                    el += blk[j] == l;                                        \
                }                                                             \
                below[u] += (int64_t)bl;                                      \
                at_lo[u] += (int64_t)el;                                      \
                if (over[u]) continue;                                        \
                if (cnt[u] > cap - b - 8) { over[u] = 1; continue; }          \
                cnt[u] += qk_bracket_##SUF(blk, b, l, span[u], share + u * cap + cnt[u]); \
            }                                                                 \
        }                                                                     \
        int missed = 0;                                                       \
        for (int64_t u = 0; u < ng; ++u)                                      \
            if (!over[u] && cnt[u] > 1)                                       \
                key_radix_##SUF(share + u * cap, (UT *)s->kb, cnt[u], lo[u],  \
                               kwk_bits_for((uint64_t)span[u]));              \
        for (int64_t t = 0; t < m; ++t) {                                     \
            const int64_t u = group[t], rr = want[t] - below[u];              \
            if (rr >= 0 && rr < at_lo[u]) {                                   \
                /* in the run of keys equal to the bracket's bottom: a tie-   \
                 * heavy row (ReLU zeros) overflows its bracket there */      \
                got[t] = lo[u];                                               \
            } else if (over[u] || rr < 0 || rr >= cnt[u]) {                   \
                missed = 1;                                                   \
                continue;                                                     \
            } else {                                                          \
                got[t] = share[u * cap + rr];                                 \
            }                                                                 \
            done[t] = 1;                                                      \
        }                                                                     \
        for (int64_t t = 0; missed && t < m; ++t) { /* scratch is free now */ \
            if (done[t]) continue;                                            \
            const int64_t j = key ? sw_rank_##SUF(key, n, want[t], s)        \
                                  : sw_rank_src_##SUF(g, row, step, n, want[t], s); \
            if (j < 0) return KWK_E_NOMEM;                                    \
            if (key) got[t] = key[j];                                         \
            else g(row + j * step, step, 1, (UT)0, &got[t]);                  \
        }                                                                     \
        return KWK_OK;                                                        \
    }                                                                         \
                                                                              \
    /* got[t] = the key at stable rank want[t] (want sorted, distinct).      \
     * key: the row's keys (may be reordered), or NULL for a long row read    \
     * through g, which must then need few selections (qk_streams). */        \
    static int qk_select_##SUF(sw_gather_fn_##SUF g, const char *row, int64_t step, \
                               UT *key, UT *tmp, int64_t n, const int64_t *want, int64_t m, \
                               UT *got, sw_rank_scratch *s)                   \
    {                                                                         \
        int64_t ng = 0;                                                       \
        if (!key || (n >= QK_BRACKET_MIN_N &&                                 \
                     (ng = qk_groups(want, m)) <= QK_SELECT_MAX_GROUPS &&     \
                     n > QK_SORT_N_PER_GROUP * ng))                           \
            return qk_ranks_src_##SUF(g, row, step, key, n, want, m, got, s); \
        if (n <= QK_INSERTION_MAX) {                                          \
            qk_insertion_##SUF(key, n);                                       \
        } else {                                                              \
            UT lo = key[0], hi = key[0];                                      \
            for (int64_t j = 1; j < n; ++j) {                                 \
                lo = key[j] < lo ? key[j] : lo;                               \
                hi = key[j] > hi ? key[j] : hi;                               \
            }                                                                 \
            qk_sort_keys_##SUF(key, tmp, n, lo, kwk_bits_for((uint64_t)(UT)(hi - lo))); \
        }                                                                     \
        for (int64_t t = 0; t < m; ++t) got[t] = key[want[t]];                \
        return KWK_OK;                                                        \
    }                                                                         \
                                                                              \
    static int qk_quantile_##SUF(sw_gather_fn_##SUF g, const void *src, int64_t outer, \
                                 int64_t len, int64_t inner, int64_t src_so,  \
                                 int64_t src_sl, int64_t src_si, const double *q, \
                                 int64_t nq, void *out, int64_t dst_sq, int64_t dst_so, \
                                 int64_t dst_si, int mode, int ignore_nan)    \
    {                                                                         \
        const int64_t es = (int64_t)sizeof(UT);                               \
        const size_t n = (size_t)len;                                         \
        /* long rows with few q (each q: at most one selection, as its two    \
         * ranks are adjacent) are read block by block: no key array, whose   \
         * allocation and first touch cost more than the passes */            \
        const int stream = len > SW_SRC_MIN && nq <= QK_SELECT_MAX_GROUPS;    \
        UT *key = stream ? NULL : (UT *)malloc(n * sizeof(UT));               \
        UT *tmp = stream ? NULL : (UT *)malloc(n * sizeof(UT));               \
        qk_ranks *rk = (qk_ranks *)malloc((size_t)nq * sizeof(qk_ranks));     \
        int64_t *want = (int64_t *)malloc((size_t)(2 * nq) * sizeof(int64_t)); \
        UT *got = (UT *)malloc((size_t)(2 * nq) * sizeof(UT));                \
        int64_t *slot = (int64_t *)malloc((size_t)nq * sizeof(int64_t));      \
        int64_t m = 0, ranks_nnan = -1; /* no ranks computed yet */           \
        sw_rank_scratch s;                                                    \
        int status = sw_rank_scratch_init(&s, len);                           \
        if ((!stream && (!key || !tmp)) || !rk || !want || !got || !slot) status = KWK_E_NOMEM; \
        /* short rows, LANES at a time, through a sorting network: their     \
         * keys side by side in net[], their infos in net_info[] */          \
        const int64_t rows = outer * inner;                                   \
        const int use_net = len >= 2 && len <= KWK_NET_MAX && rows >= (LANES); \
        UT net[KWK_NET_MAX * (LANES)];                                        \
        qk_row_info net_info[LANES];                                          \
        kwk_net_pair pairs[KWK_NET_MAX_PAIRS];                                  \
        const int npairs = use_net ? kwk_net_pairs((int)len, pairs) : 0;      \
        const int64_t net_end = use_net ? rows - rows % (LANES) : 0;          \
        for (int64_t r = 0, o = 0, i = 0; status == KWK_OK && r < rows;       \
             ++r, i = i + 1 == inner ? 0 : i + 1, o += i == 0) {              \
            {                                                                 \
                const char *row = (const char *)src + (o * src_so + i * src_si) * es; \
                const int64_t step = src_sl * es;                             \
                qk_row_info info;                                             \
                memset(&info, 0, sizeof info);                                \
                const int lane = (int)(r % (LANES));                          \
                if (r < net_end && lane == 0 && qk_group_##SUF(src, o, i, inner, src_so, src_si, \
                        step, len, pairs, npairs, q, nq, out, dst_sq, dst_so, dst_si, mode, \
                        ignore_nan)) {                                        \
                    /* the whole group answered (qk_group8_f32) */            \
                    for (int l = 1; l < (LANES); ++l) { ++r; i = i + 1 == inner ? 0 : i + 1; o += i == 0; } \
                    continue;                                                 \
                }                                                             \
                if (r < net_end && lane == 0) {                               \
                    for (int l = 0; l < (LANES); ++l) {                       \
                        const int64_t rl = r + l, ol = rl / inner, il = rl % inner; \
                        memset(&net_info[l], 0, sizeof net_info[l]);          \
                        qk_gather_##SUF((const char *)src + (ol * src_so + il * src_si) * es, \
                                        step, len, key, &net_info[l]);        \
                        for (int64_t j = 0; j < len; ++j) net[j * (LANES) + l] = key[j]; \
                    }                                                         \
                    kwk_net_sort_##SUF(net, (const kwk_net_pair *)pairs, npairs); \
                }                                                             \
                if (r < net_end) {                                            \
                    info = net_info[lane];                                    \
                    for (int64_t j = 0; j < len; ++j) key[j] = net[j * (LANES) + lane]; \
                } else if (stream) {                                          \
                    UT buf[SW_SRC_BLOCK];                                     \
                    for (int64_t j0 = 0; j0 < len; j0 += SW_SRC_BLOCK) {      \
                        const int64_t b = len - j0 < SW_SRC_BLOCK ? len - j0 : SW_SRC_BLOCK; \
                        qk_gather_##SUF(row + j0 * step, step, b, buf, &info); \
                    }                                                         \
                } else {                                                      \
                    qk_gather_##SUF(row, step, len, key, &info);              \
                }                                                             \
                /* the ranks every q needs, sorted and distinct, and each q's  \
                 * slot among them: the same for every row with as many NaNs  \
                 * as the previous one, so computed again only when that      \
                 * count changes */                                           \
                if (info.nnan != ranks_nnan) {                                \
                    ranks_nnan = info.nnan;                                   \
                    m = 0;                                                    \
                    for (int64_t t = 0; t < nq; ++t) {                        \
                        rk[t] = qk_ranks_##SUF((FT)q[t], len, &info, mode, ignore_nan); \
                        want[m++] = rk[t].below;                              \
                        if (rk[t].above != rk[t].below) want[m++] = rk[t].above; \
                    }                                                         \
                    if (m <= QK_INSERTION_MAX) qk_insertion_i64(want, m);     \
                    else qsort(want, (size_t)m, sizeof(int64_t), qk_cmp_i64); \
                    int64_t d = 0;                                            \
                    for (int64_t t = 0; t < m; ++t)                           \
                        if (d == 0 || want[t] != want[d - 1]) want[d++] = want[t]; \
                    m = d;                                                    \
                    for (int64_t t = 0; t < nq; ++t) {                        \
                        int64_t lo = 0, hi = m - 1;                           \
                        while (lo < hi) {                                     \
                            const int64_t mid = (lo + hi) / 2;                \
                            if (want[mid] < rk[t].below) lo = mid + 1; else hi = mid; \
                        }                                                     \
                        slot[t] = lo;                                         \
                    }                                                         \
                }                                                             \
                if (r < net_end) {                                            \
                    for (int64_t t = 0; t < m; ++t) got[t] = key[want[t]];    \
                } else {                                                      \
                    status = qk_select_##SUF(g, row, step, stream ? NULL : key, tmp, len, \
                                             want, m, got, &s);               \
                }                                                             \
                if (status != KWK_OK) break;                                  \
                if (info.nnan > 0) {                                          \
                    int nan_selected = 0;                                     \
                    for (int64_t t = 0; t < m; ++t) nan_selected |= got[t] == (UT)~(UT)0; \
                    if (nan_selected) qk_nan_bits_##SUF(row, step, len, &info); \
                }                                                             \
                for (int64_t t = 0; t < m; ++t) {                             \
                    UT bits;                                                  \
                    status = qk_resolve_##SUF(got[t], &info, &bits);          \
                    if (status != KWK_OK) break;                              \
                    got[t] = bits;                                            \
                }                                                             \
                if (status != KWK_OK) break;                                  \
                for (int64_t t = 0; t < nq; ++t) {                            \
                    const int64_t lo = slot[t];                               \
                    UT ab = got[lo], bb = got[lo + (rk[t].above != rk[t].below)]; \
                    char *dst = (char *)out + (t * dst_sq + o * dst_so + i * dst_si) * es; \
                    if (mode == KWK_QUANTILE_LINEAR || mode == KWK_QUANTILE_MIDPOINT) { \
                        FT a, b;                                              \
                        memcpy(&a, &ab, sizeof a);                            \
                        memcpy(&b, &bb, sizeof b);                            \
                        const FT v = qk_lerp_##SUF(a, b, (FT)rk[t].w);        \
                        memcpy(dst, &v, sizeof v);                            \
                    } else {                                                  \
                        memcpy(dst, &ab, sizeof ab);                          \
                    }                                                         \
                }                                                             \
            }                                                                 \
        }                                                                     \
        free(key);                                                            \
        free(tmp);                                                            \
        free(rk);                                                             \
        free(want);                                                           \
        free(got);                                                            \
        free(slot);                                                           \
        sw_rank_scratch_free(&s);                                             \
        return status;                                                        \
    }

QK_DEFINE(uint32_t, float, u32, 8, kwk_key_f32, 0x80000000u, 0x7F800000u, fmaf, floorf, ceilf, rintf)
QK_DEFINE(uint64_t, double, u64, 4, kwk_key_f64, 0x8000000000000000ull, 0x7FF0000000000000ull, fma, floor, ceil, rint)

#if defined(__AVX2__)
/* short_sort_network.h's comparators for n (2..16) with n a constant:
 * unrolled, the keys stay in registers (a loop over the pairs table read
 * and wrote them in memory, 39 round trips for rows of 12) */
static inline __attribute__((always_inline)) void qk_net8_n(__m256i *k, const int n)
{
    __m256i r[SN_MAX];
    _Pragma("GCC unroll 16") for (int j = 0; j < n; ++j) r[j] = k[j];
    _Pragma("GCC unroll 64") for (int c = SN_AT[n]; c < SN_AT[n + 1]; ++c) {
        const __m256i x = r[SN_PAIRS[c][0]], y = r[SN_PAIRS[c][1]];
        r[SN_PAIRS[c][0]] = _mm256_min_epu32(x, y);
        r[SN_PAIRS[c][1]] = _mm256_max_epu32(x, y);
    }
    _Pragma("GCC unroll 16") for (int j = 0; j < n; ++j) k[j] = r[j];
}

/* Eight float32 rows of 2..KWK_NET_MAX elements at once, all in vectors:
 * qk_quantile_u32's network path gathers each row's keys, sorts the eight
 * side by side, then answers row by row (ranks, bits, lerp, store: ~60 ns
 * a row, 2.7 ns/el for rows of 12, most of the call).  Rows holding no NaN
 * (so every row has the same ranks) and not both zeros (whose bits torch's
 * sort decides) are answered here for all eight lanes at once, with the
 * same arithmetic (qk_ranks_u32, qk_lerp_u32's formula lane by lane); 0
 * leaves the group to the row-by-row path.  rowp[l]: row l's first
 * element; dstp[l]: its output for q[0] (q[t]'s at + t * dst_sq * 4). */
static int qk_group8_f32(const char *const rowp[8], int64_t step, int64_t len, int contiguous,
                         const kwk_net_pair *pairs, int npairs, const double *q, int64_t nq,
                         char *const dstp[8], int64_t dst_sq, int dst_contiguous, int mode,
                         int ignore_nan)
{
    const __m256i sign = _mm256_set1_epi32((int)0x80000000u), inf = _mm256_set1_epi32(0x7F800000);
    __m256i k[KWK_NET_MAX], nan = _mm256_setzero_si256(), pz = nan, nz = nan;
    for (int64_t j = 0; j < len; ++j) {
        __m256i b;
        if (contiguous) {
            b = _mm256_loadu_si256((const __m256i *)(const void *)(rowp[0] + j * step));
        } else {
            uint32_t lane[8];
            for (int l = 0; l < 8; ++l) memcpy(&lane[l], rowp[l] + j * step, 4);
            b = _mm256_loadu_si256((const __m256i *)(const void *)lane);
        }
        k[j] = kwk_keys8_f32(b);
        nan = _mm256_or_si256(nan, _mm256_cmpgt_epi32(_mm256_andnot_si256(sign, b), inf));
        pz = _mm256_or_si256(pz, _mm256_cmpeq_epi32(b, _mm256_setzero_si256()));
        nz = _mm256_or_si256(nz, _mm256_cmpeq_epi32(b, sign));
    }
    if (!_mm256_testz_si256(nan, nan) || !_mm256_testz_si256(pz, nz)) return 0;
    switch (len) { /* unsigned min/max of the keys */
#define QK_NET8_CASE(N) case N: qk_net8_n(k, N); break;
    QK_NET8_CASE(2) QK_NET8_CASE(3) QK_NET8_CASE(4) QK_NET8_CASE(5) QK_NET8_CASE(6)
    QK_NET8_CASE(7) QK_NET8_CASE(8) QK_NET8_CASE(9) QK_NET8_CASE(10) QK_NET8_CASE(11)
    QK_NET8_CASE(12) QK_NET8_CASE(13) QK_NET8_CASE(14) QK_NET8_CASE(15) QK_NET8_CASE(16)
#undef QK_NET8_CASE
    default:
        for (int c = 0; c < npairs; ++c) {
            const __m256i x = k[pairs[c][0]], y = k[pairs[c][1]];
            k[pairs[c][0]] = _mm256_min_epu32(x, y);
            k[pairs[c][1]] = _mm256_max_epu32(x, y);
        }
    }
    qk_row_info info;
    memset(&info, 0, sizeof info); /* no NaN: the same ranks in every lane */
    for (int64_t t = 0; t < nq; ++t) {
        const qk_ranks rk = qk_ranks_u32((float)q[t], len, &info, mode, ignore_nan);
        __m256i bits[2];
        for (int e = 0; e < 2; ++e) {
            const __m256i key = k[e ? rk.above : rk.below];
            /* qk_bits_of_key: sign set -> flip it, else all bits; the zero
             * key -> -0.0 in lanes holding -0.0 (they hold no +0.0) */
            const __m256i v = _mm256_castps_si256(_mm256_blendv_ps(
                _mm256_castsi256_ps(_mm256_xor_si256(key, _mm256_set1_epi32(-1))),
                _mm256_castsi256_ps(_mm256_xor_si256(key, sign)), _mm256_castsi256_ps(key)));
            bits[e] = _mm256_or_si256(v, _mm256_and_si256(_mm256_and_si256(nz, _mm256_cmpeq_epi32(key, sign)), sign));
        }
        __m256 r = _mm256_castsi256_ps(bits[0]);
        if (mode == KWK_QUANTILE_LINEAR || mode == KWK_QUANTILE_MIDPOINT) {
            const float w = (float)rk.w;
            const int small = (w < 0 ? -w : w) < 0.5f;
            const __m256 a = r, b = _mm256_castsi256_ps(bits[1]);
            r = _mm256_fmadd_ps(_mm256_set1_ps(small ? w : w - 1.0f), _mm256_sub_ps(b, a), small ? a : b);
        }
        if (dst_contiguous) {
            _mm256_storeu_ps((float *)(void *)(dstp[0] + t * dst_sq * 4), r);
        } else {
            float lane[8];
            _mm256_storeu_ps(lane, r);
            for (int l = 0; l < 8; ++l) memcpy(dstp[l] + t * dst_sq * 4, &lane[l], 4);
        }
    }
    return 1;
}
#endif

static int qk_group_u32(QK_GROUP_ARGS)
{
#if defined(__AVX2__)
    const char *rowp[8];
    char *dstp[8];
    for (int64_t l = 0, oo = o, ii = i; l < 8; ++l, ii = ii + 1 == inner ? 0 : ii + 1, oo += ii == 0) {
        rowp[l] = (const char *)src + (oo * src_so + ii * src_si) * 4;
        dstp[l] = (char *)out + (oo * dst_so + ii * dst_si) * 4;
    }
    /* the eight rows side by side in memory (columns of a non-last dim) */
    const int contiguous = src_si == 1 && i + 8 <= inner, dst_contiguous = dst_si == 1 && i + 8 <= inner;
    return qk_group8_f32(rowp, step, len, contiguous, pairs, npairs, q, nq, dstp, dst_sq,
                         dst_contiguous, mode, ignore_nan);
#else
    QK_NO_GROUP;
#endif
}
#undef QK_NO_GROUP
#undef QK_GROUP_ARGS

static int impl_quantile(int dtype, const void *src, int64_t outer, int64_t len,
                         int64_t inner, int64_t src_so, int64_t src_sl, int64_t src_si,
                         const double *q, int64_t nq, void *out, int64_t dst_sq,
                         int64_t dst_so, int64_t dst_si, int mode, int ignore_nan)
{
    if (outer == 0 || inner == 0 || nq == 0) return KWK_OK;
    switch (dtype) {
    case KWK_FLOAT32:
        return qk_quantile_u32(sw_gather_f32, src, outer, len, inner, src_so, src_sl, src_si,
                               q, nq, out, dst_sq, dst_so, dst_si, mode, ignore_nan);
    case KWK_FLOAT64:
        return qk_quantile_u64(sw_gather_f64, src, outer, len, inner, src_so, src_sl, src_si,
                               q, nq, out, dst_sq, dst_so, dst_si, mode, ignore_nan);
    default:
        return KWK_E_DTYPE;
    }
}

#endif
