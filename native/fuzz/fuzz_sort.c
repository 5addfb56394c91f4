/*
 * fuzz_sort.c - kwk_sort against a stable merge sort.
 *
 * ORDER_STABLE: exactly the stable order's indices and the source bits
 * (bool values: 0 or 1, as torch writes them).
 * ORDER_TORCH (its tie order is checked against torch itself in pytest):
 * each position holds an element equivalent to the reference's, indices
 * form a permutation, values carry the bits of the element indexed (values
 * alone: the row's bits, permuted).  Every call: status OK, the source
 * unchanged, nothing written outside the output elements.
 */
#include "fuzz_common.h"

/* The bits kwk_sort writes for element bits b: bool as 0 or 1, as torch's
 * sort writes them; every other dtype the source's bits. */
static uint64_t sort_bits(int dt, uint64_t b) { return dt == KWK_BOOL ? b != 0 : b; }

/* bool values alone: each 0 or 1, as many zeros as the row has. */
static int bool_values_match(const fz_row *row, const uint64_t *got, int64_t len)
{
    int64_t zeros = 0;
    for (int64_t j = 0; j < len; ++j) {
        if (got[j] > 1) return 0;
        zeros += (got[j] == 0) - (fz_elem(row, j) == 0);
    }
    return zeros == 0;
}

static void check_row(const fz_row *row, const fz_view *vals, const fz_view *inds, int outs,
                      int64_t o, int64_t i, int descending, int order)
{
    const int64_t len = row->len;
    int64_t *ref = fz_stable_order(row, descending);
    unsigned char *seen = (unsigned char *)calloc((size_t)(len > 0 ? len : 1), 1);
    uint64_t *got_bits = (uint64_t *)malloc((size_t)(len > 0 ? len : 1) * 8);
    if (!seen || !got_bits) abort();
    for (int64_t j = 0; j < len; ++j) {
        const uint64_t want = fz_elem(row, ref[j]);
        const uint64_t want_bits = sort_bits(row->dt, want);
        uint64_t vb = 0;
        if (outs != FZ_INDICES) vb = got_bits[j] = fz_bits(fz_at(vals, o, j, i), row->es);
        if (outs != FZ_VALUES) {
            const int64_t idx = *(const int64_t *)fz_at(inds, o, j, i);
            if (idx < 0 || idx >= len) FZ_FAIL("row (%lld,%lld) j=%lld: index %lld out of range",
                                               (long long)o, (long long)i, (long long)j, (long long)idx);
            if (seen[idx]) FZ_FAIL("index %lld twice", (long long)idx);
            seen[idx] = 1;
            if (order == KWK_ORDER_STABLE && idx != ref[j])
                FZ_FAIL("row (%lld,%lld) j=%lld: index %lld, stable order has %lld", (long long)o,
                        (long long)i, (long long)j, (long long)idx, (long long)ref[j]);
            if (fz_cmp_bits(row->dt, fz_elem(row, idx), want) != 0)
                FZ_FAIL("row (%lld,%lld) j=%lld: element %lld is out of order", (long long)o,
                        (long long)i, (long long)j, (long long)idx);
            if (outs == FZ_BOTH && vb != sort_bits(row->dt, fz_elem(row, idx)))
                FZ_FAIL("j=%lld: value bits %llx are not element %lld's", (long long)j,
                        (unsigned long long)vb, (long long)idx);
        } else {
            if (order == KWK_ORDER_STABLE && vb != want_bits)
                FZ_FAIL("j=%lld: value bits %llx, stable order has %llx", (long long)j,
                        (unsigned long long)vb, (unsigned long long)want_bits);
            if (fz_cmp_bits(row->dt, vb, want) != 0)
                FZ_FAIL("j=%lld: value %llx is out of order", (long long)j, (unsigned long long)vb);
        }
    }
    if (outs == FZ_VALUES && !(row->dt == KWK_BOOL ? bool_values_match(row, got_bits, len)
                                                   : fz_bits_within_row(row, got_bits, len, 0)))
        FZ_FAIL("the values are not a permutation of the row's bits");
    free(ref);
    free(seen);
    free(got_bits);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_reader r = {data, size, 0};
    const uint64_t flags = fz_take(&r, 1);
    const int dt = (int)(fz_take(&r, 1) % KWK_NUM_DTYPES), es = FZ_ES[dt];
    int64_t len = fz_length(&r), outer, inner;
    fz_outer_inner(&r, len, &outer, &inner);
    const int order = (int)((flags >> 1) & 1), descending = (int)((flags >> 2) & 1);
    const int outs = (int)(((flags >> 3) & 3) % 3);
    const int reject = ((flags >> 5) & 3) == 3;
    const int bad = (int)(fz_take(&r, 1) % FZ_NUM_BAD);
    const uint64_t src_lay = fz_take(&r, 3), dst_lay = fz_take(&r, 3), pick = fz_take(&r, 1);
    fz_pick_target((int)(flags & 1));
    if (reject) fz_reject_prepare(bad, FZ_OP_SORT, &outer, &len, &inner);

    const int64_t n[3] = {outer, len, inner};
    fz_view src, vals, inds;
    fz_layout(&src, n, es, src_lay, 1);
    fz_fill(&r, dt, src.buf, src.bytes);
    fz_output(&vals, n, es, dst_lay);
    fz_output(&inds, n, 8, dst_lay); /* same strides in elements */
    fz_args a = {dt, src.base, outer, len, inner, src.s[0], src.s[1], src.s[2], 0,
                 outs != FZ_INDICES ? vals.base : NULL,
                 outs != FZ_VALUES ? (int64_t *)inds.base : NULL,
                 vals.s[0], vals.s[1], vals.s[2], order};
    const char *broken = reject ? fz_break(bad, FZ_OP_SORT, &a, es, pick) : NULL;
    fz_record("sort", broken, &a, order, descending, outs, reject);

    char *before = fz_snapshot(&src);
    const int st = kwk_sort(a.dtype, a.src, a.outer, a.len, a.inner, a.so, a.sl, a.si, a.values,
                            a.indices, a.dso, a.dsl, a.dsi, descending, a.order);
    fz_check_source(&src, before);
    if (reject) {
        if (st >= 0) FZ_FAIL("an invalid call (%s) returned %d", broken, st);
        fz_check_untouched(&vals, "values");
        fz_check_untouched(&inds, "indices");
    } else {
        if (st != KWK_OK) FZ_FAIL("status %d (%s)", st, kwk_strerror(st));
        fz_check_outputs(&vals, &inds, outs);
        for (int64_t o = 0; o < outer; ++o)
            for (int64_t i = 0; i < inner; ++i) {
                fz_row row = fz_row_of(&src, dt, o, i);
                check_row(&row, &vals, &inds, outs, o, i, descending, order);
            }
    }
    fz_view_free(&src);
    fz_view_free(&vals);
    fz_view_free(&inds);
    return 0;
}
