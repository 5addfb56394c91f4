/* link: -Wl,--wrap=malloc -Wl,--wrap=calloc -Wl,--wrap=aligned_alloc */
/*
 * test_nomem.c - every workspace allocation of every entry point made to
 * fail in turn.
 *
 * malloc, calloc and aligned_alloc are wrapped at link time (the line above, read by
 * run.sh): during a library call the wrapper counts allocations and can make
 * the n-th one return NULL.  For each configuration (chosen to reach each
 * kernel path: short and long rows, ties in torch order, every topk mode,
 * streamed medians, both CPU targets) a first call counts its allocations;
 * then each of them fails once.  The call must return KWK_E_NOMEM, or
 * KWK_OK with the same output as without the failure (a path with a
 * fallback); it must not crash, and nothing may leak (the sanitizer build
 * runs LeakSanitizer).
 *
 *   native/tests/run.sh builds it (reading the link line above); by hand:
 *   gcc -O2 -std=c11 -D_GNU_SOURCE -Inative/include -o /tmp/test_nomem \
 *       native/tests/test_nomem.c native/src/dispatch.c native/src/targets/portable.c \
 *       native/src/targets/avx2.c native/src/targets/avx512.c -lm -Wl,--wrap=malloc -Wl,--wrap=calloc \
 *       -Wl,--wrap=aligned_alloc \
 *       && /tmp/test_nomem [quick]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kwker.h"
#include "test_targets.h"

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_aligned_alloc(size_t align, size_t n);

static int armed;           /* count only inside library calls */
static long allocations;    /* counted while armed */
static long fail_at = -1;   /* the allocation (0-based) that fails */

void *__wrap_malloc(size_t n)
{
    if (armed && allocations++ == fail_at) return NULL;
    return __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t size)
{
    if (armed && allocations++ == fail_at) return NULL;
    return __real_calloc(n, size);
}

void *__wrap_aligned_alloc(size_t align, size_t n)
{
    if (armed && allocations++ == fail_at) return NULL;
    return __real_aligned_alloc(align, n);
}

static long failures, runs;

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

enum { OP_SORT, OP_TOPK, OP_KTH, OP_MEDIAN, OP_MEDIAN_ALL, OP_UNIQUE_HASH };
static const char *OP_NAME[] = {"sort", "topk", "kthvalue", "median_dim", "median_all",
                                "unique_hash"};

typedef struct {
    int op, dtype, es;
    int64_t outer, len, k;
    int order, flag, sorted;
    int ties; /* values from a few distinct ones */
} config;

/* One call of cfg on x into (vals, inds); returns the status.  The
 * thread's cached workspace blocks are released first, so that every call
 * allocates the same blocks (and each can be made to fail). */
static int call(const config *c, const void *x, void *vals, int64_t *inds)
{
    kwk_release_workspace();
    const int64_t L = c->len, n_out = c->op == OP_SORT ? L : (c->op == OP_TOPK ? c->k : 1);
    int64_t u;
    switch (c->op) {
    case OP_SORT:
        return kwk_sort(c->dtype, x, c->outer, L, 1, L, 1, 1, vals, inds, n_out, 1, 1, c->flag,
                        c->order);
    case OP_TOPK:
        return kwk_topk(c->dtype, x, c->outer, L, 1, L, 1, 1, c->k, vals, inds, n_out, 1, 1,
                        c->flag, c->sorted, c->order);
    case OP_KTH:
        return kwk_kthvalue(c->dtype, x, c->outer, L, 1, L, 1, 1, c->k, vals, inds, 1, 1, c->order);
    case OP_MEDIAN:
        return kwk_median_dim(c->dtype, x, c->outer, L, 1, L, 1, 1, vals, inds, 1, 1, c->flag);
    case OP_UNIQUE_HASH: /* the distinct values to vals, the slots to inds */
        return kwk_unique_hash(c->dtype, x, c->outer * L, c->outer * L, vals, NULL, inds, &u);
    default:
        return kwk_median_all(c->dtype, x, c->outer * L, 1, vals, c->flag);
    }
}

static void run_config(const config *c, const char *target)
{
    const int64_t n = c->outer * c->len;
    const int64_t n_out = c->outer * (c->op == OP_SORT || c->op == OP_UNIQUE_HASH
                                          ? c->len : (c->op == OP_TOPK ? c->k : 1));
    char *x = (char *)malloc((size_t)n * c->es);
    char *v0 = (char *)calloc((size_t)n_out + 1, (size_t)c->es);
    char *v1 = (char *)calloc((size_t)n_out + 1, (size_t)c->es);
    int64_t *i0 = (int64_t *)calloc((size_t)n_out + 1, 8), *i1 = (int64_t *)calloc((size_t)n_out + 1, 8);
    if (!x || !v0 || !v1 || !i0 || !i1) abort();
    for (int64_t j = 0; j < n; ++j) {
        uint64_t r = rnd();
        if (c->ties) r = (r % 5) * 0x0101010101010101ull; /* a few values, equal bytes */
        if (c->dtype == KWK_FLOAT32 && c->ties) {
            const float f[5] = {0.0f, -0.0f, 1.5f, -2.0f, 1.5f};
            memcpy(x + j * c->es, &f[r % 5], 4);
        } else {
            memcpy(x + j * c->es, &r, (size_t)c->es);
        }
    }
    /* count the allocations of an undisturbed call */
    fail_at = -1;
    allocations = 0;
    armed = 1;
    int st = call(c, x, v0, c->op == OP_MEDIAN_ALL ? NULL : i0);
    armed = 0;
    const long total = allocations;
    /* the hashing pass may defer (too many distinct values): then a failed
     * allocation must give that or KWK_E_NOMEM */
    const int st0 = st;
    if (st != KWK_OK && !(c->op == OP_UNIQUE_HASH && st == KWK_DEFER)) {
        printf("FAIL %s %s: status %d without any failure\n", target, OP_NAME[c->op], st);
        ++failures;
    }
    for (long f = 0; f < total; ++f) {
        memset(v1, 0, (size_t)(n_out + 1) * c->es);
        memset(i1, 0, (size_t)(n_out + 1) * 8);
        fail_at = f;
        allocations = 0;
        armed = 1;
        st = call(c, x, v1, c->op == OP_MEDIAN_ALL ? NULL : i1);
        armed = 0;
        ++runs;
        if (st == KWK_E_NOMEM || (st == KWK_DEFER && st0 == KWK_DEFER)) continue;
        if (st != KWK_OK || st0 != KWK_OK) {
            printf("FAIL %s %s dtype=%d len=%lld k=%lld: allocation %ld of %ld failed -> status %d\n",
                   target, OP_NAME[c->op], c->dtype, (long long)c->len, (long long)c->k, f, total, st);
            ++failures;
        } else if (memcmp(v0, v1, (size_t)n_out * c->es) != 0 ||
                   (c->op != OP_MEDIAN_ALL && memcmp(i0, i1, (size_t)n_out * 8) != 0)) {
            printf("FAIL %s %s dtype=%d len=%lld: allocation %ld failed, status OK, other output\n",
                   target, OP_NAME[c->op], c->dtype, (long long)c->len, f);
            ++failures;
        }
    }
    free(x);
    free(v0);
    free(v1);
    free(i0);
    free(i1);
}

int main(int argc, char **argv)
{
    /* "quick" (CI's sanitizer run): rows up to 70000 elements */
    const int nlens = argc > 1 && strcmp(argv[1], "quick") == 0 ? 5 : 6;
    static const int64_t LENS[] = {5, 40, 300, 5000, 70000, 300000};
    static const int DTYPES[] = {KWK_INT8, KWK_INT16, KWK_FLOAT32, KWK_INT64};
    static const int ES[] = {1, 2, 4, 8};
    const char *const *targets = KWK_TEST_TARGET_NAMES;
    long configs = 0;
    { /* a first call outside the counting makes the thread's workspace cache */
        const float warm[300] = {0};
        float out[300];
        if (kwk_sort(KWK_FLOAT32, warm, 1, 300, 1, 300, 1, 1, out, NULL, 300, 1, 1, 0, 0) != KWK_OK)
            abort();
    }
    for (int t = 0; t < KWK_TEST_NTARGETS; ++t) {
        if (test_set_target(targets[t]) != KWK_OK) continue;
        for (int li = 0; li < nlens; ++li) {
            const int64_t len = LENS[li], outer = len > 1000 ? 1 : 3;
            for (int di = 0; di < 4; ++di) {
                for (int ties = 0; ties < 2; ++ties) {
                    for (int order = 0; order < 2; ++order) {
                        config c = {OP_SORT, DTYPES[di], ES[di], outer, len, 0, order, ties, 1, ties};
                        run_config(&c, targets[t]);
                        /* topk: every mode (k*64 <= len, small m, lists, general) */
                        const int64_t ks[] = {1, 3, 17, len / 64 + 1, len / 2, len};
                        for (int q = 0; q < 6; ++q) {
                            if (ks[q] < 1 || ks[q] > len) continue;
                            for (int sorted = 0; sorted < 2; ++sorted) {
                                config tk = {OP_TOPK, DTYPES[di], ES[di], outer, len, ks[q], order,
                                             q & 1, sorted, ties};
                                run_config(&tk, targets[t]);
                                ++configs;
                            }
                        }
                        if (len <= 5000) {
                            config kt = {OP_KTH, DTYPES[di], ES[di], outer, len, len / 3 + 1, order,
                                         0, 1, ties};
                            run_config(&kt, targets[t]);
                        }
                        config md = {OP_MEDIAN, DTYPES[di], ES[di], outer, len, 0, 0, order, 1, ties};
                        run_config(&md, targets[t]);
                        config ma = {OP_MEDIAN_ALL, DTYPES[di], ES[di], outer, len, 0, 0, order, 1, ties};
                        run_config(&ma, targets[t]);
                        configs += 4;
                        if (order == 0) { /* the table grown, or a defer part way */
                            config uh = {OP_UNIQUE_HASH, DTYPES[di], ES[di], outer, len, 0, 0, 0,
                                         1, ties};
                            run_config(&uh, targets[t]);
                            ++configs;
                        }
                    }
                }
            }
        }
    }
    printf("configurations %ld, failed allocations tried %ld, failures %ld\n", configs, runs,
           failures);
    return failures != 0;
}
