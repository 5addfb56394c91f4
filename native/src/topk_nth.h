/*
 * topk_nth.h - topk rows with a large k, for keys of at most 32 bits:
 * candidates beyond a threshold (from lane bounds or a sample), and
 * torch's order reproduced only when ties make it show.  Also the rows of
 * a small k (from TN_LANE_MIN_K) over contiguous float32 rows, where the
 * lane bounds beat the streamed heap select.
 *
 * torch (TopKImpl.h) takes, on (value, index) pairs compared by value,
 * std::partial_sort(first, first + k, last) when k * 64 <= length (the heap
 * branch), else std::nth_element(first, first + k - 1, last) and, when
 * sorted, std::sort(first, first + k - 1).  Either output is unique when
 * the k + 1 smallest keys (flipped for largest) are pairwise distinct: the
 * k selected are then the only keys below the (k+1)-th, in the only sorted
 * order there is.  Equal keys among them can show: the algorithm decides
 * which of the keys equal to the k-th are taken (a tie at the boundary),
 * and the order of equal selected keys comes from its moves over the whole
 * row (nth_element's arrangement, then std::sort's, or the heap's).  So a
 * row with a tie among its k + 1 smallest is redone exactly: the heap branch
 * by the streamed heap select (select_words.h: sw_heap_torch), the
 * nth_element branch by the word emulations of both algorithms on the whole
 * row (torch_order.h: wemu_nth_element, wemu_std_sort).  The nth_element
 * branch with sorted=False returns introselect's arrangement: always
 * emulated.
 *
 * The fast answer, per row:
 *  1. a threshold t with a few more than m = k + 1 keys (k in the stable
 *     order) at or below it: on contiguous float32 rows (AVX2)
 *     with m up to 128, the m-th best of L >= 4 m lane bounds (each lane's
 *     largest value, one vector max per eight values; tn_lane_threshold),
 *     which m distinct elements reach, so t is always a bound and about
 *     1.1 m elements pass on random rows; otherwise a sample of about
 *     2 sqrt(len) keys (flipped: smallest = selected), sorted, gives t
 *     about 3 sigma above the rank k + 1.  Both predict ties: equal keys
 *     among the m best bounds or below t in the sample send the row
 *     straight to the exact path;
 *  2. one pass collects the candidates, keys <= t, as words
 *     key << ibits | index in index order (too few: every key is taken).
 *     AVX2: eight elements per compare, the passing lanes' words packed
 *     out by a permutation table; contiguous float32/bfloat16 rows are
 *     compared as floats against t's value (as the block skip of
 *     select_words.h does) and keys made only for the candidates (float32
 *     rows whose candidates are not common: their positions packed first,
 *     then their values gathered, with no branch on the data; AVX-512
 *     likewise sixteen at a time), other rows' keys are gathered first;
 *  4. the candidates are sorted stably on the key bits that differ among
 *     them (so by (key, index)) and the first k + 1 checked for equal
 *     neighbours.
 * The stable order (KWK_ORDER_STABLE) needs no check: the index bits break
 * ties in index order.
 */
#ifndef KWK_TOPK_NTH_H
#define KWK_TOPK_NTH_H

#include <math.h>
#include "row_io.h"
#include "select_words.h"

/* How common a row's candidates are expected to be: TN_DENSE, common enough
 * that every group of eight is packed without a branch on its mask (the
 * AVX2 loops' choice: the AVX-512 loop takes every row alike); TN_MIXED,
 * not so common. */
enum { TN_MIXED = 0, TN_DENSE = 1 };

#if defined(__AVX2__)
#include <immintrin.h>
/* For a 4-bit lane mask: the 32-bit lanes that move two 64-bit words
 * (lanes 2l, 2l + 1 for each set bit l, ascending) to the front. */
static const uint32_t TN_PACK4[16][8] = {
    {0, 0, 0, 0, 0, 0, 0, 0}, {0, 1, 0, 0, 0, 0, 0, 0}, {2, 3, 0, 0, 0, 0, 0, 0},
    {0, 1, 2, 3, 0, 0, 0, 0}, {4, 5, 0, 0, 0, 0, 0, 0}, {0, 1, 4, 5, 0, 0, 0, 0},
    {2, 3, 4, 5, 0, 0, 0, 0}, {0, 1, 2, 3, 4, 5, 0, 0}, {6, 7, 0, 0, 0, 0, 0, 0},
    {0, 1, 6, 7, 0, 0, 0, 0}, {2, 3, 6, 7, 0, 0, 0, 0}, {0, 1, 2, 3, 6, 7, 0, 0},
    {4, 5, 6, 7, 0, 0, 0, 0}, {0, 1, 4, 5, 6, 7, 0, 0}, {2, 3, 4, 5, 6, 7, 0, 0},
    {0, 1, 2, 3, 4, 5, 6, 7}};

/* Four words key << ibits | position from 32-bit keys and positions
 * (sh: ibits). */
static inline __m256i tn_words4(__m128i keys, __m128i pos, __m128i sh)
{
    return _mm256_or_si256(_mm256_sll_epi64(_mm256_cvtepu32_epi64(keys), sh),
                           _mm256_cvtepu32_epi64(pos));
}

#if defined(__AVX512F__)
/* The same, eight at a time. */
static inline __m512i tn_words8(__m256i keys, __m256i pos, __m128i sh)
{
    return _mm512_or_si512(_mm512_sll_epi64(_mm512_cvtepu32_epi64(keys), sh),
                           _mm512_cvtepu32_epi64(pos));
}
#endif

/* Eight keys (32-bit lanes) at index j, `mask` the lanes that pass: append
 * their words key << ibits | index to out + c (up to 8 words are written
 * past the new count: the buffer has slack); returns the new count. */
static inline int64_t tn_pack8(__m256i keys, unsigned mask, int64_t j, int ibits,
                               uint64_t *out, int64_t c)
{
    const __m128i sh = _mm_cvtsi32_si128(ibits);
    const __m256i idx0 = _mm256_add_epi64(_mm256_set1_epi64x(j), _mm256_setr_epi64x(0, 1, 2, 3));
    const __m256i idx1 = _mm256_add_epi64(idx0, _mm256_set1_epi64x(4));
    const __m256i w0 = _mm256_or_si256(
        _mm256_sll_epi64(_mm256_cvtepu32_epi64(_mm256_castsi256_si128(keys)), sh), idx0);
    const __m256i w1 = _mm256_or_si256(
        _mm256_sll_epi64(_mm256_cvtepu32_epi64(_mm256_extracti128_si256(keys, 1)), sh), idx1);
    const unsigned m0 = mask & 15u, m1 = mask >> 4;
    _mm256_storeu_si256((__m256i *)(out + c),
                        _mm256_permutevar8x32_epi32(w0, _mm256_loadu_si256((const __m256i *)TN_PACK4[m0])));
    c += __builtin_popcount(m0);
    _mm256_storeu_si256((__m256i *)(out + c),
                        _mm256_permutevar8x32_epi32(w1, _mm256_loadu_si256((const __m256i *)TN_PACK4[m1])));
    return c + __builtin_popcount(m1);
}

/* The lanes of eight unsigned 32-bit keys that are <= t. */
static inline unsigned tn_le_mask(__m256i keys, __m256i t_signed)
{
    const __m256i sign = _mm256_set1_epi32((int)0x80000000u);
    const __m256i gt = _mm256_cmpgt_epi32(_mm256_xor_si256(keys, sign), t_signed);
    return ~(unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(gt)) & 0xFFu;
}

/* Eight raw floats: the lanes whose key (flipped by largest) is <= the key
 * of tv, a number: !(v < tv) for the largest (NaN passes), v <= tv for the
 * smallest; -0 == +0 as in the keys. */
static inline unsigned tn_raw_mask(__m256 v, __m256 tv, int largest)
{
    return largest ? ~(unsigned)_mm256_movemask_ps(_mm256_cmp_ps(v, tv, _CMP_LT_OQ)) & 0xFFu
                   : (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(v, tv, _CMP_LE_OQ));
}

/* tn_raw_f32's elements j..len one at a time, appended at out + c;
 * returns the new count. */
static int64_t tn_raw_f32_tail(const char *row, int64_t j, int64_t len, float tv, int largest,
                               int all, int ibits, uint64_t *out, int64_t c)
{
    for (; j < len; ++j) {
        float v;
        uint32_t b;
        memcpy(&v, row + 4 * j, 4);
        memcpy(&b, row + 4 * j, 4);
        out[c] = (uint64_t)(kwk_key_f32(b) ^ (largest ? 0xFFFFFFFFu : 0u)) << ibits | (uint64_t)j;
        c += all || (largest ? !(v < tv) : v <= tv);
    }
    return c;
}

/* Positions per chunk of the two-step loops' first step (tn_raw_f32_512,
 * tn_raw_f32_256: a stack buffer). */
enum { TN_CHUNK = 1024 };

#if defined(__AVX512F__)

/* tn_raw_f32 for the candidates of any row on AVX-512, in two steps per
 * chunk of TN_CHUNK values, neither with a branch on the data: the passing
 * positions compressed out 16 values at a time, then their words made
 * from 16 gathered values at a time.  (Packing the words of each passing
 * group, as the AVX2 loop does, costs a mispredicted branch per group
 * when the candidates are neither rare nor common: topk of 64x32000
 * float32, k=512, through the sampled threshold, 1.44 -> 0.67 ms; 16x8400
 * k=300 79 -> 53 us.  Rare candidates too, where a loop testing 32 values
 * at a time for any candidate took twice this one's time on AMD Zen 5,
 * even at one candidate in 8000: both builds in one process, calls
 * interleaved, min of 15, time with this one / with that loop: 64x65536
 * k=128 0.51, 4x1048576 k=128 0.76, 16x262144 k=256 0.54; rows that never
 * took that loop 0.92-1.05, as two copies of one build read.) */
static int64_t tn_raw_f32_512(const char *row, int64_t len, float tv, int largest, int ibits,
                              uint64_t *out)
{
    const float *x = (const float *)(const void *)row;
    const __m512 t16 = _mm512_set1_ps(tv);
    const __m512i flip = _mm512_set1_epi32(largest ? -1 : 0);
    const __m512i lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m128i sh = _mm_cvtsi32_si128(ibits);
    int32_t pos[TN_CHUNK + 16];
    int64_t c = 0, j = 0;
    for (; j + 16 <= len;) {
        const int64_t end = j + TN_CHUNK <= len ? j + TN_CHUNK : len - (len - j) % 16;
        int64_t n = 0;
        for (__m512i at = _mm512_add_epi32(_mm512_set1_epi32((int)j), lanes); j < end; j += 16) {
            const __m512 v = _mm512_loadu_ps(x + j);
            /* as tn_raw_mask: largest, !(v < t) (NaN passes); smallest, v <= t */
            const __mmask16 mk = largest ? _mm512_cmp_ps_mask(v, t16, _CMP_NLT_UQ)
                                         : _mm512_cmp_ps_mask(v, t16, _CMP_LE_OQ);
            _mm512_storeu_si512((void *)(pos + n), _mm512_maskz_compress_epi32(mk, at));
            n += __builtin_popcount((unsigned)mk);
            at = _mm512_add_epi32(at, _mm512_set1_epi32(16));
        }
        for (int64_t i = 0; i < n; i += 16) {
            const __mmask16 live = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1u);
            const __m512i p = _mm512_maskz_loadu_epi32(live, pos + i);
            const __m512i b = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live, p, x, 4);
            const __m512i k = _mm512_xor_si512(kwk_keys16_f32(b), flip);
            _mm512_mask_storeu_epi64(out + c + i, (__mmask8)live,
                                     tn_words8(_mm512_castsi512_si256(k), _mm512_castsi512_si256(p), sh));
            _mm512_mask_storeu_epi64(out + c + i + 8, (__mmask8)(live >> 8),
                                     tn_words8(_mm512_extracti64x4_epi64(k, 1),
                                               _mm512_extracti64x4_epi64(p, 1), sh));
        }
        c += n;
    }
    return tn_raw_f32_tail(row, j, len, tv, largest, 0, ibits, out, c);
}
#endif

/* tn_raw_f32_512's two steps on AVX2: the passing positions packed eight
 * values at a time by compress_lut.h's permutations, then their words made
 * from eight gathered values at a time, no branch on the data; for rows
 * whose candidates are not common (TN_MIXED: with every group packed, the
 * pack's work would be a copy of the row).  The avx2 target on AMD Zen 5,
 * ms, the loops it replaces (a branch per group of eight, or a test per
 * 32 values where candidates were expected under one in 64) -> this:
 * 64x65536 k=128 1.86-1.93 -> 0.88-0.97, k=256 1.71-1.86 -> 1.07-1.19;
 * 4x1048576 k=128 0.82-1.04 -> 0.44-0.49, k=1024 1.04-1.26 -> 0.64-0.76;
 * 16x262144 k=256 1.05-1.38 -> 0.68-0.73; 64x32000 k=512 1.13-1.17 ->
 * 0.76-0.78; 16x8400 k=300 alike (0.081-0.085).  (Not measured on a CPU
 * without AVX-512, where gathers may cost more: they serve only the
 * candidates.) */
static int64_t tn_raw_f32_256(const char *row, int64_t len, float tv, int largest, int ibits,
                              uint64_t *out)
{
    const float *x = (const float *)(const void *)row;
    const __m256 t8 = _mm256_set1_ps(tv);
    const __m256i flip = _mm256_set1_epi32(largest ? -1 : 0);
    const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m128i sh = _mm_cvtsi32_si128(ibits);
    int32_t pos[TN_CHUNK + 8];
    int64_t c = 0, j = 0;
    for (; j + 8 <= len;) {
        const int64_t end = j + TN_CHUNK <= len ? j + TN_CHUNK : len - (len - j) % 8;
        int64_t n = 0;
        for (__m256i at = _mm256_add_epi32(_mm256_set1_epi32((int)j), lanes); j < end; j += 8) {
            const unsigned mk = tn_raw_mask(_mm256_loadu_ps(x + j), t8, largest);
            const __m256i perm = _mm256_cvtepu8_epi32(
                _mm_loadl_epi64((const __m128i *)(const void *)&KWK_COMPRESS_LUT[mk]));
            _mm256_storeu_si256((__m256i *)(void *)(pos + n), _mm256_permutevar8x32_epi32(at, perm));
            n += __builtin_popcount(mk);
            at = _mm256_add_epi32(at, _mm256_set1_epi32(8));
        }
        /* the last group's dead lanes gather element 0 (a valid address);
         * their words land in out's slack or under the next chunk's */
        _mm256_storeu_si256((__m256i *)(void *)(pos + n), _mm256_setzero_si256());
        for (int64_t i = 0; i < n; i += 8) {
            const __m256i p = _mm256_loadu_si256((const __m256i *)(const void *)(pos + i));
            const __m256i b = _mm256_i32gather_epi32((const int *)(const void *)x, p, 4);
            const __m256i k = _mm256_xor_si256(kwk_keys8_f32(b), flip);
            _mm256_storeu_si256((__m256i *)(void *)(out + c + i),
                                tn_words4(_mm256_castsi256_si128(k), _mm256_castsi256_si128(p), sh));
            _mm256_storeu_si256((__m256i *)(void *)(out + c + i + 4),
                                tn_words4(_mm256_extracti128_si256(k, 1), _mm256_extracti128_si256(p, 1), sh));
        }
        c += n;
    }
    return tn_raw_f32_tail(row, j, len, tv, largest, 0, ibits, out, c);
}

/* The candidates of a contiguous float32 row: the words of the elements
 * whose key is <= the key of tv (every element when `all`), in index
 * order; returns their count.  dense: TN_DENSE or TN_MIXED. */
static int64_t tn_raw_f32(const char *row, int64_t len, float tv, int largest, int all,
                          int dense, int ibits, uint64_t *out)
{
    const __m256 t8 = _mm256_set1_ps(tv);
    const __m256i flip = _mm256_set1_epi32(largest ? -1 : 0);
    int64_t c = 0, j = 0;
    /* (rows of 2^31 elements or more: positions do not fit the 32-bit
     * lanes of the two-step loops; they take the pack of every group) */
#if defined(__AVX512F__)
    if (!all && len <= INT32_MAX - TN_CHUNK)
        return tn_raw_f32_512(row, len, tv, largest, ibits, out);
#endif
    if (!all && dense != TN_DENSE && len <= INT32_MAX - TN_CHUNK)
        return tn_raw_f32_256(row, len, tv, largest, ibits, out);
    for (; j + 8 <= len; j += 8) { /* no branch to mispredict */
        const __m256i b = _mm256_loadu_si256((const __m256i *)(row + 4 * j));
        const unsigned mask = all ? 0xFFu : tn_raw_mask(_mm256_castsi256_ps(b), t8, largest);
        c = tn_pack8(_mm256_xor_si256(kwk_keys8_f32(b), flip), mask, j, ibits, out, c);
    }
    return tn_raw_f32_tail(row, j, len, tv, largest, all, ibits, out, c);
}

/* The same for bfloat16 (float32's top half: compared and keyed as the
 * float32 it widens to, whose key's top half is the bfloat16 key). */
static int64_t tn_raw_bf16(const char *row, int64_t len, float tv, int largest, int all,
                           int dense, int ibits, uint64_t *out)
{
    const __m256 t8 = _mm256_set1_ps(tv);
    const __m256i flip = _mm256_set1_epi32(largest ? 0xFFFF : 0);
    const int pack_all = all || dense == TN_DENSE;
    int64_t c = 0, j = 0;
    for (; j + 8 <= len; j += 8) {
        const __m256i b = _mm256_slli_epi32(
            _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(row + 2 * j))), 16);
        const unsigned mask = all ? 0xFFu : tn_raw_mask(_mm256_castsi256_ps(b), t8, largest);
        if (mask || pack_all) {
            const __m256i k = _mm256_xor_si256(_mm256_srli_epi32(kwk_keys8_f32(b), 16), flip);
            c = tn_pack8(k, mask, j, ibits, out, c);
        }
    }
    for (; j < len; ++j) {
        uint16_t h;
        memcpy(&h, row + 2 * j, 2);
        const float v = sw_load_bf16(row + 2 * j);
        out[c] = (uint64_t)(uint16_t)(kwk_key_bf16(h) ^ (largest ? 0xFFFFu : 0u)) << ibits | (uint64_t)j;
        c += all || (largest ? !(v < tv) : v <= tv);
    }
    return c;
}

#if defined(__AVX512F__)
/* tn_lane_bound_f32's runs with all L = 16 NV lanes held in registers
 * (j ends past the last run). */
#define TN_LANE_REGS(NV, OP)                                                  \
    {                                                                         \
        __m512 a_[NV];                                                        \
        for (int u = 0; u < (NV); ++u) a_[u] = init;                          \
        for (j = 0; j + step <= len; j += step)                               \
            for (int u = 0; u < (NV); ++u)                                    \
                a_[u] = OP(_mm512_loadu_ps(x + j + 16 * u), a_[u]);           \
        for (int u = 0; u < (NV); ++u) _mm512_store_ps(acc + 16 * u, a_[u]);  \
    }
#endif

/* Lane bounds for the threshold of a contiguous float32 row: of L lanes
 * (element j in lane j mod L), the largest value of each (smallest for
 * !largest) into acc[0..L), over every `every`-th run of L elements
 * (every > 1: whole runs only; a subset's bounds are bounds too).  Each
 * lane's bound is one of its elements' values or, for a lane whose elements are all NaN, the start value (-inf
 * for the largest: NaN, the largest key, still lies above it; +inf for the
 * smallest, where no element lies at or below it, so the candidates can
 * fall short of m and the caller then takes every element).  max_ps(x,
 * acc) keeps acc when x is NaN: no NaN ever enters a bound.  One vector
 * max per eight elements, no key made: about a read of the row. */
static void tn_lane_bound_f32(const char *row, int64_t len, int largest, int L, int every,
                              float *acc)
{
    const float *x = (const float *)(const void *)row;
    int64_t j = 0;
    const int64_t step = (int64_t)L * every;
#if defined(__AVX512F__)
    if (L == 64 || L == 128 || L == 256) {
        /* 64 or 128 lanes (m up to 32) in registers: in memory they cost
         * a load and a store per vector max (DGCNN's kNN, 32x1024x1024
         * k=20, with tn_raw_f32_512: 31.7 -> 23.0 ms).  (More lanes stay
         * in memory below: sweeps of 128 lanes each read the row in
         * strides, which cost more on rows read from memory, 64x32768
         * k=40 0.89 -> 0.92 ms.) */
        const __m512 init = _mm512_set1_ps(largest ? -INFINITY : INFINITY);
        if (L == 256) {
            if (largest) TN_LANE_REGS(16, _mm512_max_ps) else TN_LANE_REGS(16, _mm512_min_ps)
        } else if (L == 128) {
            if (largest) TN_LANE_REGS(8, _mm512_max_ps) else TN_LANE_REGS(8, _mm512_min_ps)
        } else {
            if (largest) TN_LANE_REGS(4, _mm512_max_ps) else TN_LANE_REGS(4, _mm512_min_ps)
        }
    } else
#endif
    {
        const __m256 init = _mm256_set1_ps(largest ? -INFINITY : INFINITY);
        for (int v = 0; v < L; v += 8) _mm256_store_ps(acc + v, init);
        if (largest) {
            for (; j + step <= len; j += step)
                for (int v = 0; v < L; v += 8)
                    _mm256_store_ps(acc + v, _mm256_max_ps(_mm256_loadu_ps(x + j + v), _mm256_load_ps(acc + v)));
        } else {
            for (; j + step <= len; j += step)
                for (int v = 0; v < L; v += 8)
                    _mm256_store_ps(acc + v, _mm256_min_ps(_mm256_loadu_ps(x + j + v), _mm256_load_ps(acc + v)));
        }
    }
    if (every > 1) return;
    for (int l = 0; j < len; ++j, ++l) {
        const float v = sw_load_f32(row + 4 * j);
        if (largest ? v > acc[l] : v < acc[l]) acc[l] = v;
    }
}
#undef TN_LANE_REGS
#endif

/* Lanes for m selected from a raw float32 row of len (at most
 * TN_LANE_ROW_MAX): the least power of two from TN_LANE_MIN that is >= 4 m
 * (the m-th best of L lane bounds then has about 1.05-1.15 m elements at
 * or beyond it on random rows, measured), with at least TN_LANE_DEPTH
 * elements a lane (at 4, 16x8400 k=300 sorted 2048 lane bounds for rows of
 * 8400: 0.15 -> 0.19 ms against the sample); 0: no lane threshold (m too
 * large, the row too short or too long, or no AVX2). */
enum { TN_LANE_MIN = 64, TN_LANE_MAX = 2048, TN_LANE_DEPTH = 8 };
/* Raw float32 rows from TN_LANE_ROW_MIN to TN_LANE_ROW_MAX long and k from
 * TN_LANE_MIN_K take the lane threshold in topk, for m up to TN_LANE_MAX / 4
 * (beyond: the sampled threshold).  Measured, ns/element, one thread,
 * random float32 rows, largest, torch order, against the path each
 * replaced (the streamed heap select, CAND, or for k >= 128 the sampled
 * threshold): 64x16384 k=8 0.19 -> 0.18, k=32 0.56 -> 0.25, k=64 0.98 ->
 * 0.34, k=128 0.93 -> 0.52, k=256 1.09 -> 0.78; 256x4096 k=8 0.50 -> 0.24,
 * k=64 2.70 -> 0.90; 512x2048 k=32 2.54 -> 0.85.  Below k = 4 the heap's
 * one pass is as fast (256x4096 k=1 0.15 either way); 4096 lanes gained
 * nothing at k = 500..1000. */
enum { TN_LANE_ROW_MIN = 1024, TN_LANE_MIN_K = 4 };
/* Rows longer than this (128 KB: up to it the second pass finds the row in
 * L2) keep the streamed heap or the sample: in the corpus they are large
 * inputs read from memory, where the lane bounds' extra pass cost more
 * than it saved (32x128256 k=20: 0.79 -> 1.2-1.8 ms; 256x91599 k=20: 9.5
 * -> 11.2 ms; the TopK activation at 256x65536 k=256 16 -> 21 ms), though
 * rows already in cache gained (8x128256 k=64 0.24 -> 0.17, k=256 0.48 ->
 * 0.22). */
enum { TN_LANE_ROW_MAX = 32768 };
/* Rows probed before a call's lane path gives way to the streamed mode it
 * replaced, when most rows so far tied. */
enum { TN_LANE_PROBE_ROWS = 4 };
/* Rows from this many elements per selected one take their lane bounds
 * from a quarter of the row: three quarters of a pass saved against about
 * 3 m more candidates to sort (64x16384 k=50 from a quarter: 0.62 ns/el,
 * whole: 0.33; 8x128256 k=8 quarter 0.12, whole 0.18). */
enum { TN_LANE_SUBSET_PER_M = 1024 };
/* Rows whose bounds come from every run take L >= 3 m lanes up to this m
 * (fewer lanes to sort, a few more candidates), else L >= 4 m.  AVX-512,
 * torch order, random float32, ns/el 4 m -> 3 m: 512 x 1024 k=16 0.39 ->
 * 0.34, k=20 0.38 -> 0.34; 256 x 2048 k=8 0.30 -> 0.27, k=16 0.27 -> 0.25;
 * dgcnn 32 x 1024 x 1024 k=20 20.7 -> 19.2 ms; from a quarter of the row
 * (16 x 32768) 0.96-0.98x, so those keep 4 m. */
enum { TN_LANE_FEW_M = 32 };
static inline int tn_lanes_for(int64_t m, int64_t len)
{
#if defined(__AVX2__)
    int L = TN_LANE_MIN;
    const int64_t need = m <= TN_LANE_FEW_M && len < (int64_t)TN_LANE_SUBSET_PER_M * m ? 3 * m : 4 * m;
    while (L < need && L < TN_LANE_MAX) L *= 2;
    return L >= need && len >= (int64_t)TN_LANE_DEPTH * L && len <= TN_LANE_ROW_MAX ? L : 0;
#else
    (void)m;
    (void)len;
    return 0;
#endif
}


/* Heap-branch rows (k * 64 <= length) take the candidates from this k:
 * below it the streamed heap select skips nearly every block and is
 * bound by reading the row (except contiguous float32 rows, which take the
 * lane threshold from TN_LANE_MIN_K). */
enum { TN_HEAP_MIN_K = 128 };
/* topk rows (k, m = k + 1 in torch's order, len) that take the lane
 * threshold when contiguous float32. */
static inline int tn_lane_row(int64_t k, int64_t m, int64_t len)
{
    return k >= TN_LANE_MIN_K && len >= TN_LANE_ROW_MIN && tn_lanes_for(m, len) > 0;
}

/* Slack words after a candidate buffer (tn_pack8 stores whole vectors). */
enum { TN_SLACK = 8 };
/* Sample sizes for the threshold. */
enum { TN_SAMPLE_MIN = 64, TN_SAMPLE_MAX = 1024 };

/* The sample of a row of len keys for a threshold past its m smallest:
 * about 2 sqrt(len) keys (clamped to [lo, hi] and to len), every
 * len / ns-th; *rank: the sample rank about three standard deviations past
 * m's expected one (a threshold there passes m keys on nearly every row). */
static inline int64_t tn_sample_plan(int64_t len, int64_t m, int64_t lo, int64_t hi, int64_t *rank)
{
    int64_t ns = 2 * sw_isqrt(len);
    ns = ns < lo ? lo : (ns > hi ? hi : ns);
    if (ns > len) ns = len;
    const double p = (double)m / (double)len;
    const double rk = p * (double)ns;
    *rank = (int64_t)(rk + 3.0 * sqrt(rk * (1.0 - p)) + 3.0);
    return ns;
}
/* Candidates up to this many are sorted by comparison (merges of ranked
 * runs), not radix: its tables cost more on a few hundred words. */
enum { TN_MERGE_MAX = 256 };
/* Rows whose candidates would repeat a key this many times if spread
 * evenly over their range go straight to the exact path. */
#define TN_SURE_TIES 4.0
/* The birthday bound: c keys spread evenly over `span` key values repeat
 * about c^2 / 2 span times; TN_SURE_TIES or more: a tie is all but sure. */
static inline int tn_sure_ties(double c, double span)
{
    return c * c > 2.0 * TN_SURE_TIES * span;
}
/* Lane minima for the threshold of small m (m <= TN_LANES / 2). */
enum { TN_LANES = 64 };

/* Candidates past TN_MERGE_MAX go to the vector quicksort when it is
 * compiled in and their keys differ in more than TN_QSORT_MIN_BITS bits
 * (fewer: one or two radix passes, cheaper).  A partial sort: only the
 * first m of the c (about 2-3 m) candidates need ordering; the radix
 * passes sorted all of them, their 2048-entry tables costing more than
 * the few hundred words. */
enum { TN_QSORT_MIN_BITS = 16 };
#if defined(KWK_HAVE_SIMD_QSORT)
#define TN_QSORT_OK(c) ((c) <= KWK_SIMD_QSORT64_MAX_N)
#else
#define TN_QSORT_OK(c) 0
#define simd_qsort_64_first(w, c, m) ((void)0)
#endif

/* w[0..m) = the m smallest of c candidate words key << ibits | index
 * (keys differing in their low kb bits, the words in index order), sorted
 * by (key, index); tmp holds c words.  The choice per size and key width
 * is the one described above. */
static void tn_sort_first(uint64_t *w, uint64_t *tmp, int64_t c, int64_t m, int ibits, int kb)
{
    if (c <= TN_MERGE_MAX && kb > 0) {
        words_small_sort(w, tmp, c);
    } else if (TN_QSORT_OK(c) && kb > TN_QSORT_MIN_BITS) {
        /* only the first m need sorting: c is about 3 m */
        simd_qsort_64_first(w, c, m);
    } else if (kb > 0 && c < KWK_WIDE_DIGIT_MIN_N) {
        /* digits of up to 11 bits: a pass fewer than bytes for most float
         * keys, tables still in L1 */
        const int passes = (kb + KWK_WIDE_DIGIT_BITS - 1) / KWK_WIDE_DIGIT_BITS;
        const uint64_t *res = words_radix_passes32(w, tmp, c, ibits, kb, passes,
                                                   (kb + passes - 1) / passes);
        if (res != w) memcpy(w, res, (size_t)m * sizeof(uint64_t));
    } else {
        words_sort_bits(w, tmp, c, ibits, kb);
    }
}

/* The m smallest of n <= TN_SAMPLE_MAX keys of at most 32 bits to a[0..m),
 * ascending (a threshold's sample: only the values matter, not where they
 * came from).  The 8-lane quicksort sorts 64 keys in registers; the word
 * sorts take about three times as long on a 64-bit word. */
static void tn_sort_keys32(uint32_t *a, int64_t n, int64_t m)
{
#if defined(KWK_HAVE_SIMD_QSORT)
    simd_qsort_32_first(a, n, m);
#else
    (void)m;
    /* the word sorts want unique words: the sample position breaks ties */
    uint64_t w[TN_SAMPLE_MAX], tmp[TN_SAMPLE_MAX];
    for (int64_t i = 0; i < n; ++i) w[i] = (uint64_t)a[i] << 16 | (uint64_t)i;
    words_sort_small_or_radix(w, tmp, n);
    for (int64_t i = 0; i < n; ++i) a[i] = (uint32_t)(w[i] >> 16);
#endif
}

#if defined(__AVX2__)
/* The m-th best lane bound of a raw row as a flipped key into *t (1), or 0
 * when the row is not raw or has no lanes for m.  *dup: two of the m best
 * bounds are equal (a tie among the selected is then likely). */
#define TN_LANE_RAW_u32(r, m, t, dup) tn_lane_threshold((r)->row, (r)->len, (r)->flip != 0, m, t, dup)
static int tn_lane_threshold(const char *row, int64_t len, int largest, int64_t m,
                             uint32_t *t, int *dup)
{
    const int L = tn_lanes_for(m, len);
    if (!L) return 0;
    _Alignas(64) float acc[TN_LANE_MAX];
    uint32_t s[TN_LANE_MAX];
    /* long rows: bounds from a quarter of the row (one run of L in four),
     * about 4 m candidates for a quarter of the first pass */
    const int every = len >= (int64_t)TN_LANE_SUBSET_PER_M * m ? 4 : 1;
    tn_lane_bound_f32(row, len, largest, L, every, acc);
    const uint32_t flip = largest ? 0xFFFFFFFFu : 0u;
    for (int l = 0; l < L; ++l) {
        uint32_t b;
        memcpy(&b, &acc[l], 4);
        s[l] = kwk_key_f32(b) ^ flip;
    }
    tn_sort_keys32(s, L, m);
    int d = 0;
    for (int64_t i = 1; i < m; ++i) d |= s[i] == s[i - 1];
    *dup = d;
    *t = s[m - 1]; /* about 1.05-1.15 m pass on random rows (from a quarter, 4 times that) */
    return 1;
}
#else
#define TN_LANE_RAW_u32(r, m, t, dup) ((void)(r), (void)(m), (void)(t), (void)(dup), 0)
#endif
/* bfloat16 rows keep the sample: their top values tie often enough that
 * the lanes' tie prediction sent most vocabulary rows (k 4..50) on to the
 * exact path after the lane pass (8x128256 k=4: 0.13 -> 0.21 ms) */
#define TN_LANE_RAW_u16(r, m, t, dup) ((void)(r), (void)(m), (void)(t), (void)(dup), 0)
#define TN_LANE_RAW_u8(r, m, t, dup) ((void)(r), (void)(m), (void)(t), (void)(dup), 0)
#define TN_LANE_RAW_u64(r, m, t, dup) ((void)(r), (void)(m), (void)(t), (void)(dup), 0)

/* Index bits of a row's words. */
static inline int tn_ibits(int64_t len) { return len > 1 ? kwk_bits_for((uint64_t)(len - 1)) : 0; }

/* The float a non-NaN key (unflipped, of a float dtype whose sign bit is
 * SIGN) stands for: keys.h's map undone. */
#define TN_KEY_BITS(k, SIGN) (((k) & (SIGN)) ? (uint32_t)((k) ^ (SIGN)) : (uint32_t)~(uint32_t)(k))

/* Per key width: the row being read, candidates, threshold, the fast
 * answer, the emulation. */
#define TN_DEFINE(UT, SUF)                                                    \
    /* A row: read through g, its keys gathered into `keys` only when       \
     * needed; raw: 1 for a contiguous float32 / bfloat16 row (AVX2 only)   \
     * whose candidates are found on the values. */                          \
    typedef struct {                                                          \
        sw_gather_fn_##SUF g;                                                 \
        const char *row;                                                      \
        int64_t step, len;                                                    \
        UT flip;                                                              \
        int raw;                                                              \
        UT *keys;                                                             \
        int have_keys;                                                        \
    } tn_row_##SUF;                                                           \
                                                                              \
    static const UT *tn_keys_##SUF(tn_row_##SUF *r)                           \
    {                                                                         \
        if (!r->have_keys) r->g(r->row, r->step, r->len, r->flip, r->keys);   \
        r->have_keys = 1;                                                     \
        return r->keys;                                                       \
    }                                                                         \
                                                                              \
    static inline UT tn_key_at_##SUF(const tn_row_##SUF *r, int64_t j)        \
    {                                                                         \
        if (r->have_keys) return r->keys[j];                                  \
        if (r->raw) return (UT)(TN_RAW_KEY_##SUF(r->row + j * r->step) ^ r->flip); \
        UT k;                                                                 \
        r->g(r->row + j * r->step, r->step, 1, r->flip, &k);                  \
        return k;                                                             \
    }                                                                         \
                                                                              \
    /* out[0..c) = key[j] << ibits | j for the j < len with key[j] <= t, in  \
     * index order; returns c.  out has len + TN_SLACK words. */              \
    static int64_t tn_compress_##SUF(const UT *key, int64_t len, UT t, int ibits, uint64_t *out) \
    {                                                                         \
        int64_t c = 0, j = 0;                                                 \
        TN_COMPRESS_SIMD_##SUF                                                \
        for (; j < len; ++j) {                                                \
            out[c] = (uint64_t)key[j] << ibits | (uint64_t)j;                 \
            c += key[j] <= t;                                                 \
        }                                                                     \
        return c;                                                             \
    }                                                                         \
                                                                              \
    /* The candidates of a row, keys <= t, as words in index order (raw   \
     * rows: t the largest key means every element). */                     \
    static int64_t tn_candidates_##SUF(tn_row_##SUF *r, UT t, int dense, int ibits, uint64_t *out) \
    {                                                                         \
        if (r->raw && !r->have_keys) {                                        \
            const int all = t == (UT)~(UT)0;                                  \
            const int64_t c = TN_RAW_##SUF(r, all ? (UT)0 : t, all, dense, ibits, out); \
            if (c >= 0) return c;                                             \
        }                                                                     \
        return tn_compress_##SUF(tn_keys_##SUF(r), r->len, t, ibits, out);    \
    }                                                                         \
                                                                              \
    /* A key t with, very likely, a few more than m keys <= t (the maximum  \
     * key when that would be most of the row).  *dup: the sample holds     \
     * equal keys at or below t (ties among the selected are then likely). */ \
    static UT tn_threshold_##SUF(tn_row_##SUF *r, int64_t m, int *dup)     \
    {                                                                         \
        uint32_t s[TN_SAMPLE_MAX];                                            \
        const int64_t len = r->len;                                           \
        if (sizeof(UT) > 4) return (UT)~(UT)0; /* (never chosen: all keys) */ \
        if (r->raw && !r->have_keys) {                                        \
            /* float32 rows: the m-th best of 4 m or more lane bounds, one    \
             * vector max per eight values, no keys gathered */              \
            uint32_t lt;                                                      \
            if (TN_LANE_RAW_##SUF(r, m, &lt, dup)) return (UT)lt;             \
        }                                                                     \
        if (m <= TN_LANES / 2 && len >= 4 * TN_LANES) {                       \
            /* small m: the m-th smallest of TN_LANES lane minima bounds     \
             * the m-th smallest key from above (m distinct elements lie at  \
             * or below it), and tightly: about 1.4 m keys pass for random   \
             * rows.  (No tie prediction: the check after the sort finds     \
             * them.) */                                                      \
            const UT *key = tn_keys_##SUF(r);                                 \
            UT mn[TN_LANES];                                                  \
            memcpy(mn, key, sizeof mn);                                       \
            int64_t j = TN_LANES;                                             \
            for (; j + TN_LANES <= len; j += TN_LANES)                        \
                for (int l = 0; l < TN_LANES; ++l) mn[l] = key[j + l] < mn[l] ? key[j + l] : mn[l]; \
            for (int l = 0; j < len; ++j, ++l) mn[l] = key[j] < mn[l] ? key[j] : mn[l]; \
            for (int l = 0; l < TN_LANES; ++l) s[l] = (uint32_t)mn[l];       \
            tn_sort_keys32(s, TN_LANES, m);                                   \
            *dup = 0;                                                         \
            return (UT)s[m - 1];                                              \
        }                                                                     \
        int64_t rs;                                                           \
        const int64_t ns = tn_sample_plan(len, m, TN_SAMPLE_MIN, TN_SAMPLE_MAX, &rs); \
        const int64_t stride = len / ns;                                      \
        for (int64_t i = 0; i < ns; ++i)                                      \
            s[i] = (uint32_t)tn_key_at_##SUF(r, i * stride + stride / 2);   \
        const int64_t top = rs < ns ? rs : ns - 1;                            \
        tn_sort_keys32(s, ns, top + 1);                                       \
        int d = 0;                                                            \
        for (int64_t i = 1; i <= top; ++i) d |= s[i] == s[i - 1];             \
        /* the birthday bound of tn_smallest, from the sample: about        \
         * (top + 1) len / ns candidates over at least the sample's span of  \
         * key values.  bfloat16 logits (k = 200 of 32000) tie in every row \
         * but rarely among a dozen sampled keys: the bound sends them to   \
         * the exact path before a candidate pass that would be wasted. */  \
        const double c_est = (double)(top + 1) * (double)len / (double)ns;    \
        const double span_est = (double)(s[top] - s[0]) + 1.0;               \
        d |= tn_sure_ties(c_est, span_est);                                   \
        *dup = d;                                                             \
        /* candidates past about 3/4 of the row: take them all */             \
        if (rs >= ns || rs * 4 >= ns * 3) return (UT)~(UT)0;                  \
        return (UT)s[rs];                                                     \
    }                                                                         \
                                                                              \
    /* The m smallest (key, index) words of a row, sorted, into w[0..m),   \
     * unless `torch` and two of them share a key (torch's order of the    \
     * ties then shows): returns 1 when w holds the answer, 0 for a tie.   \
     * w, tmp: len + TN_SLACK words. */                                       \
    static int tn_smallest_##SUF(tn_row_##SUF *r, int64_t m, int torch, uint64_t *w, \
                                 uint64_t *tmp)                               \
    {                                                                         \
        const int ibits = tn_ibits(r->len);                                   \
        int dup = 0;                                                          \
        const UT t = tn_threshold_##SUF(r, m, &dup);                          \
        if (torch && dup) return 0;                                           \
        const int density = m * 32 > r->len ? TN_DENSE : TN_MIXED;            \
        int64_t c = tn_candidates_##SUF(r, t, density, ibits, w);             \
        if (c < m) c = tn_candidates_##SUF(r, (UT)~(UT)0, TN_DENSE, ibits, w); \
        if (c > 4 * m + 256) {                                                \
            /* a poor sample: select first (which scrambles the order) */     \
            words_select(w, tmp, c, m);                                       \
            words_sort_bits(w, tmp, m, 0, ibits + 8 * (int)sizeof(UT));       \
        } else {                                                              \
            /* candidates come in index order: a stable sort on the key     \
             * bits that differ among them orders them by (key, index) */    \
            uint64_t any = 0, all = ~(uint64_t)0, lo = ~(uint64_t)0, hi = 0;  \
            for (int64_t i = 0; i < c; ++i) {                                 \
                any |= w[i];                                                  \
                all &= w[i];                                                  \
                lo = w[i] < lo ? w[i] : lo;                                   \
                hi = w[i] > hi ? w[i] : hi;                                   \
            }                                                                 \
            /* birthday bound: c keys over a range of D key values repeat   \
             * about c^2 / 2D times when spread evenly (more when not): a    \
             * tie is then all but sure, and the sort would be wasted */     \
            const double span = (double)((hi >> ibits) - (lo >> ibits)) + 1.0; \
            if (torch && tn_sure_ties((double)c, span)) return 0;             \
            const int kb = kwk_bits_for((any ^ all) >> ibits);                \
            tn_sort_first(w, tmp, c, m, ibits, kb);                           \
        }                                                                     \
        if (torch)                                                            \
            for (int64_t j = 1; j < m; ++j)                                   \
                if ((w[j] >> ibits) == (w[j - 1] >> ibits)) return 0;         \
        return 1;                                                             \
    }                                                                         \
                                                                              \
    /* torch's own moves on the whole row: std::nth_element(k - 1), then    \
     * std::sort of the first k - 1 when sorted; w[0..k) gets the result. */  \
    static void tn_emulate_##SUF(tn_row_##SUF *r, int64_t k, int sorted, uint64_t *w) \
    {                                                                         \
        const int ibits = tn_ibits(r->len);                                   \
        tn_candidates_##SUF(r, (UT)~(UT)0, TN_DENSE, ibits, w); /* every element */ \
        wemu_nth_element(w, k - 1, r->len, ibits);                            \
        if (sorted) wemu_std_sort(w, k - 1, ibits);                           \
    }

#if defined(__AVX2__)
#define TN_COMPRESS_SIMD_u32                                                  \
    {                                                                         \
        const __m256i ts = _mm256_set1_epi32((int)(t ^ 0x80000000u));         \
        for (; j + 8 <= len; j += 8) {                                        \
            const __m256i k8 = _mm256_loadu_si256((const __m256i *)(key + j)); \
            const unsigned mk = tn_le_mask(k8, ts);                           \
            if (mk) c = tn_pack8(k8, mk, j, ibits, out, c);                   \
        }                                                                     \
    }
#define TN_COMPRESS_SIMD_u16                                                  \
    {                                                                         \
        const __m256i ts = _mm256_set1_epi32((int)((uint32_t)t ^ 0x80000000u)); \
        for (; j + 8 <= len; j += 8) {                                        \
            const __m256i k8 = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(key + j))); \
            const unsigned mk = tn_le_mask(k8, ts);                           \
            if (mk) c = tn_pack8(k8, mk, j, ibits, out, c);                   \
        }                                                                     \
    }
/* float32 / bfloat16 rows compared as floats against t's value; -1: not
 * such a row */
#define TN_RAW_u32(r, t, all, dense, ibits, out)                                   \
    tn_raw_f32((r)->row, (r)->len,                                            \
               sw_load_f32(&(uint32_t){TN_KEY_BITS((uint32_t)((t) ^ (r)->flip), 0x80000000u)}), \
               (r)->flip != 0, all, dense, ibits, out)
#define TN_RAW_u16(r, t, all, dense, ibits, out)                                   \
    tn_raw_bf16((r)->row, (r)->len,                                           \
                sw_load_bf16(&(uint16_t){(uint16_t)TN_KEY_BITS((uint16_t)((t) ^ (r)->flip), 0x8000u)}), \
                (r)->flip != 0, all, dense, ibits, out)
#else
#define TN_COMPRESS_SIMD_u32
#define TN_COMPRESS_SIMD_u16
#define TN_RAW_u32(r, t, all, dense, ibits, out) ((void)(r), (void)(t), (void)(all), (void)(dense), (void)(ibits), (void)(out), (int64_t)-1)
#define TN_RAW_u16(r, t, all, dense, ibits, out) ((void)(r), (void)(t), (void)(all), (void)(dense), (void)(ibits), (void)(out), (int64_t)-1)
#endif
#define TN_COMPRESS_SIMD_u8
#define TN_COMPRESS_SIMD_u64
/* the key of a raw row's element (raw rows: float32 for u32, bfloat16 for
 * u16; select_words.h) */
#define TN_RAW_KEY_u32(p) SW_RAW_KEY_u32(p)
#define TN_RAW_KEY_u16(p) SW_RAW_KEY_u16(p)
#define TN_RAW_KEY_u8(p) ((void)(p), (uint8_t)0)
#define TN_RAW_KEY_u64(p) ((void)(p), (uint64_t)0)
#define TN_RAW_u8(r, t, all, dense, ibits, out) ((void)(r), (void)(t), (void)(all), (void)(dense), (void)(ibits), (void)(out), (int64_t)-1)
#define TN_RAW_u64(r, t, all, dense, ibits, out) ((void)(r), (void)(t), (void)(all), (void)(dense), (void)(ibits), (void)(out), (int64_t)-1)

TN_DEFINE(uint8_t, u8)
TN_DEFINE(uint16_t, u16)
TN_DEFINE(uint32_t, u32)
/* never chosen (64-bit keys leave no room for an index in a word): only so
 * the per-width topk loop compiles for every width */
TN_DEFINE(uint64_t, u64)

/* Whether a row can be compared as raw floats (tn_row.raw). */
static inline int tn_raw_ok(int dtype, int64_t step_bytes)
{
#if defined(__AVX2__)
    return (dtype == KWK_FLOAT32 && step_bytes == 4) || (dtype == KWK_BFLOAT16 && step_bytes == 2);
#else
    (void)dtype;
    (void)step_bytes;
    return 0;
#endif
}

#undef TN_COMPRESS_SIMD_u32
#undef TN_COMPRESS_SIMD_u16
#undef TN_COMPRESS_SIMD_u8
#undef TN_COMPRESS_SIMD_u64
#undef TN_RAW_u32
#undef TN_RAW_u16
#undef TN_RAW_u8
#undef TN_RAW_KEY_u32
#undef TN_RAW_KEY_u16
#undef TN_RAW_KEY_u8
#undef TN_RAW_KEY_u64
#undef TN_RAW_u64
#undef TN_DEFINE

#endif
