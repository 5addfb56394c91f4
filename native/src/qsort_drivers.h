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
