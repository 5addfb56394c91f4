/*
 * topk_threshold.h - topk with k <= SR_TOPK_MAX_K of contiguous rows of
 * TT_MIN_LEN..TT_MAX_LEN elements (MoE routers over 256 experts, accuracy@5
 * over 1000 classes), one row at a time in three short steps:
 *
 *  1. the row's keys (sign-flipped int32, as short_rows.h's columns) into a
 *     buffer, and their minimum per lane of two vector accumulators.  The
 *     16 lane minima are 16 different elements, so the k-th smallest of
 *     them, t, has at least k keys at or below it: the k smallest keys of
 *     the row are all <= t (typically t lies near the k/n quantile: a
 *     dozen candidates for k = 8).
 *  2. the positions of the keys <= t, in index order, one compare and one
 *     table-driven compress per vector (compress_lut.h), no branch.
 *  3. the first k (stable order) or k + 1 (torch order) candidates by
 *     (key, position), as words key << 32 | position ranked by counting:
 *     that is the stable answer, exact whatever the ties.  In torch order
 *     the row is exact too when those k + 1 keys are pairwise distinct: a
 *     key outside the candidates is > t >= the k-th smallest, so a tie at
 *     the (k+1)-th place is always among them.  A row with such a tie is
 *     emulated on the spot (torch_order.h's words, built from the keys at
 *     hand).  k = 1 in partial_sort's branch needs no such check: torch's
 *     heap of one keeps the first of the best keys, the stable answer.
 *
 * On AVX-512 each step takes 16 keys (or 8 words) a vector, the compress
 * in a register, and the kernel also takes rows of 128..256 for k = 1 and
 * for keys other than float32's (TT_MIN_LEN_TOP1, TT_MIN_LEN_NARROW).
 *
 * sr_topk's column kernel keeps the m best of eight rows in m vectors
 * (2m min/max per element, and a second pass for the positions): cheaper
 * for short rows, but from 256 elements the threshold's one min and one
 * compare per element win (the figures at TT_MIN_LEN).  Rows with more than
 * TT_CAND_MAX candidates (all keys equal, or the row's smallest keys all in
 * one lane) are handed back for the per-row kernel, as sr_topk hands back
 * its tied rows.
 */
#ifndef KWK_TOPK_THRESHOLD_H
#define KWK_TOPK_THRESHOLD_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "compress_lut.h"
#include "short_rows.h"
#include "torch_order.h"

/* Where it was measured faster (random float32 rows, ns/element, one
 * thread): from 256 elements (and k >= 3 there) than sr_topk's columns
 * (4096x256 k=4 0.57 -> 0.47, k=8 0.70 -> 0.57, but k=2 0.41 -> 0.43 and
 * 4096x128 k=8 0.77 -> 0.87), and below 4096 than the per-row kernel
 * (512x512 k=4 0.51 -> 0.36, 256x1000 k=5 0.41 -> 0.34); from 4096 the
 * per-row kernel's streamed block skip reads the raw values (4x4096 k=1
 * 0.19, against 0.32 here). */
enum {
    TT_MIN_LEN = 256,
    TT_MIN_K_AT_MIN_LEN = 3,
    TT_MAX_LEN = 4095,
    TT_CAND_MAX = 64,
    TT_RANK_MAX = 24, /* candidates ranked by counting; more: by insertion */
    TT_ROW_MIN_LEN = 16, /* tt_row's least: two whole vectors of keys */
};

/* On AVX-512 (tt_row's 16-key vectors) keys other than float32's take the
 * threshold from 128 elements: sr_topk's columns of those dtypes cost more
 * to load.  Measured (stable order, 4096 rows, us, sr_topk -> tt_row, min
 * of 3 alternating runs): bfloat16 x128 k=2 362 -> 206, float16 k=8 472 ->
 * 311, int16 k=8 418 -> 294, int32 k=4 292 -> 216, k=2 196 -> 184 (torch
 * order, bfloat16 k=8 937 -> 851); but float32 x128 k=2..8 0.80-0.91x,
 * x160 0.97-0.99x, and 64-wide rows of int32 0.91x.  So does k = 1 from
 * 128 (float32, router rows and randn: x128 1.16-1.18x, x200 1.20-1.28x,
 * x256 1.45-1.56x; x64 1.0-1.05x; float32 rows of 64..8192 have since gone
 * to topk_top1.h first, faster again), and k = 2 at 256 (1.05-1.09x; at
 * 128 and 200 0.73-0.88x). */
#if defined(__AVX512F__)
enum { TT_MIN_LEN_NARROW = 128, TT_MIN_LEN_TOP1 = 128, TT_MIN_K_AT_MIN_LEN_T = 2 };
#else
/* (none of these rules: TT_MIN_LEN_TOP1 past TT_MIN_LEN) */
enum { TT_MIN_LEN_NARROW = TT_MIN_LEN, TT_MIN_LEN_TOP1 = TT_MIN_LEN + 1,
       TT_MIN_K_AT_MIN_LEN_T = TT_MIN_K_AT_MIN_LEN };
#endif

/* What tt_row found. */
enum { TT_EXACT = 0, TT_TIE = 1, TT_OVERFLOW = 2 };

/* key[j] for j < n: the order key of element j of a contiguous row, xored
 * with x (flip ^ sign bit: a signed compare is then the selection order);
 * key[n..) up to a multiple of eight: INT32_MAX, which never lowers a lane
 * minimum (every lane holds a real element: n >= 8). */
#define TT_DEFINE_KEYS(SUF, UT, KEY, DTYPE)                                   \
    __attribute__((unused)) static void tt_keys_##SUF(const char *row, int64_t n, uint32_t x, \
                                                      int32_t *key)             \
    {                                                                         \
        for (int64_t j = 0; j < n; ++j) {                                     \
            UT v;                                                             \
            memcpy(&v, row + j * (int64_t)sizeof(UT), sizeof(UT));            \
            key[j] = (int32_t)((uint32_t)KEY(v) ^ x);                         \
        }                                                                     \
        for (int64_t j = n; j & (SR_LANES - 1); ++j) key[j] = INT32_MAX;      \
    }

SR_NARROW_DTYPES(TT_DEFINE_KEYS)
#undef TT_DEFINE_KEYS

typedef void (*tt_keys_fn)(const char *, int64_t, uint32_t, int32_t *);

#if defined(__AVX2__)
/* tt_keys_f32 a vector at a time (select_words.h's sw_gather_f32): the
 * scalar key's branches keep the compiler from vectorising it for AVX2.
 * Measured (float32 topk, us, min of 3 alternating runs): AVX2 target
 * 1.04-1.08x (1024x4000 k=8 1266 -> 1172, 4096x256 k=4 514 -> 494),
 * AVX-512 (whose compiled loop was vectorised, but masked) 1.0-1.06x with
 * 16-key vectors.  The pass reads the row first, so it also bears the
 * row's cache misses. */
static void tt_keys_f32_vec(const char *row, int64_t n, uint32_t x, int32_t *key)
{
    sw_gather_f32(row, 4, n, x, (uint32_t *)(void *)key);
    for (int64_t j = n; j & (SR_LANES - 1); ++j) key[j] = INT32_MAX;
}
#endif

/* The key function of a dtype with keys of <= 32 bits, else NULL. */
static tt_keys_fn tt_keys_for(int dtype)
{
#if defined(__AVX2__)
    if (dtype == KWK_FLOAT32) return tt_keys_f32_vec;
#endif
    switch (dtype) {
#define TT_KEYS_CASE(SUF, UT, KEY, DT) case DT: return tt_keys_##SUF;
    SR_NARROW_DTYPES(TT_KEYS_CASE)
#undef TT_KEYS_CASE
    default: return NULL;
    }
}

/* Whether tt_topk takes this call (torch's nth_element branch leaves
 * sorted=False rows in introselect order, as for sr_topk). */
static int tt_topk_applies(int dtype, int64_t len, int64_t k, int64_t src_sl, int sorted,
                           int order)
{
    if (order == KWK_ORDER_TORCH && !sorted && k * 64 > len && k > 1) return 0;
    if (k == 1 && len >= TT_MIN_LEN_TOP1 && len <= TT_MIN_LEN)
        return src_sl == 1 && tt_keys_for(dtype) != NULL;
    if (dtype != KWK_FLOAT32 && len >= TT_MIN_LEN_NARROW && len < TT_MIN_LEN)
        return src_sl == 1 && k >= 1 && k <= SR_TOPK_MAX_K && tt_keys_for(dtype) != NULL;
    return src_sl == 1 && len >= TT_MIN_LEN && len <= TT_MAX_LEN && k >= 1 &&
           k <= SR_TOPK_MAX_K && (len > TT_MIN_LEN || k >= TT_MIN_K_AT_MIN_LEN_T) &&
           tt_keys_for(dtype) != NULL;
}

#if defined(__AVX512F__)
/* Rows of keys are read 16 at a time on AVX-512 (tail: masked loads that
 * read INT32_MAX past n), so the callers' key and candidate buffers hold
 * n + TT_PAD entries. */
enum { TT_PAD = 16 };
#else
enum { TT_PAD = SR_LANES };
#endif

#if defined(__AVX512F__)
/* The threshold of tt_row: the k-th smallest of the row's 16 lane minima
 * (lane l: positions = l mod 16; n >= 16, so each is a real element, and
 * the 16 are different elements), counted out in one zmm: the largest
 * minimum with fewer than k minima below it is the k-th smallest. */
static int32_t tt_threshold(const int32_t *key, int64_t n, int k)
{
    const __m512i big = _mm512_set1_epi32(INT32_MAX);
    const int64_t full = n / 16;
    const __mmask16 tail = (__mmask16)((1u << (n & 15)) - 1);
    __m512i m0 = _mm512_loadu_si512(key), m1 = big;
    int64_t v = 1;
    for (; v + 1 < full; v += 2) { /* two chains: one min a cycle each */
        m0 = _mm512_min_epi32(m0, _mm512_loadu_si512(key + v * 16));
        m1 = _mm512_min_epi32(m1, _mm512_loadu_si512(key + (v + 1) * 16));
    }
    if (v < full) m0 = _mm512_min_epi32(m0, _mm512_loadu_si512(key + v * 16));
    if (tail) m1 = _mm512_min_epi32(m1, _mm512_mask_loadu_epi32(big, tail, key + full * 16));
    const __m512i mn = _mm512_min_epi32(m0, m1);
    if (k == 1) return _mm512_reduce_min_epi32(mn);
    int32_t lane[16];
    _mm512_storeu_si512(lane, mn);
    __m512i below = _mm512_setzero_si512();
    const __m512i one = _mm512_set1_epi32(1);
    for (int l = 0; l < 16; ++l)
        below = _mm512_mask_add_epi32(below, _mm512_cmpgt_epi32_mask(mn, _mm512_set1_epi32(lane[l])),
                                      below, one);
    return _mm512_mask_reduce_max_epi32(_mm512_cmplt_epi32_mask(below, _mm512_set1_epi32(k)), mn);
}

/* Positions j < n with key[j] <= t into cand, in index order; their count.
 * A register compress per 16 keys, stored whole (cand has n + TT_PAD
 * room): the memory form of vpcompressd is slow on Intel cores. */
static int64_t tt_candidates(const int32_t *key, int64_t n, int32_t t, int32_t *cand)
{
    const __m512i tv = _mm512_set1_epi32(t), step = _mm512_set1_epi32(16);
    __m512i pos = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const int64_t full = n / 16;
    int64_t c = 0;
    for (int64_t v = 0; v < full; ++v) {
        const __mmask16 le = _mm512_cmple_epi32_mask(_mm512_loadu_si512(key + v * 16), tv);
        _mm512_storeu_si512(cand + c, _mm512_maskz_compress_epi32(le, pos));
        c += __builtin_popcount((unsigned)le);
        pos = _mm512_add_epi32(pos, step);
    }
    const __mmask16 tail = (__mmask16)((1u << (n & 15)) - 1);
    if (tail) {
        const __mmask16 le = _mm512_mask_cmple_epi32_mask(
            tail, _mm512_maskz_loadu_epi32(tail, key + full * 16), tv);
        _mm512_storeu_si512(cand + c, _mm512_maskz_compress_epi32(le, pos));
        c += __builtin_popcount((unsigned)le);
    }
    return c;
}
#else
/* The k-th smallest of the 16 lane minima mn[0..1] (each a different
 * element of the row): the largest one with fewer than k minima below it
 * (minima equal to it are not below it).  Branch-free. */
SR_INLINE int32_t tt_kth_minimum(const sr_v mn[2], int k)
{
    int32_t lane[2 * SR_LANES];
    sr_store(lane, mn[0]);
    sr_store(lane + SR_LANES, mn[1]);
    sr_v below0 = sr_set1(0), below1 = sr_set1(0);
    for (int l = 0; l < 2 * SR_LANES; ++l) {
        const sr_v y = sr_set1(lane[l]);
        below0 = sr_sub(below0, sr_gt(mn[0], y));
        below1 = sr_sub(below1, sr_gt(mn[1], y));
    }
    const sr_v kv = sr_set1(k), none = sr_set1(INT32_MIN);
    const sr_v t = sr_max(sr_blend(none, mn[0], sr_gt(kv, below0)),
                          sr_blend(none, mn[1], sr_gt(kv, below1)));
    int32_t tl[SR_LANES];
    sr_store(tl, t);
    int32_t r = tl[0];
    for (int l = 1; l < SR_LANES; ++l) r = tl[l] > r ? tl[l] : r;
    return r;
}

/* The threshold of tt_row: the k-th smallest of 16 lane minima (even
 * vectors in mn[0], odd ones in mn[1]; n >= TT_ROW_MIN_LEN: every lane of
 * both holds a real element). */
static int32_t tt_threshold(const int32_t *key, int64_t n, int k)
{
    const int64_t nv = (n + SR_LANES - 1) / SR_LANES;
    sr_v mn[2] = {sr_load(key), sr_load(key + SR_LANES)};
    int64_t v = 2;
    for (; v + 1 < nv; v += 2) {
        mn[0] = sr_min(mn[0], sr_load(key + v * SR_LANES));
        mn[1] = sr_min(mn[1], sr_load(key + (v + 1) * SR_LANES));
    }
    if (v < nv) mn[0] = sr_min(mn[0], sr_load(key + v * SR_LANES));
    return tt_kth_minimum(mn, k);
}

/* Positions j < n with key[j] <= t into cand, in index order, without a
 * branch per vector (whether one holds a candidate is a coin toss); cand
 * has room for every position and a vector more.  Returns their count. */
static int64_t tt_candidates(const int32_t *key, int64_t n, int32_t t, int32_t *cand)
{
    const int64_t nv = (n + SR_LANES - 1) / SR_LANES;
    const sr_v tv = sr_set1(t);
    int64_t c = 0;
#if defined(__AVX2__)
    __m256i pos = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i step = _mm256_set1_epi32(SR_LANES);
#endif
    const unsigned tail = n & (SR_LANES - 1) ? (1u << (n & (SR_LANES - 1))) - 1 : 0xFFu;
    for (int64_t v = 0; v < nv; ++v) {
        unsigned le = ~sr_mask(sr_gt(sr_load(key + v * SR_LANES), tv)) & 0xFFu;
        le &= v + 1 < nv ? 0xFFu : tail; /* not the padding */
#if defined(__AVX2__)
        const __m256i perm = _mm256_cvtepu8_epi32(
            _mm_loadl_epi64((const __m128i *)(const void *)&KWK_COMPRESS_LUT[le]));
        _mm256_storeu_si256((__m256i *)(void *)(cand + c), _mm256_permutevar8x32_epi32(pos, perm));
        pos = _mm256_add_epi32(pos, step);
        c += __builtin_popcount(le);
#else
        for (; le; le &= le - 1) cand[c++] = (int32_t)(v * SR_LANES + __builtin_ctz(le));
#endif
    }
    return c;
}
#endif

/* best[rank] = w[i] for the c distinct words w[0..c) (room for a multiple
 * of the vector's words past c), ranks of m and more all to best[m]: each
 * candidate's rank by counting the words below it, branch-free, where an
 * insertion mispredicts on every move; a vector of candidates at once. */
static void tt_rank_words(int64_t *w, int64_t c, int m, int64_t *best)
{
#if defined(__AVX512F__)
    for (int64_t i = c; i & 7; ++i) w[i] = INT64_MAX; /* below no word */
    const __m512i one = _mm512_set1_epi64(1);
    for (int64_t q = 0; q < c; q += 8) {
        const __m512i wq = _mm512_loadu_si512(w + q);
        __m512i r = _mm512_setzero_si512();
        for (int64_t j = 0; j < c; ++j)
            r = _mm512_mask_add_epi64(r, _mm512_cmpgt_epi64_mask(wq, _mm512_set1_epi64(w[j])), r, one);
        int64_t rank[8];
        _mm512_storeu_si512(rank, r);
        for (int l = 0; l < 8 && q + l < c; ++l) best[rank[l] < m ? rank[l] : m] = w[q + l];
    }
#elif defined(__AVX2__)
    for (int64_t i = c; i & 3; ++i) w[i] = INT64_MAX; /* below no word */
    for (int64_t q = 0; q < c; q += 4) {
        const __m256i wq = _mm256_loadu_si256((const __m256i *)(const void *)(w + q));
        __m256i r = _mm256_setzero_si256();
        for (int64_t j = 0; j < c; ++j)
            r = _mm256_sub_epi64(r, _mm256_cmpgt_epi64(wq, _mm256_set1_epi64x(w[j])));
        int64_t rank[4];
        _mm256_storeu_si256((__m256i *)(void *)rank, r);
        for (int l = 0; l < 4 && q + l < c; ++l) best[rank[l] < m ? rank[l] : m] = w[q + l];
    }
#else
    for (int64_t i = 0; i < c; ++i) {
        int64_t r = 0;
        for (int64_t j = 0; j < c; ++j) r += w[j] < w[i];
        best[r < m ? r : m] = w[i];
    }
#endif
}

/* The positions of the k smallest of key[0..n) (padded as tt_keys pads) by
 * (key, position) to at[p * SR_LANES], p < k; cand has room for n +
 * TT_PAD positions.  Returns TT_EXACT, else (at[] then all 0) TT_TIE:
 * with tie_check, two equal keys among the first k + 1, or TT_OVERFLOW:
 * too many candidates.  On AVX-512 its steps (tt_threshold, tt_candidates,
 * tt_rank_words) take 16 keys or 8 words a vector, the compress in a
 * register: torch.topk under install(), float32, us, min of 3 alternating
 * runs, 8 -> 16 lanes: 4096x256 k=8 (deepseek's expert choice) 578 -> 440,
 * k=4 485 -> 370, 256x1000 k=5 (accuracy@5) 78 -> 63, 1024x4000 k=8 1149
 * -> 885; int32 4096x256 k=8 1.20-1.31x, bfloat16 (stable) 1.39x. */
static int tt_row(const int32_t *key, int64_t n, int k, int tie_check, int32_t *at,
                  int32_t *cand)
{
    const int32_t t = tt_threshold(key, n, k);
    const int64_t c = tt_candidates(key, n, t, cand);
    if (c > TT_CAND_MAX) {
        for (int p = 0; p < k; ++p) at[p * SR_LANES] = 0;
        return TT_OVERFLOW;
    }
    /* the m best candidates by (key, position) (c >= k always), as words
     * key << 32 | position in signed order */
    const int m = tie_check && c > k ? k + 1 : k;
    int64_t w[TT_CAND_MAX + 8], best[TT_CAND_MAX + 1];
    for (int64_t i = 0; i < c; ++i) w[i] = (int64_t)((uint64_t)(int64_t)key[cand[i]] << 32) | cand[i];
    if (c <= TT_RANK_MAX) {
        tt_rank_words(w, c, m, best);
    } else {
        int b = 0;
        for (int64_t i = 0; i < c; ++i) {
            if (b == m) {
                if (w[i] >= best[m - 1]) continue;
                --b; /* the last one drops out */
            }
            int p = b++;
            for (; p > 0 && best[p - 1] > w[i]; --p) best[p] = best[p - 1];
            best[p] = w[i];
        }
    }
    int tie = 0;
    if (tie_check)
        for (int p = 0; p + 1 < m; ++p) tie |= (best[p] >> 32) == (best[p + 1] >> 32);
    for (int p = 0; p < k; ++p) at[p * SR_LANES] = tie ? 0 : (int32_t)(best[p] & 0xFFFFFFFF);
    return tie ? TT_TIE : TT_EXACT;
}

/* torch.topk's selection on one row of words key << ibits | position (all
 * positions in order), move for move: std::partial_sort when k * 64 <=
 * len, else std::nth_element at k - 1 and, when sorted, std::sort of the
 * first k - 1.  The first k words then hold torch's answer. */
static void tt_emulate_words(uint64_t *w, int64_t len, int64_t k, int sorted, int ibits)
{
    if (k * 64 <= len) {
        wemu_partial_sort(w, k, len, ibits);
    } else {
        wemu_nth_element(w, k - 1, len, ibits);
        if (sorted) wemu_std_sort(w, k - 1, ibits);
    }
}

/* topk over the rows tt_topk_applies to; arguments and outputs as
 * sr_topk's.  A row with a tie among its first k + 1 keys in torch order is
 * emulated here (tt_emulate_words on words built from the keys at hand);
 * only rows with too many candidates are handed back for redo, as sr_topk
 * hands back its rows (a redone row's outputs may hold anything). */
static int tt_topk(int dtype, const void *src, int64_t outer, int64_t len, int64_t inner,
                   int64_t src_so, int64_t src_si, int64_t k, void *values, int64_t *indices,
                   int64_t dst_so, int64_t dst_sl, int64_t dst_si, int largest, int sorted,
                   int order, int64_t *redo, int64_t *nredo)
{
    const tt_keys_fn keys_of = tt_keys_for(dtype);
    const int es = KWK_DTYPES[dtype].elem_size;
    const uint32_t flip = largest ? (uint32_t)kwk_width_mask(KWK_DTYPES[dtype].key_bits) : 0;
    /* k = 1 in partial_sort's branch (k * 64 <= len): the heap of one
     * takes an element only when strictly better, so torch answers the
     * first of the best keys, the stable answer: no tie to look for */
    const int tie_check = order == KWK_ORDER_TORCH && !(k == 1 && k * 64 <= len);
    const int ibits = kwk_bits_for((uint64_t)(len - 1));
    int32_t *key = (int32_t *)malloc((size_t)(len + TT_PAD) * sizeof(int32_t));
    int32_t *cand = (int32_t *)malloc((size_t)(len + TT_PAD) * sizeof(int32_t));
    uint64_t *words = tie_check ? (uint64_t *)malloc((size_t)len * sizeof(uint64_t)) : NULL;
    if (!key || !cand || (tie_check && !words)) {
        free(key);
        free(cand);
        free(words);
        return KWK_E_NOMEM;
    }
    int32_t at[SR_TOPK_MAX_K * SR_LANES];
    int64_t ties = 0;
    sr_walk w;
    sr_group g;
    sr_walk_init(&w, src, es, outer, inner, src_so, src_si, dst_so, dst_si);
    *nredo = 0;
    sr_plan_storage plan;
    const void *dense_plan = sr_dense_plan_for(&plan, es, 1, inner, src_so, len, k, dst_so,
                                               dst_sl, values, indices);
    for (int64_t t0 = 0; sr_next_group(&w, &g); t0 += SR_LANES) {
        unsigned skip = 0;
        for (int l = 0; l < g.count; ++l) {
            keys_of(g.src[l], len, flip ^ 0x80000000u, key);
            const int found = tt_row(key, len, (int)k, tie_check, at + l, cand);
            if (found == TT_TIE) {
                /* the keys unsigned, as the emulation orders them */
                for (int64_t j = 0; j < len; ++j)
                    words[j] = (uint64_t)((uint32_t)key[j] ^ 0x80000000u) << ibits | (uint64_t)j;
                tt_emulate_words(words, len, k, sorted, ibits);
                for (int p = 0; p < k; ++p)
                    at[p * SR_LANES + l] = (int32_t)(words[p] & kwk_width_mask(ibits));
                ++ties;
            } else if (found == TT_OVERFLOW) {
                skip |= 1u << l;
                redo[(*nredo)++] = t0 + l;
            }
        }
        sr_emit_group_top(&g, skip, at, (int)k, es, es, dtype, (char *)values, indices, dst_sl,
                          dense_plan);
    }
    free(key);
    free(cand);
    free(words);
    kwk_count(KWK_COUNT_THRESHOLD_TOPK_ROWS, outer * inner);
    kwk_count(KWK_COUNT_THRESHOLD_TOPK_TIES, ties);
    kwk_count(KWK_COUNT_THRESHOLD_TOPK_REDONE, *nredo);
    return KWK_OK;
}

#endif
