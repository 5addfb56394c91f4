/*
 * sort_kernels.h - sort rows (torch.sort / argsort / msort).
 *
 * Stable order comes from sorting unique words (order_words.h).  With
 * KWK_ORDER_TORCH, a row longer than std::sort's insertion threshold whose
 * sorted keys show a tie is redone by the std::sort emulation.
 */
#ifndef KWK_SORT_KERNELS_H
#define KWK_SORT_KERNELS_H

#include "row_io.h"

/* ---------------------------------------------------------------- sort */

static int impl_sort(int dtype, const void *src, int64_t outer, int64_t len,
                     int64_t inner, int64_t src_so, int64_t src_sl,
                     int64_t src_si, void *values, int64_t *indices,
                     int64_t dst_so, int64_t dst_sl, int64_t dst_si,
                     int descending, int order)
{
    const kwk_dtype_info info = KWK_DTYPES[dtype];
    const uint64_t flip = descending ? kwk_width_mask(info.key_bits) : 0;
    const int es = info.elem_size;
    workspace ws;
    int status = workspace_init(&ws, len);
    for (int64_t o = 0; status == KWK_OK && o < outer; ++o) {
        for (int64_t i = 0; i < inner; ++i) {
            out_row out = {
                (const char *)src + (o * src_so + i * src_si) * es, src_sl * es,
                values ? (char *)values + (o * dst_so + i * dst_si) * es : NULL,
                indices ? indices + o * dst_so + i * dst_si : NULL, dst_sl, es, 0};
            row_keys rk;
            int rbits = load_row(&ws, dtype, out.row, len, out.step, flip, &rk);
            if (rbits < 0) { status = KWK_E_NOMEM; break; }
            /* std::sort leaves rows of up to 16 elements to a stable
             * insertion sort, so only longer rows can differ from index order */
            const int torch_ties = order == KWK_ORDER_TORCH && len > KWK_STD_SORT_THRESHOLD;
            if (rk.packed) {
                words_sort(ws.words, ws.tmp, len, rk.ibits, rbits);
                if (!(torch_ties && has_adjacent_tie_words(&rk, ws.words, len))) {
                    for (int64_t j = 0; j < len; ++j) emit(&out, j, word_index(&rk, ws.words[j]));
                    continue;
                }
                if (records_from_words(&ws, &rk, len) != KWK_OK) { status = KWK_E_NOMEM; break; }
            } else {
                kvs_radix_sort(ws.kv, ws.kv_tmp, len);
                if (!(torch_ties && has_adjacent_tie_kv(ws.kv, len))) {
                    for (int64_t j = 0; j < len; ++j) emit(&out, j, ws.kv[j].idx);
                    continue;
                }
                records_reset_order(ws.kv, len);
            }
            emu_std_sort(ws.kv, len);
            for (int64_t j = 0; j < len; ++j) emit(&out, j, ws.kv[j].idx);
        }
    }
    workspace_free(&ws);
    return status;
}

#endif
