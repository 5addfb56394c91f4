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
 * kwk_unique_hash (unique_hash.h) and kwk_unique_remap against a reference
 * that sorts (key, position) pairs: inputs of a few distinct values to all
 * distinct, with a NaN, two NaNs, both zero signs, bool bytes other than 0
 * and 1, limits below, at and above the number of distinct values, lengths
 * around the pass's checkpoints; every way it must defer.
 *
 * kwk_unique_dense (unique_dense.h) against a reference that sorts the keys:
 * every integer dtype, ranges at 0, at the top and (signed) across zero,
 * of one value to just past the widths it takes, runs, rooms below and at
 * the number of distinct values, with and without the inverse and counts.
 *
 *   gcc -O2 -std=c11 -D_GNU_SOURCE -Inative/include -o /tmp/test_unique \
 *       native/tests/test_unique.c native/src/dispatch.c \
 *       native/src/targets/portable.c native/src/targets/avx2.c native/src/targets/avx512.c -lm
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ref_sort.h"
#include "kwker.h"
#include "test_targets.h"
#include "test_common.h"
#include "../src/keys.h"
#include "../src/torch_order.h"

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
    CHECK(kwk_unique_order_matters(dtype, shuffled, n) == ((pos && neg) | (nans > 1) << 1),
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

/* ---------------------------------------------------------------- hashing */

typedef ref_keyed keyed; /* (key, pos): ref_sort.h */


static int by_pos(const void *a, const void *b)
{
    const keyed *x = a, *y = b;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

static int is_nan(int dtype, uint64_t b)
{
    return dtype >= KWK_FLOAT16 && !equal(dtype, b, b);
}

/* inputs: 0 few distinct values, 1 about half distinct, 2 all distinct (as
 * far as the dtype has values); special 0 none, 1 one NaN, 2 a NaN twice
 * (one payload), 3 two NaN payloads, 4 both zero signs, 5 -0.0 only */
static void hash_one(int dtype, int64_t n, int kind, int special, int64_t limit_in)
{
    const int es = SIZE[dtype];
    const int bits = 8 * es;
    const uint64_t all = bits == 64 ? ~0ull : (1ull << bits) - 1;
    const int is_float = dtype >= KWK_FLOAT16;
    const uint64_t sign = 1ull << (bits - 1), nan1 = all >> 1, nan2 = (all >> 1) - 1;
    uint64_t *b = malloc(sizeof(uint64_t) * (size_t)(n + 1));
    /* kind 3: keys in a short run of values (labels, cluster ids: a span of
     * up to 2n and about 2^16), at 0 or at the top of the range (negative
     * for the signed types) */
    int64_t pool = kind == 0 ? 1 + (int64_t)(next() % 40) : kind == 1 ? n / 2 + 1 : n + 1;
    if (kind == 3) {
        pool = next() % 4 == 0 ? 2 * n + 1 - (int64_t)(next() % 3) : 1 + (int64_t)(next() % (uint64_t)(2 * n + 1));
        if (next() % 4 == 0) pool = 65535 + (int64_t)(next() % 3);
    }
    const uint64_t base = kind == 3 && next() % 2 ? (all - (uint64_t)pool) & all : 0;
    for (int64_t i = 0; i < n; ++i) {
        uint64_t x = (kind == 2 ? (uint64_t)i * 0x9E3779B97F4A7C15ull
                      : kind == 3 ? base + (uint64_t)(next() % (uint64_t)pool)
                                  : (uint64_t)(next() % (uint64_t)pool) * 0xD1B54A32D192ED03ull) & all;
        if (is_float && (is_nan(dtype, x) || (x & (all >> 1)) == 0)) x = 1; /* specials below */
        if (dtype == KWK_BOOL) x &= 3; /* bytes 2 and 3 are True too */
        b[i] = x;
    }
    if (n > 0 && special == 1) b[next() % (uint64_t)n] = nan1;
    if (n > 1 && special == 2) { b[next() % (uint64_t)n] = nan1; b[n - 1] = nan1; b[0] = 5; }
    if (n > 1 && special == 3) { b[0] = nan1; b[n - 1] = nan2; }
    if (n > 1 && special == 4) { b[next() % (uint64_t)n] = 0; b[n - 1] = sign; b[0] = 7; }
    if (n > 0 && special == 5) b[next() % (uint64_t)n] = sign;
    char *v = malloc((size_t)(n * es + 1));
    for (int64_t i = 0; i < n; ++i) memcpy(v + i * es, &b[i], (size_t)es);

    /* the reference: keys (bool: truth), each distinct key's first position */
    keyed *k = malloc(sizeof(keyed) * (size_t)(n + 1));
    for (int64_t i = 0; i < n; ++i) k[i] = (keyed){dtype == KWK_BOOL ? b[i] != 0 : b[i], i};
    ref_sort_keyed(k, n); /* stable: by (key, pos) */
    keyed *first = malloc(sizeof(keyed) * (size_t)(n + 1));
    int64_t *group_of = malloc(sizeof(int64_t) * (size_t)(n + 1)); /* sorted place -> group */
    int64_t u = 0;
    for (int64_t i = 0; i < n; ++i) {
        if (i == 0 || k[i].key != k[i - 1].key) first[u++] = k[i];
        group_of[i] = u - 1;
    }
    int64_t *slot_of_group = malloc(sizeof(int64_t) * (size_t)(u + 1));
    keyed *order = malloc(sizeof(keyed) * (size_t)(u + 1));
    for (int64_t g = 0; g < u; ++g) order[g] = (keyed){(uint64_t)g, first[g].pos};
    qsort(order, (size_t)u, sizeof(keyed), by_pos); /* groups by first occurrence */
    for (int64_t s = 0; s < u; ++s) slot_of_group[order[s].key] = s;
    int64_t *want_slot = malloc(sizeof(int64_t) * (size_t)(n + 1));
    int64_t *want_count = calloc((size_t)(u + 1), sizeof(int64_t));
    for (int64_t i = 0; i < n; ++i) {
        want_slot[k[i].pos] = slot_of_group[group_of[i]];
        ++want_count[slot_of_group[group_of[i]]];
    }
    int64_t nans = 0;
    int pos0 = 0, neg0 = 0;
    for (int64_t i = 0; i < n && is_float; ++i) {
        nans += is_nan(dtype, b[i]);
        pos0 |= b[i] == 0;
        neg0 |= b[i] == sign;
    }
    const int64_t limit = limit_in < n ? limit_in : n;
    int defer = u > limit || nans > 1 || (pos0 && neg0);
    /* the checkpoints: more than three in four distinct among the first c */
    for (int64_t c = 4096; c < n && !defer; c *= 2) {
        int64_t seen = 0;
        for (int64_t g = 0; g < u; ++g) seen += first[g].pos < c;
        defer = seen * 4 > c * 3;
    }

    char *distinct = malloc((size_t)(limit_in * es + 1));
    int64_t *counts = malloc(sizeof(int64_t) * (size_t)(limit_in + 1));
    int64_t *slots = malloc(sizeof(int64_t) * (size_t)(n + 1));
    int64_t got_u = -1;
    const int with = (int)(next() % 4); /* counts and slots, either, neither */
    const int status = kwk_unique_hash(dtype, v, n, limit_in, distinct, with & 1 ? counts : NULL,
                                       with & 2 ? slots : NULL, &got_u);
    const int want_status = n == 0 ? KWK_OK : defer ? KWK_DEFER : KWK_OK;
    CHECK(status == want_status, "hash dtype %d n %lld kind %d special %d limit %lld: status %d, "
          "want %d (u %lld)", dtype, (long long)n, kind, special, (long long)limit_in, status,
          want_status, (long long)u);
    if (status == KWK_OK && want_status == KWK_OK) {
        CHECK(got_u == (n ? u : 0), "hash dtype %d n %lld: u %lld, want %lld", dtype, (long long)n,
              (long long)got_u, (long long)u);
        for (int64_t s = 0; s < u && got_u == u; ++s) {
            uint64_t want = b[order[s].pos], got = 0;
            if (dtype == KWK_BOOL) want = want != 0;
            memcpy(&got, distinct + s * es, (size_t)es);
            CHECK(got == want, "hash dtype %d n %lld: distinct %lld", dtype, (long long)n,
                  (long long)s);
            CHECK(!(with & 1) || counts[s] == want_count[s], "hash dtype %d n %lld: count %lld",
                  dtype, (long long)n, (long long)s);
        }
        for (int64_t i = 0; i < n && (with & 2); ++i)
            CHECK(slots[i] == want_slot[i], "hash dtype %d n %lld: slot of %lld", dtype,
                  (long long)n, (long long)i);
        if ((with & 2) && n > 0) { /* renumbered by a permutation of the slots */
            int64_t *rank = malloc(sizeof(int64_t) * (size_t)u);
            for (int64_t s = 0; s < u; ++s) rank[s] = u - 1 - s;
            CHECK(kwk_unique_remap(slots, n, rank, u) == KWK_OK, "remap status");
            for (int64_t i = 0; i < n; ++i)
                CHECK(slots[i] == u - 1 - want_slot[i], "remap dtype %d n %lld: %lld", dtype,
                      (long long)n, (long long)i);
            slots[n / 2] = u; /* a slot past the ranks */
            CHECK(kwk_unique_remap(slots, n, rank, u) == KWK_E_ARG, "remap slot >= u");
            slots[n / 2] = -1;
            CHECK(kwk_unique_remap(slots, n, rank, u) == KWK_E_ARG, "remap slot < 0");
            free(rank);
        }
    }
    free(b); free(v); free(k); free(first); free(group_of); free(slot_of_group); free(order);
    free(want_slot); free(want_count); free(distinct); free(counts); free(slots);
}

static void hash_tests(void)
{
    for (int dtype = 0; dtype < 13; ++dtype) {
        for (int64_t n = 0; n <= 300; ++n) {
            const int kind = (int)(n % 3), special = (int)(next() % 6);
            const int64_t limits[3] = {n, n / 2, (int64_t)(next() % 50)};
            hash_one(dtype, n, kind, special, limits[next() % 3]);
        }
        for (int special = 0; special < 6; ++special) {
            hash_one(dtype, 5000, 0, special, 5000);
            hash_one(dtype, 70000, 0, special, 35000);
        }
        /* around the checkpoints: mostly distinct, about half, at every limit */
        const int64_t lens[4] = {4095, 4097, 8193, 20000};
        for (int i = 0; i < 4; ++i)
            for (int kind = 1; kind < 3; ++kind) {
                hash_one(dtype, lens[i], kind, 0, lens[i]);
                hash_one(dtype, lens[i], kind, 0, lens[i] / 3);
            }
    }
    /* tables past the prefetch size and of 4 MiB or more (huge pages, not
     * the thread's cache): 150k distinct values, and the same call again
     * on the tables the first one left behind */
    for (int rep = 0; rep < 2; ++rep) {
        hash_one(KWK_INT64, 300000, 1, 0, 300000);
        hash_one(KWK_FLOAT32, 300000, 1, 1, 300000);
    }
    /* short runs of values, every integer dtype, around the checkpoints, at
     * several limits */
    for (int dtype = 0; dtype < KWK_FLOAT16; ++dtype) {
        const int64_t dlens[7] = {1023, 1024, 1500, 4097, 8193, 20000, 70000};
        for (int i = 0; i < 7; ++i)
            for (int rep = 0; rep < 6; ++rep) {
                const int64_t lim[3] = {dlens[i], dlens[i] / 2, (int64_t)(next() % 300)};
                hash_one(dtype, dlens[i], 3, 0, lim[rep % 3]);
            }
    }
    /* few distinct values: the limit at u, below u */
    for (int64_t lim = 0; lim < 45; ++lim) hash_one(KWK_INT32, 1000, 0, 0, lim);
    int64_t u;
    char buf[8] = {0};
    int64_t slot = 0, rank = 0;
    CHECK(kwk_unique_hash(13, buf, 1, 1, buf, NULL, NULL, &u) == KWK_E_DTYPE, "hash dtype");
    CHECK(kwk_unique_hash(KWK_INT8, buf, -1, 1, buf, NULL, NULL, &u) == KWK_E_ARG, "hash n < 0");
    CHECK(kwk_unique_hash(KWK_INT8, buf, 1, -1, buf, NULL, NULL, &u) == KWK_E_ARG, "limit < 0");
    CHECK(kwk_unique_hash(KWK_INT8, buf, 1, 1, NULL, NULL, NULL, &u) == KWK_E_ARG, "no distinct");
    CHECK(kwk_unique_hash(KWK_INT8, buf, 1, 1, buf, NULL, NULL, NULL) == KWK_E_ARG, "no u");
    CHECK(kwk_unique_hash(KWK_INT8, NULL, 1, 1, buf, NULL, NULL, &u) == KWK_E_ARG, "no values");
    CHECK(kwk_unique_hash(KWK_INT8, buf, 1, 0, NULL, NULL, NULL, &u) == KWK_DEFER, "limit 0");
    CHECK(kwk_unique_remap(&slot, 1, &rank, 0) == KWK_E_ARG, "remap u 0");
    CHECK(kwk_unique_remap(&slot, -1, &rank, 1) == KWK_E_ARG, "remap n < 0");
    CHECK(kwk_unique_remap(NULL, 1, &rank, 1) == KWK_E_ARG, "remap NULL");
    CHECK(kwk_unique_remap(&slot, 1, &rank, 1) == KWK_OK && slot == 0, "remap one");
}

/* unique_dense.h's rule: the widest range (in 64-value words) it takes */
static uint64_t dense_most_words(int64_t n)
{
    const uint64_t near = (uint64_t)n < (1u << 16) ? (uint64_t)n : (1u << 16);
    const uint64_t far = (uint64_t)n / 4;
    const uint64_t most = near > far ? near : far;
    return most < ((uint64_t)1 << 22) ? most : ((uint64_t)1 << 22);
}

/* n elements of an integer dtype (1..8) drawn from `pool` values starting
 * at `base` (keys: bits ^ sign bit for the signed types), in runs of up to
 * `run`; the call given room for `room` distinct values. */
static void dense_one(int dtype, int64_t n, uint64_t base, uint64_t pool, int run, int64_t room)
{
    const int es = SIZE[dtype];
    const int bits = 8 * es;
    const uint64_t all = bits == 64 ? ~0ull : (1ull << bits) - 1;
    const int is_signed = dtype >= KWK_INT8 && dtype <= KWK_INT64;
    const uint64_t flip = is_signed ? 1ull << (bits - 1) : 0;
    uint64_t *key = malloc(sizeof(uint64_t) * (size_t)(n + 1));
    for (int64_t i = 0; i < n; ++i) {
        if (i > 0 && run > 1 && next() % (uint64_t)run != 0) { key[i] = key[i - 1]; continue; }
        const uint64_t off = pool > 1 ? next() % pool : 0;
        key[i] = (base + off) & all;
    }
    if (n > 1 && pool > 1) { key[0] = base & all; key[n - 1] = (base + pool - 1) & all; }
    if (run < 0) /* every value of the range once (full words), shuffled */
        for (int64_t i = 0; i < n; ++i) {
            const int64_t j = (int64_t)(next() % (uint64_t)(i + 1));
            key[i] = key[j];
            key[j] = (base + (uint64_t)i) & all;
        }
    char *v = malloc((size_t)(n * es + 1));
    for (int64_t i = 0; i < n; ++i) {
        const uint64_t b = key[i] ^ flip;
        memcpy(v + i * es, &b, (size_t)es);
        if (dtype == KWK_BOOL) key[i] = b != 0; /* bytes 2, 3: True */
    }
    /* the reference: keys sorted with their positions */
    keyed *k = malloc(sizeof(keyed) * (size_t)(n + 1));
    for (int64_t i = 0; i < n; ++i) k[i] = (keyed){key[i], i};
    ref_sort_keyed(k, n); /* stable: by (key, pos) */
    uint64_t *want_out = malloc(sizeof(uint64_t) * (size_t)(n + 1));
    int64_t *want_count = calloc((size_t)(n + 1), sizeof(int64_t));
    int64_t *want_inv = malloc(sizeof(int64_t) * (size_t)(n + 1));
    int64_t u = 0;
    for (int64_t i = 0; i < n; ++i) {
        if (i == 0 || k[i].key != k[i - 1].key) want_out[u++] = k[i].key ^ flip;
        ++want_count[u - 1];
        want_inv[k[i].pos] = u - 1;
    }
    const uint64_t gap = n ? k[n - 1].key - k[0].key : 0;
    const int defer = n > 0 && ((gap >> 6) >= dense_most_words(n) || u > room);

    char *out = malloc((size_t)(room * es + 1));
    int64_t *counts = malloc(sizeof(int64_t) * (size_t)(room + 1));
    int64_t *inverse = malloc(sizeof(int64_t) * (size_t)(n + 1));
    const int with = (int)(next() % 4); /* counts and inverse, either, neither */
    int64_t got_u = -1;
    const int status = kwk_unique_dense(dtype, v, n, room, room ? out : NULL,
                                        with & 1 ? counts : NULL, with & 2 ? inverse : NULL,
                                        &got_u);
    CHECK(status == (defer ? KWK_DEFER : KWK_OK),
          "dense dtype %d n %lld pool %llu run %d room %lld: status %d, want defer %d (u %lld)",
          dtype, (long long)n, (unsigned long long)pool, run, (long long)room, status, defer,
          (long long)u);
    if (status == KWK_OK && !defer) {
        CHECK(got_u == u, "dense dtype %d n %lld: u %lld, want %lld", dtype, (long long)n,
              (long long)got_u, (long long)u);
        int bad = 0;
        for (int64_t s = 0; s < u && got_u == u; ++s) {
            uint64_t got = 0;
            memcpy(&got, out + s * es, (size_t)es);
            bad += got != want_out[s] || ((with & 1) && counts[s] != want_count[s]);
        }
        for (int64_t i = 0; i < n && (with & 2); ++i) bad += inverse[i] != want_inv[i];
        CHECK(bad == 0, "dense dtype %d n %lld pool %llu run %d with %d: %d wrong", dtype,
              (long long)n, (unsigned long long)pool, run, with, bad);
    }
    free(key); free(v); free(k); free(want_out); free(want_count); free(want_inv);
    free(out); free(counts); free(inverse);
}

static void dense_tests(void)
{
    for (int dtype = KWK_UINT8; dtype <= KWK_UINT64; ++dtype) {
        const int bits = 8 * SIZE[dtype];
        const uint64_t all = bits == 64 ? ~0ull : (1ull << bits) - 1;
        const uint64_t mid = 1ull << (bits - 1); /* keys: zero of the signed types */
        for (int64_t n = 0; n <= 300; ++n) {
            /* a range of 1 value to just past the widest taken, at 0, at the
             * top, across the middle */
            const uint64_t widest = 64 * dense_most_words(n);
            const uint64_t choice[5] = {1, 2 + next() % 64, 1 + next() % (widest + 1),
                                        widest - 1 + next() % 3, widest + 64};
            uint64_t pool = choice[next() % 5];
            if (pool > all) pool = all; /* (the whole 8-bit range at most) */
            const uint64_t bases[3] = {0, (all - pool + 1) & all, mid - pool / 2};
            const int64_t room = next() % 4 ? n : (int64_t)(next() % (uint64_t)(n + 1));
            dense_one(dtype, n, bases[next() % 3], pool, (int)(next() % 3) * 4, room);
            if (n <= (int64_t)all) dense_one(dtype, n, bases[next() % 3], (uint64_t)n, -1, n);
        }
        /* long inputs: ranges near the near and far bounds, runs, few values */
        const int64_t lens[5] = {4095, 4097, 70000, 262144, 300000};
        for (int i = 0; i < 5; ++i) {
            const int64_t n = lens[i];
            const uint64_t widest = 64 * dense_most_words(n);
            const uint64_t pools[5] = {widest - 1, widest, widest + 64, (uint64_t)n / 3, 7};
            for (int j = 0; j < 5; ++j) {
                const uint64_t pool = pools[j] > all ? all : pools[j];
                dense_one(dtype, n, (mid - pool / 2) & all, pool, j == 4 ? 50 : 0, n);
            }
        }
    }
    /* bool: bytes 0..3 (2 and 3 are True), in runs or not, with a short room */
    for (int64_t n = 0; n <= 300; ++n)
        dense_one(KWK_BOOL, n, 0, 1 + next() % 4, (int)(next() % 3) * 4,
                  next() % 4 ? n : (int64_t)(next() % 3));
    dense_one(KWK_BOOL, 100000, 0, 4, 0, 100000);
    dense_one(KWK_BOOL, 100000, 2, 2, 7, 100000);
    int64_t u;
    char buf[8] = {0};
    CHECK(kwk_unique_dense(KWK_FLOAT32, buf, 1, 1, buf, NULL, NULL, &u) == KWK_E_DTYPE,
          "dense float");
    CHECK(kwk_unique_dense(13, buf, 1, 1, buf, NULL, NULL, &u) == KWK_E_DTYPE, "dense dtype");
    CHECK(kwk_unique_dense(KWK_INT8, buf, -1, 1, buf, NULL, NULL, &u) == KWK_E_ARG, "dense n < 0");
    CHECK(kwk_unique_dense(KWK_INT8, buf, 1, -1, buf, NULL, NULL, &u) == KWK_E_ARG, "room < 0");
    CHECK(kwk_unique_dense(KWK_INT8, buf, 1, 1, NULL, NULL, NULL, &u) == KWK_E_ARG, "dense no out");
    CHECK(kwk_unique_dense(KWK_INT8, buf, 1, 1, buf, NULL, NULL, NULL) == KWK_E_ARG, "dense no u");
    CHECK(kwk_unique_dense(KWK_INT8, NULL, 1, 1, buf, NULL, NULL, &u) == KWK_E_ARG,
          "dense no values");
    CHECK(kwk_unique_dense(KWK_INT8, buf, 1, 0, NULL, NULL, NULL, &u) == KWK_DEFER, "room 0");
}

/* kwk_unique_torch_zero against the record emulation of std::sort
 * (torch_order.h emu_std_sort): rows holding both zeros among a few other
 * values (ties everywhere) or among distinct ones, at most one NaN; the
 * compaction of a stable sort gets the zero torch's sort puts first, and
 * no other entry changes.  float64 of a range too wide to pack defers. */
static void zero_one(int dtype, int64_t n, int few, int wide)
{
    const int es = SIZE[dtype];
    const int bits = 8 * es;
    const uint64_t sign = 1ull << (bits - 1);
    char *v = malloc((size_t)(n * es));
    for (int64_t i = 0; i < n; ++i) {
        uint64_t b;
        const uint64_t r = next();
        const uint64_t neg = (r >> 8) % 2 ? sign : 0;
        if (r % 5 == 0) b = neg; /* a zero of either sign */
        /* float64 keys pack with their index only over a narrow range:
         * subnormals of either sign around the zeros */
        else if (bits == 64) b = (few ? 8 * (r % 7) + 1 : r >> 36) | neg;
        else if (few) b = (uint64_t)(0x3C00u + 8 * (r % 7)) << (bits - 16) | neg;
        else b = (r >> 3) & ((sign - 1) >> 2); /* positive, below inf: distinct mostly */
        if (wide && i == 1) b = 0x7FE0000000000000ull; /* a huge value: 62-bit span */
        if (wide && i == 2) b = 0x0000000000000001ull;
        memcpy(v + i * es, &b, (size_t)es);
    }
    /* both zeros, and one NaN in some rows */
    const uint64_t pz = 0, nz = sign;
    memcpy(v + (n / 4) * es, &pz, (size_t)es);
    memcpy(v + (n / 4 + 1) * es, &nz, (size_t)es);
    if (n % 3 == 0 && bits < 64) { /* (a float64 NaN's key is too far from the zeros' to pack) */
        const uint64_t nan = sign - 1;
        memcpy(v + (n - 1) * es, &nan, (size_t)es);
    }
    /* any sort's compaction: a stable values-only sort */
    char *sorted = malloc((size_t)(n * es));
    CHECK(kwk_sort(dtype, v, 1, n, 1, n, 1, 1, sorted, NULL, n, 1, 1, 0, KWK_ORDER_STABLE) == KWK_OK,
          "zero: sort");
    int64_t runs = 0;
    int shows = 0;
    CHECK(kwk_unique_runs(dtype, sorted, n, NULL, NULL, &runs, &shows) == KWK_OK, "zero: runs");
    char *out = malloc((size_t)(runs * es)), *before = malloc((size_t)(runs * es));
    CHECK(kwk_unique_fill(dtype, sorted, n, runs, out, NULL) == KWK_OK, "zero: fill");
    memcpy(before, out, (size_t)(runs * es));
    CHECK(kwk_unique_order_matters(dtype, v, n) == 1, "zero: order matters dtype %d n %lld",
          dtype, (long long)n);
    const int status = kwk_unique_torch_zero(dtype, v, n, out, runs);
    if (wide && dtype == KWK_FLOAT64) {
        CHECK(status == KWK_DEFER && !memcmp(out, before, (size_t)(runs * es)),
              "zero: a 62-bit span defers, changing nothing (status %d)", status);
    } else {
        CHECK(status == KWK_OK, "zero: status %d dtype %d n %lld", status, dtype, (long long)n);
        kwk_kv *rec = malloc(sizeof(kwk_kv) * (size_t)n);
        for (int64_t i = 0; i < n; ++i) {
            rec[i].key = kwk_key_at(dtype, v + i * es);
            rec[i].idx = i;
        }
        const uint64_t zero_key = kwk_key_at(dtype, (const char *)&pz);
        emu_std_sort(rec, n);
        int64_t first = 0;
        while (rec[first].key != zero_key) ++first;
        uint64_t want = 0, got = 0;
        memcpy(&want, v + rec[first].idx * es, (size_t)es);
        int64_t entry = 0, changed = 0;
        for (int64_t j = 0; j < runs; ++j) {
            if (kwk_key_at(dtype, out + j * es) == zero_key) entry = j;
            else changed += memcmp(out + j * es, before + j * es, (size_t)es) != 0;
        }
        memcpy(&got, out + entry * es, (size_t)es);
        CHECK(got == want && changed == 0,
              "zero: dtype %d n %lld few %d: zero bits %llx, want %llx (%lld others changed)",
              dtype, (long long)n, few, (unsigned long long)got, (unsigned long long)want,
              (long long)changed);
        free(rec);
    }
    free(v);
    free(sorted);
    free(out);
    free(before);
}

static void zero_tests(void)
{
    static const int dtypes[] = {KWK_FLOAT16, KWK_BFLOAT16, KWK_FLOAT32, KWK_FLOAT64};
    for (int d = 0; d < 4; ++d) {
        for (int64_t n = 3; n <= 200; ++n) zero_one(dtypes[d], n, (int)(n % 2), 0);
        for (int few = 0; few < 2; ++few) {
            zero_one(dtypes[d], 1000, few, 0);
            zero_one(dtypes[d], 10000, few, 0);
            zero_one(dtypes[d], 70001, few, 0);
        }
        zero_one(dtypes[d], 500, 0, 1);
    }
    int64_t z;
    CHECK(kwk_unique_torch_zero(13, "", 1, &z, 1) == KWK_E_DTYPE, "zero: dtype");
    CHECK(kwk_unique_torch_zero(KWK_FLOAT32, "", 1, NULL, 1) == KWK_E_ARG, "zero: NULL out");
    CHECK(kwk_unique_torch_zero(KWK_FLOAT32, "", 1, &z, 2) == KWK_E_ARG, "zero: runs > n");
    /* a compaction without a zero entry */
    const float v[2] = {0.0f, -0.0f}, out[1] = {1.0f};
    CHECK(kwk_unique_torch_zero(KWK_FLOAT32, v, 2, (void *)out, 1) == KWK_E_ARG,
          "zero: no zero entry");
}

int main(void)
{
    ref_sort_self_check();
    const char *const *targets = KWK_TEST_TARGET_NAMES;
    for (int t = 0; t < KWK_TEST_NTARGETS; ++t) {
        if (test_set_target(targets[t]) != 0) continue;
        for (int dtype = 0; dtype < 13; ++dtype) {
            for (int64_t n = 0; n <= 300; ++n) one(dtype, n);
            one(dtype, 5000);
            one(dtype, 70000);
        }
        hash_tests();
        dense_tests();
        zero_tests();
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
