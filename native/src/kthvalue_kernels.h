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
#include "select_kernels.h"
#include "quantile_kernels.h"
#include "batch_median.h"

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

/* emu_torch_quickselect on words key << ibits | index (m: the index bits),
 * each partition by wemu_unguarded_partition: the same swaps as torch's
 * Hoare loop (its stops are libstdc++'s __unguarded_partition's: left at
 * key >= pivot, right at key <= pivot, from lo + 2 and hi - 1, with a[hi]
 * and a[lo + 1] as sentinels), found a block at a time without branches on
 * the data.  The loops differ only where both scans stop on one slot (a
 * key equal to the pivot's): torch swaps it with itself and scans on, so
 * its i is one past libstdc++'s cut (the next slot was passed by the right
 * scan or is the sentinel); otherwise i is the cut, and j is always cut - 1.
 * (The words' keys and index bits: kth_torch_rank.) */
static void emu_torch_quickselect_words(uint64_t *a, int64_t n, int64_t k, uint64_t m)
{
#define WGT(x, y) (((x) & ~m) > ((y) & ~m))
    int64_t lo = 0, hi = n - 1;
    for (;;) {
        if (hi <= lo) return;
        if (hi == lo + 1) {
            if (WGT(a[lo], a[hi])) w_swap(&a[lo], &a[hi]);
            return;
        }
        const int64_t mid = (lo + hi) >> 1;
        w_swap(&a[mid], &a[lo + 1]);
        if (WGT(a[lo + 1], a[hi])) w_swap(&a[lo + 1], &a[hi]);
        if (WGT(a[lo], a[hi])) w_swap(&a[lo], &a[hi]);
        if (WGT(a[lo + 1], a[lo])) w_swap(&a[lo + 1], &a[lo]);
        int met;
        const int64_t cut = wemu_unguarded_partition(a + lo + 2, a + hi, a[lo], m, &met) - a;
        const int64_t i = cut + met, j = cut - 1;
        w_swap(&a[lo], &a[j]);
        if (j <= k) lo = i;
        if (j >= k) hi = j - 1;
    }
#undef WGT
}

/* The index torch's quickselect leaves at rank of a row: on words where the
 * keys (64-bit ones as offsets from the row's least) leave room for the
 * index, else on records.  kv: len records of scratch (8 bytes each would
 * do for words).  A/B (us, 64x4096 rows, k = n / 10, tied k-th values):
 * bfloat16 2198 -> 858, float16 987 -> 500, float32 of rounded values
 * (k = n / 2) 2356 -> 735; int32 of +-50 16x65536 9171 -> 2694. */
static void kth_torch_rank(int dtype, const char *row, int64_t step, int64_t len, int64_t rank,
                           kwk_kv *kv, int64_t *idx)
{
    const int ibits = len > 1 ? kwk_bits_for((uint64_t)(len - 1)) : 1;
    /* the keys first, in the words' room (kwk_gather_keys: one loop per
     * dtype and step, vectorised where contiguous; a key at a time through
     * kwk_key_at's switch was 29% of a bfloat16 call) */
    uint64_t *w = (uint64_t *)(void *)kv;
    uint64_t kmin, kmax;
    kwk_gather_keys(dtype, row, len, step, 0, w, &kmin, &kmax);
    uint64_t lo = 0;
    int fits = KWK_DTYPES[dtype].key_bits + ibits <= 64;
    if (!fits && len > 0) { /* 64-bit keys: as offsets from the row's least, if they fit */
        lo = kmin;
        fits = kwk_bits_for(kmax - kmin) + ibits <= 64;
    }
    if (fits) {
        const uint64_t m = ((uint64_t)1 << ibits) - 1;
        for (int64_t j = 0; j < len; ++j) w[j] = (w[j] - lo) << ibits | (uint64_t)j;
        emu_torch_quickselect_words(w, len, rank, m);
        *idx = (int64_t)(w[rank] & m);
        return;
    }
    /* records over the same memory: from the last, so that record j
     * (words 2j and 2j + 1) overwrites only keys already taken */
    for (int64_t j = len - 1; j >= 0; --j) {
        const uint64_t key = w[j];
        kv[j].key = key;
        kv[j].idx = j;
    }
    emu_torch_quickselect(kv, len, rank);
    *idx = kv[rank].idx;
}

/* torch's index for a row whose k-th key is shared (KWK_ORDER_TORCH): its
 * quickselect re-run on (key, index) records.  (Short rows' records on the
 * stack: tie-heavy batches redo every row.) */
static __attribute__((unused)) int kth_torch_index(int dtype, const char *row, int64_t step,
                                                   int64_t len, int64_t rank, int64_t *idx)
{
    kwk_kv small[64];
    kwk_kv *kv = len <= 64 ? small : (kwk_kv *)malloc((size_t)len * sizeof(kwk_kv));
    if (!kv) return KWK_E_NOMEM;
    kth_torch_rank(dtype, row, step, len, rank, kv, idx);
    if (kv != small) free(kv);
    return KWK_OK;
}

#if defined(KWK_HAVE_BATCH_SORT)
/* Batches of short rows (batch_median.h's selection network, at rank k - 1
 * instead of the median's): the key at that rank, its index the (r -
 * #smaller)-th key equal to it, and how many keys equal it.  Only a row
 * whose k-th key is shared, in torch order, is redone by torch's
 * quickselect.  NaN keys are the largest (torch's gt_or_nan) and equal to
 * each other, so they need nothing of their own.  Keys of at most 32 bits
 * (64-bit rows take kth_rank below).  Why: a row of 8 cost ~65 ns one by
 * one (packing, a word select), about torch's own time; measured
 * (AVX-512, float32, under install(use_fast=True), us): 4096x8 k=1 261 ->
 * 44, 4096x9 k=5 361 -> 59, 4096x64 k=6 2505 -> 194; AVX2 4096x8 166 -> 39,
 * 4096x64 1980 -> 263. */
static int kth_batch_applies(int dtype, int64_t len, int64_t rows)
{
    return KWK_DTYPES[dtype].key_bits <= 32 && len >= 2 && len <= KWK_BATCH_MEDIAN_MAX &&
           rows >= KWK_BATCH_LANES;
}

/* Writes rows' answers: lane l's index at[l], redone in torch order when
 * same[l] > 1. */
static int kth_batch_emit(int dtype, const kwk_batch_src *b, const int64_t *dst, int64_t len,
                          int64_t rank, const int32_t *at, const int32_t *same, int order,
                          char *values, int64_t *indices)
{
    const int es = KWK_DTYPES[dtype].elem_size;
    for (int l = 0; l < KWK_BATCH_LANES; ++l) {
        int64_t idx = at[l];
        if (order == KWK_ORDER_TORCH && same[l] > 1) {
            const int status = kth_torch_index(dtype, b->row[l], b->step, len, rank, &idx);
            if (status != KWK_OK) return status;
        }
        if (values) kwk_copy_elem(values + dst[l] * es, b->row[l] + idx * b->step, es);
        if (indices) indices[dst[l]] = idx;
    }
    return KWK_OK;
}

static int kth_batch_dim(int dtype, const void *src, int64_t outer, int64_t len, int64_t inner,
                         int64_t src_so, int64_t src_sl, int64_t src_si, int64_t k,
                         void *values, int64_t *indices, int64_t dst_so, int64_t dst_si,
                         int order)
{
    const int64_t rows = outer * inner, rank = k - 1, es = KWK_DTYPES[dtype].elem_size;
    kwk_net_pair *sel = (kwk_net_pair *)malloc(BM_MAX_PAIRS * sizeof(kwk_net_pair));
    kwk_batch_slot *slots = (kwk_batch_slot *)aligned_alloc(32, 2 * (size_t)len * sizeof(kwk_batch_slot));
    if (!sel || !slots) {
        free(sel);
        free(slots);
        return KWK_E_NOMEM;
    }
    const int nsel = bm_select_pairs((int)len, (int)rank, sel);
    int status = KWK_OK;
    int64_t r0 = 0;
    kwk_batch_src b[2];
    int64_t dst[2 * KWK_BATCH_LANES];
    int32_t at[16], same[16];
#if defined(KWK_HAVE_BATCH16)
    /* sixteen rows a selection: two batches side by side */
    for (; status == KWK_OK && r0 + 2 * KWK_BATCH_LANES <= rows; r0 += 2 * KWK_BATCH_LANES) {
        for (int h = 0; h < 2; ++h) {
            bm_batch_src((const char *)src, es, inner, src_so, src_sl, src_si, dst_so, dst_si,
                         r0 + h * KWK_BATCH_LANES, &b[h], dst + h * KWK_BATCH_LANES);
            batch_load(dtype, &b[h], len, 0, slots + h * len);
        }
        bm_select16_body(slots, slots + len, len, rank, 0, 0, sel, nsel, at, same);
        for (int h = 0; status == KWK_OK && h < 2; ++h)
            status = kth_batch_emit(dtype, &b[h], dst + h * KWK_BATCH_LANES, len, rank,
                                    at + h * KWK_BATCH_LANES, same + h * KWK_BATCH_LANES, order,
                                    (char *)values, indices);
    }
#endif
    for (; status == KWK_OK && r0 < rows; r0 += KWK_BATCH_LANES) {
        /* the last batch ends at the last row (its rows written twice, the same) */
        const int64_t start = r0 + KWK_BATCH_LANES <= rows ? r0 : rows - KWK_BATCH_LANES;
        bm_batch_src((const char *)src, es, inner, src_so, src_sl, src_si, dst_so, dst_si, start,
                     &b[0], dst);
        batch_load(dtype, &b[0], len, 0, slots);
        bm_select8_body(slots, len, rank, 0, 0, sel, nsel, at, same);
        status = kth_batch_emit(dtype, &b[0], dst, len, rank, at, same, order, (char *)values,
                                indices);
    }
    free(sel);
    free(slots);
    return status;
}
#endif

/* Short rows: pack the row as words (or records) and select on them. */
static int kth_short(int dtype, const void *src, int64_t outer, int64_t len,
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
                    kth_torch_rank(dtype, out.row, out.step, len, rank, ws.kv, &idx);
                }
            }
            emit(&out, 0, idx);
        }
    }
    workspace_free(&ws);
    return status;
}

/* ------------------------------------------------------- long rows
 *
 * Rows of at least KTH_LONG_MIN elements (below it, packing the row costs
 * less than the sample and the bracket scratch) are answered in three steps, none
 * of which sorts or copies the row:
 *  1. the key v at stable rank k-1, with how many keys equal it (count) and
 *     which of them, in index order, sits at that rank (occ).  32/64-bit
 *     keys: kth_pick.h (a sample brackets the rank, one pass counts the
 *     keys below the bracket and compresses those inside it - a second
 *     pass if the sample misjudged the rank - and a radix select among the
 *     survivors, a few percent of the row, gives the rank); 8/16-bit keys:
 *     a 256-bin histogram of the high byte, then one of the low byte
 *     inside the chosen bucket.
 *  2. count == 1 (the usual case) or stable order: the index is that of the
 *     occ-th key equal to v, found by a scan that stops there.
 *  3. count > 1 with KWK_ORDER_TORCH: the index depends on torch's
 *     quickselect, so the whole row is re-run through emu_torch_quickselect
 *     (only rows whose k-th value is shared pay for it).
 */
enum { KTH_LONG_MIN = 128 };

/* Step 1, kth_pick_*: kth_pick.h (median's long rows use it too). */


/* The row loop for long rows. */
#define KTH_DEFINE_LONG(UT, SUF)                                              \
    static int kth_long_##SUF(sw_gather_fn_##SUF g, int dtype, const void *src, \
                              int64_t outer, int64_t len, int64_t inner,      \
                              int64_t src_so, int64_t src_sl, int64_t src_si, \
                              int64_t k, void *values, int64_t *indices,      \
                              int64_t dst_so, int64_t dst_si, int order)      \
    {                                                                         \
        const int es = (int)sizeof(UT);                                       \
        kth_scratch ks = {NULL, NULL, NULL, {0, 0, 0}, 0, es};                \
        kwk_kv *kv = NULL;                                                    \
        sw_rank_scratch s;                                                    \
        int have_s = 0, status = KWK_OK;                                      \
        for (int64_t o = 0; status == KWK_OK && o < outer; ++o) {             \
            for (int64_t i = 0; i < inner; ++i) {                             \
                out_row out = {                                               \
                    (const char *)src + (o * src_so + i * src_si) * es, src_sl * es, \
                    values ? (char *)values + (o * dst_so + i * dst_si) * es : NULL, \
                    indices ? indices + o * dst_so + i * dst_si : NULL, 0, es, 0}; \
                kth_pick p;                                                   \
                int64_t idx;                                                  \
                status = kth_pick_##SUF(g, out.row, out.step, len, k - 1, &ks, &s, \
                                        &have_s, &p, &idx);                   \
                if (status != KWK_OK) break;                                  \
                if (p.count > 1 && order == KWK_ORDER_TORCH) {                \
                    if (!kv) kv = (kwk_kv *)malloc((size_t)len * sizeof(kwk_kv)); \
                    if (!kv) { status = KWK_E_NOMEM; break; }                 \
                    kth_torch_rank(dtype, out.row, out.step, len, k - 1, kv, &idx); \
                } else if (idx < 0) {                                         \
                    idx = kth_find_##SUF(g, out.row, out.step, len, (UT)p.key, p.occ); \
                }                                                             \
                emit(&out, 0, idx);                                           \
            }                                                                 \
        }                                                                     \
        kth_scratch_free(&ks);                                                \
        free(kv);                                                             \
        if (have_s) sw_rank_scratch_free(&s);                                 \
        return status;                                                        \
    }

KTH_DEFINE_LONG(uint8_t, u8)
KTH_DEFINE_LONG(uint16_t, u16)
KTH_DEFINE_LONG(uint32_t, u32)
KTH_DEFINE_LONG(uint64_t, u64)

/* ------------------------------------------------ rows by stable rank
 *
 * Rows of 32- and 64-bit keys up to KTH_RANK_MAX elements: the row's keys
 * gathered once, the index at stable rank k - 1 by select_words.h's sw_rank
 * (the vector quicksort's partitions where one is compiled, as median
 * does), then - in torch order - the keys equal to its key counted; a
 * shared k-th key sends the row to torch's quickselect.  The sample bracket
 * of the long rows costs a sample sort and a compress pass whatever the
 * row, and packing rows of 65..127 as words cost about torch's time.
 * Measured (torch.kthvalue(x, n // 4) of randn * 1000 under
 * install(use_fast=True), us, min of 3 alternating runs, before -> after;
 * rows of 2..64 in the batch above): AVX-512 float32 100x1000 191 -> 83,
 * 64x2048 172 -> 88, 32x4096 127 -> 76, 16x8192 99 -> 85, 8x16384 82 -> 83
 * (so the bound), float64 100x1000 231 -> 129, 16x8192 153 -> 161; int64
 * rows of 8 (the batch's 32-bit offsets do not fit) 0.43x -> 3.0x torch;
 * AVX2 float32 256x128 249 -> 51, 100x1000 200 -> 94, 32x4096 134 -> 104,
 * float64 4096x16 784 -> 297.  Where no vector quicksort is compiled the
 * rows keep the bracket (portable: 0.78-1.77x, no gain). */
#if defined(__AVX512F__)
enum { KTH_RANK_MAX = 1 << 13 };
#else
enum { KTH_RANK_MAX = 1 << 12 };
#endif
/* Contiguous rows of 32-bit keys leave the rank path earlier, where
 * kth_pick reads them in place (AVX-512: float compares, keys equal to the bracket's low
 * end counted, not kept): AMD Zen 4, kthvalue at n / 4 (int32 n / 10),
 * rank path -> bracket, us: float32 32x4096 101.9 -> 101.7, int32 92.4 ->
 * 95.4, float32 24x6000 107.7 -> 100.1, int32 105.8 -> 94.2, float32
 * 16x8192 99.8 -> 84.6, int32 96.4 -> 82.0; ReLU rows 16x8192 1.13-1.14x. */
#if defined(__AVX512F__)
enum { KTH_RANK_MAX32 = 5000 };
#else
enum { KTH_RANK_MAX32 = KTH_RANK_MAX };
#endif

/* 64-bit rows of up to 8 on AVX-512: the stable ranks of the row's keys in
 * one vector (kwk_ranks8_u64) instead of gathering them for sw_rank, whose
 * vector loads of keys just stored one by one stall (no store forwarding):
 * AMD Zen 4, 4096 rows of float64, k = 1, us: 8 wide 124 -> 73 (torch 112),
 * 2 wide 153 -> 41 (torch 25: rows of 2 go to torch, support.py). */
#if defined(KWK_HAVE_SIMD_QSORT) && defined(__AVX512F__)
#define KTH_RANK8_TAKES(es, len) ((es) == 8 && (len) <= 8)
/* the index at stable rank k - 1; *same: how many keys equal its key */
static int64_t kth_rank8(int dtype, const char *row, int64_t step, int64_t len, int64_t k,
                         int64_t *same)
{
    __m512i raw;
    int tied;
    const __m512i key = kwk_keys8_row64(dtype, row, step, len, 0, &raw);
    const __m512i r = kwk_ranks8_u64(key, len, &tied);
    const int64_t idx = __builtin_ctz(_mm512_cmpeq_epi64_mask(r, _mm512_set1_epi64(k - 1)));
    const __m512i v = _mm512_permutexvar_epi64(_mm512_set1_epi64(idx), key);
    *same = __builtin_popcount(_mm512_cmpeq_epi64_mask(key, v) & ((1u << len) - 1));
    return idx;
}
#elif defined(KWK_HAVE_SIMD_QSORT)
#define KTH_RANK8_TAKES(es, len) 0
static int64_t kth_rank8(int dtype, const char *row, int64_t step, int64_t len, int64_t k,
                         int64_t *same)
{
    (void)dtype, (void)row, (void)step, (void)len, (void)k, (void)same;
    return 0;
}
#endif

#if defined(KWK_HAVE_SIMD_QSORT)
#define KTH_DEFINE_RANK(UT, SUF)                                              \
    static int kth_rank_##SUF(sw_gather_fn_##SUF g, int dtype, const void *src, \
                              int64_t outer, int64_t len, int64_t inner,      \
                              int64_t src_so, int64_t src_sl, int64_t src_si, \
                              int64_t k, void *values, int64_t *indices,      \
                              int64_t dst_so, int64_t dst_si, int order)      \
    {                                                                         \
        const int es = (int)sizeof(UT);                                       \
        sw_rank_scratch s;                                                    \
        UT *key = (UT *)malloc((size_t)len * sizeof(UT));                     \
        int status = sw_rank_scratch_init(&s, len);                           \
        if (!key) status = KWK_E_NOMEM;                                       \
        for (int64_t o = 0; status == KWK_OK && o < outer; ++o) {             \
            for (int64_t i = 0; i < inner; ++i) {                             \
                out_row out = {                                               \
                    (const char *)src + (o * src_so + i * src_si) * es, src_sl * es, \
                    values ? (char *)values + (o * dst_so + i * dst_si) * es : NULL, \
                    indices ? indices + o * dst_so + i * dst_si : NULL, 0, es, 0}; \
                int64_t idx, same = 0;                                        \
                if (KTH_RANK8_TAKES(es, len)) {                               \
                    idx = kth_rank8(dtype, out.row, out.step, len, k, &same); \
                } else {                                                      \
                    g(out.row, out.step, len, (UT)0, key);                    \
                    idx = sw_rank_##SUF(key, len, k - 1, &s);                 \
                    if (idx < 0) { status = KWK_E_NOMEM; break; }             \
                    if (order == KWK_ORDER_TORCH) {                           \
                        const UT v = key[idx];                                \
                        for (int64_t j = 0; j < len; ++j) same += key[j] == v; \
                    }                                                         \
                }                                                             \
                if (order == KWK_ORDER_TORCH) {                               \
                    if (same > 1) {                                           \
                        status = kth_torch_index(dtype, out.row, out.step, len, k - 1, &idx); \
                        if (status != KWK_OK) break;                          \
                    }                                                         \
                }                                                             \
                emit(&out, 0, idx);                                           \
            }                                                                 \
        }                                                                     \
        free(key);                                                            \
        sw_rank_scratch_free(&s);                                             \
        return status;                                                        \
    }

KTH_DEFINE_RANK(uint8_t, u8)
KTH_DEFINE_RANK(uint16_t, u16)
KTH_DEFINE_RANK(uint32_t, u32)
KTH_DEFINE_RANK(uint64_t, u64)
#undef KTH_DEFINE_RANK
#endif

static int impl_kthvalue(int dtype, const void *src, int64_t outer, int64_t len,
                         int64_t inner, int64_t src_so, int64_t src_sl,
                         int64_t src_si, int64_t k, void *values, int64_t *indices,
                         int64_t dst_so, int64_t dst_si, int order)
{
#if defined(KWK_HAVE_BATCH_SORT)
    if (kth_batch_applies(dtype, len, outer * inner)) {
        const int status = kth_batch_dim(dtype, src, outer, len, inner, src_so, src_sl, src_si, k,
                                         values, indices, dst_so, dst_si, order);
        if (status != KWK_E_NOMEM) return status;
    }
#endif
#if defined(KWK_HAVE_SIMD_QSORT)
    if (KWK_DTYPES[dtype].key_bits >= 32 && len >= 2 &&
        len <= (KWK_DTYPES[dtype].key_bits == 32 && src_sl == 1 ? KTH_RANK_MAX32 : KTH_RANK_MAX) &&
        outer > 0 && inner > 0) {
        SK_BY_DTYPE(kth_rank, dtype, src, outer, len, inner, src_so, src_sl, src_si, k, values,
                    indices, dst_so, dst_si, order)
    }
#endif
    /* (survivor indices are 32-bit) */
    if (len >= KTH_LONG_MIN && len <= (int64_t)UINT32_MAX && outer > 0 && inner > 0) {
        SK_BY_DTYPE(kth_long, dtype, src, outer, len, inner, src_so, src_sl, src_si, k,
                    values, indices, dst_so, dst_si, order)
    }
    return kth_short(dtype, src, outer, len, inner, src_so, src_sl, src_si, k, values,
                     indices, dst_so, dst_si, order);
}

#endif
