/*
 * batch_median.h - median/nanmedian over many short rows, eight at a time.
 *
 * torch's median over a dim returns the element at stable rank (n-1)/2 (the
 * lower median, ties by index), or the row's first NaN when it has one;
 * nanmedian the element at stable rank (n - #NaN - 1)/2, or for an all-NaN
 * row the element std::nth_element leaves first among equals
 * (sk_all_equal_nth, select_kernels.h; ../shared/SEMANTICS.md).
 *
 * Eight rows without NaN need only the key at rank (n-1)/2: the part of the
 * batch sort's network (batch_sort.h) that decides that slot, run on the
 * keys alone, gives it, and the index follows from it (the element at
 * stable rank r is the (r - #smaller)-th of the keys equal to it).  Eight
 * rows with a NaN take the whole stable network, which puts NaN keys last
 * in index order, so every answer is one slot of the sorted row: the first
 * NaN is slot n - #NaN.
 *
 * Why: rows of 9 or 25 (an unfolded 3x3 or 5x5 window, a smoothing
 * window) went through a per-row selection at ~10 ns an element, a little
 * under torch's; sorted eight at a time they cost a fraction of that.
 */
#ifndef KWK_BATCH_MEDIAN_H
#define KWK_BATCH_MEDIAN_H

#include "batch_sort.h"
#include "select_kernels.h"
#include "topk_short16.h" /* s16_transpose16, s16_f32_key */
#include "plain_loads.h"
#include "median_columns.h"  /* mc_median_dim */

/* Longest row: the network's cost per element grows with log^2 n, and
 * longer rows are served well by the one-row selection.  BM_MAX_PAIRS:
 * the network's comparators for 64 (row_network.h: 543 for 2^6). */
enum { KWK_BATCH_MEDIAN_MAX = 64, BM_MAX_PAIRS = 543 };

#if defined(KWK_HAVE_BATCH_SORT)

/* The comparators of the row network (row_network.h) that decide slot r,
 * in their order, compacted into `pairs`; returns how many.  Walking back
 * from the last comparator, one is kept when a position it writes is still
 * read (by slot r or a kept comparator); both its inputs are then read.
 * Rows of 9 keep 24 of 28 comparators, of 25 113 of 140, of 64 445 of 543
 * - and, on keys alone, each costs two instructions where the stable
 * network's costs ten. */
static int bm_select_pairs(int len, int r, kwk_net_pair *pairs)
{
    const int n = kwk_net_pairs(len, pairs);
    uint64_t read = 1ull << r; /* len <= 64 positions */
    int first = n;
    for (int c = n - 1; c >= 0; --c) {
        const uint64_t touched = 1ull << pairs[c][0] | 1ull << pairs[c][1];
        if (!(read & touched)) continue;
        read |= touched;
        --first; /* first >= c: the kept ones stay behind c */
        pairs[first][0] = pairs[c][0];
        pairs[first][1] = pairs[c][1];
    }
    memmove(pairs, pairs + first, (size_t)(n - first) * sizeof(kwk_net_pair));
    return n - first;
}

/* bm_select_pairs(9, 4) and bm_select_pairs(25, 12) (test_batch_median
 * checks it) as constants: the 3x3 and 5x5 windows of median filters.
 * With the comparators known at compile time the network is unrolled and
 * its keys stay in registers (native, float32, 301056 rows of 9: 12-14
 * -> 7-12 ns a row; 65536 rows of 25: 28 -> 18-21). */
static const kwk_net_pair BM_SELECT_9[24] = {
    {0, 1}, {2, 3}, {4, 5}, {6, 7}, {0, 2}, {1, 3}, {4, 6}, {5, 7}, {1, 2}, {5, 6}, {0, 4}, {1, 5},
    {2, 6}, {3, 7}, {2, 4}, {3, 5}, {1, 2}, {3, 4}, {5, 6}, {0, 8}, {4, 8}, {2, 4}, {3, 5}, {3, 4}};
static const kwk_net_pair BM_SELECT_25[113] = {
    {0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}, {16, 17}, {18, 19},
    {20, 21}, {22, 23}, {0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15},
    {16, 18}, {17, 19}, {20, 22}, {21, 23}, {1, 2}, {5, 6}, {9, 10}, {13, 14}, {17, 18}, {21, 22},
    {0, 4}, {1, 5}, {2, 6}, {3, 7}, {8, 12}, {9, 13}, {10, 14}, {11, 15}, {16, 20}, {17, 21},
    {18, 22}, {19, 23}, {2, 4}, {3, 5}, {10, 12}, {11, 13}, {18, 20}, {19, 21}, {1, 2}, {3, 4},
    {5, 6}, {9, 10}, {11, 12}, {13, 14}, {17, 18}, {19, 20}, {21, 22}, {0, 8}, {1, 9}, {2, 10},
    {3, 11}, {4, 12}, {5, 13}, {6, 14}, {7, 15}, {16, 24}, {4, 8}, {5, 9}, {6, 10}, {7, 11},
    {20, 24}, {2, 4}, {3, 5}, {6, 8}, {7, 9}, {10, 12}, {11, 13}, {18, 20}, {19, 21}, {22, 24},
    {1, 2}, {3, 4}, {5, 6}, {7, 8}, {9, 10}, {11, 12}, {13, 14}, {17, 18}, {19, 20}, {21, 22},
    {23, 24}, {0, 16}, {1, 17}, {2, 18}, {3, 19}, {4, 20}, {5, 21}, {6, 22}, {7, 23}, {8, 24},
    {8, 16}, {9, 17}, {10, 18}, {11, 19}, {12, 20}, {13, 21}, {6, 10}, {7, 11}, {12, 16}, {13, 17},
    {10, 12}, {11, 13}, {11, 12}};

/* Eight rows without NaN (their keys in slots, as batch_load leaves them):
 * sets idx[l] to the index of row l's element at stable rank r and returns
 * 1, or returns 0 when a row holds a NaN key (nan_key; `has_nan` 0 for
 * integer dtypes).  The keys-only network (`sel`, bm_select_pairs) puts the
 * r-th smallest key m in slot r; the element at stable rank r is then the
 * (r - #keys below m)-th key equal to m in index order.  Inlined so that
 * constant len and sel unroll it. */
static inline __attribute__((always_inline)) int
bm_select8_body(const kwk_batch_slot *slots, int64_t len, int64_t r, int has_nan, int32_t nan_key,
                const kwk_net_pair *sel, int nsel, int32_t idx[KWK_BATCH_LANES],
                int32_t *same)
{
    __m256i work[KWK_BATCH_MEDIAN_MAX];
    __m256i nan = _mm256_setzero_si256();
    const __m256i nan_keys = _mm256_set1_epi32(nan_key);
#pragma GCC unroll 64
    for (int64_t j = 0; j < len; ++j) {
        work[j] = slots[j].key;
        nan = _mm256_or_si256(nan, _mm256_cmpeq_epi32(work[j], nan_keys));
    }
    if (has_nan && !_mm256_testz_si256(nan, nan)) return 0;
#pragma GCC unroll 128
    for (int c = 0; c < nsel; ++c) {
        const __m256i a = work[sel[c][0]], b = work[sel[c][1]];
        work[sel[c][0]] = _mm256_min_epi32(a, b);
        work[sel[c][1]] = _mm256_max_epi32(a, b);
    }
    const __m256i m = work[r];
    __m256i below = _mm256_setzero_si256();
#pragma GCC unroll 64
    for (int64_t j = 0; j < len; ++j)
        below = _mm256_sub_epi32(below, _mm256_cmpgt_epi32(m, slots[j].key));
    const __m256i want = _mm256_sub_epi32(_mm256_set1_epi32((int)r), below);
    __m256i seen = _mm256_setzero_si256(), at = _mm256_setzero_si256();
#pragma GCC unroll 64
    for (int64_t j = 0; j < len; ++j) {
        const __m256i eq = _mm256_cmpeq_epi32(slots[j].key, m);
        const __m256i hit = _mm256_and_si256(eq, _mm256_cmpeq_epi32(seen, want));
        at = _mm256_or_si256(at, _mm256_and_si256(hit, _mm256_set1_epi32((int)j)));
        seen = _mm256_sub_epi32(seen, eq);
    }
    _mm256_storeu_si256((__m256i *)idx, at);
    if (same) _mm256_storeu_si256((__m256i *)same, seen); /* keys equal to the pick */
    return 1;
}

static int bm_select8(const kwk_batch_slot *slots, int64_t len, int has_nan, int32_t nan_key,
                      const kwk_net_pair *sel, int nsel, int32_t idx[KWK_BATCH_LANES])
{
    if (len == 9) return bm_select8_body(slots, 9, 4, has_nan, nan_key, BM_SELECT_9, 24, idx, NULL);
    if (len == 25) return bm_select8_body(slots, 25, 12, has_nan, nan_key, BM_SELECT_25, 113, idx, NULL);
    return bm_select8_body(slots, len, (len - 1) / 2, has_nan, nan_key, sel, nsel, idx, NULL);
}

static int bm_applies(int dtype, int64_t len, int64_t rows)
{
    return KWK_DTYPES[dtype].key_bits <= 32 && len >= 2 && len <= KWK_BATCH_MEDIAN_MAX &&
           rows >= KWK_BATCH_LANES;
}

/* nanmedian of an all-NaN row: the index std::nth_element leaves first
 * among len equal keys (sk_all_equal_nth, without its allocation). */
static int64_t bm_all_nan_index(int64_t len)
{
    kwk_kv kv[KWK_BATCH_MEDIAN_MAX];
    for (int64_t j = 0; j < len; ++j) {
        kv[j].key = 0;
        kv[j].idx = j;
    }
    emu_nth_element(kv, 0, len);
    return kv[0].idx;
}

/* Where rows r0 .. r0 + 7 of a call (r = o * inner + i) are and where
 * their outputs go (element offsets). */
static void bm_batch_src(const char *src, int64_t es, int64_t inner, int64_t src_so,
                         int64_t src_sl, int64_t src_si, int64_t dst_so, int64_t dst_si,
                         int64_t r0, kwk_batch_src *b, int64_t *dst)
{
    for (int l = 0; l < KWK_BATCH_LANES; ++l) {
        /* (inner is 1 for rows along the last dim: no division) */
        const int64_t r = r0 + l, o = inner == 1 ? r : r / inner, i = r - o * inner;
        b->row[l] = src + (o * src_so + i * src_si) * es;
        dst[l] = o * dst_so + i * dst_si;
    }
    b->step = src_sl * es;
    b->adjacent = src_si == 1 && (r0 % inner) + KWK_BATCH_LANES <= inner;
}

/* Rows r0 .. r0 + 7 of the call (r = o * inner + i). */
static void bm_rows(int dtype, const char *src, int64_t len, int64_t inner, int64_t src_so,
                    int64_t src_sl, int64_t src_si, char *values, int64_t *indices,
                    int64_t dst_so, int64_t dst_si, int ignore_nan, int64_t r0,
                    kwk_batch_slot *slots, const kwk_net_pair *pairs, int npairs,
                    const kwk_net_pair *sel, int nsel)
{
    const kwk_dtype_info info = KWK_DTYPES[dtype];
    const int64_t es = info.elem_size;
    /* a NaN's key: all ones of the key width, biased as batch_load does */
    const int32_t nan_key = (int32_t)((uint32_t)kwk_width_mask(info.key_bits) ^ 0x80000000u);
    kwk_batch_src b;
    int64_t dst[KWK_BATCH_LANES];
    bm_batch_src(src, es, inner, src_so, src_sl, src_si, dst_so, dst_si, r0, &b, dst);
    batch_load(dtype, &b, len, 0, slots);
    int32_t at[KWK_BATCH_LANES];
    int64_t idx[KWK_BATCH_LANES];
    if (bm_select8(slots, len, info.is_float, nan_key, sel, nsel, at)) {
        for (int l = 0; l < KWK_BATCH_LANES; ++l) idx[l] = at[l];
    } else {
        /* a NaN moves median's answer (the first NaN) and nanmedian's rank
         * row by row: the stable sort of the eight rows shows both */
        batch_network_stable(slots, pairs, npairs);
        for (int l = 0; l < KWK_BATCH_LANES; ++l) {
            int64_t nan = 0;
            while (nan < len && ((const int32_t *)&slots[len - 1 - nan].key)[l] == nan_key) ++nan;
            if (!ignore_nan) idx[l] = batch_index(slots, nan ? len - nan : (len - 1) / 2, l);
            else if (nan < len) idx[l] = batch_index(slots, (len - nan - 1) / 2, l);
            else idx[l] = bm_all_nan_index(len);
        }
    }
    for (int l = 0; l < KWK_BATCH_LANES; ++l) {
        if (values) kwk_copy_elem(values + dst[l] * es, b.row[l] + idx[l] * b.step, (int)es);
        if (indices) indices[dst[l]] = idx[l];
    }
}

#if defined(KWK_HAVE_BATCH16)
/* bm_select8_body on sixteen lanes: two batches' keys (a, b) side by side.
 * Returns 0 (nothing set) when a row holds a NaN key. */
static inline __attribute__((always_inline)) int
bm_select16_body(const kwk_batch_slot *a, const kwk_batch_slot *b, int64_t len, int64_t r,
                 int has_nan, int32_t nan_key, const kwk_net_pair *sel, int nsel, int32_t idx[16],
                 int32_t *same)
{
#define BM_KEYS16(j) _mm512_inserti64x4(_mm512_castsi256_si512(a[j].key), b[j].key, 1)
    __m512i work[KWK_BATCH_MEDIAN_MAX];
    __mmask16 nan = 0;
    const __m512i nan_keys = _mm512_set1_epi32(nan_key);
#pragma GCC unroll 64
    for (int64_t j = 0; j < len; ++j) {
        work[j] = BM_KEYS16(j);
        nan |= _mm512_cmpeq_epi32_mask(work[j], nan_keys);
    }
    if (has_nan && nan) return 0;
#pragma GCC unroll 128
    for (int c = 0; c < nsel; ++c) {
        const __m512i x = work[sel[c][0]], y = work[sel[c][1]];
        work[sel[c][0]] = _mm512_min_epi32(x, y);
        work[sel[c][1]] = _mm512_max_epi32(x, y);
    }
    const __m512i m = work[r];
    __m512i below = _mm512_setzero_si512();
    const __m512i one = _mm512_set1_epi32(1);
#pragma GCC unroll 64
    for (int64_t j = 0; j < len; ++j)
        below = _mm512_mask_add_epi32(below, _mm512_cmpgt_epi32_mask(m, BM_KEYS16(j)), below, one);
    const __m512i want = _mm512_sub_epi32(_mm512_set1_epi32((int)r), below);
    __m512i seen = _mm512_setzero_si512(), at = _mm512_setzero_si512();
#pragma GCC unroll 64
    for (int64_t j = 0; j < len; ++j) {
        const __mmask16 eq = _mm512_cmpeq_epi32_mask(BM_KEYS16(j), m);
        const __mmask16 hit = _mm512_mask_cmpeq_epi32_mask(eq, seen, want);
        at = _mm512_mask_mov_epi32(at, hit, _mm512_set1_epi32((int)j));
        seen = _mm512_mask_add_epi32(seen, eq, seen, one);
    }
    _mm512_storeu_si512((void *)idx, at);
    if (same) _mm512_storeu_si512((void *)same, seen);
    return 1;
#undef BM_KEYS16
}

static int bm_select16(const kwk_batch_slot *a, const kwk_batch_slot *b, int64_t len, int has_nan,
                       int32_t nan_key, const kwk_net_pair *sel, int nsel, int32_t idx[16])
{
    if (len == 9) return bm_select16_body(a, b, 9, 4, has_nan, nan_key, BM_SELECT_9, 24, idx, NULL);
    if (len == 25) return bm_select16_body(a, b, 25, 12, has_nan, nan_key, BM_SELECT_25, 113, idx, NULL);
    return bm_select16_body(a, b, len, (len - 1) / 2, has_nan, nan_key, sel, nsel, idx, NULL);
}

/* Rows r0 .. r0 + 15 as bm_rows would do them in two batches, by one
 * selection over sixteen lanes; 0 (nothing written) when a row holds a
 * NaN (bm_rows then takes each batch).  Measured (AVX-512, torch.median
 * along the last dim, min of 3 alternating runs, 8 -> 16 rows a
 * selection): float32 262144x9 2.94 -> 2.61 ms, 65536x16 1.11 -> 0.88,
 * 16384x64 1.11 -> 0.86, int32 65536x9 0.66 -> 0.54; the median-filter
 * recipes of the corpus 1.04-1.07x. */
static int bm_rows16(int dtype, const char *src, int64_t len, int64_t inner, int64_t src_so,
                     int64_t src_sl, int64_t src_si, char *values, int64_t *indices,
                     int64_t dst_so, int64_t dst_si, int64_t r0, kwk_batch_slot *slots,
                     kwk_batch_slot *other, const kwk_net_pair *sel, int nsel)
{
    const kwk_dtype_info info = KWK_DTYPES[dtype];
    const int64_t es = info.elem_size;
    const int32_t nan_key = (int32_t)((uint32_t)kwk_width_mask(info.key_bits) ^ 0x80000000u);
    kwk_batch_src b[2];
    int64_t dst[16];
    for (int h = 0; h < 2; ++h)
        bm_batch_src(src, es, inner, src_so, src_sl, src_si, dst_so, dst_si, r0 + 8 * h, &b[h],
                     dst + 8 * h);
    batch_load(dtype, &b[0], len, 0, slots);
    batch_load(dtype, &b[1], len, 0, other);
    int32_t at[16];
    if (!bm_select16(slots, other, len, info.is_float, nan_key, sel, nsel, at)) return 0;
    for (int l = 0; l < 16; ++l) {
        const kwk_batch_src *bh = &b[l >> 3];
        if (values) kwk_copy_elem(values + dst[l] * es, bh->row[l & 7] + at[l] * bh->step, (int)es);
        if (indices) indices[dst[l]] = at[l];
    }
    return 1;
}
#endif

#if defined(__AVX512F__)
enum { BM_F32_MAX = 32 };
/* The median of sixteen float32 rows of len <= BM_F32_MAX whose element j
 * is col[j] (lane l: row l; col[len .. len rounded up to 16) zeros): the
 * keys made from the bits (s16_f32_key: -0.0 and +0.0 one key, as torch
 * compares them), the median's
 * part of the network on them (`sel`), the index at stable rank r found as
 * bm_select16_body finds it, and the value picked from the columns by that
 * index (its bits, -0.0 included).  0 when a row holds a NaN. */
static inline __attribute__((always_inline)) int
bm_f32_median16(const __m512i *col, int64_t len, int64_t r, const kwk_net_pair *sel, int nsel,
                __m512i *value, __m512i *index)
{
    __m512i key[BM_F32_MAX], work[BM_F32_MAX];
    const __m512i zero = _mm512_setzero_si512();
    __m512i amax = zero;
    const int64_t padded = (len + 15) & ~(int64_t)15;
#pragma GCC unroll 32
    for (int64_t j = 0; j < padded; ++j) /* (past len: zeros, never read) */
        key[j] = work[j] = s16_f32_key(col[j], &amax);
    for (int64_t j = padded; j < BM_F32_MAX; ++j) key[j] = work[j] = zero; /* (never read) */
    if (_mm512_cmpgt_epi32_mask(amax, _mm512_set1_epi32(S16_INF_BITS))) return 0; /* a NaN */
#pragma GCC unroll 128
    for (int c = 0; c < nsel; ++c) {
        const __m512i x = work[sel[c][0]], y = work[sel[c][1]];
        work[sel[c][0]] = _mm512_min_epi32(x, y);
        work[sel[c][1]] = _mm512_max_epi32(x, y);
    }
    const __m512i m = work[r], one = _mm512_set1_epi32(1);
    __m512i below = zero;
#pragma GCC unroll 32
    for (int64_t j = 0; j < len; ++j)
        below = _mm512_mask_add_epi32(below, _mm512_cmpgt_epi32_mask(m, key[j]), below, one);
    const __m512i want = _mm512_sub_epi32(_mm512_set1_epi32((int)r), below);
    __m512i seen = zero, at = zero, v = zero;
#pragma GCC unroll 32
    for (int64_t j = 0; j < len; ++j) {
        const __mmask16 eq = _mm512_cmpeq_epi32_mask(key[j], m);
        const __mmask16 hit = _mm512_mask_cmpeq_epi32_mask(eq, seen, want);
        at = _mm512_mask_mov_epi32(at, hit, _mm512_set1_epi32((int)j));
        v = _mm512_mask_mov_epi32(v, hit, col[j]);
        seen = _mm512_mask_add_epi32(seen, eq, seen, one);
    }
    *value = v;
    *index = at;
    return 1;
}

/* Sixteen answers to vout[l * step] and iout[l * step]. */
static inline void bm_f32_write16(__m512i v, __m512i at, float *vout, int64_t *iout, int64_t step)
{
    const __m512i i0 = _mm512_cvtepi32_epi64(_mm512_castsi512_si256(at));
    const __m512i i1 = _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(at, 1));
    if (step == 1) {
        if (vout) _mm512_storeu_si512((void *)vout, v);
        if (iout) {
            _mm512_storeu_si512((void *)iout, i0);
            _mm512_storeu_si512((void *)(iout + 8), i1);
        }
        return;
    }
    int32_t vv[16];
    int64_t ii[16];
    _mm512_storeu_si512((void *)vv, v);
    _mm512_storeu_si512((void *)ii, i0);
    _mm512_storeu_si512((void *)(ii + 8), i1);
    for (int l = 0; l < 16; ++l) {
        if (vout) memcpy(vout + l * step, vv + l, 4);
        if (iout) iout[l * step] = ii[l];
    }
}

/* float32 rows of up to BM_F32_MAX along the last dim (an unfolded 3x3
 * window made contiguous: timm's MedianPool2d), sixteen at a time from the
 * rows themselves: each row read by masked loads, the sixteen transposed
 * in registers (topk_short16.h), then bm_f32_median16.  Where bm_rows16
 * loads the keys eight rows at a time through batch_load and writes each
 * answer by itself, this writes sixteen with three stores (A/B through
 * torch.median(dim=-1), one thread, us: 301056 rows of 9 3062 -> 1043,
 * 65536 rows of 5 / 7 / 16 / 25 / 32: 836 / 982 / 912 / 1234 / 1610 ->
 * 238 / 274 / 488 / 744 / 1126).  0 (nothing written) when a row holds a
 * NaN: bm_rows16 and bm_rows then take the block. */
static inline __attribute__((always_inline)) int
bm_f32_rows16_body(const float *tile, const float *end, int64_t so, int64_t len, int64_t r,
                   const kwk_net_pair *sel, int nsel, float *vout, int64_t *iout, int64_t dst_so)
{
    __m512i col[BM_F32_MAX];
    for (int64_t c0 = 0; c0 < len; c0 += 16) { /* columns c0 .. c0 + 15 */
        const int64_t cols = len - c0;
        const __mmask16 lm = (__mmask16)(cols >= 16 ? 0xFFFFu : (1u << cols) - 1);
        for (int l = 0; l < 16; ++l) col[c0 + l] = kwk_loadz_epi32(lm, tile + l * so + c0, end);
        s16_transpose16(col + c0);
    }
    __m512i v, at;
    if (!bm_f32_median16(col, len, r, sel, nsel, &v, &at)) return 0;
    bm_f32_write16(v, at, vout, iout, dst_so);
    return 1;
}

static int bm_f32_rows16(const float *tile, const float *end, int64_t so, int64_t len,
                         const kwk_net_pair *sel, int nsel, float *vout, int64_t *iout,
                         int64_t dst_so)
{
    if (len == 9)
        return bm_f32_rows16_body(tile, end, so, 9, 4, BM_SELECT_9, 24, vout, iout, dst_so);
    if (len == 25)
        return bm_f32_rows16_body(tile, end, so, 25, 12, BM_SELECT_25, 113, vout, iout, dst_so);
    return bm_f32_rows16_body(tile, end, so, len, (len - 1) / 2, sel, nsel, vout, iout, dst_so);
}

/* float32 rows of up to BM_F32_MAX across a non-last dim, neighbouring rows
 * adjacent (x.median(dim=0) of a (10, H, W) stack, median(dim=2) of
 * unfolded patches): element j of sixteen rows is one load, then
 * bm_f32_median16, in place of median_columns.h's eight rows ranked by
 * pairs (A/B through torch.median, one thread, us: 1x3x9x256x256 over dim
 * 2 1128 -> 432, 10x1x480x640 over dim 0 2083 -> 1255, 10x64x32x5x5 over
 * dim 0 366 -> 222, 1x25x65536 over dim 1 (the batch network's loads
 * before) 1124 -> 622). */
static inline __attribute__((always_inline)) int
bm_f32_columns16_body(const float *p, int64_t sl, int64_t len, int64_t r, const kwk_net_pair *sel,
                      int nsel, float *vout, int64_t *iout)
{
    __m512i col[BM_F32_MAX];
    const int64_t padded = (len + 15) & ~(int64_t)15;
    for (int64_t j = 0; j < padded; ++j)
        col[j] = j < len ? _mm512_loadu_si512((const void *)(p + j * sl)) : _mm512_setzero_si512();
    __m512i v, at;
    if (!bm_f32_median16(col, len, r, sel, nsel, &v, &at)) return 0;
    bm_f32_write16(v, at, vout, iout, 1);
    return 1;
}

static int bm_f32_columns16(const float *p, int64_t sl, int64_t len, const kwk_net_pair *sel,
                            int nsel, float *vout, int64_t *iout)
{
    if (len == 9) return bm_f32_columns16_body(p, sl, 9, 4, BM_SELECT_9, 24, vout, iout);
    /* (10: ensembles of ten, Marigold's and FedScope's medians over dim 0) */
    if (len == 10) return bm_f32_columns16_body(p, sl, 10, 4, sel, nsel, vout, iout);
    if (len == 25) return bm_f32_columns16_body(p, sl, 25, 12, BM_SELECT_25, 113, vout, iout);
    return bm_f32_columns16_body(p, sl, len, (len - 1) / 2, sel, nsel, vout, iout);
}

static int bm_f32_columns_applies(int dtype, int64_t len, int64_t inner, int64_t src_si,
                                  int64_t dst_si, const void *values, const int64_t *indices)
{
    return dtype == KWK_FLOAT32 && len >= 2 && len <= BM_F32_MAX && inner >= 16 && src_si == 1 &&
           dst_si == 1 && values && indices;
}

/* w rows starting at p (as bm_f32_columns_median's) another way: by
 * median_columns.h (eight at a time, else row by row) where it takes their
 * length, else row by row. */
static int bm_f32_columns_other(const float *p, int64_t len, int64_t w, int64_t src_so,
                                int64_t src_sl, float *v, int64_t *ix, int64_t dst_so,
                                int ignore_nan)
{
    if (len <= MC_MAX_LEN) return mc_median_dim(p, 1, len, w, src_so, src_sl, v, ix, dst_so, ignore_nan);
    return sk_median_dim_u32(sw_gather_f32, KWK_FLOAT32, p, 1, len, w, src_so, src_sl, 1, v, ix,
                             dst_so, 1, ignore_nan);
}

/* median_dim of the layouts bm_f32_columns_applies takes: sixteen rows at a
 * time; a group holding a NaN, and the last inner % 16 rows of each outer
 * slice, by bm_f32_columns_other. */
static int bm_f32_columns_median(const float *src, int64_t outer, int64_t len, int64_t inner,
                                 int64_t src_so, int64_t src_sl, float *values, int64_t *indices,
                                 int64_t dst_so, int ignore_nan)
{
    kwk_net_pair sel[BM_MAX_PAIRS];
    const int nsel = bm_select_pairs((int)len, (int)(len - 1) / 2, sel);
    for (int64_t o = 0; o < outer; ++o) {
        int64_t i = 0;
        for (; i + 16 <= inner; i += 16) {
            const float *p = src + o * src_so + i;
            float *v = values + o * dst_so + i;
            int64_t *ix = indices + o * dst_so + i;
            if (bm_f32_columns16(p, src_sl, len, sel, nsel, v, ix)) continue;
            const int st = bm_f32_columns_other(p, len, 16, src_so, src_sl, v, ix, dst_so, ignore_nan);
            if (st != KWK_OK) return st;
        }
        if (i < inner) {
            const int st = bm_f32_columns_other(src + o * src_so + i, len, inner - i, src_so, src_sl,
                                                values + o * dst_so + i, indices + o * dst_so + i,
                                                dst_so, ignore_nan);
            if (st != KWK_OK) return st;
        }
    }
    return KWK_OK;
}
#endif

/* Every row, in batches of eight; the last batch ends at the last row
 * (overlapping the one before: its rows are written twice, the same). */
static int bm_median_dim(int dtype, const void *src, int64_t outer, int64_t len, int64_t inner,
                         int64_t src_so, int64_t src_sl, int64_t src_si, void *values,
                         int64_t *indices, int64_t dst_so, int64_t dst_si, int ignore_nan)
{
    const int64_t rows = outer * inner;
    /* the full network (rows with NaN), then the median's part of it */
    kwk_net_pair *pairs = (kwk_net_pair *)malloc(2 * BM_MAX_PAIRS * sizeof(kwk_net_pair));
    kwk_batch_slot *slots = (kwk_batch_slot *)aligned_alloc(32, (size_t)len * sizeof(kwk_batch_slot));
    if (!pairs || !slots) {
        free(pairs);
        free(slots);
        return KWK_E_NOMEM;
    }
    kwk_net_pair *sel = pairs + BM_MAX_PAIRS;
    const int npairs = kwk_net_pairs((int)len, pairs);
    const int nsel = bm_select_pairs((int)len, (int)(len - 1) / 2, sel);
    int64_t r0 = 0;
#if defined(KWK_HAVE_BATCH16)
    /* sixteen rows a selection (two batches side by side), a pair with a
     * NaN row batch by batch */
    kwk_batch_slot *other = (kwk_batch_slot *)aligned_alloc(32, (size_t)len * sizeof(kwk_batch_slot));
    /* float32 rows of up to BM_F32_MAX along the last dim: bm_f32_rows16 first */
    const int f32_rows = dtype == KWK_FLOAT32 && inner == 1 && src_sl == 1 && len <= BM_F32_MAX &&
                         src_so >= len;
    const float *const end = (const float *)kwk_plain_end(src, ((rows - 1) * src_so + len) * 4);
    for (; other && r0 + 2 * KWK_BATCH_LANES <= rows; r0 += 2 * KWK_BATCH_LANES)
        if (!(f32_rows &&
              bm_f32_rows16((const float *)src + r0 * src_so, end, src_so, len, sel, nsel,
                            values ? (float *)values + r0 * dst_so : NULL,
                            indices ? indices + r0 * dst_so : NULL, dst_so)) &&
            !bm_rows16(dtype, (const char *)src, len, inner, src_so, src_sl, src_si, (char *)values,
                       indices, dst_so, dst_si, r0, slots, other, sel, nsel))
            for (int h = 0; h < 2; ++h)
                bm_rows(dtype, (const char *)src, len, inner, src_so, src_sl, src_si,
                        (char *)values, indices, dst_so, dst_si, ignore_nan,
                        r0 + h * KWK_BATCH_LANES, slots, pairs, npairs, sel, nsel);
    free(other);
#endif
    for (; r0 < rows; r0 += KWK_BATCH_LANES) {
        const int64_t start = r0 + KWK_BATCH_LANES <= rows ? r0 : rows - KWK_BATCH_LANES;
        bm_rows(dtype, (const char *)src, len, inner, src_so, src_sl, src_si, (char *)values,
                indices, dst_so, dst_si, ignore_nan, start, slots, pairs, npairs, sel, nsel);
    }
    free(pairs);
    free(slots);
    return KWK_OK;
}

#endif /* KWK_HAVE_BATCH_SORT */

#endif
