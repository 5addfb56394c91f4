/*
 * fuzz_median_dim.c - kwk_median_dim (torch.median(x, dim) and
 * torch.nanmedian(x, dim)) against a stable ascending merge sort.
 *
 * median: a row holding NaN gives its first NaN, exactly; otherwise the
 * element at rank (len-1)/2.  nanmedian: rank (len-nnan-1)/2 among the
 * non-NaN elements; an all-NaN row gives a NaN.  Which of several equal
 * elements is indexed is torch's choice (checked against torch in pytest):
 * here an equivalent element, and the value is the bits of the element
 * indexed.  Every call: status OK, the source unchanged, nothing written
 * outside the output elements.
 */
#include "fuzz_common.h"

static void check_row(const fz_row *row, const fz_view *vals, const fz_view *inds, int outs,
                      int64_t o, int64_t i, int ignore_nan)
{
    const int dt = row->dt;
    const int64_t len = row->len;
    int64_t first_nan = -1, nnan = 0;
    for (int64_t j = 0; j < len; ++j)
        if (fz_is_nan(dt, fz_elem(row, j))) {
            if (first_nan < 0) first_nan = j;
            ++nnan;
        }
    int64_t *ref = fz_stable_order(row, 0);
    const int64_t rank = ignore_nan ? (len - nnan - 1) / 2 : (len - 1) / 2;
    const int64_t want_idx = !ignore_nan && first_nan >= 0 ? first_nan : ref[rank < 0 ? 0 : rank];
    const uint64_t want = fz_elem(row, want_idx);
    const int exact = !ignore_nan && first_nan >= 0;
    uint64_t got;
    if (outs != FZ_VALUES) {
        const int64_t idx = *(const int64_t *)fz_at(inds, o, 0, i);
        if (idx < 0 || idx >= len) FZ_FAIL("index %lld out of range", (long long)idx);
        if (exact && idx != first_nan)
            FZ_FAIL("row (%lld,%lld) holds NaN first at %lld; got index %lld", (long long)o,
                    (long long)i, (long long)first_nan, (long long)idx);
        got = fz_elem(row, idx);
        if (outs == FZ_BOTH && fz_bits(fz_at(vals, o, 0, i), row->es) != got)
            FZ_FAIL("the value is not the bits of element %lld", (long long)idx);
    } else {
        got = fz_bits(fz_at(vals, o, 0, i), row->es);
        if (exact && got != want) FZ_FAIL("the value is not the first NaN's bits");
        if (!fz_bits_within_row(row, &got, 1, 0)) FZ_FAIL("a value that is not in the row");
    }
    if (fz_cmp_bits(dt, got, want) != 0)
        FZ_FAIL("row (%lld,%lld): %llx is not the median (%llx; %lld NaN)", (long long)o,
                (long long)i, (unsigned long long)got, (unsigned long long)want, (long long)nnan);
    free(ref);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_reader r = {data, size, 0};
    const uint64_t flags = fz_take(&r, 1);
    const int dt = (int)(fz_take(&r, 1) % KWK_NUM_DTYPES), es = FZ_ES[dt];
    int64_t len = fz_length(&r), outer, inner;
    fz_outer_inner(&r, len, &outer, &inner);
    const int ignore_nan = (int)((flags >> 1) & 1);
    const int outs = (int)(((flags >> 3) & 3) % 3);
    const int reject = ((flags >> 5) & 3) == 3;
    const int bad = (int)(fz_take(&r, 1) % FZ_NUM_BAD);
    const uint64_t src_lay = fz_take(&r, 3), dst_lay = fz_take(&r, 3), pick = fz_take(&r, 1);
    fz_pick_target((int)(flags & 1));
    if (reject) fz_reject_prepare(bad, FZ_OP_MEDIAN_DIM, &outer, &len, &inner);
    else if (len == 0) outer = 0; /* no median of nothing: an empty call instead */

    const int64_t n[3] = {outer, len, inner}, nout[3] = {outer, 1, inner};
    fz_view src, vals, inds;
    fz_layout(&src, n, es, src_lay, 1);
    fz_fill(&r, dt, src.buf, src.bytes);
    fz_output(&vals, nout, es, dst_lay);
    fz_output(&inds, nout, 8, dst_lay);
    fz_args a = {dt, src.base, outer, len, inner, src.s[0], src.s[1], src.s[2], 0,
                 outs != FZ_INDICES ? vals.base : NULL,
                 outs != FZ_VALUES ? (int64_t *)inds.base : NULL,
                 vals.s[0], 0, vals.s[2], 0};
    const char *broken = reject ? fz_break(bad, FZ_OP_MEDIAN_DIM, &a, es, pick) : NULL;
    fz_record("median_dim", broken, &a, -1, ignore_nan, outs, reject);

    char *before = fz_snapshot(&src);
    const int st = kwk_median_dim(a.dtype, a.src, a.outer, a.len, a.inner, a.so, a.sl, a.si,
                                  a.values, a.indices, a.dso, a.dsi, ignore_nan);
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
                check_row(&row, &vals, &inds, outs, o, i, ignore_nan);
            }
    }
    fz_view_free(&src);
    fz_view_free(&vals);
    fz_view_free(&inds);
    return 0;
}
