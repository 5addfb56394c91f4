/*
 * kthvalue_kernels.h - the k-th smallest element of each row (torch.kthvalue).
 *
 * The element at stable rank k-1 is found on unique words like the other
 * selections.  When its key is shared with another element of the row, the
 * index torch returns depends on torch's own quickselect (a Sedgewick-style
 * median-of-three loop over a contiguous copy of the row, swapping values and
 * indices together); with KWK_ORDER_TORCH that loop is re-run on (key,
 * index) records, comparing keys only, which makes the same swaps.
 */
#ifndef KWK_KTHVALUE_KERNELS_H
#define KWK_KTHVALUE_KERNELS_H

#include "row_io.h"

/* torch's quick_select_template with gt_or_nan as the comparison: afterwards
 * a[k] holds the record torch's kthvalue reports. */
static void emu_torch_quickselect(kwk_kv *a, int64_t n, int64_t k)
{
#define GT(x, y) ((x).key > (y).key)
    int64_t lo = 0, hi = n - 1;
    for (;;) {
        if (hi <= lo) return;
        if (hi == lo + 1) {
            if (GT(a[lo], a[hi])) kv_swap(&a[lo], &a[hi]);
            return;
        }
        int64_t mid = (lo + hi) >> 1;
        kv_swap(&a[mid], &a[lo + 1]);
        if (GT(a[lo + 1], a[hi])) kv_swap(&a[lo + 1], &a[hi]);
        if (GT(a[lo], a[hi])) kv_swap(&a[lo], &a[hi]);
        if (GT(a[lo + 1], a[lo])) kv_swap(&a[lo + 1], &a[lo]);
        int64_t i = lo + 1, j = hi;
        const kwk_kv pivot = a[lo];
        for (;;) {
            do ++i; while (GT(pivot, a[i]));
            do --j; while (GT(a[j], pivot));
            if (j < i) break;
            kv_swap(&a[i], &a[j]);
        }
        kv_swap(&a[lo], &a[j]);
        if (j <= k) lo = i;
        if (j >= k) hi = j - 1;
    }
#undef GT
}

static int impl_kthvalue(int dtype, const void *src, int64_t outer, int64_t len,
                         int64_t inner, int64_t src_so, int64_t src_sl,
                         int64_t src_si, int64_t k, void *values, int64_t *indices,
                         int64_t dst_so, int64_t dst_si, int order)
{
    const kwk_dtype_info info = KWK_DTYPES[dtype];
    const int es = info.elem_size;
    const int64_t rank = k - 1;
    workspace ws;
    int status = workspace_init(&ws, len);
    for (int64_t o = 0; status == KWK_OK && o < outer; ++o) {
        for (int64_t i = 0; i < inner; ++i) {
            out_row out = {
                (const char *)src + (o * src_so + i * src_si) * es, src_sl * es,
                values ? (char *)values + (o * dst_so + i * dst_si) * es : NULL,
                indices ? indices + o * dst_so + i * dst_si : NULL, 0, es, 0};
            row_keys rk;
            if (load_row(&ws, dtype, out.row, len, out.step, 0, &rk) < 0) {
                status = KWK_E_NOMEM;
                break;
            }
            int64_t idx;
            uint64_t key;
            if (rk.packed) {
                words_select(ws.words, ws.tmp, len, rank + 1);
                idx = word_index(&rk, ws.words[rank]);
                key = word_key(&rk, ws.words[rank]) + rk.min_key;
            } else {
                kvs_select(ws.kv, ws.kv_tmp, len, rank + 1);
                idx = ws.kv[rank].idx;
                key = ws.kv[rank].key;
            }
            if (order == KWK_ORDER_TORCH) {
                /* is the k-th key shared?  (keys re-read from the source:
                 * the workspace is reordered by now) */
                int64_t same = 0;
                for (int64_t j = 0; j < len && same < 2; ++j)
                    same += kwk_key_at(dtype, out.row + j * out.step) == key;
                if (same > 1) {
                    if (workspace_kv(&ws, len) != KWK_OK) { status = KWK_E_NOMEM; break; }
                    for (int64_t j = 0; j < len; ++j) {
                        ws.kv[j].key = kwk_key_at(dtype, out.row + j * out.step);
                        ws.kv[j].idx = j;
                    }
                    emu_torch_quickselect(ws.kv, len, rank);
                    idx = ws.kv[rank].idx;
                }
            }
            emit(&out, 0, idx);
        }
    }
    workspace_free(&ws);
    return status;
}

#endif
