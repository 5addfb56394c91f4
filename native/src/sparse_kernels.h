/*
 * sparse_kernels.h - sort-based sparse layers: sparsemax and 1.5-entmax
 * (the entmax package's exact sort-based thresholds), GroupSort, and
 * SortPooling (DGCNN / PyG SortAggregation).  Compiled once per target.
 *
 * Simplex projections.  The entmax package sorts the whole shifted row
 * z = x - max (entmax15: (x - max) / 2) descending, takes cumulative sums
 * (torch's CPU cumsum: a sequential sum in double for float32, rounded at
 * each step) and counts the positions rho where a condition holds:
 *     sparsemax: rho * z_rho > cumsum_rho - 1
 *     entmax15:  mean_rho - sqrt(max(delta_rho, 0)) <= z_rho
 * Only the largest elements can satisfy it, so the kernel sorts just the
 * candidates above a cut, runs the same arithmetic in the same order and
 * precision (bit-identical to the reference), and writes the output in a
 * second pass.  Why the cut loses no position (its proof, in short):
 *   - sparsemax: for z_rho <= -1 the condition fails by at least
 *     |z_rho| - 1 (z_1 = 0 and every z_i >= z_rho), while the rounding in
 *     the three operations and the cumsum is below
 *     |z_rho| * (u (3 n + 4) + u_double n^2) = |z_rho| * b.  Elements
 *     at or below -1 - 4b are therefore never counted; the kernel defers
 *     rows where b > 1/4.
 *   - entmax15: for z_rho <= -1.5, ss_rho >= z_rho^2 / 2 >= 1.125 (0
 *     and z_rho are among the summands; the sum of their squared
 *     deviations from any mean is at least z^2 / 2), so delta_rho < 0 even
 *     after rounding (ss's error is below 5 u rho z^2, under
 *     z^2 (1/2 - 1/2.25) while n < 1 / (110 u)) and tau_rho = mean_rho,
 *     which exceeds z_rho by at least |z_rho| / rho, far above its
 *     rounding (2 u |z|).  Longer rows are deferred (float32: n >= 152k).
 * torch's sqrt is MKL's (vsSqrt / vdSqrt), not always correctly rounded:
 * for entmax15 the kernel returns each row's mean and delta at the support
 * size and the caller forms tau = mean - torch.sqrt(delta) with torch's own
 * sqrt, then has the kernel apply it.  The support size itself is counted
 * with the correctly rounded sqrt; where some tau_rho lies within a few
 * ulps of z_rho (so an ulp of the square root could flip the decision)
 * the row is deferred.
 * Rows holding NaN or +-inf at their maximum make the reference fail
 * (gather at -1) or return NaN: such calls are deferred to it.
 */
#ifndef KWK_SPARSE_KERNELS_H
#define KWK_SPARSE_KERNELS_H

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "values_sort.h"

/* Up to SP_BUCKET_MIN candidates are sorted by insertion alone.  More go to
 * the vectorised quicksort where one is compiled (below; float64 only up
 * to its row cap); otherwise (and for float64 past the cap) up to
 * SP_INSERTION_MAX by buckets and insertion (the radix passes' fixed costs
 * dominate there), more by values_sort.h's radix sort. */
enum { SP_INSERTION_MAX = 160, SP_BUCKET_MIN = 12 };

/* What kwk_sparse_simplex computes (kwker.h). */
enum { SP_SPARSEMAX = 0, SP_ENTMAX_THRESHOLD = 1, SP_ENTMAX_APPLY = 2 };

/* Where a vectorised quicksort is compiled (simd_qsort.h, simd_qsort_avx2.h),
 * more than SP_BUCKET_MIN candidates are sorted by it (fewer: insertion,
 * faster there: rows of 7, 49 vs 84 ns a row): they are all <= 0, so
 * their magnitudes (the bits without the sign) ascending are the values
 * descending, one unsigned sort of bare keys.  The values come back as
 * -magnitude: a +0.0 returns as -0.0, which no later step can tell apart
 * (sums, products and compares treat the two zeros alike, and the output
 * is computed from x).  entmax15 over rows of 50 (nearly all candidates):
 * this sort replaced the bucket and insertion passes, a third of the
 * kernel's time. */
#if defined(KWK_HAVE_SIMD_QSORT)
#define SP_DEFINE_SIMD_SORT(T, UT, BITS)                                      \
    static int sp_simd_sort_desc_##BITS(T *v, int64_t m, UT *key)             \
    {                                                                         \
        if (BITS == 64 && m > KWK_SIMD_QSORT64_MAX_N) return 0; /* radix: faster */ \
        const UT sign = (UT)((UT)1 << (BITS - 1));                            \
        for (int64_t i = 0; i < m; ++i) {                                     \
            UT b;                                                             \
            memcpy(&b, &v[i], sizeof b);                                      \
            key[i] = (UT)(b & (UT)~sign);                                     \
        }                                                                     \
        simd_qsort_##BITS(key, m);                                            \
        for (int64_t i = 0; i < m; ++i) {                                     \
            const UT b = (UT)(key[i] | sign);                                 \
            memcpy(&v[i], &b, sizeof b);                                      \
        }                                                                     \
        return 1;                                                             \
    }
SP_DEFINE_SIMD_SORT(float, uint32_t, 32)
SP_DEFINE_SIMD_SORT(double, uint64_t, 64)
#undef SP_DEFINE_SIMD_SORT
#define SP_SIMD_SORT_DESC(BITS, v, m, key) sp_simd_sort_desc_##BITS(v, m, key)
#else
#define SP_SIMD_SORT_DESC(BITS, v, m, key) ((void)(v), (void)(m), (void)(key), 0)
#endif

/* The row's two scans before the sort: its maximum (any NaN reported in
 * *bad), then z = x - mx (halved for entmax15) kept where z > cut, into
 * cand; returns the count.  Scalar for float64 and without AVX2 (the
 * compiler keeps the maximum scalar: its NaN ordering); AVX2 for float32,
 * where the two scalar loops were 40% of entmax15 over rows of 50.  A
 * maximum of either zero sign serves: z differs then only in the sign of
 * a zero, which no later step can tell apart (see the sort above), and
 * every output is computed from z - tau with tau < 0. */
#define SP_DEFINE_SCANS(T, SUF)                                               \
    static T sp_max_scalar_##SUF(const T *x, int64_t n, int *bad)             \
    {                                                                         \
        T mx = x[0];                                                          \
        int b = 0;                                                            \
        for (int64_t j = 0; j < n; ++j) {                                     \
            b |= x[j] != x[j];                                                \
            mx = x[j] > mx ? x[j] : mx;                                       \
        }                                                                     \
        *bad = b;                                                             \
        return mx;                                                            \
    }                                                                         \
    static int64_t sp_collect_scalar_##SUF(const T *x, int64_t n, T mx, int entmax, T cut, \
                                           T *cand)                           \
    {                                                                         \
        int64_t m = 0;                                                        \
        for (int64_t j = 0; j < n; ++j) {                                     \
            T z = x[j] - mx;                                                  \
            if (entmax) z = z / (T)2;                                         \
            cand[m] = z;                                                      \
            m += z > cut;                                                     \
        }                                                                     \
        return m;                                                             \
    }
SP_DEFINE_SCANS(float, f32)
SP_DEFINE_SCANS(double, f64)
#undef SP_DEFINE_SCANS

#if defined(__AVX2__)
#include "compress_lut.h"
#include "keys.h"
static float sp_max_f32(const float *x, int64_t n, int *bad)
{
    if (n < 8) return sp_max_scalar_f32(x, n, bad);
    __m256 m = _mm256_loadu_ps(x), nan = _mm256_cmp_ps(m, m, _CMP_UNORD_Q);
    int64_t j = 8;
    for (; j + 8 <= n; j += 8) {
        const __m256 v = _mm256_loadu_ps(x + j);
        nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        m = _mm256_max_ps(m, v);
    }
    if (j < n) { /* the last eight, overlapping */
        const __m256 v = _mm256_loadu_ps(x + n - 8);
        nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        m = _mm256_max_ps(m, v);
    }
    *bad = _mm256_movemask_ps(nan) != 0;
    return kwk_hmax8_ps(m);
}
/* cand needs room for n + 7 (whole vectors are stored) */
static int64_t sp_collect_f32(const float *x, int64_t n, float mx, int entmax, float cut,
                              float *cand)
{
    const __m256 vm = _mm256_set1_ps(mx), vc = _mm256_set1_ps(cut);
    const __m256 scale = _mm256_set1_ps(entmax ? 0.5f : 1.0f); /* z / 2 == z * 0.5 exactly */
    int64_t m = 0, j = 0;
    for (; j + 8 <= n; j += 8) {
        const __m256 z = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + j), vm), scale);
        const unsigned keep = (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(z, vc, _CMP_GT_OQ));
        _mm256_storeu_ps(cand + m, _mm256_permutevar8x32_ps(z, kwk_compress_perm8(keep)));
        m += __builtin_popcount(keep);
    }
    return m + sp_collect_scalar_f32(x + j, n - j, mx, entmax, cut, cand + m);
}
#else
#define sp_max_f32 sp_max_scalar_f32
#define sp_collect_f32 sp_collect_scalar_f32
#endif
#define sp_max_f64 sp_max_scalar_f64
#define sp_collect_f64 sp_collect_scalar_f64

#define SP_DEFINE(T, SUF, DT, UNIT, SQRT, BITS)                                     \
    /* v (m values in (-span, 0]) sorted descending: the vectorised sort   \
     * above where there is one; else radix (values_sort.h) for many, and  \
     * for fewer spread into m buckets by value (monotone), then one       \
     * insertion pass, which only moves elements within their bucket */     \
    static void sp_sort_desc_##SUF(T *v, int64_t m, T span, void *key,        \
                                   void *tmp)                                 \
    {                                                                         \
        if (m > SP_BUCKET_MIN && SP_SIMD_SORT_DESC(BITS, v, m, key)) return;  \
        if (m > SP_INSERTION_MAX &&                                           \
            vs_sort_values(DT, (const char *)v, sizeof(T), m, (char *)v,      \
                           sizeof(T), 1, key, tmp) > 0)                       \
            return;                                                           \
        T *w = v;                                                             \
        if (m > SP_BUCKET_MIN && m <= SP_INSERTION_MAX) {                     \
            T *spread = key;                                                  \
            int32_t *start = tmp;                                             \
            const T scale = (T)m / span;                                      \
            for (int64_t b = 0; b <= m; ++b) start[b] = 0;                    \
            for (int64_t i = 0; i < m; ++i) {                                 \
                T f = -v[i] * scale;                                          \
                int64_t b = f < (T)0 ? 0 : f >= (T)(m - 1) ? m - 1 : (int64_t)f; \
                start[b + 1]++;                                               \
            }                                                                 \
            for (int64_t b = 0; b < m; ++b) start[b + 1] += start[b];         \
            for (int64_t i = 0; i < m; ++i) {                                 \
                T f = -v[i] * scale;                                          \
                int64_t b = f < (T)0 ? 0 : f >= (T)(m - 1) ? m - 1 : (int64_t)f; \
                spread[start[b]++] = v[i];                                    \
            }                                                                 \
            w = spread;                                                       \
        }                                                                     \
        for (int64_t i = 1; i < m; ++i) { /* +0.0 beside -0.0: any order */  \
            T e = w[i];                                                       \
            int64_t j = i;                                                    \
            while (j > 0 && w[j - 1] < e) { w[j] = w[j - 1]; --j; }           \
            w[j] = e;                                                         \
        }                                                                     \
        if (w != v) memcpy(v, w, (size_t)m * sizeof(T));                      \
    }                                                                         \
    static void sp_apply_##SUF(const T *x, int64_t n, T mx, int entmax, T tau, \
                               T *out)                                        \
    {                                                                         \
        for (int64_t j = 0; j < n; ++j) {                                     \
            T z = x[j] - mx;                                                  \
            if (entmax) z = z / (T)2;                                         \
            T v = z - tau;                                                    \
            v = v < 0 ? (T)0 : v; /* torch.clamp(min=0): keeps -0.0 */       \
            out[j] = entmax ? v * v : v;                                      \
        }                                                                     \
    }                                                                         \
    /* One row; returns 0, or KWK_DEFER when the reference must decide. */    \
    static int sp_row_##SUF(const T *x, int64_t n, T *out, int64_t *support,  \
                            int mode, T *stats, T *cand, T *work, void *key,  \
                            void *tmp)                                        \
    {                                                                         \
        const int entmax = mode != SP_SPARSEMAX;                              \
        int bad;                                                              \
        const T mx = sp_max_##SUF(x, n, &bad);                                \
        if (bad || isinf(mx)) return KWK_DEFER;                               \
        const double b = (UNIT) * (3.0 * (double)n + 4.0) +                   \
                         0x1p-53 * (double)n * (double)n;                     \
        if (entmax ? (double)n * (UNIT) * 110.0 >= 1.0 : b > 0.25)            \
            return KWK_DEFER;                                                 \
        if (n >= ((int64_t)1 << 31)) return KWK_DEFER;                        \
        if (mode == SP_ENTMAX_APPLY) {                                        \
            sp_apply_##SUF(x, n, mx, 1, stats[0], out);                       \
            return KWK_OK;                                                    \
        }                                                                     \
        const T cut = entmax ? (T)-1.5 : (T)(-1.0 - 4.0 * b);                 \
        const int64_t m = sp_collect_##SUF(x, n, mx, entmax, cut, cand);      \
        sp_sort_desc_##SUF(cand, m, -cut, key, tmp);                          \
        /* the cumulative sums (sequential, in double: torch's order), then \
         * each position's test, independent of the others (vectorised) */  \
        T *cs = work, *cq = work + n;                                         \
        double sum = 0, sum_sq = 0;                                           \
        for (int64_t r = 0; r < m; ++r) {                                     \
            sum += (double)cand[r];                                           \
            cs[r] = (T)sum;                                                   \
            if (entmax) {                                                     \
                sum_sq += (double)(T)(cand[r] * cand[r]);                     \
                cq[r] = (T)sum_sq;                                            \
            }                                                                 \
        }                                                                     \
        const int m32 = (int)m; /* n < 2^31: checked above */                \
        int count = 0, near = 0;                                              \
        if (!entmax) {                                                        \
            for (int r = 0; r < m32; ++r)                                     \
                count += (T)(r + 1) * cand[r] > cs[r] - (T)1;                 \
        } else {                                                              \
            for (int r = 0; r < m32; ++r) {                                   \
                const T rho = (T)(r + 1);                                     \
                const T mean = cs[r] / rho, mean_sq = cq[r] / rho;            \
                const T ss = rho * (mean_sq - mean * mean);                   \
                T delta = ((T)1 - ss) / rho;                                  \
                delta = delta < 0 ? (T)0 : delta;                             \
                const T root = SQRT(delta), tau = mean - root;                \
                count += tau <= cand[r];                                      \
                /* torch's sqrt may differ by an ulp: a decision that close \
                 * is left to the reference */                                \
                const T gap = tau - cand[r];                                  \
                const T fmean = mean < 0 ? -mean : mean;                      \
                near |= (gap < 0 ? -gap : gap) <= (T)(8 * (UNIT)) * (fmean + root); \
            }                                                                 \
        }                                                                     \
        if (near || count < 1) return KWK_DEFER;                              \
        *support = count;                                                     \
        const T rho = (T)count, cm = cs[count - 1];                           \
        if (entmax) { /* the caller takes the square root (see the top) */   \
            const T mean = cm / rho, mean_sq = cq[count - 1] / rho;           \
            const T delta = ((T)1 - rho * (mean_sq - mean * mean)) / rho;     \
            stats[0] = mean;                                                  \
            stats[1] = delta < 0 ? (T)0 : delta;                              \
            return KWK_OK;                                                    \
        }                                                                     \
        sp_apply_##SUF(x, n, mx, 0, (cm - (T)1) / rho, out);                  \
        return KWK_OK;                                                        \
    }

SP_DEFINE(float, f32, KWK_FLOAT32, 0x1p-24, sqrtf, 32)
SP_DEFINE(double, f64, KWK_FLOAT64, 0x1p-53, sqrt, 64)

static int impl_sparse_simplex(int dtype, int mode, const void *src, int64_t rows,
                               int64_t len, void *out, int64_t *support, void *stats)
{
    const size_t width = dtype == KWK_FLOAT32 ? sizeof(float) : sizeof(double);
    /* cand (len + 8: whole vectors stored), work (2 len), radix key and tmp
     * (8-byte words, len each) */
    char *ws = malloc((size_t)len * (3 * width + 16) + 8 * width);
    if (!ws) return KWK_E_NOMEM;
    void *cand = ws, *work = ws + ((size_t)len + 8) * width;
    void *key = (char *)work + (size_t)len * 2 * width;
    void *tmp = (char *)key + (size_t)len * 8;
    int status = KWK_OK;
    for (int64_t r = 0; r < rows; ++r) {
        const int64_t st = mode == SP_ENTMAX_APPLY ? r : 2 * r;
        int row_status;
        if (mode == SP_ENTMAX_APPLY && support[r] < 0) continue; /* deferred */
        if (dtype == KWK_FLOAT32)
            row_status = sp_row_f32((const float *)src + r * len, len, (float *)out + r * len,
                                    support + r, mode, stats ? (float *)stats + st : NULL,
                                    cand, work, key, tmp);
        else
            row_status = sp_row_f64((const double *)src + r * len, len,
                                    (double *)out + r * len, support + r, mode,
                                    stats ? (double *)stats + st : NULL, cand, work, key, tmp);
        if (row_status == KWK_DEFER) { /* the caller redoes this row */
            support[r] = -1;
            status = KWK_DEFER;
        }
    }
    free(ws);
    return status;
}

/* sparsemax's backward without its sum (torch's, whose order is not
 * reproduced here): phase 0 writes g where y != 0 and +0.0 elsewhere
 * (masked_fill); phase 1, given v[r] = sum / support, makes that
 * masked - v where y != 0 (torch.where(y != 0, masked - v, masked)). */
#define SPB_DEFINE(T, SUF)                                                     \
    static void spb_##SUF(int phase, const T *grad, const T *y, int64_t rows, \
                          int64_t n, T *masked, const T *v)                   \
    {                                                                         \
        for (int64_t r = 0; r < rows; ++r) {                                  \
            const T *g = grad + r * n, *o = y + r * n;                        \
            T *m = masked + r * n;                                            \
            if (phase == 0) {                                                 \
                for (int64_t j = 0; j < n; ++j) m[j] = o[j] == 0 ? (T)0 : g[j]; \
            } else {                                                          \
                const T shift = v[r];                                         \
                for (int64_t j = 0; j < n; ++j)                               \
                    m[j] = o[j] != 0 ? m[j] - shift : m[j];                   \
            }                                                                 \
        }                                                                     \
    }

SPB_DEFINE(float, f32)
SPB_DEFINE(double, f64)

static int impl_sparsemax_backward(int dtype, int phase, const void *grad, const void *y,
                                   int64_t rows, int64_t len, void *masked, const void *v)
{
    if (dtype == KWK_FLOAT32)
        spb_f32(phase, grad, y, rows, len, masked, v);
    else
        spb_f64(phase, grad, y, rows, len, masked, v);
    return KWK_OK;
}

/* ------------------------------------------------------------ GroupSort */

/* entmax15's backward around torch's square root and row sums (kwker.h:
 * kwk_entmax15_backward).  The reference's y.sqrt() is MKL's, which takes
 * a slow path for zeros (most of an entmax output: 640k floats, 81% zero,
 * 2.4 ms against 0.18 ms with the zeros replaced), so the root is taken of
 * y with its zeros made 1.0 and the zeros put back as they were (the root
 * of +-0 is +-0).  The products and the final difference round as torch's
 * elementwise ops do (no contraction: -ffp-contract=off). */
#define EMB_DEFINE(T, SUF)                                                     \
    static void emb_##SUF(int phase, const T *grad, const T *y, int64_t rows, \
                          int64_t n, T *a, T *b, const T *q)                  \
    {                                                                         \
        const int64_t total = rows * n;                                       \
        if (phase == 0) {                                                     \
            for (int64_t j = 0; j < total; ++j) a[j] = y[j] == 0 ? (T)1 : y[j]; \
        } else if (phase == 1) {                                              \
            for (int64_t j = 0; j < total; ++j) {                             \
                const T gppr = y[j] == 0 ? y[j] : a[j];                       \
                a[j] = gppr;                                                  \
                b[j] = grad[j] * gppr;                                        \
            }                                                                 \
        } else {                                                              \
            for (int64_t r = 0; r < rows; ++r) {                              \
                const T qr = q[r];                                            \
                T *dx = b + r * n;                                            \
                const T *gp = a + r * n;                                      \
                for (int64_t j = 0; j < n; ++j) dx[j] = dx[j] - qr * gp[j];   \
            }                                                                 \
        }                                                                     \
    }

EMB_DEFINE(float, f32)
EMB_DEFINE(double, f64)

static int impl_entmax15_backward(int dtype, int phase, const void *grad, const void *y,
                                  int64_t rows, int64_t len, void *a, void *b, const void *q)
{
    if (dtype == KWK_FLOAT32)
        emb_f32(phase, grad, y, rows, len, a, b, q);
    else
        emb_f64(phase, grad, y, rows, len, a, b, q);
    return KWK_OK;
}

/* torch.sort's ascending order with NaN last; equal keys keep index order
 * (stable) because insertion only passes strictly greater elements. */
#define GS_BEFORE(a, b) ((b) != (b) ? (a) == (a) : (a) < (b))
#define GS_AFTER(a, b) ((a) != (a) ? (b) == (b) : (a) > (b))

/* Put (v[i], p[i]) before (v[j], p[j]) in the order of the sort,
 * branch-free: NaN last ascending (first descending), ties by position. */
#define GS_EXCHANGE(T, v, p, up, i, j)                                          \
    do {                                                                      \
        const T a_ = v[i], b_ = v[j];                                         \
        const int an_ = a_ != a_, bn_ = b_ != b_;                             \
        const int tie_ = ((a_ == b_) | (an_ & bn_)) & (p[j] < p[i]);          \
        const int sw_ = (up ? (b_ < a_) | (an_ & !bn_) : (b_ > a_) | (bn_ & !an_)) | tie_; \
        const int pa_ = p[i], pb_ = p[j];                                     \
        v[i] = sw_ ? b_ : a_;                                                 \
        v[j] = sw_ ? a_ : b_;                                                 \
        p[i] = sw_ ? pb_ : pa_;                                               \
        p[j] = sw_ ? pa_ : pb_;                                               \
    } while (0)

#define GS_DEFINE(T, SUF)                                                      \
    static void gs_groups_##SUF(const T *x, int64_t groups, int64_t g,        \
                                int descending, T *out, uint8_t *perm)        \
    {                                                                         \
        if (g == 2) { /* branch-free, so that the compiler vectorises it */  \
            const int up = !descending;                                       \
            for (int64_t i = 0; i < groups; ++i) {                            \
                const T a = x[2 * i], b = x[2 * i + 1];                       \
                const int an = a != a, bn = b != b;                           \
                const int swap = up ? (b < a) | (an & !bn)                    \
                                    : (b > a) | (bn & !an);                   \
                out[2 * i] = swap ? b : a;                                    \
                out[2 * i + 1] = swap ? a : b;                                \
                perm[2 * i] = (uint8_t)swap;                                  \
                perm[2 * i + 1] = (uint8_t)(swap ^ 1);                        \
            }                                                                 \
            return;                                                           \
        }                                                                     \
        if (g == 4) { /* a 5-comparator network on (value, position):    \
                       * a total order, so the stable sort's result */        \
            const int up = !descending;                                       \
            for (int64_t i = 0; i < groups; ++i) {                            \
                T v[4] = {x[4 * i], x[4 * i + 1], x[4 * i + 2], x[4 * i + 3]}; \
                int p[4] = {0, 1, 2, 3};                                      \
                GS_EXCHANGE(T, v, p, up, 0, 1); GS_EXCHANGE(T, v, p, up, 2, 3); \
                GS_EXCHANGE(T, v, p, up, 0, 2); GS_EXCHANGE(T, v, p, up, 1, 3); \
                GS_EXCHANGE(T, v, p, up, 1, 2);                               \
                for (int k = 0; k < 4; ++k) {                                 \
                    out[4 * i + k] = v[k];                                    \
                    perm[4 * i + k] = (uint8_t)p[k];                          \
                }                                                             \
            }                                                                 \
            return;                                                           \
        }                                                                     \
        for (int64_t i = 0; i < groups; ++i) {                                \
            const T *src = x + i * g;                                         \
            T *o = out + i * g;                                               \
            uint8_t *p = perm + i * g;                                        \
            for (int64_t k = 0; k < g; ++k) {                                 \
                const T e = src[k];                                           \
                int64_t j = k;                                                \
                while (j > 0 && (descending ? GS_AFTER(e, o[j - 1])           \
                                            : GS_BEFORE(e, o[j - 1]))) {      \
                    o[j] = o[j - 1];                                          \
                    p[j] = p[j - 1];                                          \
                    --j;                                                      \
                }                                                             \
                o[j] = e;                                                     \
                p[j] = (uint8_t)k;                                            \
            }                                                                 \
        }                                                                     \
    }                                                                         \
    static void gs_backward_##SUF(const T *grad, const uint8_t *perm,         \
                                  int64_t groups, int64_t g, T *grad_input)   \
    {                                                                         \
        for (int64_t i = 0; i < groups; ++i)                                  \
            for (int64_t k = 0; k < g; ++k)                                   \
                grad_input[i * g + perm[i * g + k]] = grad[i * g + k];        \
    }

GS_DEFINE(float, f32)
GS_DEFINE(double, f64)

#if defined(__AVX2__)
/* float32 groups of four, two groups to a vector (one per 128-bit lane, so
 * every partner is an in-lane shuffle): the same 5-comparator network on
 * (order key, position), keys as in keys.h (-0 == +0, NaN largest; all
 * bits flipped for descending), so the result is the stable sort's,
 * NaN placement included.  Returns the groups done (a multiple of two). */
static int64_t gs_groups4_f32_avx2(const float *x, int64_t groups, int descending, float *out,
                                   uint8_t *perm)
{
    const __m256i sign = _mm256_set1_epi32((int)0x80000000u), abs_mask = _mm256_set1_epi32(0x7FFFFFFF);
    const __m256i inf = _mm256_set1_epi32(0x7F800000), zero = _mm256_setzero_si256();
    /* keys made signed-comparable; descending flips every key bit */
    const __m256i bias = _mm256_set1_epi32((int)(descending ? 0x7FFFFFFFu : 0x80000000u));
    const __m256i pos0 = _mm256_setr_epi32(0, 1, 2, 3, 0, 1, 2, 3);
    /* lanes that keep the smaller (key, position) of their pair, per stage */
    const __m256i low_a = _mm256_setr_epi32(-1, 0, -1, 0, -1, 0, -1, 0);
    const __m256i low_b = _mm256_setr_epi32(-1, -1, 0, 0, -1, -1, 0, 0);
    const __m256i low_c = _mm256_setr_epi32(0, -1, 0, 0, 0, -1, 0, 0);
    const __m256i bytes = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
                                           0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    int64_t i = 0;
    for (; i + 2 <= groups; i += 2) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(x + 4 * i));
        const __m256i a = _mm256_and_si256(v, abs_mask);
        const __m256i m = _mm256_andnot_si256(_mm256_cmpeq_epi32(a, zero), v); /* -0 -> +0 */
        __m256i k = _mm256_xor_si256(m, _mm256_or_si256(_mm256_srai_epi32(m, 31), sign));
        k = _mm256_or_si256(k, _mm256_cmpgt_epi32(a, inf)); /* NaN: all ones */
        k = _mm256_xor_si256(k, bias);
        __m256i p = pos0;
#define GS4_STAGE(IMM, LOW)                                                   \
        do {                                                                  \
            const __m256i pk = _mm256_shuffle_epi32(k, IMM), pp = _mm256_shuffle_epi32(p, IMM); \
            const __m256i pv = _mm256_shuffle_epi32(v, IMM);                  \
            const __m256i eq = _mm256_cmpeq_epi32(k, pk);                     \
            const __m256i gt = _mm256_or_si256(_mm256_cmpgt_epi32(k, pk),     \
                                               _mm256_and_si256(eq, _mm256_cmpgt_epi32(p, pp))); \
            const __m256i lt = _mm256_or_si256(_mm256_cmpgt_epi32(pk, k),     \
                                               _mm256_and_si256(eq, _mm256_cmpgt_epi32(pp, p))); \
            const __m256i take = _mm256_blendv_epi8(lt, gt, LOW);             \
            k = _mm256_blendv_epi8(k, pk, take);                              \
            p = _mm256_blendv_epi8(p, pp, take);                              \
            v = _mm256_blendv_epi8(v, pv, take);                              \
        } while (0)
        GS4_STAGE(0xB1, low_a); /* (0,1) (2,3) */
        GS4_STAGE(0x4E, low_b); /* (0,2) (1,3) */
        GS4_STAGE(0xD8, low_c); /* (1,2) */
#undef GS4_STAGE
        _mm256_storeu_si256((__m256i *)(out + 4 * i), v);
        const __m256i pb = _mm256_shuffle_epi8(p, bytes);
        const uint32_t lo = (uint32_t)_mm256_extract_epi32(pb, 0), hi = (uint32_t)_mm256_extract_epi32(pb, 4);
        memcpy(perm + 4 * i, &lo, 4);
        memcpy(perm + 4 * i + 4, &hi, 4);
    }
    return i;
}

/* The backward of float32 groups of two or four: grad_input[perm[k]] =
 * grad[k] in each group, i.e. grad gathered through the inverse of perm,
 * built in-lane (a group of four per 128-bit lane, four groups of two per
 * vector): lane d takes the element k whose perm[k] == d.  The scalar
 * scatter ran at 1.2 ns an element, most of the layer's backward.
 * Returns the groups done. */
static int64_t gs_backward_small_f32_avx2(const float *grad, const uint8_t *perm, int64_t groups,
                                          int64_t g, float *grad_input)
{
    /* each lane's place in its group, and in its 128-bit half (the
     * permutevar index) */
    const __m256i rel = g == 2 ? _mm256_setr_epi32(0, 1, 0, 1, 0, 1, 0, 1)
                               : _mm256_setr_epi32(0, 1, 2, 3, 0, 1, 2, 3);
    const __m256i half = _mm256_setr_epi32(0, 1, 2, 3, 0, 1, 2, 3);
    const int64_t per = 8 / g; /* groups per vector */
    int64_t i = 0;
    for (; i + per <= groups; i += per) {
        uint64_t pb;
        memcpy(&pb, perm + g * i, 8);
        const __m256i p = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)pb));
        __m256i inv;
        if (g == 2) { /* a group is swapped or not: lane d then takes d ^ 1 */
            const __m256i moved = _mm256_andnot_si256(_mm256_cmpeq_epi32(p, rel),
                                                      _mm256_set1_epi32(1));
            inv = _mm256_xor_si256(half, moved);
        } else { /* lane d takes the k whose perm[k] == d (k = 0 adds nothing) */
#define GS_INV_TERM(IMM, K)                                                   \
    _mm256_and_si256(_mm256_cmpeq_epi32(_mm256_shuffle_epi32(p, IMM), rel), _mm256_set1_epi32(K))
            inv = _mm256_or_si256(_mm256_or_si256(GS_INV_TERM(0x55, 1), GS_INV_TERM(0xAA, 2)),
                                  GS_INV_TERM(0xFF, 3));
#undef GS_INV_TERM
        }
        const __m256 v = _mm256_loadu_ps(grad + g * i);
        _mm256_storeu_ps(grad_input + g * i, _mm256_permutevar_ps(v, inv));
    }
    return i;
}
#endif

static int impl_group_sort(int dtype, const void *src, int64_t groups, int64_t g,
                           int descending, void *out, uint8_t *perm)
{
#if defined(__AVX2__)
    if (dtype == KWK_FLOAT32 && g == 4) {
        const int64_t done = gs_groups4_f32_avx2(src, groups, descending, out, perm);
        gs_groups_f32((const float *)src + 4 * done, groups - done, g, descending,
                      (float *)out + 4 * done, perm + 4 * done);
        return KWK_OK;
    }
#endif
    if (dtype == KWK_FLOAT32)
        gs_groups_f32(src, groups, g, descending, out, perm);
    else
        gs_groups_f64(src, groups, g, descending, out, perm);
    return KWK_OK;
}

static int impl_group_sort_backward(int dtype, const void *grad, const uint8_t *perm,
                                    int64_t groups, int64_t g, void *grad_input)
{
#if defined(__AVX2__)
    if (dtype == KWK_FLOAT32 && (g == 2 || g == 4)) {
        const int64_t done = gs_backward_small_f32_avx2(grad, perm, groups, g, grad_input);
        gs_backward_f32((const float *)grad + g * done, perm + g * done, groups - done, g,
                        (float *)grad_input + g * done);
        return KWK_OK;
    }
#endif
    if (dtype == KWK_FLOAT32)
        gs_backward_f32(grad, perm, groups, g, grad_input);
    else
        gs_backward_f64(grad, perm, groups, g, grad_input);
    return KWK_OK;
}

/* ---------------------------------------------------------- SortPooling */

/* Per graph b: the k nodes (of count[b] real ones, the first in each
 * graph) with the largest last channel, descending, ties and NaN as
 * torch.sort(descending=True, stable=True) (NaN first, equal keys by node
 * index); their rows are copied to out (b, k, c) and rows past count[b] are
 * zero.  index gets the node of each kept row (-1 for padding).  Returns
 * KWK_DEFER when the batch has fill rows (a graph short of nodes or of k)
 * and a real value is NaN, or when a kept row holds a value for which the reference's
 * "== min - 1 -> 0" rule could fire (NaN, inf, or |v| >= 2^p): the kept
 * values are then not provably the reference's. */
#define SPOOL_DEFINE(T, SUF, BIG)                                              \
    static int spool_##SUF(const T *x, int64_t batch, int64_t nodes,          \
                           int64_t c, const int64_t *count, int64_t k,        \
                           T *out, int64_t *index, int64_t *order)            \
    {                                                                         \
        int status = KWK_OK, padded = nodes < k, nan = 0;                     \
        for (int64_t b = 0; b < batch; ++b) padded |= count[b] < nodes;       \
        /* PyG's fill value, min(x) - 1, is NaN when x holds one: its fill   \
         * rows then sort first */                                            \
        for (int64_t b = 0; padded && b < batch; ++b) {                       \
            const T *g = x + b * nodes * c;                                   \
            for (int64_t i = 0; i < count[b] * c; ++i) nan |= g[i] != g[i];   \
        }                                                                     \
        if (nan) return KWK_DEFER;                                            \
        for (int64_t b = 0; b < batch; ++b) {                                 \
            const T *g = x + b * nodes * c;                                   \
            const int64_t n = count[b];                                       \
            const int64_t keep = n < k ? n : k;                               \
            int64_t m = 0; /* the best `keep` so far, sorted (insertion) */   \
            for (int64_t i = 0; i < n; ++i) {                                 \
                const T key = g[i * c + c - 1];                               \
                if (m == keep) {                                              \
                    const T last = g[order[m - 1] * c + c - 1];               \
                    if (!GS_AFTER(key, last)) continue;                       \
                    --m;                                                      \
                }                                                             \
                int64_t j = m;                                                \
                while (j > 0 && GS_AFTER(key, g[order[j - 1] * c + c - 1])) { \
                    order[j] = order[j - 1];                                  \
                    --j;                                                      \
                }                                                             \
                order[j] = i;                                                 \
                ++m;                                                          \
            }                                                                 \
            T *o = out + b * k * c;                                           \
            for (int64_t r = 0; r < keep; ++r) {                              \
                const T *row = g + order[r] * c;                              \
                for (int64_t j = 0; j < c; ++j) {                             \
                    const T v = row[j];                                       \
                    status |= !(v > -(BIG) && v < (BIG));                     \
                    o[r * c + j] = v;                                         \
                }                                                             \
                index[b * k + r] = order[r];                                  \
            }                                                                 \
            memset(o + keep * c, 0, (size_t)((k - keep) * c) * sizeof(T));   \
            for (int64_t r = keep; r < k; ++r) index[b * k + r] = -1;         \
        }                                                                     \
        return status ? KWK_DEFER : KWK_OK;                                   \
    }

SPOOL_DEFINE(float, f32, 0x1p24f)
SPOOL_DEFINE(double, f64, 0x1p53)

static int impl_sort_pool(int dtype, const void *src, int64_t batch, int64_t nodes, int64_t c,
                          const int64_t *count, int64_t k, void *out, int64_t *index)
{
    int64_t *order = malloc((size_t)(k > 0 ? k : 1) * sizeof(int64_t));
    if (!order) return KWK_E_NOMEM;
    int status = dtype == KWK_FLOAT32
                     ? spool_f32(src, batch, nodes, c, count, k, out, index, order)
                     : spool_f64(src, batch, nodes, c, count, k, out, index, order);
    free(order);
    return status;
}

/* kwk_sort_pool_backward: a copy, no arithmetic (any order gives the
 * reference's bits).  The reference's zeros and index_put of the kept rows
 * cost 27 ms at 128x336x97 (k = 30), most of it the fresh zeros. */
#define SPOOLB_DEFINE(T, SUF)                                                  \
    static void spool_backward_##SUF(const T *grad, const T *x, const int64_t *index, \
                                     const T *output, int64_t batch, int64_t nodes, \
                                     int64_t c, int64_t k, T *grad_input)     \
    {                                                                         \
        memset(grad_input, 0, (size_t)(batch * nodes * c) * sizeof(T));       \
        for (int64_t b = 0; b < batch; ++b)                                   \
            for (int64_t r = 0; r < k; ++r) {                                 \
                const int64_t j = index[b * k + r];                           \
                if (j < 0) continue;                                          \
                const int64_t at = (b * k + r) * c;                           \
                const T *xr = x + (b * nodes + j) * c;                        \
                T *gi = grad_input + (b * nodes + j) * c;                     \
                for (int64_t q = 0; q < c; ++q) /* zeroed by the pooling: no gradient */ \
                    gi[q] = output[at + q] == 0 && xr[q] != 0 ? (T)0 : grad[at + q]; \
            }                                                                 \
    }
SPOOLB_DEFINE(float, f32)
SPOOLB_DEFINE(double, f64)

static int impl_sort_pool_backward(int dtype, const void *grad, const void *x,
                                   const int64_t *index, const void *output, int64_t batch,
                                   int64_t nodes, int64_t c, int64_t k, void *grad_input)
{
    if (dtype == KWK_FLOAT32)
        spool_backward_f32(grad, x, index, output, batch, nodes, c, k, grad_input);
    else
        spool_backward_f64(grad, x, index, output, batch, nodes, c, k, grad_input);
    return KWK_OK;
}

#undef SPOOLB_DEFINE
#undef SP_DEFINE
#undef GS_DEFINE
#undef SPB_DEFINE
#undef SPOOL_DEFINE

#endif
