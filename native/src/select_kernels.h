/*
 * select_kernels.h - select from rows (torch.topk, median, nanmedian).
 */
#ifndef KWK_SELECT_KERNELS_H
#define KWK_SELECT_KERNELS_H

#include "row_io.h"

/* ---------------------------------------------------------------- topk */

static int impl_topk(int dtype, const void *src, int64_t outer, int64_t len,
                     int64_t inner, int64_t src_so, int64_t src_sl,
                     int64_t src_si, int64_t k, void *values, int64_t *indices,
                     int64_t dst_so, int64_t dst_sl, int64_t dst_si,
                     int largest, int sorted, int order)
{
    const kwk_dtype_info info = KWK_DTYPES[dtype];
    const uint64_t flip = largest ? kwk_width_mask(info.key_bits) : 0;
    const int es = info.elem_size;
    /* torch's topk takes k*64 <= len to mean partial_sort (heap select),
     * otherwise nth_element followed by a sort of the first k-1 */
    const int heap_path = k * 64 <= len;
    /* k+1 elements decide whether the k-th is tied with an unselected one */
    const int64_t m = k < len ? k + 1 : len;
    workspace ws;
    int status = workspace_init(&ws, len);
    if (k == 0) { workspace_free(&ws); return status; }
    for (int64_t o = 0; status == KWK_OK && o < outer; ++o) {
        for (int64_t i = 0; i < inner; ++i) {
            out_row out = {
                (const char *)src + (o * src_so + i * src_si) * es, src_sl * es,
                values ? (char *)values + (o * dst_so + i * dst_si) * es : NULL,
                indices ? indices + o * dst_so + i * dst_si : NULL, dst_sl, es,
                dtype == KWK_BFLOAT16};
            row_keys rk;
            int rbits = load_row(&ws, dtype, out.row, len, out.step, flip, &rk);
            if (rbits < 0) { status = KWK_E_NOMEM; break; }
            int tie;
            if (rk.packed) {
                words_select(ws.words, ws.tmp, len, m);
                words_sort_small_or_radix(ws.words, ws.tmp, m);
                tie = has_adjacent_tie_words(&rk, ws.words, m);
            } else {
                kvs_select(ws.kv, ws.kv_tmp, len, m);
                kvs_sort_all(ws.kv, ws.kv_tmp, m);
                tie = has_adjacent_tie_kv(ws.kv, m);
            }
            const int emulate = order == KWK_ORDER_TORCH && (tie || (!heap_path && !sorted));
            if (!emulate) {
                for (int64_t j = 0; j < k; ++j)
                    emit(&out, j, rk.packed ? word_index(&rk, ws.words[j]) : ws.kv[j].idx);
                continue;
            }
            if (rk.packed) {
                if (records_from_words(&ws, &rk, len) != KWK_OK) { status = KWK_E_NOMEM; break; }
            } else {
                records_reset_order(ws.kv, len);
            }
            if (heap_path) {
                emu_partial_sort(ws.kv, k, len);
            } else {
                emu_nth_element(ws.kv, k - 1, len);
                if (sorted) emu_std_sort(ws.kv, k - 1);
            }
            for (int64_t j = 0; j < k; ++j) emit(&out, j, ws.kv[j].idx);
        }
    }
    workspace_free(&ws);
    return status;
}

/* -------------------------------------------------------------- median */

/* Rank (0-based) of the lower median among n elements of which nnan are
 * NaN and ordered last.  C division truncates, so an all-NaN row gives 0 as
 * torch's does. */
static inline int64_t median_rank(int64_t n, int64_t nnan) { return (n - nnan - 1) / 2; }

/* Counting and finding a key in a loaded row that is still in index order. */
static inline uint64_t loaded_key(const workspace *ws, const row_keys *rk, int64_t j)
{
    return rk->packed ? word_key(rk, ws->words[j]) + rk->min_key : ws->kv[j].key;
}

static int64_t count_with_key(const workspace *ws, const row_keys *rk, int64_t n, uint64_t key)
{
    int64_t c = 0;
    for (int64_t j = 0; j < n; ++j) c += loaded_key(ws, rk, j) == key;
    return c;
}

static int64_t first_with_key(const workspace *ws, const row_keys *rk, int64_t n, uint64_t key)
{
    for (int64_t j = 0; j < n; ++j)
        if (loaded_key(ws, rk, j) == key) return j;
    return 0;
}

/* The index of the element at stable rank r of a loaded row. */
static int64_t select_stable_rank(workspace *ws, const row_keys *rk, int64_t len, int64_t r)
{
    if (rk->packed) {
        words_select(ws->words, ws->tmp, len, r + 1);
        return word_index(rk, ws->words[r]);
    }
    kvs_select(ws->kv, ws->kv_tmp, len, r + 1);
    return ws->kv[r].idx;
}

static int impl_median_dim(int dtype, const void *src, int64_t outer,
                           int64_t len, int64_t inner, int64_t src_so,
                           int64_t src_sl, int64_t src_si, void *values,
                           int64_t *indices, int64_t dst_so, int64_t dst_si,
                           int ignore_nan)
{
    const kwk_dtype_info info = KWK_DTYPES[dtype];
    const uint64_t nan_key = kwk_width_mask(info.key_bits);
    const int es = info.elem_size;
    workspace ws;
    int status = workspace_init(&ws, len);
    for (int64_t o = 0; status == KWK_OK && o < outer; ++o) {
        for (int64_t i = 0; i < inner; ++i) {
            out_row out = {
                (const char *)src + (o * src_so + i * src_si) * es, src_sl * es,
                values ? (char *)values + (o * dst_so + i * dst_si) * es : NULL,
                indices ? indices + o * dst_so + i * dst_si : NULL, 0, es, 0};
            row_keys rk;
            int rbits = load_row(&ws, dtype, out.row, len, out.step, 0, &rk);
            if (rbits < 0) { status = KWK_E_NOMEM; break; }
            int64_t nnan = 0;
            if (info.is_float && rk.max_key == nan_key) {
                /* the row is still in index order here */
                if (!ignore_nan) {
                    emit(&out, 0, first_with_key(&ws, &rk, len, nan_key));
                    continue;
                }
                nnan = count_with_key(&ws, &rk, len, nan_key);
            }
            emit(&out, 0, select_stable_rank(&ws, &rk, len, median_rank(len, nnan)));
        }
    }
    workspace_free(&ws);
    return status;
}

/* torch.median() without dim: the value only, chosen by std::nth_element on
 * the values.  Equal keys with different bits (+0.0/-0.0, NaN payloads) are
 * the only way that choice shows, so only then is nth_element emulated. */
static int impl_median_all(int dtype, const void *src, int64_t n,
                           int64_t stride, void *value, int ignore_nan)
{
    const kwk_dtype_info info = KWK_DTYPES[dtype];
    const uint64_t nan_key = kwk_width_mask(info.key_bits);
    const int es = info.elem_size;
    const char *base = (const char *)src;
    if (n <= 0) return KWK_E_ARG;
    workspace ws;
    int status = workspace_init(&ws, n);
    row_keys rk;
    if (status != KWK_OK || load_row(&ws, dtype, base, n, stride * es, 0, &rk) < 0) {
        workspace_free(&ws);
        return KWK_E_NOMEM;
    }
    int64_t nnan = 0;
    if (info.is_float && rk.max_key == nan_key) {
        if (!ignore_nan) {
            /* std::numeric_limits<T>::quiet_NaN() */
            static const uint64_t quiet_nan[KWK_NUM_DTYPES] = {
                [KWK_FLOAT16] = 0x7E00u, [KWK_BFLOAT16] = 0x7FC0u,
                [KWK_FLOAT32] = 0x7FC00000u, [KWK_FLOAT64] = 0x7FF8000000000000ull};
            store_bits(value, quiet_nan[dtype], es);
            workspace_free(&ws);
            return KWK_OK;
        }
        nnan = count_with_key(&ws, &rk, n, nan_key);
    }
    const int64_t r = median_rank(n, nnan);
    int64_t idx = select_stable_rank(&ws, &rk, n, r);
    const uint64_t key = kwk_key_at(dtype, base + idx * stride * es);
    const uint64_t zero_key = kwk_key_at(dtype, (const char *)&(uint64_t){0});
    if (info.is_float && (key == zero_key || key == nan_key)) {
        /* several bit patterns may share this key: emulate nth_element */
        status = workspace_kv(&ws, n);
        if (status == KWK_OK) {
            for (int64_t j = 0; j < n; ++j) {
                ws.kv[j].key = kwk_key_at(dtype, base + j * stride * es);
                ws.kv[j].idx = j;
            }
            emu_nth_element(ws.kv, r, n);
            idx = ws.kv[r].idx;
        }
    }
    if (status == KWK_OK) kwk_copy_elem((char *)value, base + idx * stride * es, es);
    workspace_free(&ws);
    return status;
}

#endif
