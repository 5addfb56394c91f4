/*
 * select_kernels.h - select from rows (torch.topk, median, nanmedian).
 */
#ifndef KWK_SELECT_KERNELS_H
#define KWK_SELECT_KERNELS_H

#include "row_io.h"
#include "select_words.h"
#include "kth_pick.h"
#include "short_rows.h"
#include "topk_threshold.h"
#include "topk_nth.h"
#include "topk_few.h"
#include "topk_top1.h"
#include "topk_short16.h"
#include "plain_loads.h"

/* ---------------------------------------------------------------- topk */

/* The m smallest of n records (m < n), sorted by (key, idx): the records
 * at or below a key threshold from a sample (tn_sample_plan) are copied,
 * in index order, to tmp and sorted there (exact: (key, idx) is unique),
 * kv left as it was; when the sample misjudges (fewer than m pass, or far
 * more), quickselect over kv itself as before.  Returns where the m are
 * (w: n words of scratch).
 * The quickselect's partition moves 16-byte records on data-dependent
 * branches: 64 rows of 1000 float64, k = 100, took 10 us a row. */
enum { KVS_SAMPLE_MIN = 32, KVS_SAMPLE_MAX = 2048 };

/* a[0..n) sorted by (key, idx) into out (not a), w: n words of scratch.
 * Where a vector quicksort is compiled, through words: (key - lowest) cut
 * to its top 64 - pb bits above the record's position in a (pb bits),
 * sorted; then each run whose cut keys tie (equal keys, or keys agreeing
 * on every kept bit) is sorted again as words of the cut-off bits above
 * the index, which orders it by (key, idx) whatever order a was in (a
 * selection may have left it in any).  Else a's records sorted as before,
 * a itself reordered.  Returns where the sorted records are.  Why: 64-bit
 * keys spanning more than the bits their index leaves (full-range int64,
 * float64 candidates) went to a merge sort of 16-byte records on
 * mispredicted branches - 4096 rows of 64 int64, k = 64: 1.4 us a row,
 * above torch's time.  Measured (torch.topk under
 * install(use_fast=True), AVX-512, us, min of 3 alternating runs, before
 * -> after): int64 of 62 random bits 64x1000 k=100 605 -> 171, 4096x64
 * k=64 5958 -> 1754, 64x4096 k=100 1156 -> 479; float64 4096x64 k=64 5925
 * -> 1807; float64 64x1000 k=100 (packed candidates) and k <= 8 alike. */
static const kwk_kv *kvs_sort_records(kwk_kv *a, kwk_kv *out, int64_t n, uint64_t *w)
{
#if defined(KWK_HAVE_SIMD_QSORT)
    if (n > KWK_INSERTION_MAX) {
        uint64_t lo = ~(uint64_t)0, hi = 0, top = 0;
        for (int64_t i = 0; i < n; ++i) {
            lo = a[i].key < lo ? a[i].key : lo;
            hi = a[i].key > hi ? a[i].key : hi;
            top |= (uint64_t)a[i].idx;
        }
        const int pb = kwk_bits_for((uint64_t)(n - 1)), kb = kwk_bits_for(hi - lo);
        const int ib = kwk_bits_for(top), cut = kb + pb > 64 ? kb + pb - 64 : 0;
        if (cut + ib <= 64) {
            const uint64_t pmask = kwk_width_mask(pb), imask = kwk_width_mask(ib);
            const uint64_t low = kwk_width_mask(cut);
            for (int64_t i = 0; i < n; ++i) w[i] = ((a[i].key - lo) >> cut) << pb | (uint64_t)i;
            simd_qsort_64(w, n);
            for (int64_t i = 0; i < n; ++i) out[i] = a[w[i] & pmask];
            /* a run of tied cut keys (keys equal, or agreeing on every kept
             * bit) again as words: the key's cut bits above the index */
            for (int64_t s0 = 0, e; s0 < n; s0 = e) {
                const uint64_t ck = w[s0] >> pb;
                for (e = s0 + 1; e < n && w[e] >> pb == ck; ++e) {}
                if (e - s0 < 2) continue;
                for (int64_t t = s0; t < e; ++t)
                    w[t] = ((out[t].key - lo) & low) << ib | (uint64_t)out[t].idx;
                if (e - s0 > 16) {
                    simd_qsort_64(w + s0, e - s0);
                } else {
                    for (int64_t t = s0 + 1; t < e; ++t) {
                        const uint64_t x = w[t];
                        int64_t u = t;
                        for (; u > s0 && w[u - 1] > x; --u) w[u] = w[u - 1];
                        w[u] = x;
                    }
                }
                for (int64_t t = s0; t < e; ++t) {
                    out[t].key = lo + ((ck << cut) | w[t] >> ib);
                    out[t].idx = (int64_t)(w[t] & imask);
                }
            }
            return out;
        }
    }
#endif
    (void)w;
    kvs_sort_all(a, out, n);
    return a;
}

static const kwk_kv *kvs_smallest_sorted(kwk_kv *kv, kwk_kv *tmp, int64_t n, int64_t m,
                                         uint64_t *w)
{
    int64_t rs;
    const int64_t ns = tn_sample_plan(n, m, KVS_SAMPLE_MIN, KVS_SAMPLE_MAX, &rs);
    const int64_t stride = n / ns;
    if (rs < ns && rs * 4 < ns * 3) {
        uint64_t s[KVS_SAMPLE_MAX], scratch[KVS_SAMPLE_MAX];
        for (int64_t i = 0; i < ns; ++i) s[i] = kv[i * stride + stride / 2].key;
        /* (an insertion sort took ~1 ms on the 2048 keys of a 2^20 row) */
        words_sort_small_or_radix(s, scratch, ns);
        const uint64_t t = s[rs];
        int64_t c = 0;
        for (int64_t i = 0; i < n; ++i) {
            tmp[c] = kv[i];
            c += kv[i].key <= t;
        }
        if (c >= m && c <= 4 * m + 256 && 2 * c <= n) {
            /* candidates span much less than their keys' width: packed as
             * words (key - lowest) << ibits | index where that fits, sorted
             * as topk_nth.h sorts its candidates, else sorted as records
             * (tmp + c: room for c words twice, or c records) */
            uint64_t lo = ~(uint64_t)0;
            for (int64_t i = 0; i < c; ++i) lo = tmp[i].key < lo ? tmp[i].key : lo;
            const int ib = tn_ibits(n), kb = kwk_bits_for(t - lo);
            if (kb + ib <= 64) {
                uint64_t *w = (uint64_t *)(void *)(tmp + c), *wt = w + c;
                for (int64_t i = 0; i < c; ++i)
                    w[i] = (tmp[i].key - lo) << ib | (uint64_t)tmp[i].idx;
                tn_sort_first(w, wt, c, m, ib, kb);
                const uint64_t mask = kwk_width_mask(ib);
                for (int64_t i = 0; i < m; ++i) {
                    tmp[i].key = (w[i] >> ib) + lo;
                    tmp[i].idx = (int64_t)(w[i] & mask);
                }
                return tmp;
            }
            return kvs_sort_records(tmp, tmp + c, c, w);
        }
    }
    kvs_select(kv, tmp, n, m);
    return kvs_sort_records(kv, tmp, m, w);
}

/* The general path for one row: pack the row as words (or records), select
 * the k+1 smallest, and redo the row with the emulation when torch's order
 * of equal keys shows.  Used for large k outside the heap path. */
static int topk_row_general(workspace *ws, int dtype, const out_row *out, int64_t len,
                            int64_t k, uint64_t flip, int heap_path, int sorted, int order)
{
    const int64_t m = k < len ? k + 1 : len;
    row_keys rk;
    int rbits = load_row(ws, dtype, out->row, len, out->step, flip, &rk);
    if (rbits < 0) return KWK_E_NOMEM;
    int tie;
    const kwk_kv *best = ws->kv;
    /* (m == len: the whole row is sorted, nothing to select first) */
    if (rk.packed) {
        if (m < len) words_select(ws->words, ws->tmp, len, m);
        words_sort_small_or_radix(ws->words, ws->tmp, m);
        tie = has_adjacent_tie_words(&rk, ws->words, m);
    } else {
        if (m < len) best = kvs_smallest_sorted(ws->kv, ws->kv_tmp, len, m, ws->tmp);
        else best = kvs_sort_records(ws->kv, ws->kv_tmp, m, ws->tmp);
        tie = has_adjacent_tie_kv(best, m);
    }
    const int emulate = order == KWK_ORDER_TORCH && (tie || (!heap_path && !sorted));
    if (!emulate) {
        for (int64_t j = 0; j < k; ++j)
            emit(out, j, rk.packed ? word_index(&rk, ws->words[j]) : best[j].idx);
        return KWK_OK;
    }
    if (rk.packed) {
        if (records_from_words(ws, &rk, len) != KWK_OK) return KWK_E_NOMEM;
    } else {
        records_reset_order(ws->kv, len);
    }
    if (heap_path) {
        emu_partial_sort(ws->kv, k, len);
    } else {
        emu_nth_element(ws->kv, k - 1, len);
        if (sorted) emu_std_sort(ws->kv, k - 1);
    }
    for (int64_t j = 0; j < k; ++j) emit(out, j, ws->kv[j].idx);
    return KWK_OK;
}

/* topk_row_general with the call's workspace, set up at its first use
 * (*have_ws); KWK_E_NOMEM, nothing kept, when that fails. */
static int topk_row_general_ws(workspace *ws, int *have_ws, int dtype, const out_row *out,
                               int64_t len, int64_t k, uint64_t flip, int heap_path, int sorted,
                               int order)
{
    if (!*have_ws) {
        if (workspace_init(ws, len) != KWK_OK) {
            workspace_free(ws);
            return KWK_E_NOMEM;
        }
        *have_ws = 1;
    }
    return topk_row_general(ws, dtype, out, len, k, flip, heap_path, sorted, order);
}

/* Rows up to this long take the in-memory path for small m. */
enum { SW_CAND_MAX = 1 << 16 };
/* Rows from this long (contiguous float ones) stream with the raw-value
 * block skip instead of taking the CAND path. */
enum { SW_SKIP_STREAM_MIN = 4096 };

/* The insertions a streamed selection (TK_HEAP_TORCH, TK_LIST,
 * TK_HEAP_STABLE) may make in a row before it gives the row to
 * topk_row_general: SW_HEAP_BUDGET_X times k * (2 + log2(len / k)), about
 * four times the k ln(len / k) + k a row in random order makes.  A row
 * that climbs towards the top (ascending for the largest, as a cumulative
 * sum or sorted scores) puts nearly every element through the heap or
 * list, one dependent descent each: float64 64x8192 rows, k = 8, ran at
 * 0.5x torch's time in torch's order (now 1.6x), bfloat16 0.7x (1.25x),
 * float64 with ties="stable" 0.66-1.0x (1.7-2x). */
enum { SW_HEAP_BUDGET_X = 3 };

static inline int64_t sw_heap_budget(int64_t len, int64_t k)
{
    int lg = 0;
    for (int64_t q = len / k; q > 1; q >>= 1) ++lg;
    return SW_HEAP_BUDGET_X * k * (2 + lg);
}

/* How a topk call handles its rows (chosen once per call). */
enum {
    TK_CAND,        /* top m <= SW_LANES in memory; ties in torch order redone */
    TK_HEAP_TORCH,  /* k*64 <= len, torch order: partial_sort, streamed */
    TK_LIST,        /* top m (m <= SW_LIST_MAX) by (key, index), streamed */
    TK_HEAP_STABLE, /* stable order, k small next to len: streamed heap */
    TK_EMULATE,     /* torch order, nth_element branch, sorted=0 */
    TK_NTH,         /* keys <= 32 bits: candidates beyond a threshold (topk_nth.h);
                     * in place of the two below, and of the streamed and
                     * CAND paths for k >= TN_LANE_MIN_K on float32 rows */
    TK_GENERAL      /* anything else: topk_row_general */
};

/* Per key width: the row loop of a topk call. */
#define SK_DEFINE_TOPK(UT, SUF)                                               \
    static int sk_topk_##SUF(sw_gather_fn_##SUF g, int dtype, const void *src, \
                             int64_t outer, int64_t len, int64_t inner,       \
                             int64_t src_so, int64_t src_sl, int64_t src_si,  \
                             int64_t k, void *values, int64_t *indices,       \
                             int64_t dst_so, int64_t dst_sl, int64_t dst_si,  \
                             int largest, int sorted, int order)              \
    {                                                                         \
        const int es = (int)sizeof(UT);                                       \
        const UT flip = largest ? (UT)~(UT)0 : (UT)0;                         \
        const int torch = order == KWK_ORDER_TORCH;                           \
        const int heap_path = k * 64 <= len;                                  \
        int64_t m = torch ? (k < len ? k + 1 : len) : k;                      \
        /* contiguous float rows: the streamed selections skip blocks on raw \
         * values, faster than CAND's three passes over gathered keys */     \
        const sw_beats_fn_##SUF beats = sw_beats_for_##SUF(dtype, src_sl * es);  \
        const int stream_skip = beats && len >= SW_SKIP_STREAM_MIN && (heap_path || !torch); \
        const int raw = tn_raw_ok(dtype, src_sl * es);                        \
        int mode;                                                             \
        if (torch && !sorted && !heap_path) mode = TK_EMULATE;                \
        else if (m <= SW_LANES && len <= SW_CAND_MAX && !stream_skip) mode = TK_CAND; \
        else if ((k >= TN_HEAP_MIN_K || (!torch && !heap_path && m > SW_LIST_MAX)) && \
                 sizeof(UT) <= 4 && len <= (int64_t)UINT32_MAX)               \
            /* candidates first: large k in the heap branch, and the stable \
             * order's k of more than a list when a row is too short to skip \
             * blocks (the streamed heap took 3x: 32768 rows of 1024, k=20) */ \
            mode = TK_NTH;                                                    \
        else if (heap_path && torch) { mode = TK_HEAP_TORCH; m = k; }         \
        else if (m <= SW_LIST_MAX) mode = TK_LIST;                            \
        else if (!torch && k * 16 <= len) { mode = TK_HEAP_STABLE; m = k; }   \
        else mode = TK_GENERAL;                                               \
        if ((mode == TK_GENERAL || mode == TK_EMULATE) && sizeof(UT) <= 4 &&  \
            len <= (int64_t)UINT32_MAX)                                       \
            mode = TK_NTH;                                                    \
        /* float32 rows: candidates beyond the m-th best lane bound (see    \
         * TN_LANE_MIN_K for the figures).  A streamed mode it replaces     \
         * comes back when most rows tie among their k + 1 best (logits    \
         * rounded to bfloat16): the lane pass is then wasted before the    \
         * exact streamed one. */                                           \
        int alt = -1, lane_tries = 0, lane_ties = 0;                          \
        if (mode != TK_EMULATE && raw && dtype == KWK_FLOAT32 && tn_lane_row(k, m, len)) { \
            if (mode == TK_HEAP_TORCH || mode == TK_LIST || mode == TK_HEAP_STABLE) alt = mode; \
            mode = TK_NTH;                                                    \
        }                                                                     \
        UT buf[SW_BLOCK];                                                     \
        kwk_kv *h = NULL, *kv = NULL;                                         \
        UT *keys = NULL;                                                      \
        int64_t *cand = NULL;                                                 \
        uint64_t *nw = NULL, *ntmp = NULL;                                    \
        workspace ws;                                                         \
        int have_ws = 0, status = KWK_OK;                                     \
        if (mode != TK_GENERAL && mode != TK_EMULATE) {                       \
            h = (kwk_kv *)malloc((size_t)(k + 1) * sizeof(kwk_kv));           \
            if (!h) return KWK_E_NOMEM;                                       \
        }                                                                     \
        if (mode == TK_NTH) {                                                 \
            keys = (UT *)malloc((size_t)len * sizeof(UT));                    \
            nw = (uint64_t *)malloc((size_t)(len + TN_SLACK) * sizeof(uint64_t)); \
            ntmp = (uint64_t *)malloc((size_t)(len + TN_SLACK) * sizeof(uint64_t)); \
            if (!keys || !nw || !ntmp) { free(h); free(keys); free(nw); free(ntmp); return KWK_E_NOMEM; } \
        }                                                                     \
        if (mode == TK_CAND) {                                                \
            keys = (UT *)malloc((size_t)len * sizeof(UT));                    \
            cand = (int64_t *)malloc((size_t)len * sizeof(int64_t));          \
            if (!keys || !cand) { free(h); free(keys); free(cand); return KWK_E_NOMEM; } \
        }                                                                     \
        for (int64_t o = 0; status == KWK_OK && o < outer; ++o) {             \
            for (int64_t i = 0; i < inner; ++i) {                             \
                out_row out = {                                               \
                    (const char *)src + (o * src_so + i * src_si) * es, src_sl * es, \
                    values ? (char *)values + (o * dst_so + i * dst_si) * es : NULL, \
                    indices ? indices + o * dst_so + i * dst_si : NULL, dst_sl, es, \
                    dtype == KWK_BFLOAT16};                                   \
                int emulate = mode == TK_EMULATE;                             \
                if (mode == TK_CAND) {                                        \
                    g(out.row, out.step, len, flip, keys);                    \
                    sw_top_small_##SUF(keys, len, m, h, cand);                \
                    if (torch) {                                              \
                        int tie = 0;                                          \
                        for (int64_t j = 1; j < m; ++j) tie |= h[j].key == h[j - 1].key; \
                        if (tie && heap_path) {                               \
                            /* exact partial_sort, streamed */                \
                            sw_heap_torch_##SUF(g, out.row, out.step, len, k, flip, h, buf, beats, -1); \
                        } else {                                              \
                            emulate = tie;                                    \
                        }                                                     \
                    }                                                         \
                } else if (mode == TK_HEAP_TORCH || mode == TK_LIST ||        \
                           mode == TK_HEAP_STABLE) {                          \
                    /* streamed; a row that climbs towards the top (see    \
                     * sw_heap_budget) goes to the general path instead,   \
                     * which selects exactly and emulates torch's order    \
                     * only where the top k + 1 tie */                      \
                    const int64_t budget = sw_heap_budget(len, m);            \
                    int done;                                                 \
                    if (mode == TK_HEAP_TORCH)                                \
                        done = sw_heap_torch_##SUF(g, out.row, out.step, len, k, flip, h, buf, \
                                                   beats, budget);            \
                    else if (mode == TK_LIST)                                 \
                        done = sw_list_stable_##SUF(g, out.row, out.step, len, m, flip, h, buf, \
                                                    beats, budget);           \
                    else                                                      \
                        done = sw_heap_stable_##SUF(g, out.row, out.step, len, m, flip, h, buf, \
                                                    beats, budget);           \
                    if (!done) {                                              \
                        status = topk_row_general_ws(&ws, &have_ws, dtype, &out, len, k, flip, \
                                                     heap_path, sorted, order); \
                        if (status != KWK_OK) break;                          \
                        continue;                                             \
                    }                                                         \
                    if (mode == TK_LIST && torch)                             \
                        for (int64_t j = 1; j < m; ++j)                       \
                            emulate |= h[j].key == h[j - 1].key;              \
                    if (mode == TK_HEAP_STABLE) sw_sort_heap_ki(h, m);        \
                } else if (mode == TK_NTH) {                                  \
                    /* torch's nth_element branch with sorted=0 shows its  \
                     * introselect order: always emulated */                  \
                    const int64_t mn = torch ? (k < len ? k + 1 : len) : k;   \
                    const uint64_t imask = kwk_width_mask(tn_ibits(len));     \
                    tn_row_##SUF r = {g, out.row, out.step, len, flip, raw, keys, 0}; \
                    const int fast = (heap_path || sorted || !torch) &&       \
                                     tn_smallest_##SUF(&r, mn, torch, nw, ntmp); \
                    if (alt >= 0) {                                           \
                        ++lane_tries;                                         \
                        lane_ties += !fast;                                   \
                        if (lane_tries >= TN_LANE_PROBE_ROWS && 2 * lane_ties > lane_tries) \
                            mode = alt; /* (m is alt's: TK_NTH has its own) */ \
                    }                                                         \
                    if (fast) {                                               \
                        for (int64_t j = 0; j < k; ++j) emit(&out, j, (int64_t)(nw[j] & imask)); \
                    } else if (heap_path) {                                   \
                        sw_heap_torch_##SUF(g, out.row, out.step, len, k, flip, h, buf, beats, -1); \
                        for (int64_t j = 0; j < k; ++j) emit(&out, j, h[j].idx); \
                    } else {                                                  \
                        tn_emulate_##SUF(&r, k, sorted, nw);                  \
                        for (int64_t j = 0; j < k; ++j) emit(&out, j, (int64_t)(nw[j] & imask)); \
                    }                                                         \
                    continue;                                                 \
                } else if (mode == TK_GENERAL) {                              \
                    status = topk_row_general_ws(&ws, &have_ws, dtype, &out, len, k, flip, \
                                                 heap_path, sorted, order);   \
                    if (status != KWK_OK) break;                              \
                    continue;                                                 \
                }                                                             \
                if (emulate) {                                                \
                    /* torch order shows: redo the row as nth_element does */ \
                    if (!kv) kv = (kwk_kv *)malloc((size_t)len * sizeof(kwk_kv)); \
                    if (!kv) { status = KWK_E_NOMEM; break; }                 \
                    sw_records_##SUF(g, out.row, out.step, len, flip, kv, buf); \
                    emu_nth_element(kv, k - 1, len);                          \
                    if (sorted) emu_std_sort(kv, k - 1);                      \
                    for (int64_t j = 0; j < k; ++j) emit(&out, j, kv[j].idx); \
                } else {                                                      \
                    for (int64_t j = 0; j < k; ++j) emit(&out, j, h[j].idx);  \
                }                                                             \
            }                                                                 \
        }                                                                     \
        if (have_ws) workspace_free(&ws);                                     \
        free(h);                                                              \
        free(kv);                                                             \
        free(keys);                                                           \
        free(cand);                                                           \
        free(nw);                                                             \
        free(ntmp);                                                           \
        return status;                                                        \
    }

SK_DEFINE_TOPK(uint8_t, u8)
SK_DEFINE_TOPK(uint16_t, u16)
SK_DEFINE_TOPK(uint32_t, u32)
SK_DEFINE_TOPK(uint64_t, u64)

#define SK_TOPK_ARGS dtype, src, outer, len, inner, src_so, src_sl, src_si, k, values, \
                     indices, dst_so, dst_sl, dst_si, largest, sorted, order

/* topk row by row (any shape). */
static int topk_rows(int dtype, const void *src, int64_t outer, int64_t len,
                     int64_t inner, int64_t src_so, int64_t src_sl,
                     int64_t src_si, int64_t k, void *values, int64_t *indices,
                     int64_t dst_so, int64_t dst_sl, int64_t dst_si,
                     int largest, int sorted, int order)
{
    switch (dtype) {
    case KWK_BOOL: return sk_topk_u8(sw_gather_bool, SK_TOPK_ARGS);
    case KWK_UINT8: return sk_topk_u8(sw_gather_u8, SK_TOPK_ARGS);
    case KWK_INT8: return sk_topk_u8(sw_gather_i8, SK_TOPK_ARGS);
    case KWK_UINT16: return sk_topk_u16(sw_gather_u16, SK_TOPK_ARGS);
    case KWK_INT16: return sk_topk_u16(sw_gather_i16, SK_TOPK_ARGS);
    case KWK_FLOAT16: return sk_topk_u16(sw_gather_f16, SK_TOPK_ARGS);
    case KWK_BFLOAT16: return sk_topk_u16(sw_gather_bf16, SK_TOPK_ARGS);
    case KWK_UINT32: return sk_topk_u32(sw_gather_u32, SK_TOPK_ARGS);
    case KWK_INT32: return sk_topk_u32(sw_gather_i32, SK_TOPK_ARGS);
    case KWK_FLOAT32: return sk_topk_u32(sw_gather_f32, SK_TOPK_ARGS);
    case KWK_UINT64: return sk_topk_u64(sw_gather_u64, SK_TOPK_ARGS);
    case KWK_INT64: return sk_topk_u64(sw_gather_i64, SK_TOPK_ARGS);
    case KWK_FLOAT64: return sk_topk_u64(sw_gather_f64, SK_TOPK_ARGS);
    default: return KWK_E_DTYPE;
    }
}
#undef SK_TOPK_ARGS

/* Keys too wide to share a word with the position (64-bit dtypes): a row
 * whose keys span less than 2^(64 - ibits) takes them as offsets from its
 * smallest (int64 ids, counts, small values); otherwise a row of at most
 * RANK_WORDS_MAX_LEN elements takes each key's dense rank in the row (the
 * number of smaller keys: equal keys get equal ranks, the order is the
 * keys', so every comparison of the emulation comes out as on the keys);
 * other rows go to the per-row kernel (records; no caller hands such rows
 * over today: topk_rows8v's rows of up to 8 always pack).  The rank is O(len^2)
 * compares: rows of 16 and 32 measured 2-2.5x slower with it than with
 * the records on sorted int64 rows.  (The nth_element branch of rows of
 * 16..32 with sorted=False keeps the records for 64-bit keys: words
 * measured 1.3-1.7x faster on random and tied int64 rows but 0.56x on
 * sorted ones, and float64 rows, which rarely rebase, 0.8-0.9x.) */
enum { RANK_WORDS_MAX_LEN = 8 };

static void dense_rank_keys(uint64_t *keys, int64_t len)
{
    uint64_t copy[RANK_WORDS_MAX_LEN];
    memcpy(copy, keys, (size_t)len * sizeof(uint64_t));
    for (int64_t j = 0; j < len; ++j) {
        uint64_t smaller = 0;
        for (int64_t i = 0; i < len; ++i) smaller += copy[i] < copy[j];
        keys[j] = smaller;
    }
}

/* Whether a row's keys (gathered into keys[0..len), spanning lo..hi) can
 * be packed with ibits of position: as they are, rebased, or ranked. */
static int pack_wide_keys(uint64_t *keys, int64_t len, int ibits, uint64_t lo, uint64_t hi)
{
    if (ibits == 0 || (hi - lo) >> (64 - ibits) == 0) {
        for (int64_t j = 0; j < len; ++j) keys[j] -= lo;
        return 1;
    }
    if (len <= RANK_WORDS_MAX_LEN) {
        dense_rank_keys(keys, len);
        return 1;
    }
    return 0;
}

/* torch's selection emulated row by row on packed words, key << ibits |
 * index (keys of at most 32 bits: always packable; wider keys as
 * pack_wide_keys makes them, or the row by the per-row kernel): a
 * partial_sort when k * 64 <= len, else nth_element and, when sorted, a
 * sort of the first k - 1, exactly as torch.topk.  Half the bytes of the
 * records the per-row kernel's emulation moves, and the word partition
 * scans with vector compares.  Rows list[0..nrows), or all rows 0..nrows-1
 * when list is NULL (row t = (t / inner, t % inner)). */
static int topk_emulate_words(int dtype, const void *src, int64_t len, int64_t inner,
                              int64_t src_so, int64_t src_sl, int64_t src_si, int64_t k,
                              void *values, int64_t *indices, int64_t dst_so, int64_t dst_sl,
                              int64_t dst_si, int largest, int sorted, const int64_t *list,
                              int64_t nrows)
{
    const int es = KWK_DTYPES[dtype].elem_size;
    const int wide = KWK_DTYPES[dtype].key_bits > 32;
    const uint64_t flip = largest ? kwk_width_mask(KWK_DTYPES[dtype].key_bits) : 0;
    const int ibits = len > 1 ? kwk_bits_for((uint64_t)(len - 1)) : 0;
    const uint64_t mask = kwk_width_mask(ibits);
    uint64_t *w = (uint64_t *)malloc((size_t)(len > 0 ? len : 1) * sizeof(uint64_t));
    if (!w) return KWK_E_NOMEM;
    int status = KWK_OK;
    for (int64_t r = 0; r < nrows && status == KWK_OK; ++r) {
        const int64_t t = list ? list[r] : r;
        const int64_t o = t / inner, i = t % inner;
        const int64_t d = o * dst_so + i * dst_si;
        const char *row = (const char *)src + (o * src_so + i * src_si) * es;
        uint64_t lo, hi;
        kwk_gather_keys(dtype, row, len, src_sl * es, flip, w, &lo, &hi);
        if (wide && !pack_wide_keys(w, len, ibits, lo, hi)) {
            status = topk_rows(dtype, row, 1, len, 1, 0, src_sl, 0, k,
                               values ? (char *)values + d * es : NULL, indices ? indices + d : NULL,
                               0, dst_sl, 0, largest, sorted, KWK_ORDER_TORCH);
            continue;
        }
        for (int64_t j = 0; j < len; ++j) w[j] = w[j] << ibits | (uint64_t)j;
        tt_emulate_words(w, len, k, sorted, ibits);
        out_row out = {row, src_sl * es, values ? (char *)values + d * es : NULL,
                       indices ? indices + d : NULL, dst_sl, es, dtype == KWK_BFLOAT16};
        for (int64_t j = 0; j < k; ++j) emit(&out, j, (int64_t)(w[j] & mask));
    }
    free(w);
    return status;
}

/* The stable answer of rows list[0..*nrows) of contiguous rows (src_sl ==
 * 1) by tt_row (keys of <= 32 bits, TT_ROW_MIN_LEN..TT_MAX_LEN elements,
 * k <= SR_TOPK_MAX_K), written to the outputs; the rows it cannot take
 * (too many candidates, or a call outside those bounds) are left in
 * list[0..*nrows), in order, for the caller.  sr_topk hands back the rows
 * with a tie among their first k + 1 keys: routers' softmax of bfloat16
 * logits ties in a quarter of the rows, which the per-row kernel took
 * ~900 ns each (128 elements) and tt_row ~120 ns. */
static int topk_stable_by_threshold(int dtype, const void *src, int64_t len, int64_t inner,
                                    int64_t src_so, int64_t src_si, int64_t k, void *values,
                                    int64_t *indices, int64_t dst_so, int64_t dst_sl,
                                    int64_t dst_si, int largest, int64_t *list, int64_t *nrows)
{
    const tt_keys_fn keys_of = tt_keys_for(dtype);
    if (!keys_of || len < TT_ROW_MIN_LEN || len > TT_MAX_LEN || k < 1 || k > SR_TOPK_MAX_K)
        return KWK_OK;
    const int es = KWK_DTYPES[dtype].elem_size;
    const uint32_t flip = largest ? (uint32_t)kwk_width_mask(KWK_DTYPES[dtype].key_bits) : 0;
    int32_t *key = (int32_t *)malloc((size_t)(len + TT_PAD) * sizeof(int32_t));
    int32_t *cand = (int32_t *)malloc((size_t)(len + TT_PAD) * sizeof(int32_t));
    if (!key || !cand) {
        free(key);
        free(cand);
        return KWK_E_NOMEM;
    }
    int32_t at[SR_TOPK_MAX_K * SR_LANES];
    int64_t left = 0;
    for (int64_t r = 0; r < *nrows; ++r) {
        const int64_t t = list[r];
        const int64_t o = t / inner, i = t % inner;
        const int64_t d = o * dst_so + i * dst_si;
        const char *row = (const char *)src + (o * src_so + i * src_si) * es;
        keys_of(row, len, flip ^ 0x80000000u, key);
        if (tt_row(key, len, (int)k, 0, at, cand) != TT_EXACT) {
            list[left++] = t;
            continue;
        }
        out_row out = {row, es, values ? (char *)values + d * es : NULL,
                       indices ? indices + d : NULL, dst_sl, es, dtype == KWK_BFLOAT16};
        for (int64_t p = 0; p < k; ++p) emit(&out, p, at[p * SR_LANES]);
    }
    kwk_count(KWK_COUNT_SHORT_TOPK_STABLE_BY_THRESHOLD, *nrows - left);
    *nrows = left;
    free(key);
    free(cand);
    return KWK_OK;
}

/* topk of the rows tf_applies to (topk_few.h), arguments and outputs as
 * tt_topk's; a row with a NaN or a tie among its k + 1 best is handed back
 * for redo (its outputs may hold anything). */
static int topk_few(int dtype, const void *src, int64_t outer, int64_t len, int64_t inner,
                    int64_t src_so, int64_t src_si, int64_t k, void *values, int64_t *indices,
                    int64_t dst_so, int64_t dst_sl, int64_t dst_si, int largest, int64_t *redo,
                    int64_t *nredo)
{
    *nredo = 0;
#if defined(__AVX2__)
    const int es = KWK_DTYPES[dtype].elem_size;
    int64_t at[TF_MAX_K];
    for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i) {
            const char *row = (const char *)src + (o * src_so + i * src_si) * es;
            if (!tf_row(dtype, row, len, (int)k, largest, at)) {
                redo[(*nredo)++] = o * inner + i;
                continue;
            }
            /* (no NaN among them: bfloat16 values need no canonical NaN) */
            const int64_t d = o * dst_so + i * dst_si;
            for (int64_t p = 0; p < k; ++p) {
                if (values)
                    kwk_copy_elem((char *)values + (d + p * dst_sl) * es, row + at[p] * es, es);
                if (indices) indices[d + p * dst_sl] = at[p];
            }
        }
    kwk_count(KWK_COUNT_FEW_TOPK_ROWS, outer * inner);
    kwk_count(KWK_COUNT_FEW_TOPK_TIES, *nredo);
#else
    (void)dtype, (void)src, (void)outer, (void)len, (void)inner, (void)src_so, (void)src_si;
    (void)k, (void)values, (void)indices, (void)dst_so, (void)dst_sl, (void)dst_si;
    (void)largest, (void)redo;
#endif
    return KWK_OK;
}

/* Short rows, small k: on AVX-512, float32 rows of up to S16_MAX_LEN
 * along the last dim sixteen at a time (topk_short16.h); k = 2 or 3 of
 * contiguous float32 rows (k = 2 of bfloat16 ones) of tf_applies' lengths
 * in one pass each (topk_few.h);
 * other contiguous rows of TT_MIN_LEN..TT_MAX_LEN elements one by one from
 * a threshold (topk_threshold.h), shorter or strided ones eight rows at a
 * time (short_rows.h).  The rows a kernel hands back (the eight-rows one
 * and the one-pass one: a tie among their first k + 1 keys, or for the
 * latter a NaN; the threshold one: too many candidates) are redone one by
 * one: in torch order straight by the emulation of torch's selection (the
 * per-row kernel would first select again, then find the same tie); in
 * stable order by the threshold kernel's ranking, else the per-row
 * kernel. */
static int topk_short_rows(int dtype, const void *src, int64_t outer, int64_t len,
                           int64_t inner, int64_t src_so, int64_t src_sl, int64_t src_si,
                           int64_t k, void *values, int64_t *indices, int64_t dst_so,
                           int64_t dst_sl, int64_t dst_si, int largest, int sorted, int order)
{
    const int64_t rows = outer * inner;
    int64_t *redo = (int64_t *)malloc((size_t)rows * sizeof(int64_t)), nredo = 0;
    if (!redo) return KWK_E_NOMEM;
    int status = KWK_OK;
#if defined(__AVX512F__)
    if (s16_applies(dtype, rows, len, inner, src_so, src_sl, k, dst_so, dst_sl, values, indices,
                    sorted, order)) {
        /* sixteen rows a step (topk_short16.h), ahead of the one-pass
         * kernel too (topk_few.h: k = 2 of 4096 rows of 96 / 128, 173 /
         * 207 -> 117 / 148 us a call); the last rows of the call (fewer
         * than sixteen) by the eight-rows kernel */
        const int64_t done = s16_topk((const float *)src, outer, len, src_so, k, largest,
                                      (float *)values, indices, redo, &nredo);
        kwk_count(KWK_COUNT_SHORT_TOPK_ROWS, done);
        kwk_count(KWK_COUNT_SHORT_TOPK_REDONE, nredo);
        if (done < outer) {
            int64_t ntail = 0;
            status = sr_topk(dtype, (const float *)src + done * src_so, outer - done, len, 1,
                             src_so, src_sl, src_si, k, (float *)values + done * dst_so,
                             indices + done * dst_so, dst_so, dst_sl, dst_si, largest,
                             redo + nredo, &ntail);
            for (int64_t r = nredo; r < nredo + ntail; ++r) redo[r] += done;
            nredo += ntail;
        }
    } else
#endif
    status = tf_applies(dtype, len, k, src_sl, sorted, order)
        ? topk_few(dtype, src, outer, len, inner, src_so, src_si, k, values, indices, dst_so,
                   dst_sl, dst_si, largest, redo, &nredo)
        : tt_topk_applies(dtype, len, k, src_sl, sorted, order)
        ? tt_topk(dtype, src, outer, len, inner, src_so, src_si, k, values, indices, dst_so,
                  dst_sl, dst_si, largest, sorted, order, redo, &nredo)
        : sr_topk(dtype, src, outer, len, inner, src_so, src_sl, src_si, k, values, indices,
                  dst_so, dst_sl, dst_si, largest, redo, &nredo);
    if (status == KWK_OK && nredo > 0 && order == KWK_ORDER_TORCH) {
        status = topk_emulate_words(dtype, src, len, inner, src_so, src_sl, src_si, k, values,
                                    indices, dst_so, dst_sl, dst_si, largest, sorted, redo, nredo);
    } else {
        const int64_t es = KWK_DTYPES[dtype].elem_size;
        /* stable order, contiguous rows: tt_row ranks (key, position)
         * words, exact whatever the ties; what it cannot take (too many
         * candidates) stays in the list for the per-row kernel */
        if (status == KWK_OK && nredo > 0 && src_sl == 1)
            status = topk_stable_by_threshold(dtype, src, len, inner, src_so, src_si, k, values,
                                              indices, dst_so, dst_sl, dst_si, largest, redo,
                                              &nredo);
        for (int64_t r = 0; status == KWK_OK && r < nredo; ++r) {
            const int64_t o = redo[r] / inner, i = redo[r] % inner;
            const int64_t d = o * dst_so + i * dst_si;
            status = topk_rows(dtype, (const char *)src + (o * src_so + i * src_si) * es, 1, len,
                               1, 0, src_sl, 0, k, values ? (char *)values + d * es : NULL,
                               indices ? indices + d : NULL, 0, dst_sl, 0, largest, sorted, order);
        }
    }
    free(redo);
    return status;
}

#if defined(__AVX512F__)
/* topk_top1_rows of float32 / bfloat16 rows of T1_TWO_PASS_MIN_LEN and
 * more: the two-pass scan.  (A function of its own: sharing the loops
 * below, the test of the length cost float32 4096x64 5-7%.) */
__attribute__((noinline)) static void topk_top1_two_pass(int dtype, const void *src, int64_t outer,
                                                         int64_t len, int64_t inner, int64_t src_so,
                                                         int64_t src_si, void *values, int64_t *indices,
                                                         int64_t dst_so, int64_t dst_si, int largest)
{
    const int64_t es = dtype == KWK_BFLOAT16 ? 2 : 4;
    for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i) {
            const int64_t d = o * dst_so + i * dst_si;
            const char *row = (const char *)src + es * (o * src_so + i * src_si);
            const int64_t at = es == 2 ? t1_fast_bf16(row, len, largest) : t1_fast_f32(row, len, largest);
            if (es == 2) { /* (NaN as torch writes it) */
                const out_row out = {row, 2, values ? (char *)values + 2 * d : NULL,
                                     indices ? indices + d : NULL, 1, 2, 1};
                emit(&out, 0, at);
                continue;
            }
            if (values) memcpy((char *)values + es * d, row + es * at, (size_t)es);
            if (indices) indices[d] = at;
        }
}
#endif

/* k = 1 of contiguous float32 or bfloat16 rows (topk_top1.h): the first
 * best element. */
static int topk_top1_rows(int dtype, const void *src, int64_t outer, int64_t len,
                          int64_t inner, int64_t src_so, int64_t src_si, void *values,
                          int64_t *indices, int64_t dst_so, int64_t dst_si, int largest)
{
#if defined(__AVX512F__)
    if ((dtype == KWK_FLOAT32 || dtype == KWK_BFLOAT16) && len >= T1_TWO_PASS_MIN_LEN) {
        topk_top1_two_pass(dtype, src, outer, len, inner, src_so, src_si, values, indices, dst_so,
                           dst_si, largest);
        kwk_count(KWK_COUNT_TOP1_ROWS, outer * inner);
        return KWK_OK;
    }
#endif
    if (dtype == KWK_BFLOAT16) {
        for (int64_t o = 0; o < outer; ++o)
            for (int64_t i = 0; i < inner; ++i) {
                const int64_t d = o * dst_so + i * dst_si;
                const char *row = (const char *)src + 2 * (o * src_so + i * src_si);
                const out_row out = {row, 2, values ? (char *)values + 2 * d : NULL,
                                     indices ? indices + d : NULL, 1, 2, 1};
                emit(&out, 0, t1_row_bf16(row, len, largest)); /* (NaN as torch writes it) */
            }
    } else if (KWK_DTYPES[dtype].elem_size == 8) {
        for (int64_t o = 0; o < outer; ++o)
            for (int64_t i = 0; i < inner; ++i) {
                const int64_t d = o * dst_so + i * dst_si;
                const char *row = (const char *)src + 8 * (o * src_so + i * src_si);
                const int64_t at = dtype == KWK_INT64    ? t1_row64_i64(row, len, largest)
                                   : dtype == KWK_UINT64 ? t1_row64_u64(row, len, largest)
                                                         : t1_row64_f64(row, len, largest);
                if (values) memcpy((char *)values + 8 * d, row + 8 * at, 8);
                if (indices) indices[d] = at;
            }
    } else { /* (a loop of its own: a dtype test per row cost float32 4-12%) */
        for (int64_t o = 0; o < outer; ++o)
            for (int64_t i = 0; i < inner; ++i) {
                const int64_t d = o * dst_so + i * dst_si;
                const float *row = (const float *)src + o * src_so + i * src_si;
                const int64_t at = t1_row_f32((const char *)row, len, largest);
                if (values) memcpy((float *)values + d, row + at, sizeof(float));
                if (indices) indices[d] = at;
            }
    }
    kwk_count(KWK_COUNT_TOP1_ROWS, outer * inner);
    return KWK_OK;
}

/* topk of 64-bit rows of up to 8 on AVX-512, sorted (or k = 1): the
 * row's stable ranks in one vector (kwk_ranks8_u64 on keys flipped for
 * largest, so NaN comes first) and the first k of its order, where the
 * general kernels' per-row set-up cost 2-4x torch's own (AMD Zen 4, us,
 * 4096 rows of int64: 2 elements k = 1 65 against 28, 8 k = 2 131 vs 94).
 * Distinct keys have one right answer whatever torch's algorithm; in
 * torch order a row with equal keys goes to topk_rows. */
#if defined(__AVX512F__)
static int tk8_applies(int dtype, int64_t len, int64_t k, int sorted)
{
    return KWK_DTYPES[dtype].elem_size == 8 && len <= 8 && k >= 1 && (sorted || k == 1);
}

static int topk_rows8(int dtype, const void *src, int64_t outer, int64_t len, int64_t inner,
                      int64_t src_so, int64_t src_sl, int64_t src_si, int64_t k, void *values,
                      int64_t *indices, int64_t dst_so, int64_t dst_sl, int64_t dst_si,
                      int largest, int order)
{
    const uint64_t flip = largest ? ~(uint64_t)0 : 0;
    const __mmask8 first_k = (__mmask8)((1u << k) - 1);
    int status = KWK_OK;
    for (int64_t o = 0; o < outer && status == KWK_OK; ++o) {
        for (int64_t i = 0; i < inner && status == KWK_OK; ++i) {
            const char *row = (const char *)src + (o * src_so + i * src_si) * 8;
            const int64_t d = o * dst_so + i * dst_si;
            char *vals = values ? (char *)values + d * 8 : NULL;
            int64_t *inds = indices ? indices + d : NULL;
            __m512i raw;
            int tied;
            const __m512i key = kwk_keys8_row64(dtype, row, src_sl * 8, len, flip, &raw);
            const __m512i r = kwk_ranks8_u64(key, len, &tied);
            if (tied && order == KWK_ORDER_TORCH) {
                status = topk_rows(dtype, row, 1, len, 1, 0, src_sl, 0, k, vals, inds, 0, dst_sl,
                                   0, largest, 1, order);
                continue;
            }
            const __m512i ord = kwk_order8_u64(r, len);
            const __m512i v = _mm512_permutexvar_epi64(ord, raw);
            if (dst_sl == 1) {
                if (vals) _mm512_mask_storeu_epi64(vals, first_k, v);
                if (inds) _mm512_mask_storeu_epi64(inds, first_k, ord);
            } else {
                int64_t ob[8], vb[8];
                _mm512_storeu_si512((void *)ob, ord);
                _mm512_storeu_si512((void *)vb, v);
                for (int64_t j = 0; j < k; ++j) {
                    if (vals) memcpy(vals + j * dst_sl * 8, &vb[j], 8);
                    if (inds) inds[j * dst_sl] = ob[j];
                }
            }
        }
    }
    return status;
}

/* Eight contiguous rows at a time (sort_kernels.h's sw8_rank_pick, keys
 * flipped for largest): the first k of each row's stable order; in torch
 * order a row with two equal keys goes to topk_rows.  Rows [0, returned)
 * are done.  A/B (AMD Zen 4, 4096 rows, us): int64 rows of 8, k = 2,
 * from per-row ranks (topk_rows8) 91 -> 61 (torch 94), rows of 5 66 -> 45
 * (torch 74). */
static int64_t topk_rows8v(int dtype, const char *src, int64_t rows, int64_t len, int64_t row_step,
                           int64_t k, char *values, int64_t *indices, int64_t dst_step,
                           int largest, int order, int *status)
{
    const __mmask8 in_row = (__mmask8)((1u << len) - 1), first_k = (__mmask8)((1u << k) - 1);
    const uint64_t flip = largest ? ~(uint64_t)0 : 0;
    /* rows whose torch order shows a tie, emulated together afterwards
     * (topk_emulate_words on the keys' ranks: rows of 8 cost ~115 ns each
     * through topk_rows' per-call set-up) */
    int64_t *tied_rows = NULL, ntied = 0;
    const void *const end = kwk_plain_end(src, ((rows - 1) * row_step + len) * 8);
    int64_t r = 0;
    for (; r + SW8_ROWS <= rows; r += SW8_ROWS) {
        __m512i raw[8], val[8], idx[8];
        for (int l = 0; l < SW8_ROWS; ++l)
            raw[l] = kwk_loadz_epi64(in_row, src + (r + l) * row_step * 8, end);
        sw8_transpose(raw);
        const __mmask8 tied = sw8_rank_pick(dtype, raw, len, flip, k, order == KWK_ORDER_TORCH,
                                            val, idx);
        if (values) sw8_transpose(val);
        if (indices) sw8_transpose(idx);
        for (int l = 0; l < SW8_ROWS; ++l) {
            const int64_t d = (r + l) * dst_step;
            if (tied >> l & 1) {
                if (!tied_rows) {
                    tied_rows = (int64_t *)malloc((size_t)rows * sizeof(int64_t));
                    if (!tied_rows) {
                        *status = KWK_E_NOMEM;
                        return 0;
                    }
                }
                tied_rows[ntied++] = r + l;
                continue;
            }
            if (values) _mm512_mask_storeu_epi64(values + d * 8, first_k, val[l]);
            if (indices) _mm512_mask_storeu_epi64(indices + d, first_k, idx[l]);
        }
    }
    if (ntied)
        *status = topk_emulate_words(dtype, src, len, 1, row_step, 1, 0, k, values, indices,
                                     dst_step, 1, 0, largest, 1, tied_rows, ntied);
    free(tied_rows);
    return *status == KWK_OK ? r : 0;
}
#endif

static int impl_topk(int dtype, const void *src, int64_t outer, int64_t len,
                     int64_t inner, int64_t src_so, int64_t src_sl,
                     int64_t src_si, int64_t k, void *values, int64_t *indices,
                     int64_t dst_so, int64_t dst_sl, int64_t dst_si,
                     int largest, int sorted, int order)
{
    if (k == 0 || outer == 0 || inner == 0) return KWK_OK;
#if defined(__AVX512F__)
    if (tk8_applies(dtype, len, k, sorted)) {
        int64_t done = 0;
        int status = KWK_OK;
        if (inner == 1 && src_sl == 1 && dst_sl == 1 && len >= 2 && outer >= SW8_ROWS)
            done = topk_rows8v(dtype, (const char *)src, outer, len, src_so, k, (char *)values,
                               indices, dst_so, largest, order, &status);
        if (status != KWK_OK || done == outer) return status;
        return topk_rows8(dtype, (const char *)src + done * src_so * 8, outer - done, len, inner,
                          src_so, src_sl, src_si, k,
                          values ? (char *)values + done * dst_so * 8 : NULL,
                          indices ? indices + done * dst_so : NULL, dst_so, dst_sl, dst_si,
                          largest, order);
    }
#endif
    if (t1_applies(dtype, len, k, src_sl))
        return topk_top1_rows(dtype, src, outer, len, inner, src_so, src_si, values, indices,
                              dst_so, dst_si, largest);
    if (tf_applies(dtype, len, k, src_sl, sorted, order) ||
        tt_topk_applies(dtype, len, k, src_sl, sorted, order) ||
        sr_topk_applies(dtype, outer * inner, len, k, sorted, order))
        return topk_short_rows(dtype, src, outer, len, inner, src_so, src_sl, src_si, k, values,
                               indices, dst_so, dst_sl, dst_si, largest, sorted, order);
    /* torch order, sorted=False in nth_element's branch: every row in
     * introselect order, emulated on words where the keys leave room */
    if (order == KWK_ORDER_TORCH && !sorted && k * 64 > len &&
        KWK_DTYPES[dtype].key_bits <= 32 && len <= SW_CAND_MAX)
        return topk_emulate_words(dtype, src, len, inner, src_so, src_sl, src_si, k, values,
                                  indices, dst_so, dst_sl, dst_si, largest, sorted, NULL,
                                  outer * inner);
    return topk_rows(dtype, src, outer, len, inner, src_so, src_sl, src_si, k, values, indices,
                     dst_so, dst_sl, dst_si, largest, sorted, order);
}

/* kwk_topk with KWK_ORDER_TORCH_PROBE over many short rows first looks at
 * TK_PROBE_ROWS of them: where torch's own selection is the quicker one,
 * the call returns KWK_DEFER, nothing written (the caller runs torch).
 * Two kinds of rows, measured (AMD Zen 4, one thread, 4096 rows of 8 or
 * 16, 1024 of 64):
 * - rows of at most TK_PROBE_TIE_LEN whose k + 1 best keys hold equal
 *   ones (sorted=1, or k = 1): each is redone by the emulation of torch's
 *   nth_element and sort, ~200 ns a row of 8 int64 against torch's ~55
 *   (rows of 0..15, k = 1: 0.68x torch's time; bfloat16-rounded int32,
 *   k = 2: 0.48x; float64 of 0..3: 0.63x).  Deferred when a quarter of the
 *   probed rows tie (an eighth for k = 1).  Longer rows (to 64) are probed
 *   for ties only when their keys are integers, sorted=1 and k >= 2
 *   (1024x64 int64 / int32 of a few values: 0.46-0.74x -> 0.89-0.96x):
 *   bfloat16 logits of 4096x64, k = 8, tie in most rows too, and run 8x
 *   torch's speed.
 * - rows already in order, ascending or descending, with sorted=0 and k >=
 *   2: every row is emulated (torch's introselect order shows), and on such
 *   rows torch's introselect runs on correctly predicted branches (4096x16
 *   float32 0.41x, 1024x64 0.60x).  Deferred when three quarters are.
 * The probe reads the probed rows' keys (about 1 us); a deferred call costs
 * torch's time plus Kwker's entry (~5-10 us of Python). */
enum { TK_PROBE_ROWS = 32, TK_PROBE_MAX_LEN = 64, TK_PROBE_TIE_LEN = 16,
       TK_PROBE_MIN_ROWS = 8 * TK_PROBE_ROWS };

static int tk_probe_prefers_torch(int dtype, const char *src, int64_t len, int64_t src_so,
                                  int64_t src_sl, int64_t k, int largest, int sorted)
{
    const int64_t es = KWK_DTYPES[dtype].elem_size;
    /* ties: sorted=1 or k = 1, rows of at most TK_PROBE_TIE_LEN (integer
     * keys with sorted=1 and k >= 2: rows of at most 64); in order:
     * sorted=0, and 64-bit keys of rows the candidate list takes whole
     * (sw_top_small), where each element of a rising row moves the list */
    const int ties = k < len && (sorted || k == 1) &&
                     (len <= TK_PROBE_TIE_LEN || (!KWK_DTYPES[dtype].is_float && sorted && k >= 2));
    const int order = k >= 2 && (!sorted || (es == 8 && len <= 2 * SW_LANES));
    if (!ties && !order) return 0;
    /* fewer rows for longer ones: the probe stays about 1 us */
    const int rows = len <= TK_PROBE_TIE_LEN ? TK_PROBE_ROWS : TK_PROBE_ROWS / 2;
    int in_order = 0, tied = 0;
    uint64_t key[TK_PROBE_MAX_LEN], lo, hi;
    for (int r = 0; r < rows; ++r) {
        kwk_gather_keys(dtype, src + r * src_so * es, len, src_sl * es, 0, key, &lo, &hi);
        if (order) {
            int up = 1, down = 1;
            for (int64_t j = 1; j < len; ++j) {
                up &= key[j] >= key[j - 1];
                down &= key[j] <= key[j - 1];
            }
            in_order += up | down;
        }
        if (ties) {
            /* the k + 1 best keys, as the kernels take them (an equal key
             * enters only while the list is short): a tie among them is
             * what sends a row to the emulation */
            uint64_t best[TK_PROBE_MAX_LEN];
            int64_t n = 0;
            const uint64_t flip = largest ? ~(uint64_t)0 : 0; /* best = smallest */
            for (int64_t i = 0; i < len; ++i) {
                const uint64_t v = key[i] ^ flip;
                int64_t j;
                if (n <= k) j = n++;
                else if (v < best[k]) j = k;
                else continue;
                for (; j > 0 && best[j - 1] > v; --j) best[j] = best[j - 1];
                best[j] = v;
            }
            int tie = 0;
            for (int64_t j = 1; j < n; ++j) tie |= best[j] == best[j - 1];
            tied += tie;
        }
    }
    /* k = 1: a row's tie costs the emulation ~15x a tie-free row; k >= 2: ~4x */
    const int tie_share = k == 1 ? 8 : 4;
    return (ties && tie_share * tied >= rows) || (order && 4 * in_order >= 3 * rows);
}

/* impl_topk behind kwk_topk (the kernel table): the probe above first for
 * KWK_ORDER_TORCH_PROBE, which is otherwise KWK_ORDER_TORCH.  (Kwker's own
 * layers call impl_topk, which never defers.) */
static int impl_topk_probed(int dtype, const void *src, int64_t outer, int64_t len,
                            int64_t inner, int64_t src_so, int64_t src_sl,
                            int64_t src_si, int64_t k, void *values, int64_t *indices,
                            int64_t dst_so, int64_t dst_sl, int64_t dst_si,
                            int largest, int sorted, int order)
{
    if (order == KWK_ORDER_TORCH_PROBE) {
        if (inner == 1 && outer >= TK_PROBE_MIN_ROWS && len >= 2 && len <= TK_PROBE_MAX_LEN &&
            k > 0 &&
            tk_probe_prefers_torch(dtype, (const char *)src, len, src_so, src_sl, k, largest,
                                   sorted))
            return KWK_DEFER;
        order = KWK_ORDER_TORCH;
    }
    return impl_topk(dtype, src, outer, len, inner, src_so, src_sl, src_si, k, values, indices,
                     dst_so, dst_sl, dst_si, largest, sorted, order);
}

/* -------------------------------------------------------------- median */

/* Rank (0-based) of the lower median among n elements of which nnan are
 * NaN and ordered last.  C division truncates, so an all-NaN row gives 0 as
 * torch's does. */
static inline int64_t median_rank(int64_t n, int64_t nnan) { return (n - nnan - 1) / 2; }

/* torch's quiet NaN per float dtype (std::numeric_limits<T>::quiet_NaN()). */
static const uint64_t SK_QUIET_NAN[KWK_NUM_DTYPES] = {
    [KWK_FLOAT16] = 0x7E00u, [KWK_BFLOAT16] = 0x7FC0u,
    [KWK_FLOAT32] = 0x7FC00000u, [KWK_FLOAT64] = 0x7FF8000000000000ull};

/* The infinity's bits (sign clear) per float dtype: a NaN's magnitude bits
 * are above them. */
static const uint64_t SK_INF_BITS[KWK_NUM_DTYPES] = {
    [KWK_FLOAT16] = 0x7C00u, [KWK_BFLOAT16] = 0x7F80u,
    [KWK_FLOAT32] = 0x7F800000u, [KWK_FLOAT64] = 0x7FF0000000000000ull};

/* The index std::nth_element(first, first + nth, first + n) leaves at nth
 * when every element compares equivalent (index vector 0..n-1); -1 when
 * out of memory. */
static int64_t sk_all_equal_nth(int64_t n, int64_t nth)
{
    kwk_kv *kv = (kwk_kv *)malloc((size_t)n * sizeof(kwk_kv));
    if (!kv) return -1;
    for (int64_t j = 0; j < n; ++j) {
        kv[j].key = 0;
        kv[j].idx = j;
    }
    emu_nth_element(kv, nth, n);
    int64_t idx = kv[nth].idx;
    free(kv);
    return idx;
}

/* Rows longer than this are read block by block (no key array); median's
 * rows of 32/64-bit keys from SK_PICK_MIN (kth_pick.h: AMD Zen 4, float32
 * 1x65536 47 -> 38 us, 8x40000 216 -> 186, int32 1x65536 41 -> 23; with
 * kth_pick's 64-bit pass vectorised, float64 1x65536 90 -> 62, 8x40000
 * 402 -> 296, int64 1x65536 77 -> 35; from 8192, rows of 64x8200 lost
 * 0.71x). */
enum { SW_SRC_MIN = 1 << 16 };
enum { SK_PICK_MIN = 1 << 15 };
/* median(dim) of contiguous 32-bit rows from here, where kth_pick reads
 * them in place (AVX-512; see KTH_RANK_MAX32): AMD Zen 4, 16 rows, us:
 * float32 8200 98.3 -> 93.6, 12000 135.9 -> 124.7, 20000 214.5 -> 203.4;
 * ReLU outputs (half +0.0) 95.3 -> 74.8, 134.1 -> 103.4, 205.6 -> 163.4.
 * median() keeps SK_PICK_MIN: its ReLU row of 20000 measured 16.5 -> 25.4
 * (the NaN, zero-sign and index scans on top of the bracket's pass), and
 * strided rows (gathered in blocks) lost (dim 0 of 8200x16 0.69x). */
#if defined(__AVX512F__)
enum { SK_PICK_MIN32 = 8192 };
#else
enum { SK_PICK_MIN32 = SK_PICK_MIN };
#endif

/* The median index of a 64-bit row of up to 8 on AVX-512 from the row's
 * stable ranks in one vector (kwk_ranks8_u64), where gathering the keys,
 * scanning for NaN and selecting by rank cost ~35 ns a row whatever its
 * length (AMD Zen 4, 4096 rows of 2..6: 150-169 us against torch's 72-143);
 * -1 for an all-NaN row of nanmedian (the general path's rule). */
#if defined(__AVX512F__)
#define SK_MEDIAN8 1
static int64_t sk_median8(int dtype, const char *row, int64_t step, int64_t len, int ignore_nan)
{
    __m512i raw;
    int tied;
    const __m512i key = kwk_keys8_row64(dtype, row, step, len, 0, &raw);
    const unsigned nan = KWK_DTYPES[dtype].is_float
        ? (unsigned)(_mm512_cmpeq_epi64_mask(key, _mm512_set1_epi64(-1)) & ((1u << len) - 1)) : 0u;
    if (nan && !ignore_nan) return __builtin_ctz(nan); /* the first NaN */
    const int64_t nnan = __builtin_popcount(nan);
    if (nnan == len) return -1;
    const __m512i r = kwk_ranks8_u64(key, len, &tied);
    return __builtin_ctz(_mm512_cmpeq_epi64_mask(r, _mm512_set1_epi64(median_rank(len, nnan))));
}
#else
#define SK_MEDIAN8 0
static int64_t sk_median8(int dtype, const char *row, int64_t step, int64_t len, int ignore_nan)
{
    (void)dtype, (void)row, (void)step, (void)len, (void)ignore_nan;
    return -1;
}
#endif

/* sk_nan_scan_src of contiguous float32 on the raw bits, sixteen at a
 * time, where the block gather stored every key and scanned it again (AMD
 * Zen 4: median of 3145728 floats 1418 -> 1244 us, of 8x50000 225 -> 205,
 * nanmedian of 4x60000 with 10% NaN 157 -> 124). */
#if defined(__AVX512F__)
#define SK_RAW_NAN_SCAN(g, step, es) ((es) == 4 && (step) == 4 && (void *)(g) == (void *)sw_gather_f32)
static int64_t sk_nan_scan_f32_raw(const char *row, int64_t n, int64_t *count)
{
    const __m512i abs = _mm512_set1_epi32(0x7FFFFFFF), inf = _mm512_set1_epi32(0x7F800000);
    int64_t first = -1, total = 0;
    for (int64_t j = 0; j < n; j += 16) {
        const __mmask16 live = n - j >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - j)) - 1u);
        const __m512i b = kwk_loadz_epi32(live, row + 4 * j, row + 4 * n);
        const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(b, abs), inf);
        if (!nan) continue;
        if (first < 0) {
            first = j + __builtin_ctz((unsigned)nan);
            if (!count) return first;
        }
        total += __builtin_popcount((unsigned)nan);
    }
    if (count) *count = total;
    return first;
}
#else
#define SK_RAW_NAN_SCAN(g, step, es) 0
#define sk_nan_scan_f32_raw(row, n, count) (-1)
#endif

/* The scratch of a median call: rows of at most the long-row length are
 * gathered whole into key and ranked with s; longer ones are read through
 * their gather function (kth_pick.h's ks; s only if its sample misses,
 * have_s then set). */
typedef struct {
    void *key;
    sw_rank_scratch s;
    int have_s;
    kth_scratch ks;
} sk_scratch;

static int sk_scratch_init(sk_scratch *sc, int64_t len, int long_rows, int es)
{
    const kth_scratch none = {NULL, NULL, NULL, {0, 0, 0}, 0, es};
    sc->key = NULL;
    sc->have_s = 0;
    sc->ks = none;
    if (long_rows) return KWK_OK;
    sc->key = malloc((size_t)(len > 0 ? len : 1) * (size_t)es);
    const int status = sw_rank_scratch_init(&sc->s, len);
    sc->have_s = 1;
    return sc->key ? status : KWK_E_NOMEM;
}

static void sk_scratch_free(sk_scratch *sc)
{
    free(sc->key);
    if (sc->have_s) sw_rank_scratch_free(&sc->s);
    kth_scratch_free(&sc->ks);
}

/* Per key width: median over rows, and over one strided run. */
#define SK_DEFINE_MEDIAN(UT, SUF)                                             \
    /* NaN statistics of key[0..n): the first NaN's index (or -1) and the     \
     * NaN count (only when count != NULL). */                                \
    static int64_t sk_nan_scan_##SUF(const UT *key, int64_t n, int64_t *count) \
    {                                                                         \
        const UT nan_key = (UT)~(UT)0;                                        \
        int any = 0;                                                          \
        for (int64_t j = 0; j < n; ++j) any |= key[j] == nan_key;             \
        if (!any) { if (count) *count = 0; return -1; }                       \
        int64_t first = 0;                                                    \
        while (key[first] != nan_key) ++first;                                \
        if (count) {                                                          \
            int64_t c = 0;                                                    \
            for (int64_t j = first; j < n; ++j) c += key[j] == nan_key;       \
            *count = c;                                                       \
        }                                                                     \
        return first;                                                         \
    }                                                                         \
                                                                              \
    /* Whether the row's zeros (nan = 0) or NaNs (nan = 1) all have the bits \
     * of element idx, one of them: then the value nth_element leaves at the \
     * median's place has those bits whichever zero or NaN it is, and need   \
     * not be emulated (a median of ReLU outputs, half of them +0.0: 3145728 \
     * float32 66 ms, twice torch's time, -> 5.5 ms with kth_pick.h's         \
     * shortcuts for a rank among equal keys).  Branch-free on the raw bits. */ \
    static int sk_one_pattern_##SUF(const char *row, int64_t step, int64_t n, int64_t idx, \
                                    int nan, UT inf)                          \
    {                                                                         \
        const UT sign = (UT)((UT)1 << (8 * sizeof(UT) - 1));                  \
        UT want;                                                              \
        memcpy(&want, row + idx * step, sizeof(UT));                          \
        UT differ = 0;                                                        \
        /* a constant stride for contiguous rows, so the loop vectorises */   \
        if (step == (int64_t)sizeof(UT)) {                                    \
            for (int64_t j = 0; j < n; ++j) {                                 \
                UT b;                                                         \
                memcpy(&b, row + j * (int64_t)sizeof(UT), sizeof(UT));        \
                const UT a = (UT)(b & (UT)~sign);                             \
                differ |= (UT)((UT)(nan ? a > inf : a == 0) & (UT)(b != want)); \
            }                                                                 \
        } else {                                                              \
            for (int64_t j = 0; j < n; ++j) {                                 \
                UT b;                                                         \
                memcpy(&b, row + j * step, sizeof(UT));                       \
                const UT a = (UT)(b & (UT)~sign);                             \
                differ |= (UT)((UT)(nan ? a > inf : a == 0) & (UT)(b != want)); \
            }                                                                 \
        }                                                                     \
        return !differ;                                                       \
    }                                                                         \
                                                                              \
    /* sk_nan_scan over a row read block by block. */                       \
    static int64_t sk_nan_scan_src_##SUF(sw_gather_fn_##SUF g, const char *row, int64_t step, \
                                         int64_t n, int64_t *count)           \
    {                                                                         \
        if (SK_RAW_NAN_SCAN(g, step, sizeof(UT))) return sk_nan_scan_f32_raw(row, n, count); \
        UT buf[SW_SRC_BLOCK];                                                 \
        int64_t first = -1, total = 0;                                        \
        for (int64_t j0 = 0; j0 < n; j0 += SW_SRC_BLOCK) {                    \
            const int64_t b = n - j0 < SW_SRC_BLOCK ? n - j0 : SW_SRC_BLOCK;  \
            g(row + j0 * step, step, b, (UT)0, buf);                          \
            int64_t c = 0;                                                    \
            const int64_t f = sk_nan_scan_##SUF(buf, b, &c);                  \
            if (f >= 0 && first < 0) {                                        \
                first = j0 + f;                                               \
                if (!count) return first;                                     \
            }                                                                 \
            total += c;                                                       \
        }                                                                     \
        if (count) *count = total;                                            \
        return first;                                                         \
    }                                                                         \
                                                                              \
    /* The index at stable rank r of a long row read through g; -1: no      \
     * memory.  32/64-bit keys by kth_pick.h (its bracket keeps 32-bit        \
     * indices and a scratch sized for its survivors, and selects among them  \
     * by radix; AMD Zen 4, torch.median of 3145728 float32: 2163 -> 1580 us), \
     * s (initialised by the first call that needs it: *have_s) when its      \
     * sample misses; narrower keys by sw_rank_src. */                        \
    static int64_t sk_rank_long_##SUF(sw_gather_fn_##SUF g, const char *row, int64_t step, \
                                      int64_t len, int64_t r, sw_rank_scratch *s, \
                                      int *have_s, kth_scratch *ks)           \
    {                                                                         \
        if (sizeof(UT) >= 4 && len <= (int64_t)UINT32_MAX) {                  \
            kth_pick p;                                                       \
            int64_t idx = -1;                                                 \
            if (kth_pick_##SUF(g, row, step, len, r, ks, s, have_s, &p, &idx) != KWK_OK) \
                return -1;                                                    \
            return idx;                                                       \
        }                                                                     \
        if (!*have_s) {                                                       \
            /* set first: a part-made scratch is freed too */                \
            *have_s = 1;                                                      \
            if (sw_rank_scratch_init(s, len) != KWK_OK) return -1;            \
        }                                                                     \
        return sw_rank_src_##SUF(g, row, step, len, r, s);                    \
    }                                                                         \
                                                                              \
    /* Index of the median of a row (nnan NaNs, ignore_nan); -1: no memory.  \
     * key: the row's keys (s initialised), or NULL to read long rows        \
     * through g (sk_rank_long). */                                           \
    static int64_t sk_median_index_##SUF(sw_gather_fn_##SUF g, const char *row, int64_t step, \
                                         const UT *key, int64_t len, int64_t nnan, \
                                         sw_rank_scratch *s, int *have_s, kth_scratch *ks) \
    {                                                                         \
        if (nnan == len) {                                                    \
            /* nanmedian of an all-NaN row: torch's comparator finds NaNs    \
             * all equivalent, so nth_element's moves decide */               \
            return sk_all_equal_nth(len, 0);                                  \
        }                                                                     \
        const int64_t r = median_rank(len, nnan);                             \
        return key ? sw_rank_##SUF(key, len, r, s)                            \
                   : sk_rank_long_##SUF(g, row, step, len, r, s, have_s, ks); \
    }                                                                         \
                                                                              \
    static int sk_median_dim_##SUF(sw_gather_fn_##SUF g, int dtype, const void *src, \
                                   int64_t outer, int64_t len, int64_t inner, \
                                   int64_t src_so, int64_t src_sl, int64_t src_si, \
                                   void *values, int64_t *indices, int64_t dst_so, \
                                   int64_t dst_si, int ignore_nan)            \
    {                                                                         \
        const int es = (int)sizeof(UT);                                       \
        const int is_float = KWK_DTYPES[dtype].is_float;                      \
        /* (contiguous 32-bit rows from SK_PICK_MIN32: the in-place pass) */ \
        const int64_t long_min = sizeof(UT) < 4 ? SW_SRC_MIN                  \
                                 : sizeof(UT) == 4 && src_sl == 1 ? SK_PICK_MIN32 : SK_PICK_MIN; \
        const int long_rows = len > long_min;                                 \
        sk_scratch sc;                                                        \
        int status = sk_scratch_init(&sc, len, long_rows, es);                \
        UT *const key = (UT *)sc.key;                                         \
        for (int64_t o = 0; status == KWK_OK && o < outer; ++o) {             \
            for (int64_t i = 0; i < inner; ++i) {                             \
                out_row out = {                                               \
                    (const char *)src + (o * src_so + i * src_si) * es, src_sl * es, \
                    values ? (char *)values + (o * dst_so + i * dst_si) * es : NULL, \
                    indices ? indices + o * dst_so + i * dst_si : NULL, 0, es, 0}; \
                if (es == 8 && len <= 8 && SK_MEDIAN8) {                      \
                    const int64_t at = sk_median8(dtype, out.row, out.step, len, ignore_nan); \
                    if (at >= 0) {                                            \
                        emit(&out, 0, at);                                    \
                        continue;                                             \
                    }                                                         \
                }                                                             \
                if (key) g(out.row, out.step, len, (UT)0, key);               \
                int64_t nnan = 0;                                             \
                if (is_float) {                                               \
                    int64_t *cnt = ignore_nan ? &nnan : NULL;                 \
                    int64_t first = key ? sk_nan_scan_##SUF(key, len, cnt)    \
                                        : sk_nan_scan_src_##SUF(g, out.row, out.step, len, cnt); \
                    if (first >= 0 && !ignore_nan) {                          \
                        emit(&out, 0, first);                                 \
                        continue;                                             \
                    }                                                         \
                }                                                             \
                int64_t idx = sk_median_index_##SUF(g, out.row, out.step, key, len, nnan, \
                                                    &sc.s, &sc.have_s, &sc.ks); \
                if (idx < 0) { status = KWK_E_NOMEM; break; }                 \
                emit(&out, 0, idx);                                           \
            }                                                                 \
        }                                                                     \
        sk_scratch_free(&sc);                                                 \
        return status;                                                        \
    }                                                                         \
                                                                              \
    /* torch.median() without dim: the value only, chosen by std::nth_element \
     * on the values.  Equal keys with different bits (+0.0/-0.0, NaN        \
     * payloads) are the only way that choice shows, so only then is         \
     * nth_element emulated. */                                               \
    static int sk_median_all_##SUF(sw_gather_fn_##SUF g, int dtype, const void *src, \
                                   int64_t n, int64_t stride, void *value, int ignore_nan) \
    {                                                                         \
        const int es = (int)sizeof(UT);                                       \
        const int is_float = KWK_DTYPES[dtype].is_float;                      \
        const char *base = (const char *)src;                                 \
        const UT nan_key = (UT)~(UT)0;                                        \
        const int64_t step = stride * es;                                     \
        const int long_rows = n > (sizeof(UT) >= 4 ? SK_PICK_MIN : SW_SRC_MIN); \
        sk_scratch sc;                                                        \
        int status = sk_scratch_init(&sc, n, long_rows, es);                  \
        UT *const key = (UT *)sc.key;                                         \
        if (status != KWK_OK) goto done;                                      \
        if (key) g(base, step, n, (UT)0, key);                                \
        int64_t nnan = 0;                                                     \
        if (is_float) {                                                       \
            int64_t *cnt = ignore_nan ? &nnan : NULL;                         \
            int64_t first = key ? sk_nan_scan_##SUF(key, n, cnt) : sk_nan_scan_src_##SUF(g, base, step, n, cnt); \
            if (first >= 0 && !ignore_nan) {                                  \
                store_bits(value, SK_QUIET_NAN[dtype], es);                   \
                goto done;                                                    \
            }                                                                 \
        }                                                                     \
        const int64_t r = median_rank(n, nnan);                               \
        int64_t idx = key ? sw_rank_##SUF(key, n, r, &sc.s)                   \
                          : sk_rank_long_##SUF(g, base, step, n, r, &sc.s, &sc.have_s, &sc.ks); \
        if (idx < 0) { status = KWK_E_NOMEM; goto done; }                     \
        UT zero_bits = 0, zero_key, idx_key;                                  \
        g((const char *)&zero_bits, es, 1, (UT)0, &zero_key);                 \
        g(base + idx * step, es, 1, (UT)0, &idx_key);                         \
        if (is_float && (idx_key == zero_key || idx_key == nan_key) &&        \
            !sk_one_pattern_##SUF(base, step, n, idx, idx_key == nan_key,     \
                                  (UT)SK_INF_BITS[dtype])) {                  \
            /* several bit patterns share this key: emulate nth_element */    \
            kwk_kv *kv = (kwk_kv *)malloc((size_t)n * sizeof(kwk_kv));        \
            if (!kv) { status = KWK_E_NOMEM; goto done; }                     \
            for (int64_t j = 0; j < n; ++j) {                                 \
                UT kj;                                                        \
                if (key) kj = key[j];                                         \
                else g(base + j * step, es, 1, (UT)0, &kj);                   \
                kv[j].key = kj;                                               \
                kv[j].idx = j;                                                \
            }                                                                 \
            emu_nth_element(kv, r, n);                                        \
            idx = kv[r].idx;                                                  \
            free(kv);                                                         \
        }                                                                     \
        kwk_copy_elem((char *)value, base + idx * stride * es, es);           \
    done:                                                                     \
        sk_scratch_free(&sc);                                                 \
        return status;                                                        \
    }

SK_DEFINE_MEDIAN(uint8_t, u8)
SK_DEFINE_MEDIAN(uint16_t, u16)
SK_DEFINE_MEDIAN(uint32_t, u32)
SK_DEFINE_MEDIAN(uint64_t, u64)

/* The gather function and key width of each dtype, for a call F(gather, ...). */
#define SK_BY_DTYPE(F, ...)                                                   \
    switch (dtype) {                                                          \
    case KWK_BOOL: return F##_u8(sw_gather_bool, __VA_ARGS__);                \
    case KWK_UINT8: return F##_u8(sw_gather_u8, __VA_ARGS__);                 \
    case KWK_INT8: return F##_u8(sw_gather_i8, __VA_ARGS__);                  \
    case KWK_UINT16: return F##_u16(sw_gather_u16, __VA_ARGS__);              \
    case KWK_INT16: return F##_u16(sw_gather_i16, __VA_ARGS__);               \
    case KWK_FLOAT16: return F##_u16(sw_gather_f16, __VA_ARGS__);             \
    case KWK_BFLOAT16: return F##_u16(sw_gather_bf16, __VA_ARGS__);           \
    case KWK_UINT32: return F##_u32(sw_gather_u32, __VA_ARGS__);              \
    case KWK_INT32: return F##_u32(sw_gather_i32, __VA_ARGS__);               \
    case KWK_FLOAT32: return F##_u32(sw_gather_f32, __VA_ARGS__);             \
    case KWK_UINT64: return F##_u64(sw_gather_u64, __VA_ARGS__);              \
    case KWK_INT64: return F##_u64(sw_gather_i64, __VA_ARGS__);               \
    case KWK_FLOAT64: return F##_u64(sw_gather_f64, __VA_ARGS__);             \
    default: return KWK_E_DTYPE;                                              \
    }

static int impl_median_dim(int dtype, const void *src, int64_t outer,
                           int64_t len, int64_t inner, int64_t src_so,
                           int64_t src_sl, int64_t src_si, void *values,
                           int64_t *indices, int64_t dst_so, int64_t dst_si,
                           int ignore_nan)
{
    if (len <= 0 || outer == 0 || inner == 0) return KWK_OK;
    SK_BY_DTYPE(sk_median_dim, dtype, src, outer, len, inner, src_so, src_sl, src_si,
                values, indices, dst_so, dst_si, ignore_nan)
}

static int impl_median_all(int dtype, const void *src, int64_t n,
                           int64_t stride, void *value, int ignore_nan)
{
    if (n <= 0) return KWK_E_ARG;
    SK_BY_DTYPE(sk_median_all, dtype, src, n, stride, value, ignore_nan)
}

#endif
