/*
 * fuzz_kthvalue.c - kwk_kthvalue against element k-1 of a stable ascending
 * merge sort (NaN largest).
 *
 * ORDER_STABLE: exactly that element.  ORDER_TORCH (which of several equal
 * elements torch picks is checked against torch in pytest): an element
 * equivalent to it, and the value is the bits of the element indexed.
 * Every call: status OK, the source unchanged, nothing written outside the
 * output elements.
 */
#include "fuzz_common.h"

static void check_row(const fz_row *row, const fz_view *vals, const fz_view *inds, int outs,
                      int64_t o, int64_t i, int64_t k, int order)
{
    int64_t *ref = fz_stable_order(row, 0);
    const uint64_t want = fz_elem(row, ref[k - 1]);
    uint64_t got;
    if (outs != FZ_VALUES) {
        const int64_t idx = *(const int64_t *)fz_at(inds, o, 0, i);
        if (idx < 0 || idx >= row->len) FZ_FAIL("index %lld out of range", (long long)idx);
        if (order == KWK_ORDER_STABLE && idx != ref[k - 1])
            FZ_FAIL("row (%lld,%lld): index %lld, stable order has %lld", (long long)o, (long long)i,
                    (long long)idx, (long long)ref[k - 1]);
        got = fz_elem(row, idx);
        if (outs == FZ_BOTH && fz_bits(fz_at(vals, o, 0, i), row->es) != got)
            FZ_FAIL("the value is not the bits of element %lld", (long long)idx);
    } else {
        got = fz_bits(fz_at(vals, o, 0, i), row->es);
        if (!fz_bits_within_row(row, &got, 1, 0)) FZ_FAIL("a value that is not in the row");
    }
    if (fz_cmp_bits(row->dt, got, want) != 0)
        FZ_FAIL("row (%lld,%lld): %llx is not the k-th smallest (%llx)", (long long)o, (long long)i,
                (unsigned long long)got, (unsigned long long)want);
    if (order == KWK_ORDER_STABLE && got != want) FZ_FAIL("bits differ from the stable k-th");
    free(ref);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_reader r = {data, size, 0};
    const uint64_t flags = fz_take(&r, 1);
    const int dt = (int)(fz_take(&r, 1) % KWK_NUM_DTYPES), es = FZ_ES[dt];
    int64_t len = fz_length(&r), outer, inner;
    fz_outer_inner(&r, len, &outer, &inner);
    const int order = (int)((flags >> 1) & 1);
    const int outs = (int)(((flags >> 3) & 3) % 3);
    const int reject = ((flags >> 5) & 3) == 3;
    const int bad = (int)(fz_take(&r, 1) % FZ_NUM_BAD);
    const uint64_t src_lay = fz_take(&r, 3), dst_lay = fz_take(&r, 3), pick = fz_take(&r, 1);
    fz_pick_target((int)(flags & 1));
    if (reject) fz_reject_prepare(bad, FZ_OP_KTHVALUE, &outer, &len, &inner);
    else if (len == 0) outer = 0; /* no k-th of nothing: an empty call instead */
    const int64_t k = fz_k(&r, len, 1);

    const int64_t n[3] = {outer, len, inner}, nout[3] = {outer, 1, inner};
    fz_view src, vals, inds;
    fz_layout(&src, n, es, src_lay, 1);
    fz_fill(&r, dt, src.buf, src.bytes);
    fz_output(&vals, nout, es, dst_lay);
    fz_output(&inds, nout, 8, dst_lay);
    fz_args a = {dt, src.base, outer, len, inner, src.s[0], src.s[1], src.s[2], k,
                 outs != FZ_INDICES ? vals.base : NULL,
                 outs != FZ_VALUES ? (int64_t *)inds.base : NULL,
                 vals.s[0], 0, vals.s[2], order};
    const char *broken = reject ? fz_break(bad, FZ_OP_KTHVALUE, &a, es, pick) : NULL;
    fz_record("kthvalue", broken, &a, order, 0, outs, reject);

    char *before = fz_snapshot(&src);
    const int st = kwk_kthvalue(a.dtype, a.src, a.outer, a.len, a.inner, a.so, a.sl, a.si, a.k,
                                a.values, a.indices, a.dso, a.dsi, a.order);
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
                check_row(&row, &vals, &inds, outs, o, i, k, order);
            }
    }
    fz_view_free(&src);
    fz_view_free(&vals);
    fz_view_free(&inds);
    return 0;
}
