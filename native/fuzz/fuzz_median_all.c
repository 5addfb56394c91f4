/*
 * fuzz_median_all.c - kwk_median_all (torch.median(x) and torch.nanmedian(x)
 * over all elements: n elements at src + j*stride, any stride including 0
 * and negative) against a stable ascending merge sort.
 *
 * median with a NaN among the elements: torch's quiet NaN, exactly.
 * Otherwise an element equivalent to the one at rank (n-1)/2 (nanmedian:
 * (n-nnan-1)/2; all NaN: a NaN), with the bits of one of the elements of
 * that class (which one is torch's choice, checked in pytest).  Every call:
 * status OK, the source unchanged, the one output element written.
 */
#include "fuzz_common.h"

static const uint64_t QUIET_NAN[KWK_NUM_DTYPES] = {
    [KWK_FLOAT16] = 0x7E00u, [KWK_BFLOAT16] = 0x7FC0u, [KWK_FLOAT32] = 0x7FC00000u,
    [KWK_FLOAT64] = 0x7FF8000000000000ull};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_reader r = {data, size, 0};
    const uint64_t flags = fz_take(&r, 1);
    const int dt = (int)(fz_take(&r, 1) % KWK_NUM_DTYPES), es = FZ_ES[dt];
    int64_t len = fz_length(&r), outer = 1, inner = 1;
    const int ignore_nan = (int)((flags >> 1) & 1);
    const int reject = ((flags >> 5) & 3) == 3;
    const int bad = (int)(fz_take(&r, 1) % FZ_NUM_BAD);
    const uint64_t src_lay = fz_take(&r, 3), pick = fz_take(&r, 1);
    fz_pick_target((int)(flags & 1));
    if (reject) fz_reject_prepare(bad, FZ_OP_MEDIAN_ALL, &outer, &len, &inner);
    else if (len == 0) len = 1; /* n = 0 is rejected (the caller returns NaN itself) */

    const int64_t n[3] = {1, len, 1}, nout[3] = {1, 1, 1};
    fz_view src, out;
    fz_layout(&src, n, es, src_lay, 1);
    fz_fill(&r, dt, src.buf, src.bytes);
    fz_output(&out, nout, es, 0);
    fz_args a = {dt, src.base, 1, len, 1, 0, src.s[1], 0, 0, out.base, NULL, 0, 0, 0, 0};
    const char *broken = reject ? fz_break(bad, FZ_OP_MEDIAN_ALL, &a, es, pick) : NULL;
    fz_call.op = broken ? broken : "median_all";
    fz_call.dt = dt; fz_call.order = -1; fz_call.flag_a = ignore_nan; fz_call.flag_b = 0;
    fz_call.must_reject = reject; fz_call.outer = 1; fz_call.len = a.len; fz_call.inner = 1;
    fz_call.k = 0; fz_call.so = 0; fz_call.sl = a.sl; fz_call.si = 0;
    fz_call.dso = fz_call.dsl = fz_call.dsi = 0;

    char *before = fz_snapshot(&src);
    const int st = kwk_median_all(a.dtype, a.src, a.len, a.sl, a.values, ignore_nan);
    fz_check_source(&src, before);
    if (reject) {
        if (st >= 0) FZ_FAIL("an invalid call (%s) returned %d", broken, st);
        fz_check_untouched(&out, "value");
    } else {
        if (st != KWK_OK) FZ_FAIL("status %d (%s)", st, kwk_strerror(st));
        const uint64_t got = fz_bits(out.base, es);
        fz_row row = fz_row_of(&src, dt, 0, 0);
        int64_t nnan = 0;
        for (int64_t j = 0; j < len; ++j) nnan += fz_is_nan(dt, fz_elem(&row, j));
        if (nnan && !ignore_nan) {
            if (got != QUIET_NAN[dt]) FZ_FAIL("median of a row with NaN: %llx, not torch's quiet NaN",
                                              (unsigned long long)got);
        } else {
            int64_t *ref = fz_stable_order(&row, 0);
            const int64_t rank = ignore_nan ? (len - nnan - 1) / 2 : (len - 1) / 2;
            const uint64_t want = fz_elem(&row, ref[rank < 0 ? 0 : rank]);
            if (fz_cmp_bits(dt, got, want) != 0)
                FZ_FAIL("%llx is not the median (%llx; n=%lld, %lld NaN)", (unsigned long long)got,
                        (unsigned long long)want, (long long)len, (long long)nnan);
            if (!fz_bits_within_row(&row, &got, 1, 0)) FZ_FAIL("a value that is not in the row");
            free(ref);
        }
    }
    fz_view_free(&src);
    fz_view_free(&out);
    return 0;
}
