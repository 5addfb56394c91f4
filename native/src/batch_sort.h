/*
 * batch_sort.h - many short rows sorted eight at a time by one network.
 *
 * Rows of up to KWK_BATCH_MAX elements with keys of at most 32 bits (every
 * dtype but the 64-bit ones) are sorted "vertically": key j of eight rows
 * sits in one vector, its index j in another, and each comparator of
 * Batcher's odd-even merge sort (row_network.h) is one compare-exchange of
 * eight rows at once - no branch, no shuffle.  The comparator orders by
 * (key, index), so the result is the stable sort of each row.
 *
 * Why: rows of 17..256 elements (class scores, attention rows, sparsemax
 * inputs, per-token experts) took torch's std::sort emulation or a
 * comparison sort one row at a time, 10-15 ns a word; the network spends
 * about a tenth of that per row.
 *
 * torch order (KWK_ORDER_TORCH): rows of at most 16 elements are stable in
 * torch too (std::sort's insertion sort).  A longer row is exact when its
 * keys are all different; a row whose sorted keys show a tie is redone by
 * the caller's one-row path (the std::sort emulation).
 */
#ifndef KWK_BATCH_SORT_H
#define KWK_BATCH_SORT_H

#include <stdint.h>
#include <stdlib.h>
#include "keys.h"
#include "row_network.h"
#include "transpose8.h"

enum { KWK_BATCH_LANES = 8, KWK_BATCH_MAX = 1024, KWK_BATCH_MAX_PAIRS = 24063 };

#if defined(__AVX2__)
#include <immintrin.h>
#define KWK_HAVE_BATCH_SORT 1

/* Position j of the eight rows: their keys (biased so a signed compare
 * orders them as unsigned) and the indices the keys came from. */
typedef struct {
    __m256i key, idx;
} kwk_batch_slot;

/* Row l of a batch: where its elements are and where its output goes. */
typedef struct {
    const char *row[KWK_BATCH_LANES];
    int64_t step; /* source bytes between elements */
    int adjacent; /* row l starts at row[0] + l elements (rows along a non-last
                     dim): position j of all eight is one 8-element run */
} kwk_batch_src;

/* 64-bit integers take part when each row's range fits in 32 bits (ids,
 * positions, permutations): their keys are offsets from the row's minimum. */
/* Rows of one-byte keys (bool, int8, uint8) from this length take the
 * one-row path, whose one-digit counting sort does a few steps a key where
 * the network's compares grow as n log^2 n.  Measured (stable argsort of
 * random rows of 0..99, ns/el, network -> one-row path, two runs): uint8
 * 256x384 6.0 -> 4.2, 128x512 6.9 -> 4.0, 96x768 9.1 -> 3.7, 64x1000 9.9
 * -> 3.5 (int8 the same); bool 6.1 -> 6.4 at 384, 9.9 -> 5.8 at 1000;
 * below 384 the network wins (uint8 4096x32 3.2 vs 7.6). */
enum { KWK_BATCH_BYTE_MIN_LEN = 384 };

/* The longest row the network takes.  On AVX-512 the one-row path's packed
 * words go to a quicksort whose base case sorts up to 128 words in
 * registers (simd_qsort.h), and the network's n log^2 n compares lose to it
 * sooner: stable rows of 32-bit keys past 384, of 64-bit keys past 16.
 * torch order keeps longer rows (its one-row path runs the std::sort
 * emulation on short rows).  Measured (python, torch.argsort(stable=True)
 * / torch.sort under install(), ns/el, network vs one-row): float32 448
 * 4.47 vs 4.28, 512 5.03 vs 4.48, 768 5.90 vs 4.34, 896 7.86 vs 4.35, but
 * 384 4.57 vs 4.59, 256 3.90 vs 4.04; int32 384 4.53 vs 4.32, 640 5.47 vs
 * 3.63, 192 3.92 vs 5.51; int64 of 20 bits 17 5.94 vs 4.64, 32 4.62 vs
 * 3.22, 64 5.90 vs 2.78; torch order, float32 512 4.77 vs 5.60, 640 5.68
 * vs 5.51, 896 7.87 vs 5.38, int64 64 6.21 vs 10.65 (the emulation);
 * torch order, int64 of 31-bit range, us, network -> one-row (stable sort,
 * then the tie check): 4096x64 1144 -> 1167, 1024x256 1385 -> 1447, but
 * 512x384 1162 -> 1034, 512x512 1551 -> 1296, 256x768 1472 -> 968,
 * 64x1000 648 -> 297 (tie-heavy rows alike either way), so 256 then.
 * With the 64-bit rows loaded by vectors (batch_load64_rows; Intel Xeon,
 * AVX-512, same call, us, one-row vs network, min of 7 alternating): 1024
 * x300 1696 vs 1281, 512x384 1020 vs 896, 512x448 1202 vs 1056, 512x512
 * 1235 vs 1190, 512x576 1600 vs 1624 (16-bit ranges, tie-heavy, alike
 * throughout): 448. */

static int64_t batch_sort_max_len(int dtype, int torch_ties)
{
#if defined(__AVX512F__)
    if (KWK_DTYPES[dtype].key_bits > 32) return torch_ties ? 448 : 16;
    return torch_ties ? 576 : 384;
#else
    (void)dtype;
    (void)torch_ties;
    return KWK_BATCH_MAX;
#endif
}

static int batch_sort_applies(int dtype, int64_t len, int64_t rows, int torch_ties)
{
    const int keys_fit = KWK_DTYPES[dtype].key_bits <= 32 || dtype == KWK_INT64 ||
                         dtype == KWK_UINT64;
    if (KWK_DTYPES[dtype].key_bits <= 8 && len >= KWK_BATCH_BYTE_MIN_LEN) return 0;
#if defined(__AVX512F__)
    /* 64-bit rows of up to 8 are ranked in one vector each
     * (sort_short_wide_row), quicker than the batch's loads and network
     * even where their range fits 32 bits (AMD Zen 4, int64 of 32-bit
     * values, torch.sort of 4096x8 169 -> 93 us, torch 151; 4096x6 132 -> 82) */
    if (KWK_DTYPES[dtype].key_bits == 64 && len <= 8) return 0;
#endif
    return keys_fit && len >= 2 && len <= batch_sort_max_len(dtype, torch_ties) &&
           rows >= KWK_BATCH_LANES;
}

/* batch_load64 for eight rows of at least eight contiguous int64 / uint64
 * elements (rows along the last dim): each row's range from vectors of
 * four, then eight positions of the eight rows narrowed to 32-bit offsets
 * and transposed (as batch_load_rows32 does), where the element-by-element
 * loads below were most of a batch's time.  Measured (Intel Xeon, AVX-512,
 * torch.sort / torch.argsort in torch order under install(), int64 of
 * 31-bit range, us, scalar -> vector loads, min of 3 alternating runs):
 * 8192x24 899 -> 433 / 767 -> 352, 4096x64 1220 -> 704 / 1070 -> 567,
 * 2048x128 1302 -> 849 / 1138 -> 797, 1024x256 1340 -> 956 / 1204 -> 850.
 * (Sixteen rows a network with these loads, batch_sort16: 0.85-1.24x
 * against eight, by length; not taken.)  -1: not such rows; else
 * batch_load64's answer.  Keys in the signed domain: s = key ^ 2^63
 * (int64: the value itself), whose signed order is the keys' unsigned
 * order and whose differences are the keys'. */
static int batch_load64_rows(int dtype, const kwk_batch_src *src, int64_t len, uint64_t flip,
                             kwk_batch_slot *slots)
{
    if ((dtype != KWK_INT64 && dtype != KWK_UINT64) || src->adjacent || src->step != 8 || len < 8)
        return -1;
    const uint64_t to_signed = (dtype == KWK_INT64 ? 0 : 0x8000000000000000ull) ^ flip;
    const __m256i ts = _mm256_set1_epi64x((long long)to_signed);
    int64_t lo[KWK_BATCH_LANES];
    for (int l = 0; l < KWK_BATCH_LANES; ++l) {
        const char *row = src->row[l];
        __m256i mx = _mm256_set1_epi64x(INT64_MIN), mn = _mm256_set1_epi64x(INT64_MAX);
        for (int64_t j = 0; j < len; j += 4) {
            const int64_t at = j + 4 <= len ? j : len - 4; /* (len >= 8) */
            const __m256i s = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(const void *)(row + at * 8)), ts);
            mx = _mm256_blendv_epi8(mx, s, _mm256_cmpgt_epi64(s, mx));
            mn = _mm256_blendv_epi8(mn, s, _mm256_cmpgt_epi64(mn, s));
        }
        int64_t hi;
        kwk_hminmax64(mn, mx, &lo[l], &hi);
        if ((uint64_t)hi - (uint64_t)lo[l] > 0xFFFFFFFFull) return 0;
    }
    /* low halves of the 64-bit lanes, in order, into the low 128 bits */
    const __m256i pick = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
    const __m256i bias = _mm256_set1_epi32((int)0x80000000u);
    for (int64_t c = 0; c < len; c += 8) {
        const int64_t at = c + 8 <= len ? c : len - 8;
        __m256i v[8];
        for (int l = 0; l < KWK_BATCH_LANES; ++l) {
            const char *p = src->row[l] + at * 8;
            const __m256i base = _mm256_set1_epi64x(lo[l]);
            const __m256i a = _mm256_sub_epi64(
                _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(const void *)p), ts), base);
            const __m256i b = _mm256_sub_epi64(
                _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(const void *)(p + 32)), ts), base);
            const __m256i qa = _mm256_permutevar8x32_epi32(a, pick);
            const __m256i qb = _mm256_permutevar8x32_epi32(b, pick);
            v[l] = _mm256_xor_si256(_mm256_permute2x128_si256(qa, qb, 0x20), bias);
        }
        kwk_transpose8_epi32(v);
        for (int j = 0; j < 8; ++j) slots[at + j].key = v[j];
    }
    for (int64_t j = 0; j < len; ++j) slots[j].idx = _mm256_set1_epi32((int)j);
    return 1;
}

/* 64-bit rows: keys as offsets from each row's smallest; 0 when some row's
 * range needs more than 32 bits (the caller sorts those rows one by one). */
static int batch_load64(int dtype, const kwk_batch_src *src, int64_t len, uint64_t flip,
                        kwk_batch_slot *slots)
{
    const int rows = batch_load64_rows(dtype, src, len, flip, slots);
    if (rows >= 0) return rows;
    uint32_t *keys = (uint32_t *)slots;
    for (int l = 0; l < KWK_BATCH_LANES; ++l) {
        const char *base = src->adjacent ? src->row[0] + l * 8 : src->row[l];
        uint64_t lo = ~(uint64_t)0, hi = 0;
        for (int64_t j = 0; j < len; ++j) {
            const uint64_t k = kwk_key_at(dtype, base + j * src->step) ^ flip;
            lo = k < lo ? k : lo;
            hi = k > hi ? k : hi;
        }
        if (hi - lo > 0xFFFFFFFFull) return 0;
        for (int64_t j = 0; j < len; ++j)
            keys[j * 16 + l] = (uint32_t)((kwk_key_at(dtype, base + j * src->step) ^ flip) - lo) ^ 0x80000000u;
    }
    for (int64_t j = 0; j < len; ++j) slots[j].idx = _mm256_set1_epi32((int)j);
    return 1;
}

/* slots[j].key lane l = key of element j of row l (flipped, biased); the
 * switch is outside the loops so each gather is one specialised loop.
 * Adjacent rows are read position by position (eight neighbours at a
 * time, one cache line for all of them), others row by row. */
#define KWK_BATCH_GATHER(LOAD)                                                \
    if (src->adjacent) {                                                      \
        for (int64_t j = 0; j < len; ++j) {                                   \
            const char *base = src->row[0] + j * src->step;                   \
            for (int l = 0; l < KWK_BATCH_LANES; ++l) {                       \
                const char *p = base + l * es;                                \
                keys[j * 16 + l] = ((uint32_t)(LOAD) ^ flip) ^ 0x80000000u;   \
            }                                                                 \
        }                                                                     \
    } else {                                                                  \
        for (int l = 0; l < KWK_BATCH_LANES; ++l) {                           \
            const char *base = src->row[l];                                   \
            for (int64_t j = 0; j < len; ++j) {                               \
                const char *p = base + j * src->step;                         \
                keys[j * 16 + l] = ((uint32_t)(LOAD) ^ flip) ^ 0x80000000u;   \
            }                                                                 \
        }                                                                     \
    }

/* The keys (keys.h: kwk_key_at) of eight 4-byte elements of a float32,
 * int32 or uint32 row, as 32-bit lanes; and of sixteen 2-byte elements of
 * a bfloat16, float16, int16 or uint16 row, as 16-bit lanes.  Not yet
 * flipped or biased (the loaders' `post`). */
static inline __m256i batch_keys32(int dtype, __m256i v)
{
    if (dtype == KWK_FLOAT32) return kwk_keys8_f32(v);
    return dtype == KWK_INT32 ? _mm256_xor_si256(v, _mm256_set1_epi32((int)0x80000000u)) : v;
}

static inline __m256i batch_keys16(int dtype, __m256i b)
{
    switch (dtype) {
    case KWK_BFLOAT16: return kwk_keys16_h16(b, 0x7F80);
    case KWK_FLOAT16: return kwk_keys16_h16(b, 0x7C00);
    case KWK_INT16: return _mm256_xor_si256(b, _mm256_set1_epi16((short)0x8000));
    default: return b; /* uint16 */
    }
}

/* Rows of at least eight contiguous 4-byte elements (a row along the last
 * dim): eight positions of the eight rows are eight vector loads and one
 * 8x8 transpose, the last block overlapping the one before when len is not
 * a multiple of 8, instead of 8 len scalar loads and stores (the median of
 * 301056 float32 rows of 9, native: 18 -> 12-14 ns a row with the rest
 * unchanged; eight vpgatherdd per eight positions were no faster on Zen 3).
 * Returns 0 (nothing loaded) for other dtypes and layouts. */
static int batch_load_rows32(int dtype, const kwk_batch_src *src, int64_t len, uint32_t flip,
                             kwk_batch_slot *slots)
{
    if ((dtype != KWK_FLOAT32 && dtype != KWK_INT32 && dtype != KWK_UINT32) || src->step != 4 ||
        len < 8)
        return 0;
    /* flip, then the bias that lets a signed compare order the keys */
    const __m256i post = _mm256_set1_epi32((int)(flip ^ 0x80000000u));
    for (int64_t c = 0; c < len; c += 8) {
        const int64_t at = c + 8 <= len ? c : len - 8;
        __m256i v[8];
        for (int l = 0; l < 8; ++l)
            v[l] = _mm256_loadu_si256((const __m256i *)(const void *)(src->row[l] + at * 4));
        kwk_transpose8_epi32(v);
        for (int j = 0; j < 8; ++j) {
            slots[at + j].key = _mm256_xor_si256(batch_keys32(dtype, v[j]), post);
        }
    }
    return 1;
}

/* The same for rows of 2-byte elements (bfloat16, float16, int16, uint16):
 * eight positions of two rows are one vector of sixteen keys (keys.h's
 * float keys, or the sign flipped), widened to 32 bits and transposed.
 * The element-by-element loads were a quarter of the time of a stable
 * argsort of 4096x64 bfloat16, more than the network's.  Measured (Intel
 * Xeon, AVX-512, stable argsort / torch-order sort under install(), A/B
 * against those loads, min of 3-5 alternating runs): bfloat16 8192x24
 * 1.57x / 1.29x, 4096x64 1.56x / 1.00x (randn rows tie: the emulation's
 * time), 2048x128 1.50x / 1.01x; float16 1.56x / 1.46x, 1.61x / 1.20x,
 * 1.38x / 1.02x; int16 1.30x / 1.27x, 1.34x / 1.27x, 1.22x / 1.11x,
 * 1024x256 1.18x / 1.00x, 512x384 1.20x / 1.01x; rows of 512-576 alike. */
static int batch_load_rows16(int dtype, const kwk_batch_src *src, int64_t len, uint32_t flip,
                             kwk_batch_slot *slots)
{
    if ((dtype != KWK_BFLOAT16 && dtype != KWK_FLOAT16 && dtype != KWK_INT16 &&
         dtype != KWK_UINT16) || src->step != 2 || len < 8)
        return 0;
    const __m256i post = _mm256_set1_epi32((int)(flip ^ 0x80000000u));
    for (int64_t c = 0; c < len; c += 8) {
        const int64_t at = c + 8 <= len ? c : len - 8;
        __m256i v[8];
        for (int l = 0; l < KWK_BATCH_LANES; l += 2) {
            const __m256i b = _mm256_inserti128_si256(
                _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)(src->row[l] + at * 2))),
                _mm_loadu_si128((const __m128i *)(const void *)(src->row[l + 1] + at * 2)), 1);
            const __m256i k = batch_keys16(dtype, b);
            v[l] = _mm256_cvtepu16_epi32(_mm256_castsi256_si128(k));
            v[l + 1] = _mm256_cvtepu16_epi32(_mm256_extracti128_si256(k, 1));
        }
        kwk_transpose8_epi32(v);
        for (int j = 0; j < 8; ++j) slots[at + j].key = _mm256_xor_si256(v[j], post);
    }
    return 1;
}

/* Rows side by side (adjacent: a sort along a non-last dim) of 4- or
 * 2-byte elements: position j of the eight rows is one run of eight
 * elements, loaded as one vector and keyed whole (two positions at once
 * for 2-byte elements, the last pair overlapping when len is odd),
 * where batch_load went element by element.  Measured (Intel Xeon,
 * AVX-512, torch.sort along dim 1, torch order / stable, A/B, min of 3
 * alternating runs): float32 8x100x256 1.17x / 1.14x, 64x50x32 1.43x /
 * 1.32x, zoedepth's 1x64x192x256 1.23x / 1.27x; bfloat16 8x100x256 1.01x
 * (ties: the emulation's time) / 1.38x; int16 16x64x64x8 1.04x / 1.03x;
 * int32 16x64x64x64 0.97x / 0.97x (noise).  0: not such rows. */
static int batch_load_adjacent(int dtype, const kwk_batch_src *src, int64_t len, uint32_t flip,
                               kwk_batch_slot *slots)
{
    if (!src->adjacent) return 0;
    const __m256i post = _mm256_set1_epi32((int)(flip ^ 0x80000000u));
    const char *row = src->row[0];
    const int64_t step = src->step;
    switch (dtype) {
    case KWK_FLOAT32:
    case KWK_INT32:
    case KWK_UINT32: {
        for (int64_t j = 0; j < len; ++j) {
            const __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(row + j * step));
            slots[j].key = _mm256_xor_si256(batch_keys32(dtype, v), post);
        }
        return 1;
    }
    case KWK_BFLOAT16:
    case KWK_FLOAT16:
    case KWK_INT16:
    case KWK_UINT16: {
        if (len < 2) return 0;
            for (int64_t c = 0; c < len; c += 2) {
            const int64_t j = c + 2 <= len ? c : len - 2;
            const __m256i b = _mm256_inserti128_si256(
                _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)(row + j * step))),
                _mm_loadu_si128((const __m128i *)(const void *)(row + (j + 1) * step)), 1);
            const __m256i k = batch_keys16(dtype, b);
            slots[j].key = _mm256_xor_si256(_mm256_cvtepu16_epi32(_mm256_castsi256_si128(k)), post);
            slots[j + 1].key = _mm256_xor_si256(_mm256_cvtepu16_epi32(_mm256_extracti128_si256(k, 1)), post);
        }
        return 1;
    }
    default: return 0;
    }
}

static void batch_load(int dtype, const kwk_batch_src *src, int64_t len, uint32_t flip,
                       kwk_batch_slot *slots)
{
    uint32_t *keys = (uint32_t *)slots; /* slot j: keys at [16j, 16j+8), indices after */
    const int64_t es = KWK_DTYPES[dtype].elem_size;
    if (src->adjacent ? !batch_load_adjacent(dtype, src, len, flip, slots)
                      : (!batch_load_rows32(dtype, src, len, flip, slots) &&
                         !batch_load_rows16(dtype, src, len, flip, slots))) {
        switch (dtype) {
        case KWK_BOOL: KWK_BATCH_GATHER(*(const uint8_t *)p != 0) break;
        case KWK_UINT8: KWK_BATCH_GATHER(*(const uint8_t *)p) break;
        case KWK_INT8: KWK_BATCH_GATHER((uint8_t)(*(const uint8_t *)p ^ 0x80u)) break;
        case KWK_FLOAT32: KWK_BATCH_GATHER(kwk_key_at(KWK_FLOAT32, p)) break;
        case KWK_INT32: KWK_BATCH_GATHER(kwk_key_at(KWK_INT32, p)) break;
        case KWK_UINT32: KWK_BATCH_GATHER(kwk_key_at(KWK_UINT32, p)) break;
        case KWK_FLOAT16: KWK_BATCH_GATHER(kwk_key_at(KWK_FLOAT16, p)) break;
        case KWK_BFLOAT16: KWK_BATCH_GATHER(kwk_key_at(KWK_BFLOAT16, p)) break;
        case KWK_INT16: KWK_BATCH_GATHER(kwk_key_at(KWK_INT16, p)) break;
        case KWK_UINT16: KWK_BATCH_GATHER(kwk_key_at(KWK_UINT16, p)) break;
        default: break;
        }
    }
    for (int64_t j = 0; j < len; ++j) slots[j].idx = _mm256_set1_epi32((int)j);
}
#undef KWK_BATCH_GATHER

/* The network over (key, index) pairs: a swap when the first key is
 * larger, or equal with the larger index - a total order, so the stable
 * result whatever the comparators' order. */
static void batch_network_stable(kwk_batch_slot *s, const kwk_net_pair *pairs, int npairs)
{
    for (int c = 0; c < npairs; ++c) {
        kwk_batch_slot *a = s + pairs[c][0], *b = s + pairs[c][1];
        const __m256i ka = a->key, kb = b->key, ia = a->idx, ib = b->idx;
        const __m256i swap = _mm256_or_si256(
            _mm256_cmpgt_epi32(ka, kb),
            _mm256_and_si256(_mm256_cmpeq_epi32(ka, kb), _mm256_cmpgt_epi32(ia, ib)));
        a->key = _mm256_min_epi32(ka, kb);
        b->key = _mm256_max_epi32(ka, kb);
        const __m256i lo = _mm256_blendv_epi8(ia, ib, swap);
        a->idx = lo;
        b->idx = _mm256_xor_si256(_mm256_xor_si256(ia, ib), lo);
    }
}

/* The same network by keys alone (equal keys keep their places): the
 * indices of tied keys come out in some order, right for rows without a
 * tie, which are the only rows the caller takes from a keys-only sort. */
static void batch_network_keys(kwk_batch_slot *s, const kwk_net_pair *pairs, int npairs)
{
    for (int c = 0; c < npairs; ++c) {
        kwk_batch_slot *a = s + pairs[c][0], *b = s + pairs[c][1];
        const __m256i ka = a->key, kb = b->key, ia = a->idx, ib = b->idx;
        const __m256i lo = _mm256_min_epi32(ka, kb);
        const __m256i swap = _mm256_xor_si256(_mm256_cmpeq_epi32(lo, ka), _mm256_set1_epi32(-1));
        const __m256i d = _mm256_and_si256(_mm256_xor_si256(ia, ib), swap);
        a->key = lo;
        b->key = _mm256_max_epi32(ka, kb);
        a->idx = _mm256_xor_si256(ia, d);
        b->idx = _mm256_xor_si256(ib, d);
    }
}

/* Lanes (bit l) whose sorted row holds two equal keys. */
static unsigned batch_tie_lanes(const kwk_batch_slot *s, int64_t len)
{
    __m256i eq = _mm256_setzero_si256();
    for (int64_t j = 1; j < len; ++j)
        eq = _mm256_or_si256(eq, _mm256_cmpeq_epi32(s[j - 1].key, s[j].key));
    return (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(eq));
}

/* Sort eight rows; afterwards slots[j].idx lane l is the index of row l's
 * j-th smallest element: in the stable order when `stable`, else only in
 * rows without ties.  Returns the lanes with ties, or KWK_BATCH_REFUSED
 * for 64-bit rows whose keys do not fit (nothing sorted). */
enum { KWK_BATCH_REFUSED = 1u << KWK_BATCH_LANES };

static unsigned batch_sort8(int dtype, const kwk_batch_src *src, int64_t len, uint64_t flip,
                            kwk_batch_slot *slots, const kwk_net_pair *pairs, int npairs,
                            int stable)
{
    if (KWK_DTYPES[dtype].key_bits == 64) {
        if (!batch_load64(dtype, src, len, flip, slots)) return KWK_BATCH_REFUSED;
    } else {
        batch_load(dtype, src, len, (uint32_t)flip, slots);
    }
    if (stable) batch_network_stable(slots, pairs, npairs);
    else batch_network_keys(slots, pairs, npairs);
    return batch_tie_lanes(slots, len);
}

#if defined(__AVX512F__)
#define KWK_HAVE_BATCH16 1
/* Position j of sixteen rows: two batches' slots side by side. */
typedef struct {
    __m512i key, idx;
} kwk_batch_slot16;

/* batch_network_stable and batch_network_keys on sixteen lanes. */
static void batch_network16(kwk_batch_slot16 *s, const kwk_net_pair *pairs, int npairs, int stable)
{
    if (stable) {
        for (int c = 0; c < npairs; ++c) {
            kwk_batch_slot16 *a = s + pairs[c][0], *b = s + pairs[c][1];
            const __m512i ka = a->key, kb = b->key, ia = a->idx, ib = b->idx;
            const __mmask16 swap = _mm512_cmpgt_epi32_mask(ka, kb) |
                                   _mm512_mask_cmpgt_epi32_mask(_mm512_cmpeq_epi32_mask(ka, kb), ia, ib);
            a->key = _mm512_min_epi32(ka, kb);
            b->key = _mm512_max_epi32(ka, kb);
            a->idx = _mm512_mask_blend_epi32(swap, ia, ib);
            b->idx = _mm512_mask_blend_epi32(swap, ib, ia);
        }
    } else {
        for (int c = 0; c < npairs; ++c) {
            kwk_batch_slot16 *a = s + pairs[c][0], *b = s + pairs[c][1];
            const __m512i ka = a->key, kb = b->key, ia = a->idx, ib = b->idx;
            const __mmask16 swap = _mm512_cmpgt_epi32_mask(ka, kb);
            a->key = _mm512_min_epi32(ka, kb);
            b->key = _mm512_max_epi32(ka, kb);
            a->idx = _mm512_mask_blend_epi32(swap, ia, ib);
            b->idx = _mm512_mask_blend_epi32(swap, ib, ia);
        }
    }
}

/* batch_sort8 of two batches (rows of sa into a, of sb into b) by one
 * network over their sixteen lanes (w: len joined slots): half the
 * network's instructions a row.  Returns 0 (nothing sorted) when either
 * batch's 64-bit keys do not fit, else 1 and each batch's tied lanes.
 * (Not inlined: inlined, rows of 196 measured 0.94-0.97x in torch order,
 * the rest alike.) */
__attribute__((noinline)) static int batch_sort16(int dtype, const kwk_batch_src *sa, const kwk_batch_src *sb, int64_t len,
                        uint64_t flip, kwk_batch_slot *a, kwk_batch_slot *b, kwk_batch_slot16 *w,
                        const kwk_net_pair *pairs, int npairs, int stable, unsigned *ties_a,
                        unsigned *ties_b)
{
    if (KWK_DTYPES[dtype].key_bits == 64) {
        if (!batch_load64(dtype, sa, len, flip, a) || !batch_load64(dtype, sb, len, flip, b)) return 0;
    } else {
        batch_load(dtype, sa, len, (uint32_t)flip, a);
        batch_load(dtype, sb, len, (uint32_t)flip, b);
    }
    for (int64_t j = 0; j < len; ++j) {
        w[j].key = _mm512_inserti64x4(_mm512_castsi256_si512(a[j].key), b[j].key, 1);
        w[j].idx = _mm512_inserti64x4(_mm512_castsi256_si512(a[j].idx), b[j].idx, 1);
    }
    batch_network16(w, pairs, npairs, stable);
    for (int64_t j = 0; j < len; ++j) {
        a[j].key = _mm512_castsi512_si256(w[j].key);
        a[j].idx = _mm512_castsi512_si256(w[j].idx);
        b[j].key = _mm512_extracti64x4_epi64(w[j].key, 1);
        b[j].idx = _mm512_extracti64x4_epi64(w[j].idx, 1);
    }
    *ties_a = batch_tie_lanes(a, len);
    *ties_b = batch_tie_lanes(b, len);
    return 1;
}
#endif

/* Index of row l's j-th element after the sort. */
static inline int64_t batch_index(const kwk_batch_slot *slots, int64_t j, int l)
{
    return ((const int32_t *)&slots[j].idx)[l];
}

#endif /* __AVX2__ */

#endif
