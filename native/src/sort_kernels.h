/*
 * sort_kernels.h - sort rows (torch.sort / argsort / msort).
 *
 * Stable order comes from sorting unique words, key << ibits | index
 * (order_words.h: comparison sort for short rows, LSD radix, an MSD first
 * pass for rows bigger than the cache; 64-bit keys too wide to pack go by
 * their leading bits first, then runs by the rest).
 *
 * KWK_ORDER_TORCH: a row longer than std::sort's insertion threshold
 * (16) that has a tie gets the order of the std::sort emulation on words
 * (torch_order.h).  The emulation is right with or without ties; the
 * stable sort is only a faster way to the answer for tie-free rows.  So a
 * row of at most 128 elements (there the emulation is as fast as the
 * stable sort), or one that surely has a tie (fewer key values than
 * elements, a key range small for the row's length, a tie among 64 keys
 * spread over it, or a repeated smallest or largest key) goes straight to
 * the emulation; other rows are sorted stably and redone by the emulation
 * only if the sorted keys show a tie.
 */
#ifndef KWK_SORT_KERNELS_H
#define KWK_SORT_KERNELS_H

#include "row_io.h"
#include "values_sort.h"
#include "batch_sort.h"
#include "short_rows.h"
#include "plain_loads.h"

/* ---------------------------------------------------------------- sort */

/* Write a sorted row: output element j takes source element index(j).
 * The element size switch is outside the loops.  The row's pointers are
 * read into locals first: the byte stores may alias *o, and the compiler
 * then reloaded them for every element: 49152 rows of 64 float32, native,
 * 2.76 -> 2.55 ns/el; corpus A/B 1.0-1.28x, zoedepth 14.8 -> 12.8 ms.
 * (Transposing eight rows' indices and gathering their values instead was
 * slower: 2.8-3.8 ns/el, vpgatherdd the worst of it.) */
#define KWK_EMIT_LOOP(T, INDEX)                                               \
    {                                                                         \
        const char *const src_ = o->row;                                      \
        char *const vals_ = o->vals;                                          \
        int64_t *const inds_ = o->inds;                                       \
        const int64_t step_ = o->step, dsl_ = o->dsl;                         \
        if (inds_ && dsl_ == 1 && step_ == (int64_t)sizeof(T)) {              \
            /* dense source and outputs (the common case): no strides, no  \
             * test per element */                                           \
            for (int64_t j = 0; j < n; ++j) {                                 \
                const int64_t idx_ = (INDEX);                                 \
                T v_;                                                         \
                memcpy(&v_, src_ + idx_ * (int64_t)sizeof(T), sizeof(T));     \
                memcpy(vals_ + j * (int64_t)sizeof(T), &v_, sizeof(T));       \
                inds_[j] = idx_;                                              \
            }                                                                 \
        } else {                                                              \
            for (int64_t j = 0; j < n; ++j) {                                 \
                const int64_t idx_ = (INDEX);                                 \
                T v_;                                                         \
                memcpy(&v_, src_ + idx_ * step_, sizeof(T));                  \
                memcpy(vals_ + j * dstep, &v_, sizeof(T));                    \
                if (inds_) inds_[j * dsl_] = idx_;                            \
            }                                                                 \
        }                                                                     \
    }

#define KWK_EMIT_ALL(INDEX)                                                   \
    do {                                                                      \
        if (!o->vals) {                                                       \
            int64_t *const inds_ = o->inds;                                   \
            const int64_t dsl_ = o->dsl;                                      \
            for (int64_t j = 0; j < n; ++j) inds_[j * dsl_] = (INDEX);        \
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

static void emit_words_plain(const out_row *o, const uint64_t *w, int64_t n, uint64_t mask)
{
    KWK_EMIT_ALL((int64_t)(w[j] & mask));
}

/* Rows of 64-bit keys too wide to pack with their index (wide_sort) are
 * written by reading the source in random order (element index(j) for
 * output j): where the source is larger than the caches each read is a miss
 * the loop cannot see coming, so the source element KWK_EMIT_AHEAD outputs
 * on is prefetched.  Native, torch order, 1M int64 of full range / float64
 * (A/B, min of 3): 18.3 -> 16.2 / 16.8 -> 14.8 ns/el. */
enum { KWK_EMIT_PREFETCH_BYTES = 4 << 20, KWK_EMIT_AHEAD = 32 };

static void emit_words(const out_row *o, const uint64_t *w, int64_t n, uint64_t mask)
{
    if (o->vals && o->inds && o->dsl == 1 && o->es == 8 && o->step == 8 &&
        n * 8 >= KWK_EMIT_PREFETCH_BYTES) {
        const char *const src = o->row;
        char *const vals = o->vals;
        int64_t *const inds = o->inds;
        for (int64_t j = 0; j < n; ++j) {
#if defined(__GNUC__)
            if (j + KWK_EMIT_AHEAD < n)
                __builtin_prefetch(src + (int64_t)(w[j + KWK_EMIT_AHEAD] & mask) * 8);
#endif
            const int64_t idx = (int64_t)(w[j] & mask);
            uint64_t v;
            memcpy(&v, src + idx * 8, 8);
            memcpy(vals + j * 8, &v, 8);
            inds[j] = idx;
        }
        return;
    }
    emit_words_plain(o, w, n, mask);
}

static void emit_kvs(const out_row *o, const kwk_kv *kv, int64_t n)
{
    KWK_EMIT_ALL(kv[j].idx);
}
#if defined(KWK_HAVE_BATCH_SORT)
/* Row l of a sorted batch (batch_sort.h). */
static void batch_emit(const out_row *o, const kwk_batch_slot *slots, int l, int64_t n)
{
    KWK_EMIT_ALL(batch_index(slots, j, l));
}
#endif
#undef KWK_EMIT_ALL
#undef KWK_EMIT_LOOP

/* Write a sorted row of packed words, (key - lo) << ibits | index, whose
 * values are rebuilt from the keys: a sequential pass instead of a random
 * gather from the source row (a fifth of a million-element sort's time).
 * A key maps back to one bit pattern except the zeros' (+0.0 / -0.0) and
 * NaN's (any payload): those few elements, and bool rows (any nonzero byte
 * is true), are still copied from the source by index.  Rows shorter than
 * KWK_DECODE_MIN_N sit in cache, where the plain gather takes fewer
 * instructions (19 vs 30 a word at 8 elements, measured with cachegrind). */
enum { KWK_DECODE_MIN_N = 1 << 14 };
/* ... but eight float32 words at a time (emit_f32_decoded_avx2) beat the
 * gather from this length (A/B, avx512: kNN vote rows of 1000 1.10x, NMS
 * scores of 4700 1.08x, rows of 336 1.07x; rows of 54 alike) */
enum { KWK_DECODE_VEC_MIN_N = 64 };
#define KWK_DECODE_ONE(T, DECODE, GATHER_IF)                                  \
    const uint64_t w_ = w[j];                                                 \
    const int64_t idx_ = (int64_t)(w_ & mask);                                \
    const T k_ = (T)(((w_ >> ibits) + lo) ^ flip);                            \
    T v_;                                                                     \
    if (GATHER_IF) memcpy(&v_, src_ + idx_ * step_, sizeof(T));               \
    else v_ = (T)(DECODE);
/* (the row's pointers in locals: see KWK_EMIT_LOOP) */
#define KWK_DECODE_LOOP(T, DECODE, GATHER_IF)                                 \
    {                                                                         \
        const char *const src_ = o->row;                                      \
        char *const vals_ = o->vals;                                          \
        int64_t *const inds_ = o->inds;                                       \
        const int64_t step_ = o->step, dsl_ = o->dsl;                         \
        if (inds_ && dsl_ == 1) { /* dense outputs: no strides, no test */   \
            for (int64_t j = 0; j < n; ++j) {                                 \
                KWK_DECODE_ONE(T, DECODE, GATHER_IF)                          \
                memcpy(vals_ + j * (int64_t)sizeof(T), &v_, sizeof(T));       \
                inds_[j] = idx_;                                              \
            }                                                                 \
        } else {                                                              \
            for (int64_t j = 0; j < n; ++j) {                                 \
                KWK_DECODE_ONE(T, DECODE, GATHER_IF)                          \
                memcpy(vals_ + j * dstep, &v_, sizeof(T));                    \
                if (inds_) inds_[j * dsl_] = idx_;                            \
            }                                                                 \
        }                                                                     \
    }
/* float keys: NaN -> all ones, zeros -> the sign bit alone; others are
 * (k & sign) ? k ^ sign : ~k (keys.h's map inverted) */
#define KWK_FLOAT_DECODE(T, SIGN) ((k_ & (T)(SIGN)) ? (T)(k_ ^ (T)(SIGN)) : (T)~k_)
#define KWK_FLOAT_GATHER(T, SIGN) (k_ == (T)~(T)0 || k_ == (T)(SIGN))

#if defined(__AVX2__)
/* Whether no element of n contiguous floats is -0.0 or NaN: then every
 * key decodes to the element's own bits (a zero's key to +0.0), and the
 * decode need not copy the groups holding zeros from the source.  Rows
 * of exact zeros are common (dino's kNN votes, 980 of 1000: its sort
 * 1547 -> 1406 us on AMD Zen 4).  Tested once a row has such a group. */
static int f32_row_plain(const char *row, int64_t n)
{
    const __m256i sign = _mm256_set1_epi32((int)0x80000000u);
    const __m256i inf = _mm256_set1_epi32(0x7F800000);
    __m256i odd = _mm256_setzero_si256();
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        const __m256i b = _mm256_loadu_si256((const __m256i *)(const void *)(row + 4 * j));
        odd = _mm256_or_si256(odd, _mm256_or_si256(
                  _mm256_cmpeq_epi32(b, sign),
                  _mm256_cmpgt_epi32(_mm256_andnot_si256(sign, b), inf)));
    }
    if (!_mm256_testz_si256(odd, odd)) return 0;
    for (; j < n; ++j) {
        uint32_t b;
        memcpy(&b, row + 4 * j, 4);
        if (b == 0x80000000u || (b & 0x7FFFFFFFu) > 0x7F800000u) return 0;
    }
    return 1;
}

/* The float32 decode of dense outputs eight words at a time: indices and
 * keys split with a mask and a shift, the keys narrowed to 32 bits and
 * mapped back by one xor (with t = k >> 31 arithmetic, the map is
 * k ^ (~t | sign)).  A group holding a zero's or NaN's key (the key does
 * not tell -0.0 from +0.0, nor one NaN from another) copies its eight
 * values from the source by index instead: rows full of zeros (kNN votes)
 * cost no more than the plain gather.  Words n - n % 8 .. n - 1 are left
 * to the caller (returns how many were written). */
static int64_t emit_f32_decoded_avx2(const uint64_t *w, int64_t n, int ibits, uint64_t mask,
                                     uint64_t lo, uint32_t flip, const char *src, int64_t step,
                                     char *vals, int64_t *inds, int64_t row_len)
{
    int plain = -1; /* f32_row_plain of the row, once a group needs it */
    const __m256i vmask = _mm256_set1_epi64x((long long)mask);
    const __m256i vlo = _mm256_set1_epi64x((long long)lo);
    const __m128i shift = _mm_cvtsi32_si128(ibits);
    const __m256i vflip = _mm256_set1_epi32((int)flip);
    const __m256i sign = _mm256_set1_epi32((int)0x80000000u);
    const __m256i ones = _mm256_set1_epi32(-1);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        const __m256i a = _mm256_loadu_si256((const __m256i *)(w + j));
        const __m256i b = _mm256_loadu_si256((const __m256i *)(w + j + 4));
        const __m256i ia = _mm256_and_si256(a, vmask), ib = _mm256_and_si256(b, vmask);
        _mm256_storeu_si256((__m256i *)(inds + j), ia);
        _mm256_storeu_si256((__m256i *)(inds + j + 4), ib);
        const __m256i ka = _mm256_add_epi64(_mm256_srl_epi64(a, shift), vlo);
        const __m256i kb = _mm256_add_epi64(_mm256_srl_epi64(b, shift), vlo);
        /* the low halves of ka's and kb's lanes, in order */
        const __m256i kab = _mm256_castps_si256(_mm256_shuffle_ps(
            _mm256_castsi256_ps(ka), _mm256_castsi256_ps(kb), _MM_SHUFFLE(2, 0, 2, 0)));
        const __m256i k = _mm256_xor_si256(_mm256_permute4x64_epi64(kab, _MM_SHUFFLE(3, 1, 2, 0)),
                                           vflip);
        const __m256i odd =
            _mm256_or_si256(_mm256_cmpeq_epi32(k, ones), _mm256_cmpeq_epi32(k, sign));
        if (!_mm256_testz_si256(odd, odd) &&
            (plain < 0 ? (plain = step == 4 && f32_row_plain(src, row_len)) : plain) == 0) {
            for (int u = 0; u < 8; ++u)
                memcpy(vals + 4 * (j + u), src + inds[j + u] * step, 4);
            continue;
        }
        const __m256i t = _mm256_srai_epi32(k, 31);
        const __m256i v = _mm256_xor_si256(k, _mm256_or_si256(_mm256_xor_si256(t, ones), sign));
        _mm256_storeu_si256((__m256i *)(vals + 4 * j), v);
    }
    return j;
}
#endif

/* row_len: the length of the row o reads (n, or more when w is a part of
 * the row's words). */
static void emit_words_decoded(const out_row *o, int dtype, const uint64_t *w, int64_t n,
                               int ibits, uint64_t mask, uint64_t lo, uint64_t flip,
                               int64_t row_len)
{
    if (!o->vals || dtype == KWK_BOOL) {
        emit_words(o, w, n, mask);
        return;
    }
#if defined(__AVX2__)
    if (dtype == KWK_FLOAT32 && o->inds && o->dsl == 1 && n >= KWK_DECODE_VEC_MIN_N) {
        const int64_t j = emit_f32_decoded_avx2(w, n, ibits, mask, lo, (uint32_t)flip, o->row,
                                                o->step, o->vals, o->inds, row_len);
        out_row rest = *o; /* the last n % 8 words */
        rest.vals = o->vals + 4 * j;
        rest.inds = o->inds + j;
        emit_words(&rest, w + j, n - j, mask);
        return;
    }
#endif
    if (n < KWK_DECODE_MIN_N) {
        emit_words(o, w, n, mask);
        return;
    }
    const int64_t dstep = o->dsl * o->es;
    switch (dtype) {
    case KWK_UINT8: KWK_DECODE_LOOP(uint8_t, k_, 0) break;
    case KWK_INT8: KWK_DECODE_LOOP(uint8_t, k_ ^ 0x80u, 0) break;
    case KWK_UINT16: KWK_DECODE_LOOP(uint16_t, k_, 0) break;
    case KWK_INT16: KWK_DECODE_LOOP(uint16_t, k_ ^ 0x8000u, 0) break;
    case KWK_UINT32: KWK_DECODE_LOOP(uint32_t, k_, 0) break;
    case KWK_INT32: KWK_DECODE_LOOP(uint32_t, k_ ^ 0x80000000u, 0) break;
    case KWK_UINT64: KWK_DECODE_LOOP(uint64_t, k_, 0) break;
    case KWK_INT64: KWK_DECODE_LOOP(uint64_t, k_ ^ 0x8000000000000000ull, 0) break;
    case KWK_FLOAT16:
    case KWK_BFLOAT16:
        KWK_DECODE_LOOP(uint16_t, KWK_FLOAT_DECODE(uint16_t, 0x8000u), KWK_FLOAT_GATHER(uint16_t, 0x8000u))
        break;
    case KWK_FLOAT32:
        KWK_DECODE_LOOP(uint32_t, KWK_FLOAT_DECODE(uint32_t, 0x80000000u),
                        KWK_FLOAT_GATHER(uint32_t, 0x80000000u))
        break;
    case KWK_FLOAT64:
        KWK_DECODE_LOOP(uint64_t, KWK_FLOAT_DECODE(uint64_t, 0x8000000000000000ull),
                        KWK_FLOAT_GATHER(uint64_t, 0x8000000000000000ull))
        break;
    default: emit_words(o, w, n, mask); break;
    }
}
#undef KWK_FLOAT_GATHER
#undef KWK_FLOAT_DECODE
#undef KWK_DECODE_LOOP
#undef KWK_DECODE_ONE

/* emit_words_decoded over parts of the row on several threads (kwker.h
 * kwk_set_row_threads), each part writing its own slice of the outputs:
 * with fresh outputs most of an emit's time is their page faults, taken
 * in parallel too. */
typedef struct {
    const out_row *o;
    const uint64_t *w;
    int64_t n;
    uint64_t mask, lo, flip;
    int dtype, ibits, parts;
} emit_split;

static void emit_part(void *ctx, int p)
{
    const emit_split *e = (const emit_split *)ctx;
    const int64_t j0 = e->n * p / e->parts, j1 = e->n * (p + 1) / e->parts;
    out_row o = *e->o;
    if (o.vals) o.vals += j0 * o.dsl * o.es;
    if (o.inds) o.inds += j0 * o.dsl;
    emit_words_decoded(&o, e->dtype, e->w + j0, j1 - j0, e->ibits, e->mask, e->lo, e->flip, e->n);
}

enum { KWK_SPLIT_EMIT_MIN_N = 1 << 17 };

static void emit_words_decoded_split(const out_row *o, int dtype, const uint64_t *w, int64_t n,
                                     int ibits, uint64_t mask, uint64_t lo, uint64_t flip)
{
    const int parts = kwk_row_threads();
    if (parts > 1 && n >= KWK_SPLIT_EMIT_MIN_N) {
        emit_split e = {o, w, n, mask, lo, flip, dtype, ibits, parts};
        kwk_run_parts(emit_part, &e, parts);
        return;
    }
    emit_words_decoded(o, dtype, w, n, ibits, mask, lo, flip, n);
}

/* Put unique words back in index order (dst[index(w)] = w). */
static void words_to_index_order(const uint64_t *src, uint64_t *dst, int64_t n, uint64_t mask)
{
    for (int64_t j = 0; j < n; ++j) dst[src[j] & mask] = src[j];
}

static inline int sort_bits_for(uint64_t v) { return v ? 64 - __builtin_clzll(v) : 0; }

/* A row's keys gathered into words[] (flipped for descending), then packed
 * there in place as (key - lo) << ibits | index when that fits in 64 bits;
 * otherwise words[] keeps the keys. */
typedef struct {
    int packed; /* words[] holds the packed words */
    int ibits;  /* bits of the largest index */
    int rbits;  /* bits of the key range (hi - lo) */
    uint64_t lo, hi, mask;
} sort_row;

enum { KWK_SHORT_GATHER_MAX = 16 };

/* sort_load's two passes by slices: the keys and each slice's extremes,
 * then the packing; a long row's slices on several threads (kwker.h
 * kwk_set_row_threads), whose first pass is also the workspace's first
 * touch (its page faults are most of that pass's time), else one slice. */
typedef struct {
    const char *row;
    int64_t len, step;
    uint64_t flip, lo, *words;
    int dtype, ib, parts;
    uint64_t part_lo[KWK_MAX_ROW_THREADS], part_hi[KWK_MAX_ROW_THREADS];
} load_split;

static void load_keys_part(void *ctx, int p)
{
    load_split *s = (load_split *)ctx;
    const int64_t j0 = s->len * p / s->parts, j1 = s->len * (p + 1) / s->parts;
    kwk_gather_keys(s->dtype, s->row + j0 * s->step, j1 - j0, s->step, s->flip, s->words + j0,
                    &s->part_lo[p], &s->part_hi[p]);
}

static void load_pack_part(void *ctx, int p)
{
    const load_split *s = (const load_split *)ctx;
    /* (no division for the one slice of a short row) */
    const int64_t j0 = p ? s->len * p / s->parts : 0;
    const int64_t j1 = p + 1 < s->parts ? s->len * (p + 1) / s->parts : s->len;
    const uint64_t lo = s->lo;
    const int ib = s->ib;
    uint64_t *words = s->words;
    for (int64_t j = j0; j < j1; ++j) words[j] = ((words[j] - lo) << ib) | (uint64_t)j;
}

enum { KWK_SPLIT_LOAD_MIN_N = 1 << 17 };

static void sort_load(int dtype, const char *row, int64_t len, int64_t step, uint64_t flip,
                      uint64_t *words, sort_row *r)
{
    const int parts = len >= KWK_SPLIT_LOAD_MIN_N ? kwk_row_threads() : 1;
    load_split s = {row, len, step, flip, 0, words, dtype, 0, parts, {0}, {0}};
    if (parts > 1) {
        kwk_run_parts(load_keys_part, &s, parts);
        r->lo = s.part_lo[0];
        r->hi = s.part_hi[0];
        for (int p = 1; p < parts; ++p) {
            r->lo = s.part_lo[p] < r->lo ? s.part_lo[p] : r->lo;
            r->hi = s.part_hi[p] > r->hi ? s.part_hi[p] : r->hi;
        }
    } else if (len <= KWK_SHORT_GATHER_MAX) {
        /* short rows: a plain loop beats the vectorised gather's set-up and
         * horizontal min/max (a third of the time of 8-element rows) */
        uint64_t lo = ~(uint64_t)0, hi = 0;
        for (int64_t j = 0; j < len; ++j) {
            const uint64_t k = kwk_key_at(dtype, row + j * step) ^ flip;
            words[j] = k;
            lo = k < lo ? k : lo;
            hi = k > hi ? k : hi;
        }
        r->lo = lo;
        r->hi = hi;
    } else {
        kwk_gather_keys(dtype, row, len, step, flip, words, &r->lo, &r->hi);
    }
    if (len <= 0) r->lo = r->hi = 0;
    r->ibits = len > 1 ? sort_bits_for((uint64_t)(len - 1)) : 0;
    r->rbits = sort_bits_for(r->hi - r->lo);
    r->mask = kwk_width_mask(r->ibits);
    r->packed = r->rbits + r->ibits <= 64;
    if (!r->packed) return;
    s.lo = r->lo;
    s.ib = r->ibits;
    if (parts > 1) kwk_run_parts(load_pack_part, &s, parts);
    else load_pack_part(&s, 0);
}

/* How many leading key bits the first radix sort orders: enough whole
 * digits to cover the index bits and KWK_TOP_MARGIN more, so that runs of
 * equal leading bits stay short on most inputs; each run is then sorted
 * on its own (comparison sort when short).  Returns 0 for "sort all". */
enum { KWK_TOP_MARGIN = 4, KWK_TOP_MIN_SAVED = 3 };

static int top_bits_for(int64_t n, int ibits, int rbits)
{
    const int db = n >= KWK_WIDE_DIGIT_MIN_N ? KWK_WIDE_DIGIT_BITS : KWK_DIGIT_BITS;
    const int full = (rbits + db - 1) / db;
    const int top = (ibits + KWK_TOP_MARGIN + db - 1) / db;
    /* measured: 64x1000 float32 (31-bit keys) is slower with 2+runs than
     * with 4 passes; 64-bit keys (7-8 passes) gain 1.7x-3x with 2+runs */
    return full - top >= KWK_TOP_MIN_SAVED ? top * db : 0;
}

/* Stable sort of packed words by key: leading key bits first, then each
 * run of equal leading bits by the rest. */
static void words_sort_top_first(uint64_t *w, uint64_t *tmp, int64_t n, int ibits, int rbits)
{
    const int tbits = n > KWK_SMALL_SORT_MAX ? top_bits_for(n, ibits, rbits) : 0;
    if (tbits == 0) {
        words_sort(w, tmp, n, ibits, rbits);
        return;
    }
    const int low = rbits - tbits, sh = ibits + low;
    words_radix_sort(w, tmp, n, sh, tbits);
    for (int64_t s = 0; s < n;) {
        const uint64_t top = w[s] >> sh;
        int64_t e = s + 1;
        while (e < n && (w[e] >> sh) == top) ++e;
        if (e - s > 1) words_sort(w + s, tmp, e - s, ibits, low);
        s = e;
    }
}

/* Stable sort of a row's packed words.  The words are distinct, so any
 * correct sort is the stable one: where a quicksort is compiled
 * (simd_qsort.h) it takes rows of QS_WORDS_MIN_N..KWK_SIMD_QSORT64_MAX_N words.
 * Measured for AVX-512 (bench_simd_qsort.c, words of randn float32 keys, ns/word,
 * radix vs quicksort, best and worst of 4 noisy runs): 64: 8.0 vs 6.8,
 * 128: 7.0-7.2 vs 5.3-5.5, 1000: 7.2-10.3 vs 5.3-10.2, 100k: 11.0-14.0 vs
 * 8.7-13.6, 1M: 14.3-15.8 vs 13.3-16.5, 4M: 17.3-24.4 vs 12.1-19.3, 16M:
 * 23.3-34.6 vs 16.4-22.5.  The quicksort was as fast or faster at every
 * size; the radix sort keeps the rest (no measurement past 16M). */
/* Keys of at most QS_WORDS_MIN_BITS bits stay with the radix sort, which
 * orders them in one or two passes: expert ids and other small ranges
 * (int64 0..127, 16k-32k rows) measured 1.6x slower by quicksort
 * (ab_target: hf_grouped_mm_sort_expert_ids 302 vs 471 us,
 * megatron_permute_argsort 119 vs 195 us). */
/* The longest row: KWK_SIMD_QSORT64_MAX_N, set by the quicksort compiled
 * (AVX-512 16M, AVX2 8192). */
/* AVX-512 from 17 words, since its base case sorts 17..128 words in
 * registers columns first (simd_qsort.h): python, stable torch.argsort of
 * int64 rows of 20-bit values, ns/el, radix -> quicksort: 17 5.1 -> 4.6,
 * 24 4.6 -> 4.0, 40 5.0 -> 3.8, 48 5.4 -> 3.3 (64 and up took it already). */
#if defined(__AVX512F__)
enum { QS_WORDS_MIN_N = 17, QS_WORDS_MIN_BITS = 16 };
#else
enum { QS_WORDS_MIN_N = 64, QS_WORDS_MIN_BITS = 16 };
#endif
/* Except, for AVX-512, rows of QS_WORDS_RADIX_FROM + 1 .. QS_WORDS_RADIX_TO
 * words: the radix sort (leading digits, then runs) measured faster there on
 * a quiet Intel Xeon with AVX-512 (the figures above came from a busy
 * one).  bench_simd_qsort.c, ns/word radix vs quicksort, two runs: 2000
 * 4.7-5.0 vs 4.2-4.3, 4000 4.0-4.1 vs 4.4, 10000 4.1-4.2 vs 4.7-4.8, 100k
 * 4.7 vs 5.8-5.9, 1M 5.5-5.7 vs 7.1-7.2, 4M 12.3 vs 8.7.  End to end
 * (torch.sort(stable=True) under install(), float32, ns/el, min of two
 * alternating runs, quicksort -> radix): randn rows of 3500 6.12 -> 5.67,
 * 4096 6.28 -> 6.31, 5000 6.38 -> 5.91, 8192 6.20 -> 5.38, 16384 6.63 ->
 * 5.89, 2^21 9.71 -> 8.31, 3 * 2^20 10.29 -> 10.34; corpus rows
 * hf_typical_sort 4 x 50257 7.5 -> 5.6, kornia_lovasz 2 x 21 x 65536 8.5 ->
 * 5.8-6.2 (torch order 13.9 -> 11.4), torchrec_auc 262144 8.5 -> 6.6.
 * The window's start moved from 3072 to 8192 in session 63, once the
 * quicksort's base case kept its vectors in registers (simd_qsort.h
 * QS_COLUMN_NETWORK): AMD Zen 5, both builds in one process, kwk_sort
 * of random float32 and 31-bit int64 rows, stable and torch order, time
 * after / before: rows of 3100-4096 0.60-0.73, 6000 0.72-0.78, 8192
 * 0.82-0.93, 8193 and 20000 alike (radix both).  Longer rows read
 * 0.7-1.3 by run, in both directions: left to the radix sort. */
#if defined(__AVX512F__)
enum { QS_WORDS_RADIX_FROM = 8192, QS_WORDS_RADIX_TO = 1 << 21 };
#else
enum { QS_WORDS_RADIX_FROM = 0, QS_WORDS_RADIX_TO = 0 };
#endif

#if defined(KWK_HAVE_SIMD_QSORT)
static int sample_has_tie(const uint64_t *words, int64_t n, int ibits);

/* Rows of W32_MIN_N..2^W32_MAX_PBITS packed words (a row, or a part of one:
 * runs, dropped elements) sorted as 32-bit words: each word's position in
 * w in the low pbits bits and its key's leading 32 - pbits bits (of its
 * offset from the row's minimum) above them, sorted by the vector
 * quicksort's 32-bit version (eight keys a vector where the 64-bit one has
 * four: 2.5-3x faster a key, simd_qsort_avx2.h); the full words are then
 * gathered in that order, and each run of words whose cut keys are equal
 * (keys that differ only in the bits cut off, or equal keys, which came
 * out in position order) is sorted by full word.  Runs are short when the
 * cut keys rarely collide, so the path is taken only when 64 keys spread
 * over the row show no collision (clustered keys, or a few outliers
 * stretching the range - masked -inf logits - would make most of the row
 * one run); a run of more than W32_RUN_RANK words still sorts right, by
 * words_sort_bits.  Words are distinct, so this is the stable sort
 * whatever the runs.
 * Measured (native kwk_sort, float32 rows, ns/el stable / torch order, min
 * of 3 interleaved runs, Zen 3): uniform [0, 1) and normal rows of 256-2000
 * 8.9-10.8 -> 7.9-8.5 / 10.5-11.6 -> 8.9-10.0, rows with -inf every 50th
 * declined by the sample (unchanged).  Longer rows keep fewer key bits:
 * normal rows of 4700 and 8192 had 40-55% of their words in runs and were
 * slower (11.0 -> 11.9, 11.4 -> 13.3), which neither a 64 nor a 256-key
 * sample told apart from uniform rows (8-9% in runs, faster): so
 * W32_MAX_PBITS.  tmp holds n words. */
enum { W32_MIN_N = 256, W32_MAX_PBITS = 11, W32_RUN_RANK = 16, W32_TIED = 512 };

/* Sort the run w[s..e) by full word (its cut keys are equal): the key's
 * rest, then the index (not words_sort: the run is in position order, not
 * index order). */
static void w32_sort_run(uint64_t *w, uint64_t *tmp, int64_t s, int64_t e, int cut)
{
    if (e - s <= W32_RUN_RANK) words_rank_sort16(w + s, (int)(e - s));
    else words_sort_bits(w + s, tmp, e - s, 0, cut);
}

/* Every run of equal cut keys in w[0..n), found by a scan. */
static void words_sort_runs(uint64_t *w, uint64_t *tmp, int64_t n, int cut)
{
    for (int64_t s = 0; s < n - 1;) {
        const uint64_t top = w[s] >> cut;
        int64_t e = s + 1;
        while (e < n && (w[e] >> cut) == top) ++e;
        if (e - s > 1) w32_sort_run(w, tmp, s, e, cut);
        s = e;
    }
}

static int words_sort_via32(uint64_t *w, uint64_t *tmp, int64_t n, int ibits, int rbits)
{
    const int pbits = n > 1 ? sort_bits_for((uint64_t)(n - 1)) : 0;
    if (n < W32_MIN_N || pbits > W32_MAX_PBITS) return 0;
    const int kbits = 32 - pbits;
    const int shift = rbits > kbits ? rbits - kbits : 0; /* key bits cut off */
    const int cut = ibits + shift;                      /* word >> cut: the cut key */
    if (shift > 0 && sample_has_tie(w, n, cut)) return 0;
    const uint64_t pm = kwk_width_mask(pbits);
    /* the 32-bit words in tmp's upper half; each full word is gathered
     * into tmp[p] after w32[p] was read, and tmp[p] overlaps only w32
     * entries 2p - n and 2p - n + 1 (<= p): read already.  (The library
     * is built with -fno-strict-aliasing; the loop stays in order.) */
    uint32_t *w32 = (uint32_t *)(void *)tmp + n;
    for (int64_t j = 0; j < n; ++j) w32[j] = (uint32_t)((w[j] >> cut) << pbits | (uint64_t)j);
    simd_qsort_32(w32, n);
    /* the gather also lists, without a branch, the positions whose cut key
     * equals the one before (a run's second word onwards), so that the
     * runs are found without a data-dependent branch per word */
    int32_t tied[W32_TIED];
    int64_t ntied = 0;
    uint32_t prev = ~(uint32_t)0;
    for (int64_t p = 0; p < n; ++p) {
        const uint32_t v = w32[p];
        tmp[p] = w[v & pm];
        tied[ntied & (W32_TIED - 1)] = (int32_t)p;
        ntied += (int64_t)(((v >> pbits) == (prev >> pbits)) & (p > 0));
        prev = v;
    }
    memcpy(w, tmp, (size_t)n * sizeof(uint64_t));
    if (ntied >= W32_TIED) {
        /* more runs than the list holds (the sample missed them; the list
         * wrapped round): a scan finds them */
        words_sort_runs(w, tmp, n, cut);
        return 1;
    }
    for (int64_t t = 0; t < ntied;) {
        /* a run: tied[t] - 1 .. the last of consecutive listed positions */
        const int64_t s = tied[t] - 1;
        int64_t e = tied[t] + 1;
        for (++t; t < ntied && tied[t] == e; ++t) ++e;
        w32_sort_run(w, tmp, s, e, cut);
    }
    return 1;
}
#endif

static void sort_packed_words_any(uint64_t *w, uint64_t *tmp, int64_t n, int ibits, int rbits)
{
#if defined(KWK_HAVE_SIMD_QSORT)
    if (rbits > QS_WORDS_MIN_BITS && words_sort_via32(w, tmp, n, ibits, rbits)) return;
    if (n >= QS_WORDS_MIN_N && n <= KWK_SIMD_QSORT64_MAX_N && rbits > QS_WORDS_MIN_BITS &&
        !(n > QS_WORDS_RADIX_FROM && n <= QS_WORDS_RADIX_TO)) {
        simd_qsort_64(w, n);
        return;
    }
#endif
    words_sort_top_first(w, tmp, n, ibits, rbits);
}

/* ---- presorted rows --------------------------------------------------
 * Real rows are often sorted already or nearly: timestamps with a few late
 * arrivals, score lists concatenated from sorted parts (per-level detection
 * candidates), keys sorted once and sorted again.  A sort that ignores it
 * spends its full 10-20 ns a word; one pass counting descents (w[i+1] <
 * w[i]) tells these rows apart for well under 1 ns a word:
 * - no descent: already sorted.
 * - a few (up to KWK_RUNS_MAX - 1): that many + 1 sorted runs, merged.
 * - up to 1 in KWK_NEAR_RATIO: nearly sorted.  One pass keeps an ascending
 *   subsequence and drops the rest (a drop-merge sort): an element below
 *   the last kept one is dropped, unless at most KWK_DROP_BACK kept ones
 *   are above it, which are then dropped instead (displaced outliers: with
 *   one only, two adjacent late arrivals in pyg_temporal's timestamps
 *   dropped 99% of the row; with two or more, 5%).  The dropped (few) are
 *   sorted and merged with the kept.  More than n / KWK_DROP_RATIO
 *   dropped: given up, and the row sorted as any.
 * Words are unique, so every merge is exact and the result the stable
 * sort's. */
enum { KWK_ADAPT_MIN_N = 256, KWK_RUNS_MAX = 8, KWK_NEAR_RATIO = 16, KWK_DROP_RATIO = 8,
       KWK_DROP_BACK = 4, KWK_DESCENT_CHUNK = 1024 };

/* Descents in w[0..n), counted until they exceed `limit` (then limit + 1
 * or more). */
static int64_t words_descents(const uint64_t *w, int64_t n, int64_t limit)
{
    int64_t d = 0;
    for (int64_t s = 0; s + 1 < n && d <= limit; s += KWK_DESCENT_CHUNK) {
        const int64_t e = s + KWK_DESCENT_CHUNK < n - 1 ? s + KWK_DESCENT_CHUNK : n - 1;
        int64_t c = 0;
        for (int64_t i = s; i < e; ++i) c += w[i + 1] < w[i];
        d += c;
    }
    return d;
}

/* Sort w[0..n) made of at most KWK_RUNS_MAX ascending runs: pairwise
 * merges between w and tmp (order_words.h's words_merge). */
static void words_merge_runs(uint64_t *w, uint64_t *tmp, int64_t n)
{
    int64_t bound[KWK_RUNS_MAX + 1];
    int r = 0;
    bound[r++] = 0;
    for (int64_t i = 1; i < n; ++i)
        if (w[i] < w[i - 1]) bound[r++] = i;
    bound[r] = n;
    uint64_t *src = w, *dst = tmp;
    while (r > 1) {
        int nr = 0;
        for (int k = 0; k < r; k += 2) {
            if (k + 1 < r)
                words_merge(src + bound[k], bound[k + 1] - bound[k], src + bound[k + 1],
                            bound[k + 2] - bound[k + 1], dst + bound[k]);
            else
                memcpy(dst + bound[k], src + bound[k], (size_t)(bound[k + 1] - bound[k]) * sizeof(uint64_t));
            bound[nr++] = bound[k];
        }
        bound[nr] = n;
        r = nr;
        uint64_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != w) memcpy(w, src, (size_t)n * sizeof(uint64_t));
}

/* The drop-merge sort above; 0 (w untouched) when it gives up. */
static int words_drop_merge(uint64_t *w, uint64_t *tmp, int64_t n, int ibits, int rbits)
{
    /* kept words grow up from tmp[0], dropped ones down from tmp[n - 1]:
     * together never more than the words read, so they do not meet */
    uint64_t *drop = tmp + n;
    const int64_t dmax = n / KWK_DROP_RATIO;
    int64_t k = 1, d = 0;
    /* the last kept word in a register: compared against tmp[k - 1], each
     * word waited on the store of the one before (pyg_temporal's 157474
     * nearly sorted timestamps, us, min of 3 alternating runs: 425 -> 391;
     * a galloping merge of the few dropped words measured slower than
     * words_merge's vector merge, 0.86x) */
    uint64_t last = tmp[0] = w[0]; /* (n >= KWK_ADAPT_MIN_N) */
    for (int64_t i = 1; i < n; ++i) {
        const uint64_t e = w[i];
        if (e > last) {
            tmp[k++] = last = e;
            continue;
        }
        /* the j last kept words above e, if at most KWK_DROP_BACK and
         * the word below them is below e, are displaced outliers (a late
         * arrival's neighbours): dropped, and e kept; else e is */
        int j = 1;
        while (j <= KWK_DROP_BACK && j < k && tmp[k - 1 - j] > e) ++j;
        if (j <= KWK_DROP_BACK) {
            for (int t = 0; t < j; ++t) *--drop = tmp[--k];
            tmp[k++] = last = e;
            d += j;
        } else {
            *--drop = e;
            ++d;
        }
        if (d > dmax) return 0;
    }
    /* every word is in tmp now: w is scratch for sorting the dropped */
    if (d == 0) {
        memcpy(w, tmp, (size_t)n * sizeof(uint64_t));
        return 1;
    }
    /* the dropped are not in index order (the list runs backwards, and a
     * dropped outlier comes after later elements): sorted by whole words,
     * as if their index bits were key bits (the radix sorts order by key
     * bits alone, keeping the input order of equal keys) */
    sort_packed_words_any(drop, w, d, 0, ibits + rbits);
    words_merge(tmp, k, drop, d, w);
    return 1;
}

/* Sort w if it is presorted (see above); 0 when it is not. */
static int words_sort_presorted(uint64_t *w, uint64_t *tmp, int64_t n, int ibits, int rbits)
{
    const int64_t d = words_descents(w, n, n / KWK_NEAR_RATIO);
    if (d == 0) return 1;
    if (d < KWK_RUNS_MAX) {
        words_merge_runs(w, tmp, n);
        return 1;
    }
    return d <= n / KWK_NEAR_RATIO && words_drop_merge(w, tmp, n, ibits, rbits);
}

/* ---- rows dominated by one key ----------------------------------------
 * Padding, masked entries and sparse votes fill most of many real rows
 * with one value: a graph batch's padded nodes (PyG's SortAggregation),
 * the zeros of k-NN vote counts (DINO's k-NN eval: 988 of 1000), -inf
 * after top-k masking.  Its words are already in their final order among
 * themselves (equal keys, ascending index), so one pass splits the row
 * into the words below that key, those equal to it (kept in place, in
 * index order) and those above it, and only the first and last parts are
 * sorted.  The split is a quicksort step around the key, exact for any
 * key; the sample only makes it worth its pass.  The key: the most
 * frequent of KWK_DOM_SAMPLES spread over the row, taken when it is at
 * least KWK_DOM_HITS of them; a sample with no two adjacent keys equal
 * (any row of distinct keys) is turned down after 15 compares. */
enum { KWK_DOM_MIN_N = 128, KWK_DOM_SAMPLES = 16, KWK_DOM_HITS = 6 };
/* Batches of rows of at least KWK_DOM_BATCH_MIN_N whose first rows' samples
 * hold a key KWK_DOM_BATCH_HITS times leave the batch network
 * (sort_rows_batched) for the split: a stricter bar, as the network is
 * faster than a split of a row a third of one key (rows of five values
 * 0.66x at 6 of 16), and shorter rows keep it */
enum { KWK_DOM_BATCH_MIN_N = 256, KWK_DOM_BATCH_HITS = 8 };

/* The dominant key of w's sample (its bits above the index, the index
 * bits zero) when it holds it `hits` times or more (*found = 1), else
 * *found = 0. */
static uint64_t words_dominant_key(const uint64_t *w, int64_t n, uint64_t m, int hits, int *found)
{
    uint64_t s[KWK_DOM_SAMPLES];
    int adjacent = 0;
    for (int j = 0; j < KWK_DOM_SAMPLES; ++j) {
        s[j] = w[(n - 1) * j / (KWK_DOM_SAMPLES - 1)] & ~m;
        adjacent += j > 0 && s[j] == s[j - 1];
    }
    *found = 0;
    if (adjacent == 0) return 0;
    int best = 0;
    uint64_t key = 0;
    for (int j = 0; j < KWK_DOM_SAMPLES; ++j) {
        int count = 0;
        for (int t = 0; t < KWK_DOM_SAMPLES; ++t) count += s[t] == s[j];
        if (count > best) {
            best = count;
            key = s[j];
        }
    }
    *found = best >= hits;
    return key;
}

/* The split: words below `key` to tmp from the front (*nl of them), above
 * it to tmp from the back (*ng, the first at tmp[n - 1]), equal ones to
 * w's front (returned count), each part in w's order: the sorts that
 * follow must get words in index order (the radix passes order by key
 * bits alone and keep the order of equal keys).  An equal word is written
 * at or before the slot it was read from, so w is read before it is
 * overwritten. */
static int64_t words_split3(uint64_t *w, uint64_t *tmp, int64_t n, uint64_t key, uint64_t m,
                            int64_t *nl, int64_t *ng)
{
    const uint64_t below = key, above = key | m; /* key(x) < K <=> x < below; > K <=> x > above */
    int64_t l = 0, g = 0, e = 0, i = 0;
#if defined(__AVX512F__)
    const __m512i vb = _mm512_set1_epi64((long long)below), va = _mm512_set1_epi64((long long)above);
    const __m512i reverse = _mm512_set_epi64(0, 1, 2, 3, 4, 5, 6, 7);
    for (; i + 8 <= n; i += 8) {
        const __m512i v = _mm512_loadu_si512((const void *)(w + i));
        const __mmask8 lt = _mm512_cmplt_epu64_mask(v, vb), gt = _mm512_cmpgt_epu64_mask(v, va);
        const __mmask8 eq = (__mmask8)~(lt | gt);
        const int cl = __builtin_popcount(lt), cg = __builtin_popcount(gt), ce = 8 - cl - cg;
        /* compress in registers, then masked stores: a compress straight to
         * memory is slow on Intel cores.  The greater words compressed from
         * the lanes reversed, so that they run backwards from the top. */
        _mm512_mask_storeu_epi64(w + e, (__mmask8)((1u << ce) - 1), _mm512_maskz_compress_epi64(eq, v));
        _mm512_mask_storeu_epi64(tmp + l, (__mmask8)((1u << cl) - 1), _mm512_maskz_compress_epi64(lt, v));
        if (cg) {
            const __m512i r = _mm512_permutexvar_epi64(reverse, v);
            _mm512_mask_storeu_epi64(tmp + n - g - cg, (__mmask8)((1u << cg) - 1),
                                     _mm512_maskz_compress_epi64(_mm512_cmpgt_epu64_mask(r, va), r));
        }
        e += ce;
        l += cl;
        g += cg;
    }
#endif
    for (; i < n; ++i) {
        /* branch-free: x written to all three places, one count advanced
         * (l + g <= i, so both tmp slots lie in tmp) */
        const uint64_t x = w[i];
        const int lt = x < below, gt = x > above;
        tmp[n - 1 - g] = x;
        tmp[l] = x;
        w[e] = x;
        l += lt;
        g += gt;
        e += !(lt | gt);
    }
    *nl = l;
    *ng = g;
    return e;
}

static void sort_packed_words_rest(uint64_t *w, uint64_t *tmp, int64_t n, int ibits, int rbits);

/* Sort w if one key dominates its sample (see above); 0 (w untouched) if
 * not.  tmp: n words. */
static int words_sort_dominant(uint64_t *w, uint64_t *tmp, int64_t n, int ibits, int rbits)
{
    const uint64_t m = kwk_width_mask(ibits);
    int found;
    const uint64_t key = words_dominant_key(w, n, m, KWK_DOM_HITS, &found);
    if (!found) return 0;
    int64_t nl, ng;
    const int64_t ne = words_split3(w, tmp, n, key, m, &nl, &ng);
    kwk_count(KWK_COUNT_DOMINANT_SPLIT_ROWS, 1);
    /* equal words to their place, then the greater ones sorted after them
     * (scratch: tmp past the lower words, ne + ng words free), then the
     * lower ones sorted before them (scratch: all of tmp) */
    memmove(w + nl, w, (size_t)ne * sizeof(uint64_t));
    for (int64_t j = 0; j < ng; ++j) w[nl + ne + j] = tmp[n - 1 - j];
    sort_packed_words_rest(w + nl + ne, tmp + nl, ng, ibits, rbits);
    memcpy(w, tmp, (size_t)nl * sizeof(uint64_t));
    sort_packed_words_rest(w, tmp, nl, ibits, rbits);
    return 1;
}

/* sort_packed_words without the split: what the split leaves holds no
 * word of its key. */
static void sort_packed_words_rest(uint64_t *w, uint64_t *tmp, int64_t n, int ibits, int rbits)
{
    if (n < 2) return;
    if (n >= KWK_ADAPT_MIN_N && words_sort_presorted(w, tmp, n, ibits, rbits)) return;
    sort_packed_words_any(w, tmp, n, ibits, rbits);
}

/* Stable sort of a row's packed words: rows dominated by one key by the
 * split, presorted rows by their runs, others by sort_packed_words_any. */
static void sort_packed_words(uint64_t *w, uint64_t *tmp, int64_t n, int ibits, int rbits)
{
    if (n >= KWK_DOM_MIN_N && words_sort_dominant(w, tmp, n, ibits, rbits)) return;
    sort_packed_words_rest(w, tmp, n, ibits, rbits);
}

/* Where wide_sort's first sort is the vector quicksort on every key bit
 * its words hold (the runs after it then only for keys agreeing on all of
 * them) instead of the radix sort of the leading digits: float keys,
 * crowded on a few exponents, leave that radix sort long runs of equal
 * leading digits; spread integer keys (uniform 64-bit, hashes) leave runs
 * of one or two, and the radix sort wins from 256 to 65536.  Measured
 * (torch.sort under install(), AVX-512, us, min of 3 alternating runs,
 * radix -> quicksort): float64 randn 4096x64 1419 -> 1047, 64x1000 657 ->
 * 329, 32x2048 stable 677 -> 357, 8x8192 stable 543 -> 414, 4x65536 5791
 * -> 4727, 2^18 stable 4150 -> 2652; int64 of 62 random bits 4096x64 1414
 * -> 1005, 1M 17318 -> 15067, but 128x512 266 -> 339, 16x4096 339 -> 406,
 * 4x65536 1778 -> 2148. */
#if defined(__AVX512F__)
enum { WIDE_INT_RADIX_FROM = 128, WIDE_INT_RADIX_TO = 1 << 20 };
#endif
static int wide_by_qsort(int dtype, int64_t n)
{
#if defined(KWK_HAVE_SIMD_QSORT) && defined(__AVX512F__)
    if (n < QS_WORDS_MIN_N || n > KWK_SIMD_QSORT64_MAX_N) return 0;
    return KWK_DTYPES[dtype].is_float || n <= WIDE_INT_RADIX_FROM || n > WIDE_INT_RADIX_TO;
#elif defined(KWK_HAVE_SIMD_QSORT)
    /* AVX2's four-lane quicksort: float rows of 512..4096 only (A/B, us:
     * float64 64x1000 723 -> 583, 32x2048 731 -> 635, but 4096x64 1622 ->
     * 2002, 8x8192 587 -> 685; int64 4096x64 1582 -> 1935) */
    return KWK_DTYPES[dtype].is_float && n >= 512 && n <= 4096;
#else
    (void)dtype, (void)n;
    return 0;
#endif
}

/* Keys too wide to pack with their index (64-bit keys spanning more than
 * 64 - ibits bits, ibits <= 32): words hold the leading tbits of the key;
 * runs of equal leading bits are re-packed with the remaining low bits
 * (low + ibits <= 64) and sorted.  Afterwards only the words' index bits
 * are meaningful.  Returns 1 when two keys are equal, found in the runs as
 * they are re-packed: a check of the sorted row afterwards reads every key
 * through its index, a random read each (native, torch order with
 * indices and values, ns/el, two interleaved runs: 1M float64 49-68 ->
 * 39-50, 1M int64 of full range 61-66 -> 41-45). */
static int wide_sort(int dtype, const uint64_t *keys, uint64_t *w, uint64_t *tmp, int64_t n,
                     const sort_row *r)
{
    const int ib = r->ibits;
    const int qsort = wide_by_qsort(dtype, n);
    int tbits = n > KWK_SMALL_SORT_MAX && !qsort ? top_bits_for(n, ib, r->rbits) : 0;
    if (tbits == 0 || tbits > 64 - ib) tbits = 64 - ib;
    const int low = r->rbits - tbits; /* <= ib, as rbits <= 64 and tbits >= ... */
    const uint64_t lo = r->lo, lowmask = kwk_width_mask(low), m = r->mask;
    for (int64_t j = 0; j < n; ++j) w[j] = (((keys[j] - lo) >> low) << ib) | (uint64_t)j;
#if defined(KWK_HAVE_SIMD_QSORT)
    if (qsort) simd_qsort_64(w, n);
    else
#endif
        words_sort(w, tmp, n, ib, tbits);
    /* Most rows have no two words with equal leading bits (uniform 64-bit
     * keys, float64 rows): one branch-free pass, which the compiler
     * vectorises, says so before the scan for runs below, whose branch on
     * every word was a fifth of the time of rows of 64 (native, float64
     * 4096x64, torch order, ns/el: 3.46-3.52 -> 2.85-2.93; A/B through
     * install(), min of 8 alternating runs: float64 / int64 of full range
     * 4096x64 1.23x / 1.22x, 1M 1.11x / 1.05x with the prefetch in
     * emit_words). */
    uint64_t same_top = 0;
    for (int64_t j = 1; j < n; ++j) same_top |= (uint64_t)((w[j] >> ib) == (w[j - 1] >> ib));
    if (!same_top) return 0;
    int tie = 0;
    for (int64_t s = 0; s < n;) {
        const uint64_t top = w[s] >> ib;
        int64_t e = s + 1;
        while (e < n && (w[e] >> ib) == top) ++e;
        if (e - s > 1) {
            /* re-packed in place; a run already in order (the usual case
             * for repeated keys, e.g. unique's hashed ids: equal keys sit
             * in index order after the stable first sort) is left as is */
            int sorted = 1;
            uint64_t prev = 0;
            for (int64_t q = s; q < e; ++q) {
                const uint64_t idx = w[q] & m;
                const uint64_t nw = (((keys[idx] - lo) & lowmask) << ib) | idx;
                sorted &= q == s || nw > prev;
                w[q] = prev = nw;
            }
            if (!sorted) words_sort(w + s, tmp, e - s, ib, low);
            /* equal leading bits and equal low bits: equal keys */
            for (int64_t q = s + 1; q < e; ++q) tie |= (w[q] >> ib) == (w[q - 1] >> ib);
        }
        s = e;
    }
    return tie;
}

/* Words in key order become words (dense rank << ibits | index) in index
 * order: the same ties, so the same std::sort moves. */
static void rank_words_from_sorted(const uint64_t *keys, const uint64_t *w, uint64_t *dst,
                                   int64_t n, int ibits, uint64_t m)
{
    uint64_t rank = 0;
    for (int64_t j = 0; j < n; ++j) {
        const uint64_t idx = w[j] & m;
        rank += j > 0 && keys[idx] != keys[w[j - 1] & m];
        dst[idx] = rank << ibits | idx;
    }
}

/* Rows whose keys are lo..lo + n - 1, each once (argsort of a permutation:
 * MAE's ids_restore, inverse permutations, positions): the word with key
 * r goes to slot r, one scatter instead of a sort (1-2 ns a word against
 * 8-10 for the radix sort of 1024 int64).  The scatter also checks that no
 * key repeats; 0 (w untouched) when one does.  tmp holds n words. */
static int words_place_permutation(uint64_t *w, uint64_t *tmp, int64_t n, int ibits)
{
    /* no word is ~0: keys and indices are below n < 2^32 */
    if (n < 2 || n >= ((int64_t)1 << 32)) return 0;
    memset(tmp, 0xFF, (size_t)n * sizeof(uint64_t));
    for (int64_t j = 0; j < n; ++j) {
        const uint64_t k = w[j] >> ibits;
        if (tmp[k] != ~(uint64_t)0) return 0;
        tmp[k] = w[j];
    }
    memcpy(w, tmp, (size_t)n * sizeof(uint64_t));
    return 1;
}

/* Whether a packed row is (almost) sure to hold a tie, so that the torch
 * order goes straight to the emulation (whose answer is right with or
 * without ties; the stable sort only saves time on tie-free rows):
 * fewer possible keys than elements, or n^2 / 2 > 4 * 2^rbits (in whole
 * bits: 2 * ibits > rbits + 3): more than four equal pairs expected were
 * the keys spread evenly over their range (real data clusters, so ties
 * are likelier still), or a tie in a sample.
 * On a tie-free row this costs the emulation's time instead of the radix
 * sort's: slower, still exact, still well under torch's.  Rows of at most
 * KWK_TIE_EMU_ALWAYS_MAX elements always take the emulation: measured on
 * tie-free 64-element rows it is faster than the stable sort plus its tie
 * check, and a tie found after the stable sort would cost both. */
/* Rows of at least KWK_TIE_SAMPLE_MIN_N elements first look for a tie among
 * KWK_TIE_SAMPLE of their keys, evenly spaced (a small hash set): one found means a tie
 * for sure.  64 keys find a tie with ~98% odds on bf16-rounded float rows
 * (about 500 distinct values in a binade) for ~100 ns a row. */
enum { KWK_TIE_EMU_ALWAYS_MAX = 128 };
enum { KWK_TIE_SAMPLE = 64, KWK_TIE_SAMPLE_MIN_N = 128, KWK_TIE_TABLE = 256 };

static int sample_has_tie(const uint64_t *words, int64_t n, int ibits)
{
    uint64_t table[KWK_TIE_TABLE]; /* key + 1; 0 = empty (ibits >= 7: no overflow) */
    memset(table, 0, sizeof table);
    /* keys spread over the row, not its head: padding and masked entries
     * often sit together at one end (a graph batch's padded nodes) */
    for (int j = 0; j < KWK_TIE_SAMPLE; ++j) {
        const uint64_t k = (words[(int64_t)j * n / KWK_TIE_SAMPLE] >> ibits) + 1;
        unsigned h = (unsigned)((k * 0x9E3779B97F4A7C15ull) >> 56);
        while (table[h] != 0) {
            if (table[h] == k) return 1;
            h = (h + 1) & (KWK_TIE_TABLE - 1);
        }
        table[h] = k;
    }
    return 0;
}

/* Dense keys (a key range of less than 64 per element: ids, positions,
 * permutations, small integers): how many elements repeat an earlier
 * element's key, counted exactly with a bitmap of the range (in `bitmap`,
 * room for n words = 64n bits), one pass.  Stops counting at `enough`. */
static int64_t dense_key_repeats(const uint64_t *words, int64_t n, int ibits, uint64_t range,
                                 uint64_t *bitmap, int64_t enough)
{
    memset(bitmap, 0, (size_t)((range >> 6) + 1) * sizeof(uint64_t));
    int64_t repeats = 0;
    for (int64_t j = 0; j < n; ++j) {
        const uint64_t k = words[j] >> ibits, bit = (uint64_t)1 << (k & 63);
        if (bitmap[k >> 6] & bit) {
            if (++repeats >= enough) break;
        }
        bitmap[k >> 6] |= bit;
    }
    return repeats;
}

/* Rows of at least KWK_TIE_WIDE_MIN_N elements whose key range is wide for
 * their length (float32 rows of 2^17+: rbits 31-32, ibits 18+) still
 * expect n^2 / 2^(rbits+1) ties or more (float keys crowd around a few
 * exponents, so many more), and with a few hundred tied keys the pruned
 * emulation still runs ~10 of the ~13 levels: the full emulation is then
 * faster than the stable sort plus the pruned one.  Measured (Zen 3,
 * float32 randn rows, ns/el, stable+pruned vs full, min of 5 alternating
 * runs): 152064 (188 tied keys) 24.6 vs 19.8, 262144 31.2 vs 20.8, 1M
 * 35.7 vs 25.8; 50257 (~20 tied keys) 19.8 vs 17.8, 20000 14.4 vs 18.0.
 * Rows with thousands of tied keys (the corpus's torchrec_auc 262144 with
 * 2492, sparsegpt 524288 with 3282) cost the same either way: the pruned
 * emulation runs nearly every level there.  Presorted rows keep the stable
 * path, whose run detection sorts them in a pass or two. */
enum { KWK_TIE_WIDE_MIN_N = 1 << 17 };

static int words_presorted_likely(const uint64_t *w, int64_t n)
{
    return words_descents(w, n, n / KWK_NEAR_RATIO) <= n / KWK_NEAR_RATIO;
}

static int tie_expected(const uint64_t *words, int64_t n, const sort_row *r, uint64_t *scratch)
{
    if (r->hi - r->lo < (uint64_t)(n - 1)) return 1;
    if (n <= KWK_TIE_EMU_ALWAYS_MAX) return 1;
    /* Dense keys: known exactly, not guessed from the range (the guess
     * below sent every permutation to the emulation, 14 ns/el at 4096
     * where the stable sort takes 10).  Few repeats are left to the
     * stable sort and the pruned emulation (the threshold of the guess
     * below: n / 256 tied keys). */
    if ((r->hi - r->lo) >> 6 < (uint64_t)n)
        return dense_key_repeats(words, n, r->ibits, r->hi - r->lo, scratch, n / 256 + 1) > n / 256;
    /* A few expected ties (a key range over 2^10 times the row: the
     * estimate runs 3-10x low on real rows) are left to the stable sort,
     * whose sorted row lets the emulation copy every range free of tied
     * keys (wemu_prune): with D tied keys it still emulates about log2(D)
     * levels, which pays for the sort only when D < n / 256.  Measured:
     * 48 tied keys in 65536 1.25x faster that way, 2475 in 262144 1.45x
     * slower. */
    if (2 * r->ibits > r->rbits + 3 &&
        (r->rbits <= r->ibits + 10 || (n >= KWK_TIE_WIDE_MIN_N && !words_presorted_likely(words, n))))
        return 1;
    /* a repeated extreme key alone (masked entries, padding) is left to
     * the sort: its stable order lets the emulation copy every range free
     * of tied keys (wemu_prune), which is most of such a row */
    return n >= KWK_TIE_SAMPLE_MIN_N && sample_has_tie(words, n, r->ibits);
}

/* What a call's rows share. */
typedef struct {
    int dtype, descending, torch_ties, values_only;
    int no_indices; /* values only, of any length */
    int64_t len;
    uint64_t flip;
} sort_call;

/* A row of at most KWK_STD_SORT_THRESHOLD elements with 64-bit keys: each
 * element's stable rank from the keys themselves (n^2 compares, no packing
 * or radix passes).  std::sort leaves such a row to its insertion sort,
 * which is stable, so this is torch's order too.  Keys too wide to pack
 * with an index (int64 of full range, float64) otherwise went through the
 * wide sort's passes and re-packing: stable argsort of 4096x8 int64 14.4
 * ns/el, float64 16.4. */
static void sort_short_wide_row(int dtype, const out_row *out, int64_t len, uint64_t flip,
                                uint64_t *keys, uint64_t *order)
{
#if defined(__AVX512F__)
    if (len <= 8) {
        /* the stable ranks of all eight lanes at once (kwk_ranks8_u64:
         * key j against every lane).  The keys come straight from the row
         * (kwk_keys8_row64), the order is the ranks' inverse in a register
         * and dense outputs take two vector stores.  A/B (torch.sort under
         * install(), us): on an Intel Xeon, the ranks vector against scalar
         * ranks, int64 4096x8 163 -> 127 (np.argsort 136), float64 169 ->
         * 141, stable alike; on AMD Zen 4, this against the ranks of keys
         * stored one by one, 4096x8 float64 202 -> 104, int64 175 -> 93
         * (torch 121 / 117) */
        __m512i raw;
        const __m512i k = kwk_keys8_row64(dtype, out->row, out->step, len, flip, &raw);
        int tied;
        const __m512i ord = kwk_order8_u64(kwk_ranks8_u64(k, len, &tied), len);
        const __mmask8 m = (__mmask8)((1u << len) - 1);
        if (out->dsl == 1) {
            if (out->vals) _mm512_mask_storeu_epi64(out->vals, m, _mm512_permutexvar_epi64(ord, raw));
            if (out->inds) _mm512_mask_storeu_epi64(out->inds, m, ord);
        } else { /* (order holds len words: a whole vector could overrun it) */
            uint64_t o8[8];
            _mm512_storeu_si512((void *)o8, ord);
            emit_words(out, o8, len, ~(uint64_t)0);
        }
        return;
    }
#endif
    for (int64_t j = 0; j < len; ++j) keys[j] = kwk_key_at(dtype, out->row + j * out->step) ^ flip;
    for (int64_t i = 0; i < len; ++i) {
        const uint64_t k = keys[i];
        int64_t r = 0;
        for (int64_t j = 0; j < i; ++j) r += keys[j] <= k;
        for (int64_t j = i + 1; j < len; ++j) r += keys[j] < k;
        order[r] = (uint64_t)i;
    }
    emit_words(out, order, len, ~(uint64_t)0);
}

/* Taken for float16/bfloat16 rows of 256..2^17, batched rows too (AMD Zen
 * 3, stable sort of one row with indices, ns/el words -> counting, min of 3
 * runs: bf16 256 13.0 -> 6.8, 1024 9.9 -> 5.7, float16 256 8.3 -> 5.6, 1024
 * 7.2 -> 5.6; bf16 of three spreads 2048 7.9-9.8 -> 5.6-5.9, 8192 7.9-9.6
 * -> 5.8-5.9, 65536 8.1-10.9 -> 6.0-7.1, 131072 7.5-7.8 -> 6.1-6.4).  Not
 * longer rows (262144-1M: 0.9-1.1x, the scatters' 256 streams outgrow the
 * cache) nor int16/uint16 (keys of a small range pack into few bits, which
 * the words' radix sort orders in fewer passes: 131072 int16 of +-400 4.6
 * vs 5.4). */
enum { KWK_H16_SORT_MIN_LEN = 256, KWK_H16_SORT_MAX_LEN = 1 << 17 };

/* Whether a row of this call takes sort_h16_row (the one place that
 * decides: the row path and the batched path both ask). */
static int h16_sort_takes(int dtype, int64_t len, int torch_ties, int with_indices)
{
    return !torch_ties && with_indices && len >= KWK_H16_SORT_MIN_LEN &&
           len <= KWK_H16_SORT_MAX_LEN && (dtype == KWK_FLOAT16 || dtype == KWK_BFLOAT16);
}

/* Stable sort of a float16/bfloat16 row with indices: two counting passes,
 * by the low byte and then the high byte, over 2-byte keys and 4-byte
 * positions, the second writing the indices and values to their places,
 * instead of packing 8-byte words and moving them through the radix passes
 * (about 28 bytes moved an element instead of 60-90).  A byte shared by
 * every key skips its pass.  Values are copied from the source (a float key
 * stands for both zeros and every NaN).  ws->words holds the keys, ws->tmp
 * the first pass's keys and positions (2 + 4 bytes each: within its 8;
 * rows up to KWK_H16_SORT_MAX_LEN, so positions fit in 32 bits). */
static void sort_h16_row(int dtype, const out_row *o, int64_t len, uint64_t flip, workspace *ws)
{
    uint16_t *k = (uint16_t *)(void *)ws->words;
    uint16_t *tk = (uint16_t *)(void *)ws->tmp;
    uint32_t *ti = (uint32_t *)(void *)((char *)ws->tmp + (((size_t)len * 2 + 7) & ~(size_t)7));
    int64_t c0[256], c1[256];
    memset(c0, 0, sizeof c0);
    memset(c1, 0, sizeof c1);
    const char *row = o->row;
    const int64_t step = o->step;
    const uint16_t fl = (uint16_t)flip;
#define KWK_H16_KEYS(KEY)                                                     \
    for (int64_t j = 0; j < len; ++j) {                                       \
        uint16_t v;                                                           \
        memcpy(&v, row + j * step, 2);                                        \
        const uint16_t kk = (uint16_t)((KEY) ^ fl);                           \
        k[j] = kk;                                                            \
        c0[kk & 255]++;                                                       \
        c1[kk >> 8]++;                                                        \
    }
    if (dtype == KWK_FLOAT16) {
        KWK_H16_KEYS(kwk_key_f16(v))
    } else {
        KWK_H16_KEYS(kwk_key_bf16(v))
    }
#undef KWK_H16_KEYS
    const int skip0 = c0[k[0] & 255] == len, skip1 = c1[k[0] >> 8] == len;
    for (int64_t b = 0, s0 = 0, s1 = 0; b < 256; ++b) {
        const int64_t t0 = c0[b], t1 = c1[b];
        c0[b] = s0;
        c1[b] = s1;
        s0 += t0;
        s1 += t1;
    }
    const uint16_t *sk = k;
    const uint32_t *si = NULL;
    if (!skip0) {
        for (int64_t j = 0; j < len; ++j) {
            const uint16_t kk = k[j];
            const int64_t p = c0[kk & 255]++;
            tk[p] = kk;
            ti[p] = (uint32_t)j;
        }
        sk = tk;
        si = ti;
    }
    int64_t *inds = o->inds;
    const int64_t dsl = o->dsl;
    char *vals = o->vals;
    for (int64_t j = 0; j < len; ++j) {
        const int64_t idx = si ? (int64_t)si[j] : j;
        const int64_t p = skip1 ? j : c1[sk[j] >> 8]++;
        inds[p * dsl] = idx;
        if (vals) memcpy(vals + p * dsl * 2, row + idx * step, 2);
    }
}

/* Stable sort of a row of one-byte keys (bool, uint8, int8) by counting:
 * a histogram, then each index written straight to its place, instead of
 * packing 8-byte words and moving them through a radix pass (four passes
 * over 8n bytes where this reads n twice).  As in words_radix_one_digit,
 * the row is walked in four quarters with their own counts (independent
 * chains when keys repeat), each quarter's elements of a key placed after
 * the earlier quarters': stable.  Values are runs of the one byte each key
 * stands for (bool: 0 or 1, as torch writes them). */
enum { KWK_BYTE_SORT_MIN_LEN = 384 };
static void sort_byte_row(int dtype, const out_row *o, int64_t len, uint64_t flip)
{
    /* a byte's key: the byte itself ^ x (int8: its sign bit flipped;
     * descending: every bit), a bool's its truth ^ x; no table to build
     * per row (native, uint8 64x1000 stable argsort, min of 3 alternating
     * runs: 1.24-1.33 -> 1.11-1.20 ns/el; with values, descending, 1.57 ->
     * 1.53) */
    const int is_bool = dtype == KWK_BOOL;
    const uint8_t x = (uint8_t)((dtype == KWK_INT8 ? 0x80 : 0) ^ (int)(flip & 0xFF));
    int64_t c[4][256];
    memset(c, 0, sizeof c);
    const char *row = o->row;
    const int64_t step = o->step, q = len / 4;
#define KWK_BYTE_KEY(j) (uint8_t)((is_bool ? row[(j) * step] != 0 : (uint8_t)row[(j) * step]) ^ x)
    for (int64_t i = 0; i < q; ++i) {
        c[0][KWK_BYTE_KEY(i)]++;
        c[1][KWK_BYTE_KEY(q + i)]++;
        c[2][KWK_BYTE_KEY(2 * q + i)]++;
        c[3][KWK_BYTE_KEY(3 * q + i)]++;
    }
    for (int64_t i = 4 * q; i < len; ++i) c[3][KWK_BYTE_KEY(i)]++;
    /* each quarter's first place for each key: the keys' totals (one
     * serial chain of 256 adds, not 1024, which on rows of 1000 was a
     * third of the time), then the quarters' offsets within a key by
     * whole-array adds (native, uint8 64x1000 stable argsort 1.54 -> 1.40
     * ns/el; A/B through install(), min of 8: 1.15x, 4x65536 1.04x) */
    int64_t run[256], start[256], sum = 0;
    for (int b = 0; b < 256; ++b) run[b] = c[0][b] + c[1][b] + c[2][b] + c[3][b];
    for (int b = 0; b < 256; ++b) {
        start[b] = sum;
        sum += run[b];
    }
    for (int b = 0; b < 256; ++b) {
        const int64_t s1 = start[b] + c[0][b], s2 = s1 + c[1][b], s3 = s2 + c[2][b];
        c[0][b] = start[b];
        c[1][b] = s1;
        c[2][b] = s2;
        c[3][b] = s3;
    }
    if (o->inds) {
        int64_t *inds = o->inds;
        const int64_t dsl = o->dsl;
        for (int64_t i = 0; i < q; ++i) {
            inds[c[0][KWK_BYTE_KEY(i)]++ * dsl] = i;
            inds[c[1][KWK_BYTE_KEY(q + i)]++ * dsl] = q + i;
            inds[c[2][KWK_BYTE_KEY(2 * q + i)]++ * dsl] = 2 * q + i;
            inds[c[3][KWK_BYTE_KEY(3 * q + i)]++ * dsl] = 3 * q + i;
        }
        for (int64_t i = 4 * q; i < len; ++i) inds[c[3][KWK_BYTE_KEY(i)]++ * dsl] = i;
    }
#undef KWK_BYTE_KEY
    if (!o->vals) return;
    int64_t at = 0;
    for (int b = 0; b < 256; ++b) {
        const char byte = (char)(uint8_t)(is_bool ? (b ^ x) & 1 : b ^ x); /* the key's byte */
        if (o->dsl == 1) memset(o->vals + at, byte, (size_t)run[b]);
        else
            for (int64_t j = at; j < at + run[b]; ++j) o->vals[j * o->dsl] = byte;
        at += run[b];
    }
}

/* The same counting for wider integer keys that span few values (expert
 * ids of a MoE layer flattened to int64, graph ids of a batch, class
 * labels), stable order only: once sort_load has packed the words,
 * (key - lo) << ibits | index in index order, a row whose keys span at most
 * 2^KWK_SMALL_RANGE_BITS values is counted by w >> ibits (four quarters,
 * as above), each index written straight to its place and each key's run
 * of values filled with the element it stands for (an integer key is one
 * bit pattern).  The radix path moved the words through a scatter pass,
 * copied them back and decoded them (hf_grouped_mm's 32768 int64 expert ids
 * of 0..127: the scatter 38%, the decode 10%, the copy 6% of the call).
 * Measured (corpus inputs, fresh variants, us, min of 4 alternating runs,
 * AVX-512 Zen 4): hf_grouped_mm 70.1 -> 56.4, pyg_topk_pool (36352 graph
 * ids) 75.5 -> 61.4, megatron_permute (16384 expert ids, argsort) 34.8 ->
 * 27.4.  Not taken: rows under KWK_SMALL_RANGE_MIN_LEN (64x4096 int64 of
 * 0..127 0.92x: the tables' set-up a row), 16-bit keys (int16 16384 of
 * 0..255 0.57x against their own path), ranges of 9-11 bits (0.7-1.14x:
 * 2048-bucket tables), int32 rows measured alike (0.97-1.03x). */
enum { KWK_SMALL_RANGE_BITS = 8, KWK_SMALL_RANGE_MIN_LEN = 16384, KWK_SR_CHAINS = 4 };

static int small_range_sort_takes(int dtype, int64_t len, int rbits, int torch_ties)
{
    if (torch_ties || rbits > KWK_SMALL_RANGE_BITS || len < KWK_SMALL_RANGE_MIN_LEN ||
        len >= ((int64_t)1 << 31))
        return 0;
    switch (dtype) {
    case KWK_INT32: case KWK_UINT32: case KWK_INT64: case KWK_UINT64:
        return 1;
    default: return 0;
    }
}

/* The element bits key k (flipped back) stands for, in the low bytes. */
static inline uint64_t int_key_bits(int dtype, uint64_t k)
{
    switch (dtype) {
    case KWK_INT32: return (k ^ 0x80000000u) & 0xFFFFFFFFu;
    case KWK_INT64: return k ^ 0x8000000000000000ull;
    default: return k;
    }
}

static void sort_small_range_row(int dtype, const out_row *o, const uint64_t *w, int64_t len,
                                 int ibits, uint64_t lo, uint64_t flip)
{
    /* KWK_SR_CHAINS parts of the row, each with its own counts: keys that
     * repeat (a few hot experts) make each count wait on its last store,
     * and independent chains hide that latency (eight measured slower
     * than four in one run, 0.45-0.85x: eight streams a power-of-two
     * stride apart) */
    enum { NC = KWK_SR_CHAINS, NB = 1 << KWK_SMALL_RANGE_BITS };
    uint32_t c[NC][NB];
    memset(c, 0, sizeof c);
    const int64_t q = len / NC;
    for (int64_t i = 0; i < q; ++i)
        for (int k = 0; k < NC; ++k) c[k][w[k * q + i] >> ibits]++;
    for (int64_t i = NC * q; i < len; ++i) c[NC - 1][w[i] >> ibits]++;
    uint32_t run[NB], sum = 0;
    for (int b = 0; b < NB; ++b) {
        uint32_t r = 0;
        for (int k = 0; k < NC; ++k) {
            const uint32_t t = c[k][b];
            c[k][b] = sum;
            sum += t;
            r += t;
        }
        run[b] = r;
    }
    if (o->inds) {
        int64_t *inds = o->inds;
        const int64_t dsl = o->dsl;
        for (int64_t i = 0; i < q; ++i)
            for (int k = 0; k < NC; ++k) inds[(int64_t)c[k][w[k * q + i] >> ibits]++ * dsl] = k * q + i;
        for (int64_t i = NC * q; i < len; ++i) inds[(int64_t)c[NC - 1][w[i] >> ibits]++ * dsl] = i;
    }
    if (!o->vals) return;
    const int es = o->es;
    const int64_t dsl = o->dsl;
    int64_t at = 0;
    for (int b = 0; b < NB; ++b) {
        if (!run[b]) continue;
        const uint64_t bits = int_key_bits(dtype, ((uint64_t)b + lo) ^ flip);
        const int64_t end = at + run[b];
        if (dsl == 1 && es == 8) {
            uint64_t *v = (uint64_t *)(void *)o->vals;
            for (int64_t j = at; j < end; ++j) v[j] = bits;
        } else if (dsl == 1 && es == 4) {
            uint32_t *v = (uint32_t *)(void *)o->vals;
            for (int64_t j = at; j < end; ++j) v[j] = (uint32_t)bits;
        } else {
            const uint32_t b4 = (uint32_t)bits; /* (4- and 8-byte keys only) */
            const void *e = es == 4 ? (const void *)&b4 : (const void *)&bits;
            for (int64_t j = at; j < end; ++j) memcpy(o->vals + j * dsl * es, e, (size_t)es);
        }
        at = end;
    }
}

/* ---- std::sort's emulation on threads ---------------------------------
 * The introsort loop's ranges are disjoint and independent once split:
 * each carries the depth limit and key bounds the serial recursion gives
 * it (wemu_introsort_loop), and its result does not depend on when it is
 * done.  So a long row's first steps run here, always on the largest
 * range, until WEMU_PAR_RANGES ranges (or none above WEMU_PAR_SPLIT_MIN)
 * are left; these go to the threads, the largest first to the least loaded
 * (the median-of-3 pivots split unevenly).  Rows of WEMU_PAR_MIN_N or more
 * words when kwk_row_threads() > 1 (Python asks for threads from 2^18
 * elements). */
enum { WEMU_PAR_MIN_N = 1 << 16, WEMU_PAR_RANGES = 8, WEMU_PAR_SPLIT_MIN = 4096 };

typedef struct {
    uint64_t *first, *last;
    int64_t depth;
    uint64_t klo, khi;
} wemu_range;

typedef struct {
    wemu_range r[WEMU_PAR_RANGES];
    int owner[WEMU_PAR_RANGES];
    int nr, s;
    uint64_t m;
    const wemu_prune *pr;
    wemu_gate gate[KWK_MAX_ROW_THREADS];
} wemu_par;

static void wemu_par_part(void *ctx, int p)
{
    wemu_par *w = (wemu_par *)ctx;
    for (int i = 0; i < w->nr; ++i)
        if (w->owner[i] == p)
            wemu_introsort_loop(w->r[i].first, w->r[i].last, w->r[i].depth, w->s, w->m, w->pr,
                                w->r[i].klo, w->r[i].khi, &w->gate[p]);
}

static void wemu_introsort_threads(uint64_t *first, uint64_t *last, int64_t depth_limit, int s,
                                   uint64_t m, const wemu_prune *pr, uint64_t klo, uint64_t khi,
                                   wemu_gate *g)
{
    const int parts = kwk_row_threads();
    if (parts < 2 || last - first < WEMU_PAR_MIN_N) {
        wemu_introsort_loop(first, last, depth_limit, s, m, pr, klo, khi, g);
        return;
    }
    wemu_par w;
    w.nr = 1;
    w.s = s;
    w.m = m;
    w.pr = pr;
    for (int p = 0; p < KWK_MAX_ROW_THREADS; ++p) w.gate[p] = *g;
    w.r[0] = (wemu_range){first, last, depth_limit, klo, khi};
    while (w.nr < WEMU_PAR_RANGES) {
        int big = 0;
        for (int i = 1; i < w.nr; ++i)
            if (w.r[i].last - w.r[i].first > w.r[big].last - w.r[big].first) big = i;
        wemu_range *g = &w.r[big];
        if (g->last - g->first < WEMU_PAR_SPLIT_MIN) break;
        /* wemu_introsort_loop's body on this range */
        uint64_t *cut;
        if (wemu_copy_if_untied(pr, g->first, g->last, g->klo, g->khi) ||
            !wemu_introsort_step(g->first, g->last, &g->depth, s, m, &cut)) {
            w.r[big] = w.r[--w.nr]; /* finished */
            if (w.nr == 0) return;
            continue;
        }
        const uint64_t pivot_key = *g->first >> s;
        w.r[w.nr++] = (wemu_range){cut, g->last, g->depth, pivot_key, g->khi};
        g->last = cut;
        g->khi = pivot_key;
    }
    const int use = parts < w.nr ? parts : w.nr;
    int64_t load[KWK_MAX_ROW_THREADS] = {0};
    int taken[WEMU_PAR_RANGES] = {0};
    for (int a = 0; a < w.nr; ++a) {
        int big = -1;
        for (int i = 0; i < w.nr; ++i)
            if (!taken[i] && (big < 0 || w.r[i].last - w.r[i].first > w.r[big].last - w.r[big].first))
                big = i;
        int least = 0;
        for (int p = 1; p < use; ++p)
            if (load[p] < load[least]) least = p;
        taken[big] = 1;
        w.owner[big] = least;
        load[least] += w.r[big].last - w.r[big].first;
    }
    kwk_run_parts(wemu_par_part, &w, use);
}

/* Rows from this length sort their words in their index output when it
 * is dense (sort_one_row): issue 3's memory budget allows a call its
 * outputs and one copy of its input, and a workspace of words is two
 * copies of a float32 input.  Shorter rows keep the workspace, which
 * stays in L2 from row to row where the outputs' rows do not (both builds
 * in one process, AMD Zen 5, from 4096 instead: int64 rows of 4096-50257
 * 0.87-0.91, but stable float32 4 x 32000 1.15-1.19 in two runs); their
 * blocks come from the thread's cache, resident after the first call. */
enum { KWK_WORDS_IN_OUTPUT_MIN_N = 1 << 16 };

/* Whether byte ranges [a, a + an) and [b, b + bn) share a byte. */
static inline int ranges_meet(const void *a, size_t an, const void *b, size_t bn)
{
    const uintptr_t pa = (uintptr_t)a, pb = (uintptr_t)b;
    return pa < pb + bn && pb < pa + an;
}

/* Whether a row's dense outputs (indices, and values where wanted) share
 * no byte with each other or with the source row.  kwk_sort's callers keep
 * them apart; a caller that did not would otherwise see the words that
 * sort_one_row keeps in them overwritten, and their indices read the
 * source out of bounds. */
static int outputs_apart(const out_row *o, int64_t len)
{
    const int64_t reach = (len - 1) * o->step; /* the source row's span */
    const char *const src = reach < 0 ? o->row + reach : o->row;
    const size_t sbytes = (size_t)(reach < 0 ? -reach : reach) + (size_t)o->es;
    const size_t ibytes = (size_t)len * sizeof(int64_t), vbytes = (size_t)len * (size_t)o->es;
    return !ranges_meet(o->inds, ibytes, src, sbytes) &&
           (!o->vals || (!ranges_meet(o->vals, vbytes, src, sbytes) &&
                         !ranges_meet(o->vals, vbytes, o->inds, ibytes)));
}

/* Sort one row into its outputs (the whole path: values-only sort, short
 * rows of 64-bit keys, packed words with the tie check, wide keys,
 * records). */
static int sort_one_row(const sort_call *c, workspace *ws, uint64_t **keys, const out_row *out)
{
    const int dtype = c->dtype;
    int torch_ties = c->torch_ties;
    const int64_t len = c->len;
    const uint64_t flip = c->flip;
    if (c->values_only) {
        const int done = vs_sort_values(dtype, out->row, out->step, len, out->vals,
                                        out->dsl * out->es, c->descending, ws->words, ws->tmp);
        if (done > 0) return KWK_OK;
        if (done < 0) torch_ties = 0; /* the values cannot show which order */
    }
    if (!torch_ties && len >= KWK_BYTE_SORT_MIN_LEN && KWK_DTYPES[dtype].elem_size == 1) {
        sort_byte_row(dtype, out, len, flip);
        return KWK_OK;
    }
    if (h16_sort_takes(dtype, len, torch_ties, out->inds != NULL)) {
        sort_h16_row(dtype, out, len, flip, ws);
        return KWK_OK;
    }
    if (len <= KWK_STD_SORT_THRESHOLD && KWK_DTYPES[dtype].elem_size == 8) {
        sort_short_wide_row(dtype, out, len, flip, ws->words, ws->tmp);
        return KWK_OK;
    }
    /* a long row with a dense index output keeps its words there: the
     * output's len int64 slots are exactly their room, and every emit
     * below reads word j before it writes index j (so the words' pages
     * are the output's, not a workspace's as well) */
    uint64_t *const words = out->inds && out->dsl == 1 && len >= KWK_WORDS_IN_OUTPUT_MIN_N &&
                                    outputs_apart(out, len)
                                ? (uint64_t *)(void *)out->inds
                                : ws->words;
    /* and its dense values output, when 8-byte aligned, holds the keys of
     * rows too wide to pack (len words: 8-byte elements, as wide keys are)
     * or the list of tied keys (at most len / 2 words: 4-byte elements and
     * wider): nothing writes that output before the emit, which reads
     * neither */
    uint64_t *const vals_words =
        words != ws->words && out->vals && out->es >= 4 && ((uintptr_t)out->vals & 7) == 0
            ? (uint64_t *)(void *)out->vals
            : NULL;
    sort_row r;
    sort_load(dtype, out->row, len, out->step, flip, words, &r);
    uint64_t *wide_keys = NULL; /* a row too wide to pack: its keys */
    if (!r.packed) {
        if (vals_words && out->es == 8) {
            wide_keys = vals_words;
        } else {
            if (!*keys) *keys = (uint64_t *)malloc((size_t)len * sizeof(uint64_t));
            if (!*keys) return KWK_E_NOMEM;
            wide_keys = *keys;
        }
        memcpy(wide_keys, words, (size_t)len * sizeof(uint64_t));
    }
    if (r.packed) {
        if (small_range_sort_takes(dtype, len, r.rbits, torch_ties)) {
            /* (its counting sort writes indices anywhere while it reads
             * the words: those move to the workspace first) */
            if (words != ws->words) memcpy(ws->words, words, (size_t)len * sizeof(uint64_t));
            sort_small_range_row(dtype, out, ws->words, len, r.ibits, r.lo, flip);
            kwk_count(KWK_COUNT_SMALL_RANGE_SORT_ROWS, 1);
            return KWK_OK;
        }
        if (r.hi - r.lo == (uint64_t)(len - 1) && words_place_permutation(words, ws->tmp, len, r.ibits)) {
            /* a permutation (of lo..hi): no ties, so one order for both */
            emit_words_decoded_split(out, dtype, words, len, r.ibits, r.mask, r.lo, flip);
            return KWK_OK;
        }
        if (torch_ties && tie_expected(words, len, &r, ws->tmp)) {
            /* the stable sort would almost surely be thrown away */
            wemu_std_sort_with(words, len, r.ibits, wemu_introsort_threads, &ws->gate);
            emit_words_decoded_split(out, dtype, words, len, r.ibits, r.mask, r.lo, flip);
            return KWK_OK;
        }
        if (r.rbits > 0) sort_packed_words(words, ws->tmp, len, r.ibits, r.rbits);
        row_keys rk = {1, r.ibits, r.lo, r.hi, r.mask};
        if (torch_ties && has_adjacent_tie_words(&rk, words, len)) {
            /* the emulation, with ranges free of tied keys copied from the
             * sorted row (wemu_prune); dups holds the tied keys */
            uint64_t *dups = vals_words;
            if (!dups) {
                if (!*keys) *keys = (uint64_t *)malloc((size_t)len * sizeof(uint64_t));
                dups = *keys;
            }
            words_to_index_order(words, ws->tmp, len, r.mask);
            if (dups)
                wemu_std_sort_sorted_with(ws->tmp, len, r.ibits, words, dups,
                                          wemu_introsort_threads, &ws->gate);
            else wemu_std_sort_with(ws->tmp, len, r.ibits, wemu_introsort_threads, &ws->gate);
            emit_words_decoded_split(out, dtype, ws->tmp, len, r.ibits, r.mask, r.lo, flip);
        } else {
            emit_words_decoded_split(out, dtype, words, len, r.ibits, r.mask, r.lo, flip);
        }
        return KWK_OK;
    }
    uint64_t *k = wide_keys;
    if (r.ibits <= 32) {
        if (wide_sort(dtype, k, words, ws->tmp, len, &r) && torch_ties) {
            rank_words_from_sorted(k, words, ws->tmp, len, r.ibits, r.mask);
            wemu_std_sort_with(ws->tmp, len, r.ibits, wemu_introsort_threads, &ws->gate);
            emit_words(out, ws->tmp, len, r.mask);
        } else {
            emit_words(out, words, len, r.mask);
        }
        return KWK_OK;
    }
    /* rows of more than 2^32 elements: (key, index) records */
    if (workspace_kv(ws, len) != KWK_OK) return KWK_E_NOMEM;
    for (int64_t j = 0; j < len; ++j) {
        ws->kv[j].key = k[j];
        ws->kv[j].idx = j;
    }
    kvs_radix_sort(ws->kv, ws->kv_tmp, len);
    if (torch_ties && has_adjacent_tie_kv(ws->kv, len)) {
        records_reset_order(ws->kv, len);
        emu_std_sort(ws->kv, len);
    }
    emit_kvs(out, ws->kv, len);
    return KWK_OK;
}

/* Where row (o, i) of a sort call reads and writes. */
typedef struct {
    const char *src;
    char *values;
    int64_t *indices;
    int64_t inner, src_so, src_sl, src_si, dst_so, dst_sl, dst_si;
    int es;
    int64_t src_bytes; /* from src to just past the call's last input element (plain_loads.h) */
} sort_layout;

static out_row sort_out_row(const sort_layout *g, int64_t r)
{
    const int64_t o = r / g->inner, i = r % g->inner, es = g->es;
    out_row out = {g->src + (o * g->src_so + i * g->src_si) * es, g->src_sl * es,
                   g->values ? g->values + (o * g->dst_so + i * g->dst_si) * es : NULL,
                   g->indices ? g->indices + o * g->dst_so + i * g->dst_si : NULL,
                   g->dst_sl, (int)es, 0};
    return out;
}

#if defined(__AVX512F__)
/* Rows of 2..8 64-bit keys, eight rows at once (the 32-bit keys' batch
 * network cannot hold them): the rows loaded as vectors and transposed, so
 * key j of the eight rows sits in one vector; each key's stable rank from
 * one compare per pair of positions (rank j counts the i < j with key i <=
 * key j and the i > j with key i < key j), which is torch's order too (its
 * std::sort leaves rows this short to a stable insertion sort); output
 * position p of each row takes the key whose rank is p, and the outputs
 * are transposed back.  Against a row at a time by vector ranks (AMD Zen
 * 4, torch.sort of 4096 rows, us): float64 rows of 2 60.6 -> 36.7 (torch 39),
 * of 5 84.6 -> 51.6 (torch 77), of 8 105.6 -> 72.7 (torch 121); int64
 * alike.  (Compiled once per length, the kernel measured slower: 44 us
 * for rows of 2.) */
enum { SW8_ROWS = 8, SW8_MAX_LEN = 8 };

/* the 8x8 transpose of 64-bit lanes (its own inverse) */
static inline void sw8_transpose(__m512i r[8])
{
    const __m512i lo2 = _mm512_set_epi64(13, 12, 5, 4, 9, 8, 1, 0);
    const __m512i hi2 = _mm512_set_epi64(15, 14, 7, 6, 11, 10, 3, 2);
    const __m512i lo4 = _mm512_set_epi64(11, 10, 9, 8, 3, 2, 1, 0);
    const __m512i hi4 = _mm512_set_epi64(15, 14, 13, 12, 7, 6, 5, 4);
    __m512i t[8], u[8];
    for (int q = 0; q < 4; ++q) {
        t[2 * q] = _mm512_unpacklo_epi64(r[2 * q], r[2 * q + 1]);
        t[2 * q + 1] = _mm512_unpackhi_epi64(r[2 * q], r[2 * q + 1]);
    }
    /* u0 = a0 b0 c0 d0 a4 b4 c4 d4, u1 = .. 1 .. 5, u2 = .. 2 .. 6, u3 = .. 3 .. 7,
     * u4..u7 the same of rows e..h */
    for (int h = 0; h < 2; ++h) {
        u[4 * h + 0] = _mm512_permutex2var_epi64(t[4 * h + 0], lo2, t[4 * h + 2]);
        u[4 * h + 2] = _mm512_permutex2var_epi64(t[4 * h + 0], hi2, t[4 * h + 2]);
        u[4 * h + 1] = _mm512_permutex2var_epi64(t[4 * h + 1], lo2, t[4 * h + 3]);
        u[4 * h + 3] = _mm512_permutex2var_epi64(t[4 * h + 1], hi2, t[4 * h + 3]);
    }
    for (int c = 0; c < 4; ++c) {
        r[c] = _mm512_permutex2var_epi64(u[c], lo4, u[c + 4]);
        r[c + 4] = _mm512_permutex2var_epi64(u[c], hi4, u[c + 4]);
    }
}

static inline int sw8_applies(int dtype, int64_t len, int64_t rows, int64_t src_sl, int64_t dst_sl)
{
    return KWK_DTYPES[dtype].elem_size == 8 && len >= 2 && len <= SW8_MAX_LEN &&
           rows >= SW8_ROWS && src_sl == 1 && dst_sl == 1;
}

/* The core for eight rows: raw[j] holds element j of each row (j < len),
 * keys flipped by flip; val[p] and idx[p] (p < np) become each row's p-th
 * element and its index in the stable order.  Returns the rows holding two
 * equal keys when want_ties (else 0). */
static inline __mmask8 sw8_rank_pick(int dtype, const __m512i *raw, int64_t len, uint64_t flip,
                                     int64_t np, int want_ties, __m512i *val, __m512i *idx)
{
    const __m512i fl = _mm512_set1_epi64((long long)flip);
    const __m512i sign = _mm512_set1_epi64((long long)0x8000000000000000ull);
    __m512i key[8], rank[8];
    for (int j = 0; j < len; ++j) {
        __m512i k = raw[j];
        if (dtype == KWK_FLOAT64) k = kwk_keys8_f64(k);
        else if (dtype == KWK_INT64) k = _mm512_xor_si512(k, sign);
        key[j] = _mm512_xor_si512(k, fl);
        rank[j] = _mm512_setzero_si512();
    }
    const __m512i one = _mm512_set1_epi64(1);
    __mmask8 tied = 0;
    for (int j = 1; j < len; ++j)
        for (int i = 0; i < j; ++i) {
            const __mmask8 i_first = _mm512_cmple_epu64_mask(key[i], key[j]);
            rank[j] = _mm512_mask_add_epi64(rank[j], i_first, rank[j], one);
            rank[i] = _mm512_mask_add_epi64(rank[i], (__mmask8)~i_first, rank[i], one);
            if (want_ties) tied |= _mm512_cmpeq_epu64_mask(key[i], key[j]);
        }
    for (int p = 0; p < 8; ++p) {
        val[p] = _mm512_setzero_si512();
        idx[p] = _mm512_setzero_si512();
    }
    for (int p = 0; p < np; ++p) {
        const __m512i at = _mm512_set1_epi64(p);
        for (int j = 0; j < len; ++j) {
            const __mmask8 e = _mm512_cmpeq_epi64_mask(rank[j], at);
            val[p] = _mm512_mask_mov_epi64(val[p], e, raw[j]);
            idx[p] = _mm512_mask_mov_epi64(idx[p], e, _mm512_set1_epi64(j));
        }
    }
    return tied;
}

/* rows r .. r + 7 of g (contiguous rows in and out) */
static void sw8_sort_group(const sort_call *c, const sort_layout *g, int64_t r)
{
    const int64_t len = c->len;
    const __mmask8 in_row = (__mmask8)((1u << len) - 1);
    out_row o[SW8_ROWS];
    __m512i raw[8], val[8], idx[8];
    const void *const end = kwk_plain_end(g->src, g->src_bytes);
    for (int l = 0; l < SW8_ROWS; ++l) {
        o[l] = sort_out_row(g, r + l);
        raw[l] = kwk_loadz_epi64(in_row, o[l].row, end);
    }
    sw8_transpose(raw); /* raw[j]: element j of each row */
    sw8_rank_pick(c->dtype, raw, len, c->flip, len, 0, val, idx);
    if (o[0].vals) {
        sw8_transpose(val);
        for (int l = 0; l < SW8_ROWS; ++l) _mm512_mask_storeu_epi64(o[l].vals, in_row, val[l]);
    }
    if (o[0].inds) {
        sw8_transpose(idx);
        for (int l = 0; l < SW8_ROWS; ++l) _mm512_mask_storeu_epi64(o[l].inds, in_row, idx[l]);
    }
}
#endif

/* ---- staged rows along a non-last dim --------------------------------
 * Rows along a non-last dim (src_si == 1: neighbouring rows are
 * neighbouring addresses) are sorted from a stage: up to `w` neighbouring
 * rows copied position by position into a contiguous buffer, their outputs
 * (when adjacent too) written to buffers of the same shape and copied out
 * position by position once the stage is done.  In place, position j of
 * a row lies j strides away, a stride often a multiple of 4 KB: a batch's
 * (or a row's) len lines fall in a few cache sets and evict each other,
 * the next rows missed the same lines again, and every access was a cache
 * miss at memory latency; the stage moves each position's w rows as one
 * run.  Measured (python, torch.sort / stable argsort along dim 1 of 1 x
 * 64 x 192 x 256 float32, zoedepth's bin centres, ms; the same rows made
 * contiguous 11.8): in place 29.8 / 25.8; stages of 16 rows 29.9 / 35.5,
 * 64 rows 22.4 / 19.4, 256 rows 16.8 / 13.8, 512 15.9 / 13.0, 1024 17.2 /
 * 13.4; rows too long for the network, one at a time (torch.sort along
 * dim 0 of 1000 x 1024 float32): 23.1 -> 11.7 ns/el.  A stage position
 * holds ROW_BYTES, fewer when the input stage would pass MAX_BYTES (len x
 * position bytes).  Only rows whose positions lie MIN_STRIDE bytes apart or
 * more are staged: nearer, the lines are shared and stay cached, and the
 * stage's copies of a few rows cost more than they save (torch.sort along
 * dim 1, float32, ns/el, in place vs staged: 512 x 64 x 8 3.2 vs 9.9,
 * 256 x 64 x 16 3.4 vs 9.9, 16 x 64 x 256 4.0 vs 4.3; 8 x 1000 x 256 17.2
 * vs 12.2, 4 x 1000 x 512 21.3 vs 13.3, 8 x 64 x 512 4.9 vs 4.3).  Rows
 * of STAGE_LONG_ROW and more whose stride is a multiple of
 * STAGE_ALIAS_BYTES are staged too: such a stride maps a row's lines to a
 * quarter of the cache sets or fewer, and they no longer stay cached for
 * the rows sharing them (sort / stable argsort along dim 0, staged against
 * in place: int64 10000 x 64 1.4 / 2.8x, float32 4096 x 64 1.3 / 1.3x,
 * 3000 x 128 1.5 / 1.5x, 1500 x 128 1.2 / 1.1x, bfloat16 2200 x 128 1.2 /
 * 2.0x); other strides spread over the sets and lose to the copies
 * (float32 5000 x 100 0.83 / 0.80x, 6000 x 200 0.82 / 0.70x, 1200 x 200
 * 0.89x; int64 4500 x 72 0.96 / 0.88x), and so do narrower ones (float32
 * 65536 x 16 0.89-0.99x; int64 5000 x 16 0.75-0.87x). */
enum { STAGE_MIN_BYTES = 64, STAGE_ROW_BYTES = 1024, STAGE_MAX_BYTES = 1 << 16, STAGE_MIN_STRIDE = 1024,
       STAGE_LONG_ROW = 1024, STAGE_ALIAS_BYTES = 256 };

typedef struct {
    char *in, *vals;  /* input stage, values stage (or NULL) */
    int64_t *inds;    /* indices stage (or NULL) */
    int64_t bytes, w; /* bytes per position, rows a stage holds */
    int64_t r0, n;    /* rows r0 .. r0 + n - 1 are staged */
    int64_t done;     /* of them, rows whose outputs are in the stage */
    int out;          /* outputs staged too */
    int rowmajor;     /* rows held one after another (stage_rowmajor_bytes) */
} row_stage;

/* The row-major stage, for rows sorted one at a time (sort_rows_any's
 * last loop) of 2-, 4- or 8-byte elements: eight neighbouring rows a stage
 * (32 of 2-byte elements), transposed into contiguous rows (register
 * transposes of 8x8 / 4x4 blocks), each sorted there as a contiguous row
 * with contiguous outputs (the row kernels' vector loads and stores), and
 * the outputs transposed back.  In a position-major stage each row was
 * read and written one element per cache line, and the copies were a libc
 * memcpy call per position (at eight 64-bit rows a stage, 64 bytes each).
 * Being cheap, it is used at any stride (inner >= 8), where position-major
 * copies cost more than they saved (STAGE_MIN_STRIDE).  Measured (python,
 * torch.sort / stable argsort along dim 0, fresh inputs, ms, min of 3
 * alternating runs, AMD Zen 4 avx512): int64 10000 x 64 (pyg's quantile
 * aggregation) 11.7 -> 9.2 / 5.5 -> 3.4, float32 4096 x 64 2.60 -> 1.95,
 * 3000 x 128 stable 3.55 -> 2.52, 65536 x 16 17.5 -> 12.4 / 9.4 -> 7.1,
 * 6000 x 200 13.4 -> 9.9 / 9.5 -> 7.9, 1200 x 200 1.24 / 1.18x, int32
 * 8192 x 32 1.30 / 1.19x, int64 5000 x 16 1.29 / 1.13x, float64 1000 x
 * 1024 1.04 / 1.08x; 20000 x 9, 50000 x 12, 40 x 5000 and 100 x 1000
 * 0.98-1.11x; 2-byte elements, 32 rows a stage: bfloat16 10000 x 64 10.8
 * -> 8.5 / 3.5 -> 3.1, float16 5000 x 100 1.21 / 1.29x, int16 8192 x 32
 * 1.11 / 1.32x, bfloat16 65536 x 16 1.15 / 0.98x (sixteen rows a stage
 * for 4-byte elements measured 0.87-0.97x against eight).  Four rows
 * (inner < 8) stay as they were: 100000 x 4 staged this way measured
 * 0.66x. */
enum { STAGE_ROWMAJOR_MIN_INNER = 8 };

/* Bytes of a position a row-major stage holds. */
static inline int64_t stage_rowmajor_bytes(int es) { return es == 2 ? 64 : 8 * (int64_t)es; }

/* dst[i * dst_ld + c] = src[c * src_ld + i] for i < ni, c < nc (elements
 * of es bytes, strides in elements). */
static void stage_transpose(char *dst, int64_t dst_ld, const char *src, int64_t src_ld,
                            int64_t ni, int64_t nc, int es)
{
    int64_t i0 = 0;
#if defined(__AVX2__)
    if (es == 8) {
        for (; i0 + 4 <= ni; i0 += 4) {
            int64_t c = 0;
            for (; c + 4 <= nc; c += 4) {
                __m256i v[4];
                for (int q = 0; q < 4; ++q)
                    v[q] = _mm256_loadu_si256((const __m256i *)(const void *)(src + ((c + q) * src_ld + i0) * 8));
                const __m256i t0 = _mm256_unpacklo_epi64(v[0], v[1]), t1 = _mm256_unpackhi_epi64(v[0], v[1]);
                const __m256i t2 = _mm256_unpacklo_epi64(v[2], v[3]), t3 = _mm256_unpackhi_epi64(v[2], v[3]);
                /* t0: c0i0 c1i0 | c0i2 c1i2, t1: c0i1 c1i1 | c0i3 c1i3, t2/t3 alike for c2, c3 */
                const __m256i o[4] = {_mm256_permute2x128_si256(t0, t2, 0x20), _mm256_permute2x128_si256(t1, t3, 0x20),
                                      _mm256_permute2x128_si256(t0, t2, 0x31), _mm256_permute2x128_si256(t1, t3, 0x31)};
                for (int q = 0; q < 4; ++q)
                    _mm256_storeu_si256((__m256i *)(void *)(dst + ((i0 + q) * dst_ld + c) * 8), o[q]);
            }
            for (; c < nc; ++c)
                for (int q = 0; q < 4; ++q)
                    memcpy(dst + ((i0 + q) * dst_ld + c) * 8, src + (c * src_ld + i0 + q) * 8, 8);
        }
    } else if (es == 4) {
        for (; i0 + 8 <= ni; i0 += 8) {
            int64_t c = 0;
            for (; c + 8 <= nc; c += 8) {
                __m256i v[8];
                for (int q = 0; q < 8; ++q)
                    v[q] = _mm256_loadu_si256((const __m256i *)(const void *)(src + ((c + q) * src_ld + i0) * 4));
                kwk_transpose8_epi32(v);
                for (int q = 0; q < 8; ++q)
                    _mm256_storeu_si256((__m256i *)(void *)(dst + ((i0 + q) * dst_ld + c) * 4), v[q]);
            }
            for (; c < nc; ++c)
                for (int q = 0; q < 8; ++q)
                    memcpy(dst + ((i0 + q) * dst_ld + c) * 4, src + (c * src_ld + i0 + q) * 4, 4);
        }
    } else if (es == 2) {
        for (; i0 + 8 <= ni; i0 += 8) {
            int64_t c = 0;
            for (; c + 8 <= nc; c += 8) {
                __m128i a[8], t[8], u[8];
                for (int q = 0; q < 8; ++q)
                    a[q] = _mm_loadu_si128((const __m128i *)(const void *)(src + ((c + q) * src_ld + i0) * 2));
                for (int q = 0; q < 8; q += 2) {
                    t[q] = _mm_unpacklo_epi16(a[q], a[q + 1]);     /* elements 0..3 of rows q, q + 1 */
                    t[q + 1] = _mm_unpackhi_epi16(a[q], a[q + 1]); /* elements 4..7 */
                }
                for (int q = 0; q < 8; q += 4) {
                    u[q] = _mm_unpacklo_epi32(t[q], t[q + 2]);         /* elements 0, 1 of four rows */
                    u[q + 1] = _mm_unpackhi_epi32(t[q], t[q + 2]);     /* 2, 3 */
                    u[q + 2] = _mm_unpacklo_epi32(t[q + 1], t[q + 3]); /* 4, 5 */
                    u[q + 3] = _mm_unpackhi_epi32(t[q + 1], t[q + 3]); /* 6, 7 */
                }
                for (int p = 0; p < 4; ++p) {
                    _mm_storeu_si128((__m128i *)(void *)(dst + ((i0 + 2 * p) * dst_ld + c) * 2),
                                     _mm_unpacklo_epi64(u[p], u[p + 4]));
                    _mm_storeu_si128((__m128i *)(void *)(dst + ((i0 + 2 * p + 1) * dst_ld + c) * 2),
                                     _mm_unpackhi_epi64(u[p], u[p + 4]));
                }
            }
            for (; c < nc; ++c)
                for (int q = 0; q < 8; ++q)
                    memcpy(dst + ((i0 + q) * dst_ld + c) * 2, src + (c * src_ld + i0 + q) * 2, 2);
        }
    }
#endif
    for (; i0 < ni; ++i0)
        for (int64_t c = 0; c < nc; ++c)
            memcpy(dst + (i0 * dst_ld + c) * es, src + (c * src_ld + i0) * es, (size_t)es);
}

/* A stage for the call's rows of len elements where they are adjacent in
 * the source, their outputs staged too where adjacent in the output; or
 * st->w == 0 (none, or no memory).  Outputs alone are not staged: msort
 * of a transposed tensor (rows contiguous, outputs adjacent) measured no
 * faster (4096 x 64 float32 337 -> 349 us).  8-byte elements gain as
 * much (float64 1000 x 1024 sorted along dim 0: 42.7 -> 28.3 ns/el; int64
 * 64 x 65536 30.1 -> 19.2, stable argsort 12.4 -> 7.7). */
static void row_stage_init(row_stage *st, const sort_layout *g, int64_t len, int rowmajor)
{
    memset(st, 0, sizeof *st);
    st->r0 = -1;
    const int out = g->dst_si == 1;
    const int64_t stride = g->src_sl * g->es;
#if defined(__AVX2__)
    const int rm = rowmajor && (g->es == 2 || g->es == 4 || g->es == 8) &&
                   g->inner >= STAGE_ROWMAJOR_MIN_INNER;
#else
    const int rm = 0;
    (void)rowmajor;
#endif
    if (g->src_si != 1 || len < 2 ||
        (!rm && stride < STAGE_MIN_STRIDE &&
         (len < STAGE_LONG_ROW || stride % STAGE_ALIAS_BYTES != 0 || g->inner < 2)))
        return;
    int64_t b = (STAGE_MAX_BYTES / len) & ~(int64_t)(STAGE_MIN_BYTES - 1);
    b = b > STAGE_ROW_BYTES ? STAGE_ROW_BYTES : b < STAGE_MIN_BYTES ? STAGE_MIN_BYTES : b;
    st->rowmajor = rm;
    if (rm) b = stage_rowmajor_bytes(g->es);
    st->bytes = b;
    st->out = out;
    st->in = (char *)malloc((size_t)(len * b));
    if (out && g->values) st->vals = (char *)malloc((size_t)(len * b));
    if (out && g->indices) st->inds = (int64_t *)malloc((size_t)(len * (b / g->es)) * sizeof(int64_t));
    if (!st->in || (out && ((g->values && !st->vals) || (g->indices && !st->inds)))) {
        free(st->in);
        free(st->vals);
        free(st->inds);
        memset(st, 0, sizeof *st);
        st->r0 = -1;
        return;
    }
    st->w = b / g->es;
}

/* Copy n bytes of a position-major stage position (64..1024 bytes, or
 * the few of a partial stage) without a call: at a cache line a position
 * libc's memcpy call cost more than the copy (int64 10000 x 64 sorted
 * along dim 0 stable, eight rows a stage, 6.0 -> 5.1 ms; those rows have
 * since gone to the row-major stage). */
static inline void stage_copy(char *d, const char *s, int64_t n)
{
    int64_t i = 0;
#if defined(__AVX2__)
    for (; i + 32 <= n; i += 32)
        _mm256_storeu_si256((__m256i *)(void *)(d + i), _mm256_loadu_si256((const __m256i *)(const void *)(s + i)));
#endif
    for (; i + 8 <= n; i += 8) {
        uint64_t t;
        memcpy(&t, s + i, 8);
        memcpy(d + i, &t, 8);
    }
    for (; i < n; ++i) d[i] = s[i];
}

/* Outputs of the staged rows done so far copied to their place. */
static void row_stage_flush(row_stage *st, const sort_layout *g, int64_t len)
{
    if (!st->done) return;
    const out_row o = sort_out_row(g, st->r0);
    if (st->rowmajor) {
        if (st->vals) stage_transpose(o.vals, o.dsl, st->vals, len, len, st->done, o.es);
        if (st->inds)
            stage_transpose((char *)o.inds, o.dsl, (const char *)st->inds, len, len, st->done, 8);
        st->done = 0;
        return;
    }
    for (int64_t j = 0; j < len; ++j) {
        if (st->vals)
            stage_copy(o.vals + j * o.dsl * o.es, st->vals + j * st->bytes, st->done * o.es);
        if (st->inds)
            stage_copy((char *)(o.inds + j * o.dsl), (const char *)(st->inds + j * st->w),
                       st->done * (int64_t)sizeof(int64_t));
    }
    st->done = 0;
}

/* Rows r .. r + k - 1 (out[0..k)) read from the stage, and written to it
 * where outputs are staged; a new stage is loaded when they are not in
 * the current one: the rows from r up to w (a multiple of k), within r's
 * slice of the inner dim and the call's `rows`.  Returns 0 (nothing
 * changed) when rows r .. r + k - 1 cannot be staged together. */
static int row_stage_enter(row_stage *st, const sort_layout *g, int64_t r, int64_t k,
                           int64_t rows, int64_t len, out_row *out)
{
    if (!st->w || (r % g->inner) + k > g->inner) return 0;
    if (r < st->r0 || r + k > st->r0 + st->n) {
        row_stage_flush(st, g, len);
        const int64_t in_slice = g->inner - r % g->inner, in_call = rows - r;
        int64_t n = st->w < in_slice ? st->w : in_slice;
        n = n < in_call ? n : in_call;
        n -= n % k;
        if (n < k) return 0;
        const out_row o = sort_out_row(g, r);
        if (st->rowmajor)
            stage_transpose(st->in, len, o.row, o.step / g->es, n, len, g->es);
        else
            for (int64_t j = 0; j < len; ++j)
                stage_copy(st->in + j * st->bytes, o.row + j * o.step, n * g->es);
        st->r0 = r;
        st->n = n;
    }
    for (int64_t l = 0; l < k; ++l) {
        const int64_t at = r - st->r0 + l;
        if (st->rowmajor) {
            out[l].row = st->in + at * len * g->es;
            out[l].step = g->es;
            if (st->out) {
                out[l].vals = st->vals ? st->vals + at * len * g->es : NULL;
                out[l].inds = st->inds ? st->inds + at * len : NULL;
                out[l].dsl = 1;
            }
            continue;
        }
        out[l].row = st->in + at * g->es;
        out[l].step = st->bytes;
        if (st->out) {
            out[l].vals = st->vals ? st->vals + at * g->es : NULL;
            out[l].inds = st->inds ? st->inds + at : NULL;
            out[l].dsl = st->w;
        }
    }
    if (st->out) st->done = r + k - st->r0;
    return 1;
}

/* After rows up to r_end - 1 are done: the stage's outputs copied out
 * when its last row is among them. */
static void row_stage_after(row_stage *st, const sort_layout *g, int64_t r_end, int64_t len)
{
    if (st->done && r_end >= st->r0 + st->n) row_stage_flush(st, g, len);
}

static void row_stage_free(row_stage *st, const sort_layout *g, int64_t len)
{
    row_stage_flush(st, g, len);
    free(st->in);
    free(st->vals);
    free(st->inds);
}

#if defined(KWK_HAVE_BATCH_SORT)

/* 1 when the row holds equal keys with different bits (+0.0 and -0.0, or
 * NaNs with different bits; bool bytes other than 0 and 1), so the order
 * of its equal elements shows in its values: always for bool, never for
 * the other integers, found by one pass over a float row. */
#define VTS_ROW(UT, SIGN, INF)                                                \
    do {                                                                      \
        int pz = 0, nz = 0, have_nan = 0;                                     \
        UT nan_bits = 0;                                                      \
        for (int64_t j = 0; j < len; ++j) {                                   \
            UT b;                                                             \
            memcpy(&b, out->row + j * out->step, sizeof(UT));                 \
            pz |= b == 0;                                                     \
            nz |= b == (UT)(SIGN);                                            \
            if ((UT)(b & (UT)~(UT)(SIGN)) > (UT)(INF)) { /* rare */           \
                if (have_nan && b != nan_bits) return 1;                      \
                nan_bits = b;                                                 \
                have_nan = 1;                                                 \
            }                                                                 \
        }                                                                     \
        return pz && nz;                                                      \
    } while (0)
static int values_ties_show(int dtype, const out_row *out, int64_t len)
{
    switch (dtype) {
    case KWK_BOOL: return 1;
    case KWK_FLOAT16: VTS_ROW(uint16_t, 0x8000u, 0x7C00u);
    case KWK_BFLOAT16: VTS_ROW(uint16_t, 0x8000u, 0x7F80u);
    case KWK_FLOAT32: VTS_ROW(uint32_t, 0x80000000u, 0x7F800000u);
    case KWK_FLOAT64: VTS_ROW(uint64_t, 0x8000000000000000ull, 0x7FF0000000000000ull);
    default: return 0;
    }
}
#undef VTS_ROW

/* Sorted values written by vector gathers (batch_emit_adjacent,
 * batch_emit_rows) where they were measured: AVX-512 targets. */
#if defined(__AVX512F__)
#define KWK_EMIT_GATHERS 1
#else
#define KWK_EMIT_GATHERS 0
#endif

/* Eight rows that sit side by side in the source and the outputs (a sort
 * along a non-last dim): output position j of all eight is written
 * together, neighbours in one cache line, instead of row by row through
 * eight passes over the same lines. */
#define KWK_BATCH_EMIT_ADJ_LOOP(T)                                            \
    for (int64_t j = 0; j < n; ++j) {                                         \
        T *dv = (T *)(o[0].vals + j * dstep);                                 \
        for (int l = 0; l < KWK_BATCH_LANES; ++l) {                           \
            const int64_t idx_ = batch_index(slots, j, l);                    \
            memcpy(dv + l, o[0].row + l * (int64_t)sizeof(T) + idx_ * o[0].step, sizeof(T)); \
        }                                                                     \
    }

static void batch_emit_adjacent(const out_row *o, const kwk_batch_slot *slots, int64_t n)
{
    if (o[0].inds) {
        for (int64_t j = 0; j < n; ++j) {
            int64_t *di = o[0].inds + j * o[0].dsl;
            const __m256i idx = slots[j].idx;
            _mm256_storeu_si256((__m256i *)di, _mm256_cvtepi32_epi64(_mm256_castsi256_si128(idx)));
            _mm256_storeu_si256((__m256i *)(di + 4), _mm256_cvtepi32_epi64(_mm256_extracti128_si256(idx, 1)));
        }
    }
    if (!o[0].vals) return;
    const int64_t dstep = o[0].dsl * o[0].es;
    if (KWK_EMIT_GATHERS && o[0].es == 4 && n * o[0].step + 32 <= INT32_MAX) {
        /* the eight values of position j by one gather: lane l reads row
         * l's element idx_l, idx_l * step + 4 l bytes from the first row's
         * start (elements of the rows just sorted: in bounds).  Measured
         * (Intel Xeon, AVX-512, torch.sort along dim 1, torch order /
         * stable, A/B against the copies below, min of 5 alternating
         * runs): float32 8x100x256 1.08x / 1.04x, 64x50x32 1.11x / 1.06x,
         * zoedepth's 1x64x192x256 1.05x / 1.00x, int32 16x64x64x64 1.02x /
         * 1.04x; 8-byte elements by two gathers of four lost (float64
         * 8x100x256 0.84x), and keep the copies. */
        const __m256i step = _mm256_set1_epi32((int)o[0].step);
        const __m256i lane = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
        for (int64_t j = 0; j < n; ++j) {
            const __m256i off = _mm256_add_epi32(_mm256_mullo_epi32(slots[j].idx, step), lane);
            _mm256_storeu_si256((__m256i *)(o[0].vals + j * dstep),
                                _mm256_i32gather_epi32((const int *)o[0].row, off, 1));
        }
        return;
    }
    switch (o[0].es) {
    case 1: KWK_BATCH_EMIT_ADJ_LOOP(uint8_t) break;
    case 2: KWK_BATCH_EMIT_ADJ_LOOP(uint16_t) break;
    case 4: KWK_BATCH_EMIT_ADJ_LOOP(uint32_t) break;
    default: KWK_BATCH_EMIT_ADJ_LOOP(uint64_t) break;
    }
}
#undef KWK_BATCH_EMIT_ADJ_LOOP

/* Eight rows of a sorted batch written out together, when their outputs
 * are contiguous (dsl 1) and their values, if asked for, 4-byte elements:
 * eight positions of the eight rows' indices transposed into eight runs
 * of one row each, stored widened to int64, and the values of each run
 * gathered from its row by those indices, where batch_emit goes through
 * the slots once per row, element by element.  The last block overlaps
 * the one before (rows of at least 8).  0: not such rows, nothing
 * written.  Measured (Intel Xeon, AVX-512, A/B against batch_emit, stable
 * argsort / stable sort / torch-order sort, rows of 24 / 64 / 128 / 256,
 * min of 3 alternating runs): float32 1.17 / 1.23 / 1.24x, 1.06 / 1.16 /
 * 1.14x, 1.00 / 1.10 / 1.14x, 1.07 / 1.12 / 1.07x; int32 alike (0.97-1.27x);
 * bfloat16 indices only, 1.01-1.16x; int64 0.98-1.10x (a 64-bit gather
 * of the values lost in batch_emit_adjacent).  2-byte values by 32-bit
 * gathers (stable sort / torch-order sort, rows of 24 / 64 / 128):
 * bfloat16 1.14 / 1.05x, 1.14 / 1.05x, 1.28 / 1.04x; float16 1.10-1.19x /
 * 1.01-1.08x; int16 1.08-1.18x / 1.00-1.10x. */
static int batch_emit_rows(const out_row *o, const kwk_batch_slot *slots, int64_t n)
{
    const int vals = o[0].vals != NULL, inds = o[0].inds != NULL;
    const int es = o[0].es;
    /* the value gathers are measured on AVX-512 CPUs only (AVX2-only
     * cores, Zen 2/3 among them, gather slowly: they keep batch_emit's
     * copies for rows with values) */
    const int gathers = KWK_EMIT_GATHERS;
    if (n < 8 || o[0].dsl != 1 ||
        (vals && !(gathers && es == 4 && o[0].step >= 0 && n * o[0].step <= INT32_MAX) &&
         !(gathers && es == 2 && o[0].step == 2 && n <= INT32_MAX / 2)))
        return 0;
    const __m256i step = _mm256_set1_epi32((int)o[0].step);
    /* 2-byte values: the 4 bytes at element idx, the low half; at the
     * row's last element the 4 bytes before its end, the high half (no
     * read past the row) */
    const __m256i last = _mm256_set1_epi32((int)(n - 1)), two = _mm256_set1_epi32(2);
    const __m256i low16 = _mm256_set1_epi32(0xFFFF);
    for (int64_t c = 0; c < n; c += 8) {
        const int64_t at = c + 8 <= n ? c : n - 8;
        __m256i v[8];
        for (int j = 0; j < 8; ++j) v[j] = slots[at + j].idx;
        kwk_transpose8_epi32(v); /* v[l]: row l's indices at positions at.. */
        for (int l = 0; l < KWK_BATCH_LANES; ++l) {
            if (inds) {
                _mm256_storeu_si256((__m256i *)(o[l].inds + at), _mm256_cvtepi32_epi64(_mm256_castsi256_si128(v[l])));
                _mm256_storeu_si256((__m256i *)(o[l].inds + at + 4),
                                    _mm256_cvtepi32_epi64(_mm256_extracti128_si256(v[l], 1)));
            }
            if (vals && es == 4) {
                _mm256_storeu_si256((__m256i *)(o[l].vals + at * 4),
                                    _mm256_i32gather_epi32((const int *)o[l].row,
                                                           _mm256_mullo_epi32(v[l], step), 1));
            } else if (vals) {
                const __m256i at_end = _mm256_cmpeq_epi32(v[l], last);
                const __m256i w = _mm256_i32gather_epi32(
                    (const int *)o[l].row, _mm256_sub_epi32(_mm256_add_epi32(v[l], v[l]),
                                                            _mm256_and_si256(at_end, two)), 1);
                const __m256i h = _mm256_blendv_epi8(_mm256_and_si256(w, low16),
                                                     _mm256_srli_epi32(w, 16), at_end);
                _mm_storeu_si128((__m128i *)(o[l].vals + at * 2),
                                 _mm_packus_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1)));
            }
        }
    }
    return 1;
}

enum { KWK_BATCH_PROBE_ROWS = 8, KWK_BATCH_VALUES_MAX = 512 };

/* Whether the call's first KWK_BATCH_LANES rows are each a permutation of
 * consecutive integers (MAE's ids_restore = argsort(ids_shuffle), inverse
 * permutations): then the one-row path places each row with one scatter
 * (words_place_permutation) instead of sorting it by the network (argsort
 * of 64 x 196 int64 permutations through torch.argsort, installed:
 * 109 -> 41 us, of which the kernel 106 -> 33; torch 334).  Only the key
 * range is checked here (hi - lo == len - 1); a row that repeats a key
 * anyway is sorted by the one-row path as usual. */
static int batch_rows_are_permutations(const sort_call *c, const sort_layout *g, workspace *ws)
{
    const kwk_dtype_info info = KWK_DTYPES[c->dtype];
    if (info.is_float || info.elem_size < 4 || c->values_only || c->len <= KWK_STD_SORT_THRESHOLD)
        return 0;
    for (int64_t r = 0; r < KWK_BATCH_LANES; ++r) {
        const out_row o = sort_out_row(g, r);
        sort_row sr;
        sort_load(c->dtype, o.row, c->len, o.step, c->flip, ws->words, &sr);
        if (!sr.packed || sr.hi - sr.lo != (uint64_t)(c->len - 1)) return 0;
    }
    return 1;
}

/* A sorted batch written out (ties: its tied lanes, or KWK_BATCH_REFUSED):
 * emitted, its rows whose torch order shows a tie redone one by one, and a
 * refused batch (64-bit keys too far apart) sorted row by row.  Returns
 * how many of its rows had ties, or -1 for a refused batch (the batching
 * then stops: the other rows' keys likely spread as far). */
static inline int batch_finish(const sort_call *c, const sort_layout *g, out_row *outs, int adjacent,
                               const kwk_batch_slot *slots, unsigned ties, int64_t len,
                               workspace *ws, uint64_t **keys, int *status)
{
    if (c->torch_ties && c->no_indices && ties != KWK_BATCH_REFUSED) {
        /* values only: a row's ties matter only where equal keys
         * differ in bits (bfloat16 rows of 64 with ties, values only:
         * 4096x64, 12.3 -> 5.3 ns/el, no longer emulated) */
        unsigned shown = 0;
        for (int l = 0; l < KWK_BATCH_LANES; ++l)
            if ((ties >> l & 1u) && values_ties_show(c->dtype, &outs[l], len)) shown |= 1u << l;
        ties = shown;
    }
    if (ties == KWK_BATCH_REFUSED) {
        for (int l = 0; l < KWK_BATCH_LANES && *status == KWK_OK; ++l)
            *status = sort_one_row(c, ws, keys, &outs[l]);
        return -1;
    }
    if (adjacent && g->dst_si == 1 && !(c->torch_ties && ties)) {
        batch_emit_adjacent(outs, slots, len);
    } else if (!adjacent && !(c->torch_ties && ties) && batch_emit_rows(outs, slots, len)) {
    } else {
        for (int l = 0; l < KWK_BATCH_LANES && *status == KWK_OK; ++l) {
            if (c->torch_ties && (ties >> l & 1u)) *status = sort_one_row(c, ws, keys, &outs[l]);
            else batch_emit(&outs[l], slots, l, len);
        }
    }
    return c->torch_ties ? __builtin_popcount(ties) : 0;
}

/* Whether the batching stops after rows [0, done) of which tie_rows had
 * ties: rows of one call are alike, and when most have ties (zeros,
 * masked entries, rounded values) in torch order, the network's work is
 * thrown away; the rest go straight to the one-row path. */
static inline int batch_ties_stop(const sort_call *c, int64_t done, int64_t tie_rows)
{
    return c->torch_ties && done > KWK_BATCH_PROBE_ROWS && 2 * tie_rows > done;
}

#if defined(KWK_HAVE_BATCH16)
/* (rows the sixteen-row network takes: see sort_rows_batched16) */
enum { KWK_BATCH16_MIN_LEN = 40, KWK_BATCH16_MAX_LEN = 320 };
/* Rows along a non-last dim (inner a multiple of 16: groups of sixteen
 * rows side by side, read from and written to the long-stride stage as
 * the eight-row loop does) take it up to this length.  Measured (torch.sort
 * along dim 1, stable / torch order, us, 8 -> 16 rows a network, min of 3
 * alternating runs): float32 8x100x256 910 -> 788 / 782 -> 771, 64x50x32
 * 313 -> 271 / 275 -> 265, 8x100x48 1.12 / 1.05x, bfloat16 4x200x1024
 * 4364 -> 3806 / 1.04x, zoedepth's 1x64x192x256 1.08 / 0.97x (stable
 * argsort 1.12x), int32 16x64x64x64 1.0x; rows of 300 lost (2x300x4096
 * 0.85-0.92x: the joined slots past L1).  Read in place instead of
 * staged, the far-apart rows lost 0.53-0.65x. */
enum { KWK_BATCH16_ADJ_MAX_LEN = 256 };

/* Rows [0, rows - rows % 16) sixteen at a time through one network
 * (batch_sort16), for rows of 32-bit keys along the last dim, and along
 * another dim in groups of sixteen side by side up to
 * KWK_BATCH16_ADJ_MAX_LEN (staged as the eight-row loop stages).
 * Measured (AVX-512, stable argsort / torch order, ns/el, 8 -> 16 rows a
 * network, min of 3 alternating runs): float32 / int32 /
 * int16 rows of 40..320 1.12-1.22x / 1.0-1.13x (1024x64 float32 stable
 * 0.132 -> 0.109 us a row), bfloat16 1.0-1.13x; shorter rows lost to the
 * joining (17..32: 0.86-0.95x), rows of 512 to the joined slots' size
 * (128 KB with the two batches' own, past L1: float32 torch order 0.68x),
 * 64-bit keys 0.94-0.96x.  Its own loop: sharing the eight-row loop cost
 * that loop's short rows 4-8%.  Returns the rows done; *stop: the batching
 * stopped (ties, a refused batch), the rest goes row by row. */
static int64_t sort_rows_batched16(const sort_call *c, const sort_layout *g, int64_t rows,
                                   workspace *ws, uint64_t **keys, int *status,
                                   const kwk_net_pair *pairs, int npairs, kwk_batch_slot *slots,
                                   int64_t *tie_rows, int *stop)
{
    const int64_t len = c->len;
    kwk_batch_slot *other = (kwk_batch_slot *)aligned_alloc(32, (size_t)len * sizeof(kwk_batch_slot));
    kwk_batch_slot16 *joined =
        (kwk_batch_slot16 *)aligned_alloc(64, (size_t)len * sizeof(kwk_batch_slot16));
    int64_t r0 = 0;
    row_stage st;
    row_stage_init(&st, g, len, 0);
    if (other && joined) {
        for (; r0 + 2 * KWK_BATCH_LANES <= rows && *status == KWK_OK && !*stop;) {
            out_row outs[2][KWK_BATCH_LANES];
            kwk_batch_src src[2];
            /* sixteen rows side by side (a sort along a non-last dim):
             * position j of all of them is one run, read from the stage
             * where the rows are far apart */
            const int adjacent = g->src_si == 1 && (r0 % g->inner) + 2 * KWK_BATCH_LANES <= g->inner;
            out_row all[2 * KWK_BATCH_LANES];
            for (int l = 0; l < 2 * KWK_BATCH_LANES; ++l) all[l] = sort_out_row(g, r0 + l);
            if (adjacent) row_stage_enter(&st, g, r0, 2 * KWK_BATCH_LANES, rows, len, all);
            for (int h = 0; h < 2; ++h) {
                for (int l = 0; l < KWK_BATCH_LANES; ++l) {
                    outs[h][l] = all[h * KWK_BATCH_LANES + l];
                    src[h].row[l] = outs[h][l].row;
                }
                src[h].step = outs[h][0].step;
                src[h].adjacent = adjacent;
            }
            unsigned ties[2];
            if (!batch_sort16(c->dtype, &src[0], &src[1], len, c->flip, slots, other, joined, pairs,
                              npairs, !c->torch_ties, &ties[0], &ties[1]))
                ties[0] = ties[1] = KWK_BATCH_REFUSED;
            for (int h = 0; h < 2 && *status == KWK_OK && !*stop; ++h) {
                const int tied = batch_finish(c, g, outs[h], adjacent, h ? other : slots, ties[h],
                                              len, ws, keys, status);
                r0 += KWK_BATCH_LANES;
                if (tied < 0) *stop = 1;
                else *tie_rows += tied;
                *stop |= batch_ties_stop(c, r0, *tie_rows);
            }
            row_stage_after(&st, g, r0, len);
        }
    }
    row_stage_free(&st, g, len);
    free(other);
    free(joined);
    return r0;
}
#endif

/* Rows [0, rows - rows % 8) by the batch network; a row whose torch order
 * depends on a tie goes through sort_one_row; once more than half the rows
 * seen had ties (after KWK_BATCH_PROBE_ROWS), the batching stops.  Returns
 * the rows done. */
static int64_t sort_rows_batched(const sort_call *c, const sort_layout *g, int64_t rows,
                                 workspace *ws, uint64_t **keys, int *status)
{
    if (batch_rows_are_permutations(c, g, ws)) return 0;
    const int64_t len = c->len;
    kwk_batch_slot *slots = (kwk_batch_slot *)aligned_alloc(32, (size_t)len * sizeof(kwk_batch_slot));
    if (!slots) return 0; /* the one-row path needs less */
    if (c->torch_ties && !c->no_indices && len > KWK_TIE_EMU_ALWAYS_MAX) {
        /* the one-row path's tie predictor on the first rows: most of them
         * sure to tie (padding, masked or repeated extreme values) -> no
         * network at all */
        int expected = 0;
        for (int64_t r = 0; r < KWK_BATCH_LANES; ++r) {
            const out_row o = sort_out_row(g, r);
            sort_row sr;
            sort_load(c->dtype, o.row, len, o.step, c->flip, ws->words, &sr);
            expected += sr.packed && tie_expected(ws->words, len, &sr, ws->tmp);
        }
        if (2 * expected >= KWK_BATCH_LANES) {
            free(slots);
            return 0;
        }
    }
    if (!c->torch_ties && !c->no_indices && len >= KWK_DOM_BATCH_MIN_N) {
        /* the stable order of rows most of whose first ones are dominated
         * by one key (padding): the one-row path's split, a pass and two
         * short sorts, where the network sorts every word */
        int dominated = 0;
        for (int64_t r = 0; r < KWK_BATCH_LANES; ++r) {
            const out_row o = sort_out_row(g, r);
            sort_row sr;
            sort_load(c->dtype, o.row, len, o.step, c->flip, ws->words, &sr);
            int found = 0;
            if (sr.packed) words_dominant_key(ws->words, len, sr.mask, KWK_DOM_BATCH_HITS, &found);
            dominated += found;
        }
        if (2 * dominated >= KWK_BATCH_LANES) {
            free(slots);
            return 0;
        }
    }
    int npairs;
    kwk_net_pair *pairs = kwk_net_take((int)len, &npairs);
    if (!pairs) {
        free(slots);
        return 0;
    }
    int64_t r0 = 0, tie_rows = 0;
    int stop = 0;
#if defined(KWK_HAVE_BATCH16)
    if ((g->src_si != 1 || g->inner < KWK_BATCH_LANES ||
         (g->inner % (2 * KWK_BATCH_LANES) == 0 && len <= KWK_BATCH16_ADJ_MAX_LEN)) &&
        len >= KWK_BATCH16_MIN_LEN && len <= KWK_BATCH16_MAX_LEN &&
        KWK_DTYPES[c->dtype].key_bits <= 32)
        r0 = sort_rows_batched16(c, g, rows, ws, keys, status, pairs, npairs, slots, &tie_rows, &stop);
#endif
    row_stage st;
    row_stage_init(&st, g, len, 0);
    for (; !stop && r0 + KWK_BATCH_LANES <= rows && *status == KWK_OK; r0 += KWK_BATCH_LANES) {
        out_row outs[KWK_BATCH_LANES];
        kwk_batch_src src;
        for (int l = 0; l < KWK_BATCH_LANES; ++l) {
            outs[l] = sort_out_row(g, r0 + l);
            src.row[l] = outs[l].row;
        }
        src.step = outs[0].step;
        src.adjacent = g->src_si == 1 && (r0 % g->inner) + KWK_BATCH_LANES <= g->inner;
        if (src.adjacent && row_stage_enter(&st, g, r0, KWK_BATCH_LANES, rows, len, outs)) {
            for (int l = 0; l < KWK_BATCH_LANES; ++l) src.row[l] = outs[l].row;
            src.step = outs[0].step;
        }

        /* torch order past 16 elements: rows with ties are redone anyway,
         * so the network may ignore the indices of equal keys */
        const unsigned ties = batch_sort8(c->dtype, &src, len, c->flip, slots, pairs,
                                          npairs, !c->torch_ties);
        const int tied = batch_finish(c, g, outs, src.adjacent, slots, ties, len, ws, keys, status);
        if (tied < 0) {
            r0 += KWK_BATCH_LANES;
            break;
        }
        row_stage_after(&st, g, r0 + KWK_BATCH_LANES, len);
        tie_rows += tied;
        if (batch_ties_stop(c, r0 + KWK_BATCH_LANES, tie_rows)) {
            r0 += KWK_BATCH_LANES;
            break;
        }
    }
    row_stage_free(&st, g, len);
    kwk_net_give(pairs, (int)len, npairs);
    free(slots);
    return r0;
}
#endif

static int sort_rows_any(int dtype, const void *src, int64_t outer, int64_t len,
                         int64_t inner, int64_t src_so, int64_t src_sl,
                         int64_t src_si, void *values, int64_t *indices,
                         int64_t dst_so, int64_t dst_sl, int64_t dst_si,
                         int descending, int order)
{
    if (sr_sort_applies(dtype, len, outer * inner))
        return sr_sort(dtype, src, outer, len, inner, src_so, src_sl, src_si, values, indices,
                       dst_so, dst_sl, dst_si, descending);
    const kwk_dtype_info info = KWK_DTYPES[dtype];
    sort_call c;
    c.dtype = dtype;
    c.descending = descending;
    c.len = len;
    c.flip = descending ? kwk_width_mask(info.key_bits) : 0;
    /* std::sort leaves rows of up to 16 elements to a stable insertion
     * sort, so only longer rows can differ from index order */
    c.torch_ties = order == KWK_ORDER_TORCH && len > KWK_STD_SORT_THRESHOLD;
    /* values only: bare keys sorted when they map back to single bit
     * patterns (values_sort.h); ws.words and ws.tmp hold them */
    /* 64-bit keys from 17 elements where the vector quicksort is compiled
     * (values_sort.h; the wide keys' indexed sort carries an index per key:
     * values only, 4096x64 float64 14.6 -> 9.8 ns/el, int64 14.7 -> 7.6),
     * contiguous ones from VS_B64_MIN_LEN, and contiguous float32 (int32,
     * uint32 on AVX2) rows from VS_F32_MIN_LEN: vs_takes */
    c.values_only = indices == NULL && vs_takes(dtype, len, src_sl);
    c.no_indices = indices == NULL;
    const sort_layout g = {(const char *)src, (char *)values, indices, inner, src_so, src_sl,
                           src_si, dst_so, dst_sl, dst_si, info.elem_size,
                           ((outer - 1) * src_so + (inner - 1) * src_si + (len - 1) * src_sl + 1) *
                               info.elem_size};
    workspace ws;
    int status = workspace_init(&ws, len);
    /* a third row of words, for the keys of rows too wide to pack */
    uint64_t *keys = NULL;
    const int64_t rows = outer * inner;
    int64_t r = 0;
#if defined(KWK_HAVE_BATCH_SORT)
    /* values-only rows past 512 keep the bare-key sort (measured, msort
     * of float32 rows along dim 0, ns/el batch vs bare keys: 256 7.5 vs
     * 14.3, 512 8.7 vs 19.1, 1000 17.7 vs 13.9), and so do contiguous
     * float32 and 64-bit rows, whose bare keys sort faster there (native,
     * values only, ns/el batch vs bare keys, min of 5 interleaved runs:
     * float32 4096x256 4.7 vs 3.5, 2048x512 5.6 vs 3.9; int64 of 21 bits
     * 16384x64 5.2 vs 2.4, 8192x128 5.8 vs 3.8, 4096x256 6.7 vs 4.1; but
     * int32 and int16 4096x256 4.7-9.1 vs 8.9-12.5, which stay batched) */
    const int h16 = VS_H16_CONTIG && (dtype == KWK_FLOAT16 || dtype == KWK_BFLOAT16);
    const int bare_values = c.values_only && (len > KWK_BATCH_VALUES_MAX ||
                                              (src_sl == 1 && (vs_contig32_takes(dtype) || h16 ||
                                                               info.elem_size == 8)));
    if (status == KWK_OK && batch_sort_applies(dtype, len, rows, c.torch_ties) && !bare_values &&
        !h16_sort_takes(dtype, len, c.torch_ties, indices != NULL))
        r = sort_rows_batched(&c, &g, rows, &ws, &keys, &status);
#endif
#if defined(__AVX512F__)
    if (status == KWK_OK && r == 0 && sw8_applies(dtype, len, rows, src_sl, dst_sl))
        for (; r + SW8_ROWS <= rows; r += SW8_ROWS) sw8_sort_group(&c, &g, r);
#endif
    row_stage st;
    row_stage_init(&st, &g, len, 1);
    for (; status == KWK_OK && r < rows; ++r) {
        out_row out = sort_out_row(&g, r);
        row_stage_enter(&st, &g, r, 1, rows, len, &out);
        status = sort_one_row(&c, &ws, &keys, &out);
        row_stage_after(&st, &g, r + 1, len);
    }
    row_stage_free(&st, &g, len);
    free(keys);
    workspace_free(&ws);
    return status;
}

/* The sort; bool values then written as 0 or 1, as torch's sort writes
 * them (a bool tensor viewed from other bytes can hold any non-zero byte;
 * the paths above but the byte counting sort copy the source's bytes). */
static int impl_sort(int dtype, const void *src, int64_t outer, int64_t len,
                     int64_t inner, int64_t src_so, int64_t src_sl,
                     int64_t src_si, void *values, int64_t *indices,
                     int64_t dst_so, int64_t dst_sl, int64_t dst_si,
                     int descending, int order)
{
    const int status = sort_rows_any(dtype, src, outer, len, inner, src_so, src_sl, src_si,
                                     values, indices, dst_so, dst_sl, dst_si, descending, order);
    if (status != KWK_OK || dtype != KWK_BOOL || !values) return status;
    for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i) {
            uint8_t *v = (uint8_t *)values + o * dst_so + i * dst_si;
            for (int64_t j = 0; j < len; ++j) v[j * dst_sl] = v[j * dst_sl] != 0;
        }
    return KWK_OK;
}

#endif
