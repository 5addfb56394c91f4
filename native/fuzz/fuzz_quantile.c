/*
 * fuzz_quantile.c - kwk_quantile (torch.quantile / torch.nanquantile over
 * rows) against a stable ascending merge sort of each row.
 *
 * float32/float64 rows of any layout, 1..4 q (the ends 0 and 1, the middle,
 * anything between), every interpolation mode, NaNs, +-0, ties.  Other
 * dtypes and q outside [0, 1] must be rejected with nothing written.  A call
 * either returns KWK_DEFER - allowed only when some row holds equal keys of
 * different bits (+0.0 beside -0.0, NaNs of different bits) - or gives, for
 * every (q, row), exactly the value torch's formula makes from the stably
 * sorted row (the formula is spelled out plainly below; pytest checks it
 * against torch itself).  The source is never modified and the output is
 * written only at its elements.
 */
#include "fuzz_common.h"

/* The order statistics of a sorted row (bits at ranks lo and hi) turned into
 * the result as torch computes it, in float or double. */
static uint64_t reference(int dt, const fz_row *row, const int64_t *ord, int64_t nnan,
                          double qd, int mode, int ignore_nan)
{
    const int64_t n = row->len;
    uint64_t out = 0;
    if (dt == KWK_FLOAT32) {
        const float q = (float)qd;
        float rank = ignore_nan ? q * (float)(n - nnan - 1) : nnan ? (float)(n - 1) : q * (float)(n - 1);
        if (ignore_nan && rank < 0) rank = 0;
        if (mode == KWK_QUANTILE_LOWER) rank = floorf(rank);
        if (mode == KWK_QUANTILE_HIGHER) rank = ceilf(rank);
        if (mode == KWK_QUANTILE_NEAREST) rank = rintf(rank);
        const int64_t lo = (int64_t)rank, hi = (int64_t)ceilf(rank);
        uint32_t ab = (uint32_t)fz_elem(row, ord[lo]), bb = (uint32_t)fz_elem(row, ord[hi]);
        if (mode == KWK_QUANTILE_LINEAR || mode == KWK_QUANTILE_MIDPOINT) {
            float a, b, r;
            memcpy(&a, &ab, 4);
            memcpy(&b, &bb, 4);
            const float w = mode == KWK_QUANTILE_MIDPOINT ? 0.5f : rank - (float)lo;
            r = fabsf(w) < 0.5f ? fmaf(w, b - a, a) : fmaf(w - 1.0f, b - a, b);
            memcpy(&ab, &r, 4);
        }
        out = ab;
    } else {
        const double q = qd;
        double rank = ignore_nan ? q * (double)(n - nnan - 1) : nnan ? (double)(n - 1) : q * (double)(n - 1);
        if (ignore_nan && rank < 0) rank = 0;
        if (mode == KWK_QUANTILE_LOWER) rank = floor(rank);
        if (mode == KWK_QUANTILE_HIGHER) rank = ceil(rank);
        if (mode == KWK_QUANTILE_NEAREST) rank = rint(rank);
        const int64_t lo = (int64_t)rank, hi = (int64_t)ceil(rank);
        uint64_t ab = fz_elem(row, ord[lo]), bb = fz_elem(row, ord[hi]);
        if (mode == KWK_QUANTILE_LINEAR || mode == KWK_QUANTILE_MIDPOINT) {
            double a, b, r;
            memcpy(&a, &ab, 8);
            memcpy(&b, &bb, 8);
            const double w = mode == KWK_QUANTILE_MIDPOINT ? 0.5 : rank - (double)lo;
            r = fabs(w) < 0.5 ? fma(w, b - a, a) : fma(w - 1.0, b - a, b);
            memcpy(&ab, &r, 8);
        }
        out = ab;
    }
    return out;
}

/* Equal keys of different bits in the row: +0.0 and -0.0, or two NaNs. */
static int ambiguous(int dt, const fz_row *row)
{
    const uint64_t sign = dt == KWK_FLOAT32 ? 0x80000000ull : 0x8000000000000000ull;
    int pz = 0, nz = 0, have_nan = 0, mixed = 0;
    uint64_t nan_bits = 0;
    for (int64_t j = 0; j < row->len; ++j) {
        const uint64_t b = fz_elem(row, j);
        pz |= b == 0;
        nz |= b == sign;
        if (fz_is_nan(dt, b)) {
            mixed |= have_nan && b != nan_bits;
            nan_bits = b;
            have_nan = 1;
        }
    }
    return (pz && nz) || mixed;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_reader r = {data, size, 0};
    const uint64_t flags = fz_take(&r, 1);
    /* mostly float32/float64; now and then another dtype, which is rejected */
    const uint64_t dsel = fz_take(&r, 1);
    const int dt = dsel < 240 ? (dsel & 1 ? KWK_FLOAT64 : KWK_FLOAT32) : (int)(dsel % KWK_NUM_DTYPES);
    const int es = FZ_ES[dt];
    int64_t len = fz_length(&r), outer, inner;
    fz_outer_inner(&r, len, &outer, &inner);
    if (len == 0) outer = 0; /* no quantile of nothing: an empty call instead */
    const int ignore_nan = (int)((flags >> 1) & 1);
    const int mode = (int)(((flags >> 2) & 7) % 5);
    const int64_t nq = 1 + (int64_t)((flags >> 5) & 3);
    double q[4];
    int q_bad = 0;
    for (int64_t t = 0; t < nq; ++t) {
        const uint64_t v = fz_take(&r, 2);
        q[t] = v < 8 ? (double)(v & 1) : v < 16 ? 0.5 : (double)v / 65535.0;
        if (v == 0xFFFF) { q[t] = 1.0 + 1e-9; q_bad = 1; } /* outside [0, 1] */
    }
    const int reject = q_bad || (dt != KWK_FLOAT32 && dt != KWK_FLOAT64);
    const uint64_t src_lay = fz_take(&r, 3), dst_lay = fz_take(&r, 3);
    fz_pick_target((int)(flags & 1));

    /* output viewed as (nq, outer * inner): dims (q, outer, inner) */
    const int64_t n[3] = {outer, len, inner}, nout[3] = {nq, outer, inner};
    fz_view src, out;
    fz_layout(&src, n, es, src_lay, 1);
    fz_fill(&r, dt, src.buf, src.bytes);
    fz_output(&out, nout, es, dst_lay);
    fz_call.op = "quantile";
    fz_call.dt = dt; fz_call.order = -1; fz_call.flag_a = ignore_nan; fz_call.flag_b = mode;
    fz_call.must_reject = reject; fz_call.outer = outer; fz_call.len = len; fz_call.inner = inner;
    fz_call.k = nq; fz_call.so = src.s[0]; fz_call.sl = src.s[1]; fz_call.si = src.s[2];
    fz_call.dso = out.s[1]; fz_call.dsl = out.s[0]; fz_call.dsi = out.s[2];

    char *before = fz_snapshot(&src);
    const int st = kwk_quantile(dt, src.base, outer, len, inner, src.s[0], src.s[1], src.s[2], q,
                                nq, out.base, out.s[0], out.s[1], out.s[2], mode, ignore_nan);
    fz_check_source(&src, before);
    if (reject && outer > 0 && inner > 0) {
        if (st >= 0) FZ_FAIL("an invalid call returned %d", st);
        fz_check_untouched(&out, "output");
    } else if (st == KWK_DEFER) {
        int any = 0;
        for (int64_t o = 0; o < outer; ++o)
            for (int64_t i = 0; i < inner; ++i) {
                fz_row row = fz_row_of(&src, dt, o, i);
                any |= ambiguous(dt, &row);
            }
        if (!any) FZ_FAIL("KWK_DEFER for rows without equal keys of different bits");
    } else if (!reject) {
        if (st != KWK_OK) FZ_FAIL("status %d (%s)", st, kwk_strerror(st));
        fz_check_gaps(&out, "output");
        for (int64_t o = 0; o < outer; ++o)
            for (int64_t i = 0; i < inner; ++i) {
                fz_row row = fz_row_of(&src, dt, o, i);
                int64_t nnan = 0;
                for (int64_t j = 0; j < len; ++j) nnan += fz_is_nan(dt, fz_elem(&row, j));
                int64_t *ord = fz_stable_order(&row, 0);
                for (int64_t t = 0; t < nq; ++t) {
                    const uint64_t want = reference(dt, &row, ord, nnan, q[t], mode, ignore_nan);
                    const uint64_t got = fz_bits(fz_at(&out, t, o, i), es);
                    if (got != want)
                        FZ_FAIL("row (%lld,%lld) q=%.17g: %llx, want %llx (%lld NaN)",
                                (long long)o, (long long)i, q[t], (unsigned long long)got,
                                (unsigned long long)want, (long long)nnan);
                }
                free(ord);
            }
    }
    fz_view_free(&src);
    fz_view_free(&out);
    return 0;
}
