/*
 * batch_median.h - median/nanmedian over many short rows, eight at a time.
 *
 * torch's median over a dim returns the element at stable rank (n-1)/2 (the
 * lower median, ties by index), or the row's first NaN when it has one;
 * nanmedian the element at stable rank (n - #NaN - 1)/2, or for an all-NaN
 * row the element std::nth_element leaves first among equals
 * (sk_all_equal_nth, select_kernels.h; ../shared/SEMANTICS.md).  The batch sort's network
 * (batch_sort.h) gives each row's stable order, NaN keys last in index
 * order, so all of these are one slot of the sorted row: the first NaN is
 * slot n - #NaN.
 *
 * Why: rows of 9 or 25 (an unfolded 3x3 or 5x5 window, a smoothing
 * window) went through a per-row selection at ~10 ns an element, a little
 * under torch's; sorted eight at a time they cost a fraction of that.
 */
#ifndef KWK_BATCH_MEDIAN_H
#define KWK_BATCH_MEDIAN_H

#include "batch_sort.h"
#include "select_kernels.h"

/* Longest row: the network's cost per element grows with log^2 n, and
 * longer rows are served well by the one-row selection. */
enum { KWK_BATCH_MEDIAN_MAX = 64 };

#if defined(KWK_HAVE_BATCH_SORT)

static int bm_applies(int dtype, int64_t len, int64_t rows)
{
    return KWK_DTYPES[dtype].key_bits <= 32 && len >= 2 && len <= KWK_BATCH_MEDIAN_MAX &&
           rows >= KWK_BATCH_LANES;
}

/* Rows r0 .. r0 + 7 of the call (r = o * inner + i). */
static void bm_rows(int dtype, const char *src, int64_t len, int64_t inner, int64_t src_so,
                    int64_t src_sl, int64_t src_si, char *values, int64_t *indices,
                    int64_t dst_so, int64_t dst_si, int ignore_nan, int64_t r0,
                    kwk_batch_slot *slots, const kwk_net_pair *pairs, int npairs)
{
    const kwk_dtype_info info = KWK_DTYPES[dtype];
    const int64_t es = info.elem_size;
    /* a NaN's key: all ones of the key width, biased as batch_load does */
    const int32_t nan_key = (int32_t)((uint32_t)kwk_width_mask(info.key_bits) ^ 0x80000000u);
    kwk_batch_src b;
    int64_t dst[KWK_BATCH_LANES];
    for (int l = 0; l < KWK_BATCH_LANES; ++l) {
        const int64_t r = r0 + l, o = r / inner, i = r % inner;
        b.row[l] = src + (o * src_so + i * src_si) * es;
        dst[l] = o * dst_so + i * dst_si;
    }
    b.step = src_sl * es;
    b.adjacent = src_si == 1 && (r0 % inner) + KWK_BATCH_LANES <= inner;
    batch_sort8(dtype, &b, len, 0, slots, pairs, npairs, 1);
    for (int l = 0; l < KWK_BATCH_LANES; ++l) {
        int64_t nan = 0;
        if (info.is_float)
            while (nan < len && ((const int32_t *)&slots[len - 1 - nan].key)[l] == nan_key) ++nan;
        int64_t idx;
        if (!ignore_nan) idx = batch_index(slots, nan ? len - nan : (len - 1) / 2, l);
        else if (nan < len) idx = batch_index(slots, (len - nan - 1) / 2, l);
        else idx = sk_all_equal_nth(len, 0); /* all NaN: nth_element's moves decide */
        if (values) kwk_copy_elem(values + dst[l] * es, b.row[l] + idx * b.step, (int)es);
        if (indices) indices[dst[l]] = idx;
    }
}

/* Every row, in batches of eight; the last batch ends at the last row
 * (overlapping the one before: its rows are written twice, the same). */
static int bm_median_dim(int dtype, const void *src, int64_t outer, int64_t len, int64_t inner,
                         int64_t src_so, int64_t src_sl, int64_t src_si, void *values,
                         int64_t *indices, int64_t dst_so, int64_t dst_si, int ignore_nan)
{
    const int64_t rows = outer * inner;
    kwk_net_pair *pairs = (kwk_net_pair *)malloc(KWK_BATCH_MAX_PAIRS * sizeof(kwk_net_pair));
    kwk_batch_slot *slots = (kwk_batch_slot *)aligned_alloc(32, (size_t)len * sizeof(kwk_batch_slot));
    if (!pairs || !slots) {
        free(pairs);
        free(slots);
        return KWK_E_NOMEM;
    }
    const int npairs = kwk_net_pairs((int)len, pairs);
    for (int64_t r0 = 0; r0 < rows; r0 += KWK_BATCH_LANES) {
        const int64_t start = r0 + KWK_BATCH_LANES <= rows ? r0 : rows - KWK_BATCH_LANES;
        bm_rows(dtype, (const char *)src, len, inner, src_so, src_sl, src_si, (char *)values,
                indices, dst_so, dst_si, ignore_nan, start, slots, pairs, npairs);
    }
    free(pairs);
    free(slots);
    return KWK_OK;
}

#endif /* KWK_HAVE_BATCH_SORT */

#endif
