/*
 * qsort_drivers.h - the recursion of the vector quicksorts (simd_qsort.h's
 * AVX-512 one, simd_qsort_avx2.h's AVX2 one), written once: they differ in
 * their primitives, not in how they recurse.
 *
 * QS_DRIVERS(P, T, BASE_N) defines, for element type T, from the
 * primitives P##_split (pivot and partition: the left part's length, or 0
 * with *n cut to the part left to sort when the row was all equal to the
 * pivot), P##_heap_sort and P##_sort_base (rows of at most BASE_N):
 *  - P##_rec(a, n, depth): sort a[0..n), the smaller part by recursion
 *    (stack depth O(log n)), heap sort when depth runs out;
 *  - P##_first(a, n, m, depth): the m smallest of a[0..n) to a[0..m),
 *    ascending (the rest in no order): partitions recurse only into the
 *    part holding rank m - 1, sorting whatever lies wholly before it;
 *  - P##_select(a, n, r, depth): the key of rank r (0 <= r < n) of
 *    a[0..n), which is left reordered: partitions follow rank r alone.
 */
#ifndef KWK_QSORT_DRIVERS_H
#define KWK_QSORT_DRIVERS_H

#include <stdint.h>

/* Runs part(ctx, p) for p = 0..parts-1, possibly side by side (the
 * library's kwk_run_parts, kernels.h): the quicksorts' *_par versions take
 * it as an argument, so these headers need nothing from the rest. */
typedef void (*kwk_parts_fn)(void (*part)(void *ctx, int p), void *ctx, int parts);

/* The most ranges a *_par sort cuts a row into; the keys sampled for each
 * cut's pivot (their median leaves the two sides within a few percent of
 * each other, where one vector of samples, a recursion step's, leaves them
 * 10-20% apart: the slower side sets the time); ranges shorter than
 * QS_PAR_MIN are not cut. */
enum { QS_PAR_MAX = 16, QS_PAR_SAMPLES = 127, QS_PAR_MIN = 1 << 14 };

/* Cut a[0..n) (elements of es bytes) into up to `parts` ranges whose keys
 * each lie at or below the next range's, cutting the longest range again
 * and again: split(base, len) partitions base[0..len) and returns the cut k
 * ([0, k) <= [k, len), 0 < k < len), or 0 when its keys are all equal (the
 * range is then sorted as it stands and is not cut again).  at[0..r]: the
 * r ranges' bounds; returns r. */
static inline int qs_par_cut(void *a, size_t es, int64_t n, int parts, int64_t *at,
                             int64_t (*split)(void *a, int64_t n))
{
    int done[QS_PAR_MAX] = {0};
    int r = 1;
    at[0] = 0;
    at[1] = n;
    if (parts > QS_PAR_MAX) parts = QS_PAR_MAX;
    while (r < parts) {
        int w = -1;
        for (int i = 0; i < r; ++i) {
            const int64_t len = at[i + 1] - at[i];
            if (!done[i] && len >= QS_PAR_MIN && (w < 0 || len > at[w + 1] - at[w])) w = i;
        }
        if (w < 0) break;
        const int64_t k = split((char *)a + (size_t)at[w] * es, at[w + 1] - at[w]);
        if (k == 0) {
            done[w] = 1;
            continue;
        }
        for (int i = r; i > w; --i) {
            at[i + 1] = at[i];
            done[i] = done[i - 1];
        }
        at[w + 1] = at[w] + k;
        done[w + 1] = 0;
        ++r;
    }
    return r;
}

/* NAME(a, n, parts, run): a[0..n) of T sorted by SORT(a, n) in ranges
 * that SPLIT(void *a, int64_t n) cuts (qs_par_cut), the ranges side by side
 * by run; P names the helpers. */
#define QS_PAR_DEFINE(P, NAME, T, SORT, SPLIT)                                \
    typedef struct {                                                          \
        T *a;                                                                 \
        int64_t at[QS_PAR_MAX + 1];                                           \
    } P##_par_ctx;                                                            \
    static void P##_par_part(void *ctx, int p)                                \
    {                                                                         \
        const P##_par_ctx *c = (const P##_par_ctx *)ctx;                      \
        SORT(c->a + c->at[p], c->at[p + 1] - c->at[p]);                       \
    }                                                                         \
    __attribute__((unused)) static void NAME(T *a, int64_t n, int parts, kwk_parts_fn run) \
    {                                                                         \
        P##_par_ctx c;                                                        \
        c.a = a;                                                              \
        run(P##_par_part, &c, qs_par_cut(a, sizeof(T), n, parts, c.at, SPLIT)); \
    }

#define QS_DRIVERS(P, T, BASE_N) QS_DRIVERS2(P, T, BASE_N, BASE_N)
/* SELECT_N: the range P##_first and P##_select sort outright (a base case
 * that sorts more than a network holds pays there, where only one part of
 * each partition goes on) */
#define QS_DRIVERS2(P, T, BASE_N, SELECT_N)                                   \
    static void P##_rec(T *a, int64_t n, int depth)                           \
    {                                                                         \
        while (n > (BASE_N)) {                                                \
            if (depth-- <= 0) {                                               \
                P##_heap_sort(a, n);                                          \
                return;                                                       \
            }                                                                 \
            const int64_t k = P##_split(a, &n);                               \
            if (k == 0) continue;                                             \
            if (k < n - k) {                                                  \
                P##_rec(a, k, depth);                                         \
                a += k;                                                       \
                n -= k;                                                       \
            } else {                                                          \
                P##_rec(a + k, n - k, depth);                                 \
                n = k;                                                        \
            }                                                                 \
        }                                                                     \
        P##_sort_base(a, n);                                                  \
    }                                                                         \
    static void P##_first(T *a, int64_t n, int64_t m, int depth)              \
    {                                                                         \
        while (n > (SELECT_N)) {                                              \
            if (m >= n) {                                                     \
                P##_rec(a, n, depth);                                         \
                return;                                                       \
            }                                                                 \
            if (m <= 0) return;                                               \
            if (depth-- <= 0) {                                               \
                P##_heap_sort(a, n);                                          \
                return;                                                       \
            }                                                                 \
            const int64_t k = P##_split(a, &n);                               \
            if (k == 0 || k >= m) {                                           \
                if (k) n = k;                                                 \
                continue;                                                     \
            }                                                                 \
            P##_rec(a, k, depth);                                             \
            a += k;                                                           \
            n -= k;                                                           \
            m -= k;                                                           \
        }                                                                     \
        if (m > 0) P##_sort_base(a, n);                                       \
    }                                                                         \
    __attribute__((unused)) static T P##_select(T *a, int64_t n, int64_t r, int depth) \
    {                                                                         \
        while (n > (SELECT_N)) {                                              \
            if (depth-- <= 0) {                                               \
                P##_heap_sort(a, n);                                          \
                return a[r];                                                  \
            }                                                                 \
            const int64_t k = P##_split(a, &n);                               \
            if (k == 0) {                                                     \
                /* [n, old n) all equal the pivot, in place */                \
                if (r >= n) return a[r];                                      \
                continue;                                                     \
            }                                                                 \
            if (r < k) {                                                      \
                n = k;                                                        \
            } else {                                                          \
                a += k;                                                       \
                n -= k;                                                       \
                r -= k;                                                       \
            }                                                                 \
        }                                                                     \
        P##_sort_base(a, n);                                                  \
        return a[r];                                                          \
    }

#endif
