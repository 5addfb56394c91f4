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

/* Write a sorted row: output element j takes source element index(j).
 * The element size switch is outside the loops. */
#define KWK_EMIT_LOOP(T, INDEX)                                               \
    for (int64_t j = 0; j < n; ++j) {                                         \
        const int64_t idx_ = (INDEX);                                         \
        T v_;                                                                 \
        memcpy(&v_, o->row + idx_ * o->step, sizeof(T));                      \
        memcpy(o->vals + j * dstep, &v_, sizeof(T));                          \
        if (o->inds) o->inds[j * o->dsl] = idx_;                              \
    }

#define KWK_EMIT_ALL(INDEX)                                                   \
    do {                                                                      \
        if (!o->vals) {                                                       \
            for (int64_t j = 0; j < n; ++j) o->inds[j * o->dsl] = (INDEX);    \
            break;                                                            \
        }                                                                     \
        const int64_t dstep = o->dsl * o->es;                                 \
        switch (o->es) {                                                      \
        case 1: KWK_EMIT_LOOP(uint8_t, INDEX) break;                          \
        case 2: KWK_EMIT_LOOP(uint16_t, INDEX) break;                         \
        case 4: KWK_EMIT_LOOP(uint32_t, INDEX) break;                         \
        default: KWK_EMIT_LOOP(uint64_t, INDEX) break;                        \
        }                                                                     \
    } while (0)

static void emit_words(const out_row *o, const uint64_t *w, int64_t n, uint64_t mask)
{
    KWK_EMIT_ALL((int64_t)(w[j] & mask));
}

static void emit_kvs(const out_row *o, const kwk_kv *kv, int64_t n)
{
    KWK_EMIT_ALL(kv[j].idx);
}
#undef KWK_EMIT_ALL
#undef KWK_EMIT_LOOP

/* Put unique words back in index order (dst[index(w)] = w). */
static void words_to_index_order(const uint64_t *src, uint64_t *dst, int64_t n, uint64_t mask)
{
    for (int64_t j = 0; j < n; ++j) dst[src[j] & mask] = src[j];
}

/* Records sorted stably by key become words (dense rank << ibits | index)
 * in index order: the same ties, so the same std::sort moves. */
static void rank_words_from_sorted_kvs(const kwk_kv *kv, uint64_t *dst, int64_t n, int ibits)
{
    uint64_t rank = 0;
    for (int64_t j = 0; j < n; ++j) {
        rank += j > 0 && kv[j].key != kv[j - 1].key;
        dst[kv[j].idx] = rank << ibits | (uint64_t)kv[j].idx;
    }
}

static int impl_sort(int dtype, const void *src, int64_t outer, int64_t len,
                     int64_t inner, int64_t src_so, int64_t src_sl,
                     int64_t src_si, void *values, int64_t *indices,
                     int64_t dst_so, int64_t dst_sl, int64_t dst_si,
                     int descending, int order)
{
    const kwk_dtype_info info = KWK_DTYPES[dtype];
    const uint64_t flip = descending ? kwk_width_mask(info.key_bits) : 0;
    const int es = info.elem_size;
    /* std::sort leaves rows of up to 16 elements to a stable insertion
     * sort, so only longer rows can differ from index order */
    const int torch_ties = order == KWK_ORDER_TORCH && len > KWK_STD_SORT_THRESHOLD;
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
            if (rk.packed) {
                if (torch_ties && rk.max_key - rk.min_key < (uint64_t)(len - 1)) {
                    /* fewer possible keys than elements: a tie for sure, so
                     * the stable sort would only be thrown away */
                    wemu_std_sort(ws.words, len, rk.ibits);
                    emit_words(&out, ws.words, len, rk.idx_mask);
                    continue;
                }
                words_sort(ws.words, ws.tmp, len, rk.ibits, rbits);
                if (torch_ties && has_adjacent_tie_words(&rk, ws.words, len)) {
                    words_to_index_order(ws.words, ws.tmp, len, rk.idx_mask);
                    wemu_std_sort(ws.tmp, len, rk.ibits);
                    emit_words(&out, ws.tmp, len, rk.idx_mask);
                } else {
                    emit_words(&out, ws.words, len, rk.idx_mask);
                }
                continue;
            }
            kvs_radix_sort(ws.kv, ws.kv_tmp, len);
            if (!(torch_ties && has_adjacent_tie_kv(ws.kv, len))) {
                emit_kvs(&out, ws.kv, len);
            } else if (2 * rk.ibits <= 64) {
                rank_words_from_sorted_kvs(ws.kv, ws.words, len, rk.ibits);
                wemu_std_sort(ws.words, len, rk.ibits);
                emit_words(&out, ws.words, len, rk.idx_mask);
            } else {
                records_reset_order(ws.kv, len);
                emu_std_sort(ws.kv, len);
                emit_kvs(&out, ws.kv, len);
            }
        }
    }
    workspace_free(&ws);
    return status;
}

#endif
