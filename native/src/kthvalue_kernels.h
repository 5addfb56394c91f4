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
    uint64_t lo = 0;
    int fits = KWK_DTYPES[dtype].key_bits + ibits <= 64;
    if (!fits) { /* 64-bit keys: as offsets from the row's least, if they fit */
        uint64_t hi = 0;
        lo = ~(uint64_t)0;
        for (int64_t j = 0; j < len; ++j) {
            const uint64_t key = kwk_key_at(dtype, row + j * step);
            lo = key < lo ? key : lo;
            hi = key > hi ? key : hi;
        }
        fits = kwk_bits_for(hi - lo) + ibits <= 64;
    }
    if (fits) {
        uint64_t *w = (uint64_t *)(void *)kv;
        const uint64_t m = ((uint64_t)1 << ibits) - 1;
        for (int64_t j = 0; j < len; ++j)
            w[j] = (kwk_key_at(dtype, row + j * step) - lo) << ibits | (uint64_t)j;
        emu_torch_quickselect_words(w, len, rank, m);
        *idx = (int64_t)(w[rank] & m);
        return;
    }
    for (int64_t j = 0; j < len; ++j) {
        kv[j].key = kwk_key_at(dtype, row + j * step);
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
 *     keys: quantile's machinery (a sorted sample brackets the rank, one
 *     pass counts the keys below the bracket and compresses those inside
 *     it, a quickselect (radix sort when many) on the survivors - a few
 *     percent of the row - gives the rank); 8/16-bit keys: a 256-bin histogram of the high byte, then
 *     one of the low byte inside the chosen bucket.
 *  2. count == 1 (the usual case) or stable order: the index is that of the
 *     occ-th key equal to v, found by a scan that stops there.
 *  3. count > 1 with KWK_ORDER_TORCH: the index depends on torch's
 *     quickselect, so the whole row is re-run through emu_torch_quickselect
 *     (only rows whose k-th value is shared pay for it).
 */
enum { KTH_LONG_MIN = 128 };

/* What step 1 finds. */
typedef struct {
    uint64_t key;
    int64_t count, occ;
} kth_pick;

#define KTH_DEFINE_FIND(UT, SUF)                                              \
    /* Index of the occ-th (from 0) element whose key is v; -1 if none. */    \
    static int64_t kth_find_##SUF(sw_gather_fn_##SUF g, const char *row, int64_t step, \
                                  int64_t n, UT v, int64_t occ)               \
    {                                                                         \
        UT buf[SW_SRC_BLOCK];                                                 \
        for (int64_t j0 = 0; j0 < n; j0 += SW_SRC_BLOCK) {                    \
            const int64_t b = n - j0 < SW_SRC_BLOCK ? n - j0 : SW_SRC_BLOCK;  \
            g(row + j0 * step, step, b, (UT)0, buf);                          \
            int64_t c = 0;                                                    \
            for (int64_t j = 0; j < b; ++j) c += buf[j] == v;                 \
            if (occ >= c) { occ -= c; continue; }                             \
            for (int64_t j = 0; j < b; ++j)                                   \
                if (buf[j] == v && occ-- == 0) return j0 + j;                 \
        }                                                                     \
        return -1;                                                            \
    }

/* count and occ of the key at index idx (the bracket's exact fallback). */
#define KTH_DEFINE_PICK_AT(UT, SUF)                                           \
    static kth_pick kth_pick_at_##SUF(sw_gather_fn_##SUF g, const char *row, int64_t step, \
                                      int64_t n, int64_t idx)                 \
    {                                                                         \
        UT buf[SW_SRC_BLOCK], v;                                              \
        g(row + idx * step, step, 1, (UT)0, &v);                              \
        kth_pick p = {v, 0, 0};                                               \
        for (int64_t j0 = 0; j0 < n; j0 += SW_SRC_BLOCK) {                    \
            const int64_t b = n - j0 < SW_SRC_BLOCK ? n - j0 : SW_SRC_BLOCK;  \
            g(row + j0 * step, step, b, (UT)0, buf);                          \
            for (int64_t j = 0; j < b; ++j) {                                 \
                p.count += buf[j] == v;                                       \
                p.occ += buf[j] == v && j0 + j < idx;                         \
            }                                                                 \
        }                                                                     \
        return p;                                                             \
    }

KTH_DEFINE_FIND(uint8_t, u8)
KTH_DEFINE_FIND(uint16_t, u16)
KTH_DEFINE_FIND(uint32_t, u32)
KTH_DEFINE_FIND(uint64_t, u64)
KTH_DEFINE_PICK_AT(uint32_t, u32)
KTH_DEFINE_PICK_AT(uint64_t, u64)

/* One block of the bracket pass: keys x of buf[0..b) with x - lo <= span
 * go, in order, to keys[c..] with their row indices (base + j) to idx[c..];
 * returns how many, and adds the count of keys below lo to *below.  keys
 * and idx need room for b + 8 entries (the vector paths store whole vectors:
 * compress = keep the selected lanes, packed to the front). */
static int64_t kth_bracket_u32(const uint32_t *buf, int64_t b, uint32_t lo, uint32_t span,
                               uint32_t *keys, uint32_t *idx, uint32_t base, int64_t *below)
{
    int64_t c = 0, j = 0, under = 0;
#if defined(__AVX512F__)
    /* sixteen lanes (strided rows; contiguous ones take kth_bracket_row32);
     * the compress in a register and a whole-vector store (c <= j, so
     * keys + c + 16 <= keys + b): Zen 4 runs a compress to memory as
     * microcode.  Both: AMD Zen 4, torch.kthvalue of kornia DISK's 20000
     * floats, call included, 15.8 -> 14.8 us (torch 45). */
    {
        const __m512i vlo = _mm512_set1_epi32((int)lo), vspan = _mm512_set1_epi32((int)span);
        const __m512i sixteen = _mm512_set1_epi32(16);
        __m512i vidx = _mm512_add_epi32(_mm512_set1_epi32((int)base),
                                        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10,
                                                          11, 12, 13, 14, 15));
        for (; j + 16 <= b; j += 16) {
            const __m512i v = _mm512_loadu_si512(buf + j);
            const __mmask16 in = _mm512_cmple_epu32_mask(_mm512_sub_epi32(v, vlo), vspan);
            under += __builtin_popcount((unsigned)_mm512_cmplt_epu32_mask(v, vlo));
            _mm512_storeu_si512(keys + c, _mm512_maskz_compress_epi32(in, v));
            _mm512_storeu_si512(idx + c, _mm512_maskz_compress_epi32(in, vidx));
            vidx = _mm512_add_epi32(vidx, sixteen);
            c += __builtin_popcount((unsigned)in);
        }
    }
#endif
#if defined(__AVX2__)
    const __m256i vlo = _mm256_set1_epi32((int)lo), vspan = _mm256_set1_epi32((int)span);
    __m256i vidx = _mm256_add_epi32(_mm256_set1_epi32((int)(base + (uint32_t)j)),
                                    _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    const __m256i eight = _mm256_set1_epi32(8);
    for (; j + 8 <= b; j += 8) {
        const __m256i v = _mm256_loadu_si256((const __m256i *)(buf + j));
        const __m256i in = kwk_in_bracket_u32(v, vlo, vspan);
        const __m256i ge = _mm256_cmpeq_epi32(_mm256_max_epu32(v, vlo), v);   /* v >= lo */
        const unsigned mask = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(in));
        under += 8 - __builtin_popcount((unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(ge)));
        const __m256i perm = kwk_compress_perm8(mask);
        _mm256_storeu_si256((__m256i *)(keys + c), _mm256_permutevar8x32_epi32(v, perm));
        _mm256_storeu_si256((__m256i *)(idx + c), _mm256_permutevar8x32_epi32(vidx, perm));
        vidx = _mm256_add_epi32(vidx, eight);
        c += __builtin_popcount(mask);
    }
#endif
    for (; j < b; ++j) {
        const uint32_t x = buf[j];
        keys[c] = x;
        idx[c] = base + (uint32_t)j;
        under += x < lo;
        c += (uint32_t)(x - lo) <= span;
    }
    *below += under;
    return c;
}

#if defined(__AVX512F__)
/* kth_bracket_u32 over n contiguous float32 (kind 2), int32 (1) or uint32
 * (0) elements of a row (row indices base + j), the keys made in the
 * register: the block gather's store and reload of every key were a tenth
 * of the call.  keys and idx need room for n + 16 entries.  c <= j, so the
 * whole-vector stores at keys + c stay inside keys + n + 16. */
static int64_t kth_bracket_row32(const char *row, int64_t n, int kind, uint32_t base,
                                 uint32_t lo, uint32_t span, uint32_t *keys, uint32_t *idx,
                                 int64_t *below)
{
    const __m512i vlo = _mm512_set1_epi32((int)lo), vspan = _mm512_set1_epi32((int)span);
    const __m512i sign = _mm512_set1_epi32((int)0x80000000u), sixteen = _mm512_set1_epi32(16);
    __m512i vidx = _mm512_add_epi32(_mm512_set1_epi32((int)base),
                                    _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11,
                                                      12, 13, 14, 15));
    int64_t c = 0, j = 0, under = 0;
    for (; j < n; j += 16) {
        /* the last block by a masked load: lanes past n are out of the count */
        const __mmask16 live = n - j >= 16 ? (__mmask16)0xFFFF
                                           : (__mmask16)((1u << (n - j)) - 1u);
        __m512i v = _mm512_maskz_loadu_epi32(live, row + 4 * j);
        if (kind == 2) v = kwk_keys16_f32(v);
        else if (kind == 1) v = _mm512_xor_si512(v, sign);
        const __mmask16 in = _mm512_mask_cmple_epu32_mask(live, _mm512_sub_epi32(v, vlo), vspan);
        under += __builtin_popcount((unsigned)_mm512_mask_cmplt_epu32_mask(live, v, vlo));
        _mm512_storeu_si512(keys + c, _mm512_maskz_compress_epi32(in, v));
        _mm512_storeu_si512(idx + c, _mm512_maskz_compress_epi32(in, vidx));
        vidx = _mm512_add_epi32(vidx, sixteen);
        c += __builtin_popcount((unsigned)in);
    }
    *below += under;
    return c;
}
#endif

static int64_t kth_bracket_u64(const uint64_t *buf, int64_t b, uint64_t lo, uint64_t span,
                               uint64_t *keys, uint32_t *idx, uint32_t base, int64_t *below)
{
    int64_t c = 0, under = 0;
    for (int64_t j = 0; j < b; ++j) {
        const uint64_t x = buf[j];
        keys[c] = x;
        idx[c] = base + (uint32_t)j;
        under += x < lo;
        c += (uint64_t)(x - lo) <= span;
    }
    *below += under;
    return c;
}


/* Scratch of the bracket path: the survivors' keys (in index order) and
 * indices, and the keys to select on, es bytes a key.  Sized for the
 * survivors the sample predicts and grown when a row has more (kth_fit):
 * sized for the whole row, a row of 3 * 10^6 took three fresh 12 MB blocks
 * a call (too big for the workspace cache) and cleared their pages. */
typedef struct {
    void *keys, *sorted;
    uint32_t *idx;
    size_t cap[3];  /* bytes (workspace_alloc) */
    int64_t room;   /* entries keys and idx hold */
    int es;
} kth_scratch;

/* keys and idx with room for `need` entries, their first `keep` kept. */
static int kth_fit(kth_scratch *ks, int64_t need, int64_t keep)
{
    if (need <= ks->room) return KWK_OK;
    const int64_t room = need > 2 * ks->room ? need : 2 * ks->room;
    size_t kcap, icap;
    void *keys = workspace_alloc((size_t)room * (size_t)ks->es, &kcap);
    uint32_t *idx = (uint32_t *)workspace_alloc((size_t)room * sizeof(uint32_t), &icap);
    if (!keys || !idx) {
        kwk_ws_give(keys, kcap);
        kwk_ws_give(idx, icap);
        return KWK_E_NOMEM;
    }
    if (keep > 0) {
        memcpy(keys, ks->keys, (size_t)keep * (size_t)ks->es);
        memcpy(idx, ks->idx, (size_t)keep * sizeof(uint32_t));
    }
    kwk_ws_give(ks->keys, ks->cap[0]);
    kwk_ws_give(ks->idx, ks->cap[2]);
    ks->keys = keys;
    ks->idx = idx;
    ks->cap[0] = kcap;
    ks->cap[2] = icap;
    ks->room = room;
    return KWK_OK;
}

/* sorted with room for n entries (its contents not kept). */
static int kth_fit_sorted(kth_scratch *ks, int64_t n)
{
    const size_t bytes = (size_t)n * (size_t)ks->es;
    if (ks->sorted && bytes <= ks->cap[1]) return KWK_OK;
    kwk_ws_give(ks->sorted, ks->cap[1]);
    ks->sorted = workspace_alloc(bytes, &ks->cap[1]);
    return ks->sorted ? KWK_OK : KWK_E_NOMEM;
}

static void kth_scratch_free(kth_scratch *ks)
{
    kwk_ws_give(ks->keys, ks->cap[0]);
    kwk_ws_give(ks->sorted, ks->cap[1]);
    kwk_ws_give(ks->idx, ks->cap[2]);
}

/* The rr-th smallest of the c bracket survivors keys[] (in [lo, lo +
 * span]; a: scratch of c entries): a radix select.  A 256-bin histogram of their
 * top bits within the bracket finds the bin holding rank rr, whose keys -
 * about c / 256 - are gathered to the front; again inside that bin until
 * few keys or few bits are left, then a quickselect.  Branch-free passes
 * instead of a quickselect's mispredicted partitions over a few thousand
 * keys (a 20000-element row's ~1700 survivors: 7 -> 2 us), and instead of
 * radix-sorting the 10^5 survivors of a row of 3 * 10^6 (AMD Zen 4,
 * with kth_fit's scratch: ibert's 3145728 GELU activations at rank 99.9%
 * 1953 -> 924 us, brevitas' 3211264 ReLU outputs 1430 -> 935; torch 26-30
 * ms). */
#define KTH_DEFINE_HISTOGRAM_SELECT(UT, SUF)                                  \
    static UT kth_histogram_select_##SUF(const UT *keys, UT *a, int64_t c, int64_t rr, \
                                         UT lo, UT span)                      \
    {                                                                         \
        const UT *from = keys; /* the first round reads keys, the rest a */  \
        for (;;) {                                                            \
            const int bits = kwk_bits_for((uint64_t)span);                    \
            if (c <= 64 || bits <= 8) {                                       \
                if (from != a) memcpy(a, from, (size_t)c * sizeof(UT));       \
                sw_qselect_##SUF(a, c, rr);                                   \
                return a[rr];                                                 \
            }                                                                 \
            const int shift = bits - 8;                                       \
            /* four histograms: a run of keys in one bin would otherwise     \
             * wait on each other's increments */                             \
            uint32_t count[4][256];                                           \
            memset(count, 0, sizeof count);                                   \
            int64_t j = 0;                                                    \
            for (; j + 4 <= c; j += 4) {                                      \
                count[0][(UT)(from[j] - lo) >> shift]++;                      \
                count[1][(UT)(from[j + 1] - lo) >> shift]++;                  \
                count[2][(UT)(from[j + 2] - lo) >> shift]++;                  \
                count[3][(UT)(from[j + 3] - lo) >> shift]++;                  \
            }                                                                 \
            for (; j < c; ++j) count[0][(UT)(from[j] - lo) >> shift]++;       \
            int b = 0;                                                        \
            int64_t before = 0;                                               \
            for (;; ++b) {                                                    \
                const int64_t in = (int64_t)count[0][b] + count[1][b] + count[2][b] + count[3][b]; \
                if (before + in > rr) break;                                  \
                before += in;                                                 \
            }                                                                 \
            int64_t m = 0;                                                    \
            for (j = 0; j < c; ++j) {                                         \
                const UT x = from[j];                                         \
                a[m] = x;                                                     \
                m += (int)((UT)(x - lo) >> shift) == b;                       \
            }                                                                 \
            /* the bin's keys: lo + (b << shift) + [0, 2^shift), fewer bits */ \
            const UT start = (UT)((UT)b << shift);                            \
            const UT width = (UT)(((UT)1 << shift) - 1);                      \
            lo = (UT)(lo + start);                                            \
            span = (UT)(span - start) < width ? (UT)(span - start) : width;   \
            c = m;                                                            \
            rr -= before;                                                     \
            from = a;                                                         \
        }                                                                     \
    }

KTH_DEFINE_HISTOGRAM_SELECT(uint32_t, u32)
KTH_DEFINE_HISTOGRAM_SELECT(uint64_t, u64)

/* Step 1 for 32/64-bit keys (rows shorter than 2^32).  s is initialised on
 * first use (a missed bracket).  KWK_E_NOMEM or KWK_OK; *index is the
 * answer's index when the bracket already tells it (count == 1 or stable
 * order), else -1. */
/* Which kth_bracket_row32 kind reads a row gathered by g with this step in
 * place (-1: none; 64-bit rows and strided rows gather blocks). */
#if defined(__AVX512F__)
#define KTH_FUSED_KIND(g, step, es)                                           \
    ((es) != 4 || (step) != 4 ? -1                                            \
     : (void *)(g) == (void *)sw_gather_f32 ? 2                               \
     : (void *)(g) == (void *)sw_gather_i32 ? 1                               \
     : (void *)(g) == (void *)sw_gather_u32 ? 0 : -1)
#else
#define KTH_FUSED_KIND(g, step, es) -1
#define kth_bracket_row32(row, n, kind, base, lo, span, keys, idx, below) 0
#endif

#define KTH_DEFINE_PICK_BRACKET(UT, SUF)                                      \
    static int kth_pick_##SUF(sw_gather_fn_##SUF g, const char *row, int64_t step, \
                              int64_t n, int64_t r, kth_scratch *ks,          \
                              sw_rank_scratch *s, int *have_s, kth_pick *out, \
                              int64_t *index)                                 \
    {                                                                         \
        UT sample[QK_SAMPLE_MAX], buf[SW_SRC_BLOCK];                          \
        const int64_t ns = qk_sample_size(n), stride = n / ns;               \
        *index = -1;                                                          \
        /* one gather call: the sample is every stride-th element */         \
        g(row + (stride / 2) * step, step * stride, ns, (UT)0, sample);       \
        /* keys bracketing rank r: sample ranks about 2 sigma either side */  \
        const int64_t centre = (int64_t)(((double)r + 0.5) * (double)ns / (double)n); \
        const int64_t margin = sw_isqrt(ns) + 1;                              \
        const int64_t sa = centre - margin, sb = centre + margin;             \
        UT lo = 0, hi = (UT)~(UT)0;                                           \
        if (sa > 0) {                                                         \
            sw_qselect_##SUF(sample, ns, sa);                                 \
            lo = sample[sa];                                                  \
        }                                                                     \
        if (sb < ns - 1) {                                                    \
            const int64_t from = sa > 0 ? sa : 0;                             \
            sw_qselect_##SUF(sample + from, ns - from, sb - from);            \
            hi = sample[sb];                                                  \
        }                                                                     \
        const UT span = (UT)(hi - lo);                                        \
        /* room for the survivors expected (2 margin + 1 of ns sample        \
         * elements stand for n / ns each), grown if more come */            \
        const int64_t expect = (2 * margin + 1) * (n / ns + 1);              \
        if (kth_fit(ks, (expect < n ? expect : n) + SW_SRC_BLOCK + 16, 0) != KWK_OK) \
            return KWK_E_NOMEM;                                               \
        const int fused = KTH_FUSED_KIND(g, step, sizeof(UT));                            \
        int64_t below = 0, c = 0;                                             \
        for (int64_t j0 = 0; j0 < n; j0 += SW_SRC_BLOCK) {                    \
            const int64_t b = n - j0 < SW_SRC_BLOCK ? n - j0 : SW_SRC_BLOCK;  \
            if (kth_fit(ks, c + b + 16, c) != KWK_OK) return KWK_E_NOMEM;     \
            UT *keys = (UT *)ks->keys;                                        \
            if (fused >= 0) {                                                 \
                c += kth_bracket_row32(row + j0 * 4, b, fused, (uint32_t)j0,  \
                                       (uint32_t)lo, (uint32_t)span,          \
                                       (uint32_t *)(void *)(keys + c), ks->idx + c, &below); \
                continue;                                                     \
            }                                                                 \
            g(row + j0 * step, step, b, (UT)0, buf);                          \
            c += kth_bracket_##SUF(buf, b, lo, span, keys + c, ks->idx + c, (uint32_t)j0, \
                                   &below);                                   \
        }                                                                     \
        const UT *keys = (const UT *)ks->keys;                                \
        if (r >= below && r < below + c) {                                    \
            if (kth_fit_sorted(ks, c) != KWK_OK) return KWK_E_NOMEM;          \
            const int64_t rr = r - below;                                     \
            const UT v = kth_histogram_select_##SUF(keys, (UT *)ks->sorted, c, rr, lo, span); \
            int64_t under = 0, same = 0;                                      \
            for (int64_t j = 0; j < c; ++j) {                                 \
                under += keys[j] < v;                                         \
                same += keys[j] == v;                                         \
            }                                                                 \
            out->key = v;                                                     \
            out->count = same;                                                \
            out->occ = rr - under;                                            \
            /* every key equal to v survived, in index order */              \
            for (int64_t j = 0, left = out->occ; j < c; ++j)                  \
                if (keys[j] == v && left-- == 0) { *index = ks->idx[j]; break; } \
            return KWK_OK;                                                    \
        }                                                                     \
        /* the sample misjudged the rank (rare): exact stable-rank select */  \
        if (!*have_s) {                                                       \
            if (sw_rank_scratch_init(s, n) != KWK_OK) return KWK_E_NOMEM;     \
            *have_s = 1;                                                      \
        }                                                                     \
        const int64_t idx = sw_rank_src_##SUF(g, row, step, n, r, s);         \
        if (idx < 0) return KWK_E_NOMEM;                                      \
        *out = kth_pick_at_##SUF(g, row, step, n, idx);                       \
        *index = idx;                                                         \
        return KWK_OK;                                                        \
    }

KTH_DEFINE_PICK_BRACKET(uint32_t, u32)
KTH_DEFINE_PICK_BRACKET(uint64_t, u64)

/* Step 1 for 8/16-bit keys: histograms. */
#define KTH_DEFINE_PICK_HIST(UT, SUF, HI_SHIFT)                               \
    static int kth_pick_##SUF(sw_gather_fn_##SUF g, const char *row, int64_t step, \
                              int64_t n, int64_t r, kth_scratch *ks,          \
                              sw_rank_scratch *s, int *have_s, kth_pick *out, \
                              int64_t *index)                                 \
    {                                                                         \
        (void)ks; (void)s; (void)have_s;                                      \
        *index = -1;                                                          \
        UT buf[SW_SRC_BLOCK];                                                 \
        int64_t h[256] = {0};                                                 \
        for (int64_t j0 = 0; j0 < n; j0 += SW_SRC_BLOCK) {                    \
            const int64_t b = n - j0 < SW_SRC_BLOCK ? n - j0 : SW_SRC_BLOCK;  \
            g(row + j0 * step, step, b, (UT)0, buf);                          \
            for (int64_t j = 0; j < b; ++j) h[buf[j] >> (HI_SHIFT)]++;        \
        }                                                                     \
        int64_t below = 0, top = 0;                                           \
        while (below + h[top] <= r) below += h[top++];                        \
        if (HI_SHIFT == 0) {                                                  \
            out->key = (uint64_t)top;                                         \
            out->count = h[top];                                              \
            out->occ = r - below;                                             \
            return KWK_OK;                                                    \
        }                                                                     \
        int64_t h2[256] = {0};                                                \
        for (int64_t j0 = 0; j0 < n; j0 += SW_SRC_BLOCK) {                    \
            const int64_t b = n - j0 < SW_SRC_BLOCK ? n - j0 : SW_SRC_BLOCK;  \
            g(row + j0 * step, step, b, (UT)0, buf);                          \
            for (int64_t j = 0; j < b; ++j)                                   \
                h2[buf[j] & 0xFF] += (buf[j] >> (HI_SHIFT)) == (UT)top;       \
        }                                                                     \
        int64_t low = 0;                                                      \
        while (below + h2[low] <= r) below += h2[low++];                      \
        out->key = (uint64_t)top << (HI_SHIFT) | (uint64_t)low;               \
        out->count = h2[low];                                                 \
        out->occ = r - below;                                                 \
        return KWK_OK;                                                        \
    }

KTH_DEFINE_PICK_HIST(uint8_t, u8, 0)
KTH_DEFINE_PICK_HIST(uint16_t, u16, 8)

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
    if (KWK_DTYPES[dtype].key_bits >= 32 && len >= 2 && len <= KTH_RANK_MAX && outer > 0 &&
        inner > 0) {
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
