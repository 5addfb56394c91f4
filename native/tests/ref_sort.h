/*
 * ref_sort.h - the reference sorts of the native tests: stable LSD radix
 * sorts by a 64-bit (or 32-bit) unsigned key, one byte a pass.
 *
 * Why not qsort: glibc's qsort is a merge sort calling a comparator per
 * step, and it was most of several tests' time once the kernels under test
 * got fast (perf, optimised build: test_simd_qsort 78% in qsort and its
 * comparators, test_unique 78%, test_select 38%); CI runs these tests twice
 * (optimised and under ASan/UBSan).  A radix sort is as plain a reference
 * (no comparisons at all, so no shared idea with the kernels' networks and
 * partitions) and several times quicker.  ref_sort_self_check() compares
 * it with qsort on a few hundred arrays at each test's start, so the
 * reference is itself checked by the old one.
 *
 * REF_SORT_DEFINE(name, T, KEY, BYTES): void name(T *a, int64_t n) sorts
 * a stably by KEY(element) (an unsigned integer of BYTES bytes): records
 * listed in position order come out ordered by (key, position).
 */
#ifndef KWK_REF_SORT_H
#define KWK_REF_SORT_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REF_KEY_SELF(x) ((uint64_t)(x))
#define REF_KEY_FIELD(x) ((uint64_t)(x).key)

#define REF_SORT_DEFINE(NAME, T, KEY, BYTES)                                  \
    static void NAME(T *a, int64_t n)                                         \
    {                                                                         \
        if (n < 2) return;                                                    \
        if (n <= 16) { /* insertion sort: stable, and no tables to clear */   \
            for (int64_t i = 1; i < n; ++i) {                                 \
                const T x = a[i];                                             \
                int64_t j = i;                                                \
                for (; j > 0 && KEY(a[j - 1]) > KEY(x); --j) a[j] = a[j - 1]; \
                a[j] = x;                                                     \
            }                                                                 \
            return;                                                           \
        }                                                                     \
        T *tmp = malloc(sizeof(T) * (size_t)n);                               \
        int64_t(*count)[257] = calloc(BYTES, sizeof *count);                  \
        if (tmp == NULL || count == NULL) {                                   \
            fprintf(stderr, "ref_sort: out of memory\n");                     \
            exit(2);                                                          \
        }                                                                     \
        for (int64_t i = 0; i < n; ++i)                                       \
            for (int b = 0; b < (BYTES); ++b) count[b][((KEY(a[i]) >> (8 * b)) & 255) + 1]++; \
        T *src = a, *dst = tmp;                                               \
        for (int b = 0; b < (BYTES); ++b) {                                   \
            int64_t *c = count[b];                                            \
            const int shift = 8 * b;                                          \
            if (c[((KEY(src[0]) >> shift) & 255) + 1] == n) continue; /* one byte value */ \
            for (int v = 0; v < 256; ++v) c[v + 1] += c[v];                   \
            for (int64_t i = 0; i < n; ++i) dst[c[(KEY(src[i]) >> shift) & 255]++] = src[i]; \
            T *t = src;                                                       \
            src = dst;                                                        \
            dst = t;                                                          \
        }                                                                     \
        if (src != a) memcpy(a, src, sizeof(T) * (size_t)n);                  \
        free(tmp);                                                            \
        free(count);                                                          \
    }

REF_SORT_DEFINE(ref_sort_u64, uint64_t, REF_KEY_SELF, 8)
REF_SORT_DEFINE(ref_sort_u32, uint32_t, REF_KEY_SELF, 4)

/* records listed by position, sorted stably by key: by (key, pos)
 * (test_unique.c's, and the self check's) */
typedef struct {
    uint64_t key;
    int64_t pos;
} ref_keyed;
REF_SORT_DEFINE(ref_sort_keyed, ref_keyed, REF_KEY_FIELD, 8)

static int ref_cmp_u64(const void *a, const void *b)
{
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}
static int ref_cmp_u32(const void *a, const void *b)
{
    const uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}
static int ref_cmp_keyed(const void *a, const void *b)
{
    const ref_keyed *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return (x->pos > y->pos) - (x->pos < y->pos);
}

/* The radix sorts against qsort: lengths around the insertion-sort bound
 * and a few long ones, keys random, of few values (ties: stability), of
 * one value in most bytes (skipped passes) and at the extremes.  Exits 2
 * (the test cannot be trusted) on any difference. */
static void ref_sort_self_check(void)
{
    static const int64_t LENGTHS[] = {0, 1, 2, 15, 16, 17, 33, 100, 257, 1000, 4099, 70001};
    uint64_t rng = 0x2545F4914F6CDD1Dull;
    for (size_t li = 0; li < sizeof LENGTHS / sizeof LENGTHS[0]; ++li) {
        const int64_t n = LENGTHS[li];
        for (int kind = 0; kind < 4; ++kind) {
            uint64_t *a = malloc(sizeof(uint64_t) * (size_t)(n + 1));
            uint64_t *b = malloc(sizeof(uint64_t) * (size_t)(n + 1));
            uint32_t *c = malloc(sizeof(uint32_t) * (size_t)(n + 1));
            uint32_t *d = malloc(sizeof(uint32_t) * (size_t)(n + 1));
            ref_keyed *e = malloc(sizeof(ref_keyed) * (size_t)(n + 1));
            ref_keyed *f = malloc(sizeof(ref_keyed) * (size_t)(n + 1));
            if (!a || !b || !c || !d || !e || !f) {
                fprintf(stderr, "ref_sort: out of memory\n");
                exit(2);
            }
            for (int64_t i = 0; i < n; ++i) {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                const uint64_t r = rng;
                const uint64_t k = kind == 0 ? r
                                 : kind == 1 ? r % 7
                                 : kind == 2 ? 0x0123456789ABCDEFull ^ ((r % 3) << 40)
                                             : (r & 1 ? ~(uint64_t)0 - (r >> 1) % 2 : (r >> 1) % 2);
                a[i] = b[i] = k;
                c[i] = d[i] = (uint32_t)(k ^ (k >> 29));
                e[i] = f[i] = (ref_keyed){k, i};
            }
            ref_sort_u64(a, n);
            qsort(b, (size_t)n, sizeof *b, ref_cmp_u64);
            ref_sort_u32(c, n);
            qsort(d, (size_t)n, sizeof *d, ref_cmp_u32);
            ref_sort_keyed(e, n);
            qsort(f, (size_t)n, sizeof *f, ref_cmp_keyed);
            if (memcmp(a, b, sizeof *a * (size_t)n) || memcmp(c, d, sizeof *c * (size_t)n) ||
                memcmp(e, f, sizeof *e * (size_t)n)) {
                fprintf(stderr, "ref_sort: the reference sort differs from qsort (n=%ld, kind %d)\n",
                        (long)n, kind);
                exit(2);
            }
            free(a);
            free(b);
            free(c);
            free(d);
            free(e);
            free(f);
        }
    }
}

#endif
