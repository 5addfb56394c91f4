/*
 * test_unique.c - kwk_unique_runs / kwk_unique_fill and the pre-scan
 * kwk_unique_order_matters (unique_runs.h) against a plain reference, every
 * dtype, lengths 0..300 and a few long ones, both CPU targets, buffers of
 * their exact sizes (the sanitizer build catches any access past them), and
 * the arguments they must refuse.
 *
 * The input is any sorted-looking array: runs of a few repeated values,
 * with the pairs torch.ne treats specially mixed in for the float types
 * (-0.0 next to +0.0: one run; NaN next to NaN: two), both of which make
 * the result depend on the sort's order of equal elements (order_shows).  Agreement with
 * torch.unique itself is tested from Python (tests/test_unique.py).
 *
 *   gcc -O2 -std=c11 -D_GNU_SOURCE -Inative/include -o /tmp/test_unique \
 *       native/tests/test_unique.c native/src/dispatch.c \
 *       native/src/targets/portable.c native/src/targets/avx2.c native/src/targets/avx512.c -lm
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kwker.h"
#include "test_targets.h"
#include "test_common.h"

static const int SIZE[13] = {1, 1, 1, 2, 4, 8, 2, 4, 8, 2, 2, 4, 8};

/* Whether sorted elements a, b (bit patterns of `dtype`) are equal as
 * torch.ne sees them: floats by value (NaN unequal, -0 == +0), the rest by
 * bits. */
static int equal(int dtype, uint64_t a, uint64_t b)
{
    int ebits, mbits;
    switch (dtype) {
    case KWK_FLOAT16: ebits = 5; mbits = 10; break;
    case KWK_BFLOAT16: ebits = 8; mbits = 7; break;
    case KWK_FLOAT32: ebits = 8; mbits = 23; break;
    case KWK_FLOAT64: ebits = 11; mbits = 52; break;
    default: return a == b;
    }
    const int bits = 1 + ebits + mbits;
    const uint64_t abs_mask = (bits == 64 ? ~0ull : ((1ull << bits) - 1)) >> 1;
    const uint64_t inf = ((1ull << ebits) - 1) << mbits;
    if ((a & abs_mask) > inf || (b & abs_mask) > inf) return 0; /* NaN */
    if ((a & abs_mask) == 0 && (b & abs_mask) == 0) return 1;   /* +-0 */
    return a == b;
}

/* A value of the dtype: one of a few, the special float pairs included. */
static uint64_t pick(int dtype, int kind)
{
    const int bits = 8 * SIZE[dtype];
    const uint64_t sign = 1ull << (bits - 1);
    const int is_float = dtype >= KWK_FLOAT16;
    if (is_float && kind == 0) return 0;              /* +0 */
    if (is_float && kind == 1) return sign;           /* -0 */
    if (is_float && kind == 2) return ~0ull >> (64 - bits) >> 1; /* a NaN */
    if (dtype == KWK_BOOL) return (uint64_t)(kind & 1);
    return (uint64_t)(kind * 37 + 5) & (bits == 64 ? ~0ull : (1ull << bits) - 1);
}

static void one(int dtype, int64_t n)
{
    const int es = SIZE[dtype];
    uint64_t *bitsv = malloc(sizeof(uint64_t) * (size_t)(n + 1));
    char *values = malloc((size_t)(n * es + 1));
    int64_t *perm = malloc(sizeof(int64_t) * (size_t)(n + 1));
    int64_t *inverse = malloc(sizeof(int64_t) * (size_t)(n + 1));
    int kind = (int)(next() % 6);
    for (int64_t i = 0; i < n; ++i) {
        if (next() % 3 == 0) kind = (int)(next() % 6); /* runs of a few */
        bitsv[i] = pick(dtype, kind);
        memcpy(values + i * es, &bitsv[i], (size_t)es); /* little-endian low bytes */
        perm[i] = i;
    }
    for (int64_t i = n - 1; i > 0; --i) { /* any permutation */
        const int64_t j = (int64_t)(next() % (uint64_t)(i + 1));
        const int64_t t = perm[i]; perm[i] = perm[j]; perm[j] = t;
    }
    int64_t want = n > 0;
    int want_shows = 0; /* -0.0 next to +0.0, or two NaNs next to each other */
    for (int64_t i = 1; i < n; ++i) {
        want += !equal(dtype, bitsv[i - 1], bitsv[i]);
        want_shows |= equal(dtype, bitsv[i - 1], bitsv[i]) && bitsv[i - 1] != bitsv[i];
        want_shows |= dtype >= KWK_FLOAT16 && !equal(dtype, bitsv[i], bitsv[i]) &&
                      !equal(dtype, bitsv[i - 1], bitsv[i - 1]);
    }
    /* the pre-scan of the unsorted input: both zero signs, or two NaNs */
    int64_t nans = 0;
    int pos = 0, neg = 0;
    for (int64_t i = 0; i < n && dtype >= KWK_FLOAT16; ++i) {
        nans += !equal(dtype, bitsv[i], bitsv[i]);
        pos |= bitsv[i] == 0;
        neg |= equal(dtype, bitsv[i], 0) && bitsv[i] != 0;
    }
    char *shuffled = malloc((size_t)(n * es + 1));
    for (int64_t i = 0; i < n; ++i) memcpy(shuffled + i * es, values + perm[i] * es, (size_t)es);
    CHECK(kwk_unique_order_matters(dtype, shuffled, n) == (nans > 1 || (pos && neg)),
          "dtype %d n %lld: order matters", dtype, (long long)n);
    free(shuffled);
    int64_t runs = -1;
    int shows = -1;
    CHECK(kwk_unique_runs(dtype, values, n, perm, inverse, &runs, &shows) == KWK_OK,
          "runs status");
    CHECK(runs == want, "dtype %d n %lld: %lld runs, want %lld", dtype, (long long)n,
          (long long)runs, (long long)want);
    CHECK(shows == want_shows, "dtype %d n %lld: order shows %d, want %d", dtype, (long long)n,
          shows, want_shows);
    if (runs != want || n == 0) goto done;
    char *out = malloc((size_t)(runs * es));
    int64_t *counts = malloc(sizeof(int64_t) * (size_t)runs);
    CHECK(kwk_unique_fill(dtype, values, n, runs, out, counts) == KWK_OK, "fill status");
    int64_t run = 0, start = 0;
    for (int64_t i = 0; i <= n; ++i) {
        if (i == n || (i > 0 && !equal(dtype, bitsv[i - 1], bitsv[i]))) {
            CHECK(memcmp(out + run * es, values + start * es, (size_t)es) == 0,
                  "dtype %d: run %lld value", dtype, (long long)run);
            CHECK(counts[run] == i - start, "dtype %d: run %lld count", dtype, (long long)run);
            if (i == n) break;
            ++run;
            start = i;
        }
        CHECK(inverse[perm[i]] == run, "dtype %d: inverse of %lld", dtype, (long long)i);
    }
    /* the arguments it must refuse, nothing written past the buffers */
    CHECK(kwk_unique_fill(dtype, values, n, runs - 1, out, counts) == KWK_E_ARG || runs == 1,
          "fewer runs than there are");
    CHECK(kwk_unique_fill(dtype, values, n, runs + 1, NULL, NULL) == KWK_E_ARG || runs == n,
          "more runs than there are");
    const int64_t keep = perm[n / 2];
    perm[n / 2] = n;
    CHECK(kwk_unique_runs(dtype, values, n, perm, inverse, &runs, &shows) == KWK_E_ARG, "perm >= n");
    perm[n / 2] = -1;
    CHECK(kwk_unique_runs(dtype, values, n, perm, inverse, &runs, &shows) == KWK_E_ARG, "perm < 0");
    perm[n / 2] = keep;
    CHECK(kwk_unique_runs(dtype, values, n, NULL, inverse, &runs, &shows) == KWK_E_ARG, "no perm");
    free(out);
    free(counts);
done:
    free(bitsv); free(values); free(perm); free(inverse);
}

int main(void)
{
    const char *const *targets = KWK_TEST_TARGET_NAMES;
    for (int t = 0; t < KWK_TEST_NTARGETS; ++t) {
        if (test_set_target(targets[t]) != 0) continue;
        for (int dtype = 0; dtype < 13; ++dtype) {
            for (int64_t n = 0; n <= 300; ++n) one(dtype, n);
            one(dtype, 5000);
            one(dtype, 70000);
        }
    }
    int64_t runs;
    int shows;
    CHECK(kwk_unique_runs(13, "", 1, NULL, NULL, &runs, &shows) == KWK_E_DTYPE, "dtype");
    CHECK(kwk_unique_runs(KWK_INT8, "", -1, NULL, NULL, &runs, &shows) == KWK_E_ARG, "n < 0");
    CHECK(kwk_unique_runs(KWK_INT8, NULL, 1, NULL, NULL, &runs, &shows) == KWK_E_ARG,
          "NULL values");
    CHECK(kwk_unique_runs(KWK_INT8, "", 1, NULL, NULL, &runs, NULL) == KWK_E_ARG, "NULL shows");
    CHECK(kwk_unique_fill(KWK_INT8, "", 0, 1, NULL, NULL) == KWK_E_ARG, "runs of nothing");
    CHECK(kwk_unique_order_matters(13, "", 1) == KWK_E_DTYPE, "order matters dtype");
    CHECK(kwk_unique_order_matters(KWK_FLOAT32, NULL, 1) == KWK_E_ARG, "order matters NULL");
    printf("test_unique: %s (%d failures)\n", failures ? "FAILED" : "ok", failures);
    return failures != 0;
}
