/*
 * fuzz_topk.c - kwk_topk against the first k of a stable merge sort
 * (descending for largest).
 *
 * ORDER_STABLE: sorted=1 gives exactly the stable order's first k, sorted=0
 * the same set.  ORDER_TORCH (its choice among equal elements is checked
 * against torch in pytest): distinct indices in range whose elements are
 * equivalent to the reference's, position by position when sorted, as a
 * multiset otherwise; values carry the bits of the element indexed
 * (bfloat16 NaN as 0x7FC0, as torch returns them).  Every call: status OK,
 * the source unchanged, nothing written outside the output elements.
 * ORDER_TORCH_PROBE (torch's order with the probe of short rows): as
 * ORDER_TORCH, or KWK_DEFER with nothing written.
 */
#include "fuzz_common.h"

static void check_row(const fz_row *row, const fz_view *vals, const fz_view *inds, int outs,
                      int64_t o, int64_t i, int64_t k, int largest, int sorted, int order)
{
    const int dt = row->dt;
    const int64_t len = row->len, m = k > 0 ? k : 1;
    int64_t *ref = fz_stable_order(row, largest);
    unsigned char *seen = (unsigned char *)calloc((size_t)(len > 0 ? len : 1), 1);
    uint64_t *got = (uint64_t *)malloc((size_t)m * 8), *want = (uint64_t *)malloc((size_t)m * 8);
    if (!seen || !got || !want) abort();
    for (int64_t j = 0; j < k; ++j) {
        want[j] = fz_canon(dt, fz_elem(row, ref[j]), 1);
        if (outs != FZ_VALUES) {
            const int64_t idx = *(const int64_t *)fz_at(inds, o, j, i);
            if (idx < 0 || idx >= len) FZ_FAIL("j=%lld: index %lld out of range", (long long)j, (long long)idx);
            if (seen[idx]) FZ_FAIL("index %lld twice", (long long)idx);
            seen[idx] = 1;
            got[j] = fz_canon(dt, fz_elem(row, idx), 1);
            if (order == KWK_ORDER_STABLE && sorted && idx != ref[j])
                FZ_FAIL("row (%lld,%lld) j=%lld: index %lld, stable order has %lld", (long long)o,
                        (long long)i, (long long)j, (long long)idx, (long long)ref[j]);
            if (outs == FZ_BOTH) {
                const uint64_t vb = fz_bits(fz_at(vals, o, j, i), row->es);
                if (vb != got[j]) FZ_FAIL("j=%lld: value bits %llx are not element %lld's (%llx)",
                                          (long long)j, (unsigned long long)vb, (long long)idx,
                                          (unsigned long long)got[j]);
            }
        } else {
            got[j] = fz_bits(fz_at(vals, o, j, i), row->es);
        }
        if (sorted && fz_cmp_bits(dt, got[j], want[j]) != 0)
            FZ_FAIL("row (%lld,%lld) j=%lld: %llx where the reference has %llx", (long long)o,
                    (long long)i, (long long)j, (unsigned long long)got[j], (unsigned long long)want[j]);
        if (order == KWK_ORDER_STABLE && sorted && got[j] != want[j])
            FZ_FAIL("j=%lld: bits %llx, stable order has %llx", (long long)j,
                    (unsigned long long)got[j], (unsigned long long)want[j]);
    }
    if (order == KWK_ORDER_STABLE && !sorted && outs != FZ_VALUES) {
        for (int64_t j = 0; j < k; ++j)
            if (!seen[ref[j]]) FZ_FAIL("element %lld of the stable top k is missing", (long long)ref[j]);
    }
    /* the multiset of equivalence classes (and, stable, of bits) */
    fz_sort_bits(dt, largest, got, k);
    fz_sort_bits(dt, largest, want, k);
    for (int64_t j = 0; j < k; ++j)
        if (fz_cmp_bits(dt, got[j], want[j]) != 0)
            FZ_FAIL("the top %lld differ from the reference's (sorted position %lld)", (long long)k,
                    (long long)j);
    if (outs == FZ_VALUES && !fz_bits_within_row(row, got, k, 1))
        FZ_FAIL("values with bits that are not the row's");
    free(ref);
    free(seen);
    free(got);
    free(want);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_reader r = {data, size, 0};
    const uint64_t flags = fz_take(&r, 1);
    const int dt = (int)(fz_take(&r, 1) % KWK_NUM_DTYPES), es = FZ_ES[dt];
    int64_t len = fz_length(&r), outer, inner;
    fz_outer_inner(&r, len, &outer, &inner);
    const int order = (int)((flags >> 1) & 1), largest = (int)((flags >> 2) & 1);
    const int outs = (int)(((flags >> 3) & 3) % 3);
    const int reject = ((flags >> 5) & 3) == 3, sorted = (int)((flags >> 7) & 1);
    const int bad = (int)(fz_take(&r, 1) % FZ_NUM_BAD);
    const uint64_t src_lay = fz_take(&r, 3), dst_lay = fz_take(&r, 3), pick = fz_take(&r, 1);
    fz_pick_target((int)(flags & 1));
    if (reject) fz_reject_prepare(bad, FZ_OP_TOPK, &outer, &len, &inner);
    const int64_t k = fz_k(&r, len, 0);

    const int64_t n[3] = {outer, len, inner}, nout[3] = {outer, k, inner};
    fz_view src, vals, inds;
    fz_layout(&src, n, es, src_lay, 1);
    fz_fill(&r, dt, src.buf, src.bytes);
    fz_output(&vals, nout, es, dst_lay);
    fz_output(&inds, nout, 8, dst_lay);
    /* a valid call's pick byte is free: its top bit asks for the probe */
    const int call_order = !reject && order == KWK_ORDER_TORCH && (pick & 0x80)
                               ? KWK_ORDER_TORCH_PROBE : order;
    fz_args a = {dt, src.base, outer, len, inner, src.s[0], src.s[1], src.s[2], k,
                 outs != FZ_INDICES ? vals.base : NULL,
                 outs != FZ_VALUES ? (int64_t *)inds.base : NULL,
                 vals.s[0], vals.s[1], vals.s[2], call_order};
    const char *broken = reject ? fz_break(bad, FZ_OP_TOPK, &a, es, pick) : NULL;
    fz_record("topk", broken, &a, order, largest, sorted, reject);

    char *before = fz_snapshot(&src);
    const int st = kwk_topk(a.dtype, a.src, a.outer, a.len, a.inner, a.so, a.sl, a.si, a.k,
                            a.values, a.indices, a.dso, a.dsl, a.dsi, largest, sorted, a.order);
    fz_check_source(&src, before);
    if (reject) {
        if (st >= 0) FZ_FAIL("an invalid call (%s) returned %d", broken, st);
        fz_check_untouched(&vals, "values");
        fz_check_untouched(&inds, "indices");
    } else if (st == KWK_DEFER && call_order == KWK_ORDER_TORCH_PROBE) {
        fz_check_untouched(&vals, "values");
        fz_check_untouched(&inds, "indices");
    } else {
        if (st != KWK_OK) FZ_FAIL("status %d (%s)", st, kwk_strerror(st));
        fz_check_outputs(&vals, &inds, outs);
        for (int64_t o = 0; o < outer; ++o)
            for (int64_t i = 0; i < inner; ++i) {
                fz_row row = fz_row_of(&src, dt, o, i);
                check_row(&row, &vals, &inds, outs, o, i, k, largest, sorted, order);
            }
    }
    fz_view_free(&src);
    fz_view_free(&vals);
    fz_view_free(&inds);
    return 0;
}
