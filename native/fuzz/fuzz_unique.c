/*
 * fuzz_unique.c - kwk_unique_hash (torch.unique of few distinct values by
 * hashing) and kwk_unique_remap against a reference that sorts the
 * elements' keys (their bits; bool: truth).
 *
 * Any call may defer (KWK_DEFER: the caller then sorts); it must when the
 * elements hold more than `limit` distinct values, two NaNs, or both -0.0
 * and +0.0.  An answer (KWK_OK) must give every distinct value once, in the
 * order of first occurrence, bool as 0 or 1, with exact counts and the
 * distinct value of each element; the remap then renumbers those.  Every
 * call: the source unchanged, nothing written past the buffers (exact sizes:
 * the sanitizers catch an overrun).
 *
 * With flag bit 3, kwk_unique_dense instead (integers and bool of a short
 * range, by a bitmap or a table): float dtypes refused, a deferral only where the range
 * is wide or the distinct values more than the room (`limit`), and an
 * answer of the distinct values in ascending order with exact counts and
 * each element's place among them.
 */
#include "fuzz_common.h"

static uint64_t key_of(int dt, uint64_t bits)
{
    return dt == KWK_BOOL ? bits != 0 : bits;
}

/* How many of the sorted keys[0, n) equal key. */
static int64_t count_of(const uint64_t *keys, int64_t n, uint64_t key)
{
    int64_t lo = 0, hi = n;
    while (lo < hi) { /* first >= key */
        const int64_t mid = lo + (hi - lo) / 2;
        if (keys[mid] < key) lo = mid + 1; else hi = mid;
    }
    int64_t end = lo;
    while (end < n && keys[end] == key) ++end;
    return end - lo;
}

static int is_signed_int(int dt)
{
    return dt == KWK_INT8 || dt == KWK_INT16 || dt == KWK_INT32 || dt == KWK_INT64;
}

/* out and counts: room for `room` elements; inverse: n */
static void fuzz_dense(int dt, int es, const char *src, int64_t n, int64_t room, char *out,
                       int64_t *counts, int64_t *inverse)
{
    int64_t u = -1;
    const int st = kwk_unique_dense(dt, src, n, room, out, counts, inverse, &u);
    if (fz_is_float(dt)) {
        if (st != KWK_E_DTYPE) FZ_FAIL("dense of dtype %d: status %d", dt, st);
        return;
    }
    /* keys that order as the values: the sign bit flipped for signed types */
    const uint64_t flip = is_signed_int(dt) ? 1ull << (8 * es - 1) : 0;
    uint64_t *keys = malloc(sizeof(uint64_t) * (size_t)n + 1);
    for (int64_t j = 0; j < n; ++j) keys[j] = key_of(dt, fz_bits(src + j * es, es)) ^ flip;
    qsort(keys, (size_t)n, sizeof(uint64_t), fz_u64_cmp);
    int64_t want_u = 0;
    for (int64_t j = 0; j < n; ++j) want_u += j == 0 || keys[j] != keys[j - 1];
    if (st != KWK_OK && st != KWK_DEFER) FZ_FAIL("dense status %d (%s)", st, kwk_strerror(st));
    if (st == KWK_DEFER && n == 0) FZ_FAIL("dense deferred an empty input");
    if (st == KWK_OK) {
        if (want_u > room) FZ_FAIL("dense: %lld distinct values in room for %lld",
                                   (long long)want_u, (long long)room);
        if (u != want_u) FZ_FAIL("dense: %lld distinct values, want %lld", (long long)u,
                                 (long long)want_u);
        for (int64_t s = 0, j = 0; s < u; ++s) {
            const uint64_t key = fz_bits(out + s * es, es) ^ flip;
            if (key != keys[j]) FZ_FAIL("dense: distinct value %lld", (long long)s);
            int64_t c = 0;
            while (j < n && keys[j] == key) { ++j; ++c; }
            if (counts && counts[s] != c)
                FZ_FAIL("dense: count of %lld: %lld, want %lld", (long long)s,
                        (long long)counts[s], (long long)c);
        }
        for (int64_t j = 0; j < n && inverse; ++j) {
            if (inverse[j] < 0 || inverse[j] >= u)
                FZ_FAIL("dense: place %lld of element %lld", (long long)inverse[j], (long long)j);
            if (fz_bits(out + inverse[j] * es, es) != key_of(dt, fz_bits(src + j * es, es)))
                FZ_FAIL("dense: element %lld placed at another value", (long long)j);
        }
    }
    free(keys);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_reader r = {data, size, 0};
    const uint64_t flags = fz_take(&r, 1);
    const int dt = (int)(fz_take(&r, 1) % KWK_NUM_DTYPES), es = FZ_ES[dt];
    const int64_t n = fz_length(&r);
    const int64_t limit = (int64_t)(fz_take(&r, 2) % (uint64_t)(n + 2)); /* 0 .. n + 1 */
    const int with_counts = (int)((flags >> 1) & 1), with_slots = (int)((flags >> 2) & 1);
    fz_pick_target((int)(flags & 1));
    fz_call.op = "unique_hash";
    fz_call.dt = dt; fz_call.order = -1; fz_call.flag_a = with_counts; fz_call.flag_b = with_slots;
    fz_call.must_reject = 0; fz_call.outer = 1; fz_call.len = n; fz_call.inner = 1;
    fz_call.k = limit; fz_call.so = fz_call.sl = fz_call.si = 0;
    fz_call.dso = fz_call.dsl = fz_call.dsi = 0;

    char *src = malloc((size_t)(n * es) + 1);
    fz_fill(&r, dt, src, (size_t)(n * es));
    char *before = malloc((size_t)(n * es) + 1);
    memcpy(before, src, (size_t)(n * es));
    char *distinct = malloc((size_t)(limit * es) + 1);
    int64_t *counts = malloc(sizeof(int64_t) * (size_t)limit + 1);
    int64_t *slots = malloc(sizeof(int64_t) * (size_t)n + 1);
    if ((flags >> 3) & 1) {
        fz_call.op = "unique_dense";
        fuzz_dense(dt, es, src, n, limit, distinct, with_counts ? counts : NULL,
                   with_slots ? slots : NULL);
        if (memcmp(before, src, (size_t)(n * es)) != 0) FZ_FAIL("the source was modified");
        free(src); free(before); free(distinct); free(counts); free(slots);
        return 0;
    }
    int64_t u = -1;
    const int st = kwk_unique_hash(dt, src, n, limit, distinct, with_counts ? counts : NULL,
                                   with_slots ? slots : NULL, &u);
    if (memcmp(before, src, (size_t)(n * es)) != 0) FZ_FAIL("the source was modified");

    uint64_t *keys = malloc(sizeof(uint64_t) * (size_t)n + 1);
    int64_t nans = 0;
    int pos_zero = 0, neg_zero = 0;
    const uint64_t sign = 1ull << (8 * es - 1);
    for (int64_t j = 0; j < n; ++j) {
        const uint64_t b = fz_bits(src + j * es, es);
        keys[j] = key_of(dt, b);
        nans += fz_is_nan(dt, b);
        pos_zero |= fz_is_float(dt) && b == 0;
        neg_zero |= fz_is_float(dt) && b == sign;
    }
    qsort(keys, (size_t)n, sizeof(uint64_t), fz_u64_cmp);
    int64_t want_u = 0;
    for (int64_t j = 0; j < n; ++j) want_u += j == 0 || keys[j] != keys[j - 1];
    const int must_defer = n > 0 && (want_u > limit || nans > 1 || (pos_zero && neg_zero));

    if (st != KWK_OK && st != KWK_DEFER) FZ_FAIL("status %d (%s)", st, kwk_strerror(st));
    if (st == KWK_DEFER && n == 0) FZ_FAIL("deferred an empty input");
    if (st == KWK_OK) {
        if (must_defer)
            FZ_FAIL("answered where it must defer (%lld distinct, limit %lld, %lld NaN, zeros %d%d)",
                    (long long)want_u, (long long)limit, (long long)nans, pos_zero, neg_zero);
        if (u != want_u) FZ_FAIL("%lld distinct values, want %lld", (long long)u, (long long)want_u);
        for (int64_t s = 0; s < u; ++s) {
            const uint64_t b = fz_bits(distinct + s * es, es);
            if (dt == KWK_BOOL && b > 1) FZ_FAIL("bool distinct value %llu", (unsigned long long)b);
            const int64_t c = count_of(keys, n, key_of(dt, b));
            if (c == 0) FZ_FAIL("distinct value %lld is not in the input", (long long)s);
            if (with_counts && counts[s] != c)
                FZ_FAIL("count of %lld: %lld, want %lld", (long long)s, (long long)counts[s],
                        (long long)c);
        }
        if (with_slots && n > 0) {
            int64_t next_new = 0; /* slots numbered by first occurrence */
            for (int64_t j = 0; j < n; ++j) {
                if (slots[j] < 0 || slots[j] >= u) FZ_FAIL("slot %lld of element %lld",
                                                          (long long)slots[j], (long long)j);
                if (slots[j] > next_new) FZ_FAIL("slot %lld before %lld", (long long)slots[j],
                                                 (long long)next_new);
                next_new += slots[j] == next_new;
                if (key_of(dt, fz_bits(distinct + slots[j] * es, es)) !=
                    key_of(dt, fz_bits(src + j * es, es)))
                    FZ_FAIL("element %lld numbered as another value", (long long)j);
            }
            int64_t *rank = malloc(sizeof(int64_t) * (size_t)u);
            int64_t *old = malloc(sizeof(int64_t) * (size_t)n);
            memcpy(old, slots, sizeof(int64_t) * (size_t)n);
            for (int64_t s = 0; s < u; ++s) rank[s] = (s * 7 + (int64_t)flags) % u;
            if (kwk_unique_remap(slots, n, rank, u) != KWK_OK) FZ_FAIL("remap refused");
            for (int64_t j = 0; j < n; ++j)
                if (slots[j] != rank[old[j]]) FZ_FAIL("remap of element %lld", (long long)j);
            free(rank);
            free(old);
        }
    }
    free(src); free(before); free(distinct); free(counts); free(slots); free(keys);
    return 0;
}
