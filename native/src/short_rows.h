/*
 * short_rows.h - many short rows at once: sort (rows of 2..16) and topk
 * (rows up to SR_TOPK_MAX_LEN, k <= SR_TOPK_MAX_K), eight rows side by side.
 *
 * Per row, the general kernels pay a fixed cost (gather, pack, branchy
 * small sort, emit) that dominates at 4..64 elements: torch's own inline
 * insertion sort is about as fast there.  Here key j of eight rows sits in
 * one vector (column layout, SR_LANES lanes of int32), so every compare
 * serves eight rows and has no data-dependent branch.  Keys of up to 32
 * bits (every dtype but the 64-bit ones) are widened to int32 lanes with
 * the sign bit flipped, so a signed compare is the unsigned key order.
 *
 *  - sort: each element's stable rank, counted over all pairs (n^2 / 2
 *    compares of 8 rows, n <= 16): rank(j) = #{i: key(i) < key(j)} +
 *    #{i < j: key(i) == key(j)}.  std::sort leaves rows of up to 16
 *    elements to an insertion sort, which is stable, so the stable rank is
 *    torch's order, ties included, in both directions.
 *  - topk: the m = min(k + 1, n) smallest keys per lane, kept sorted in m
 *    vectors (each new key sinks through them by min/max; a key beating no
 *    lane's m-th is skipped), keys only.  A lane whose first m keys are
 *    pairwise distinct has one right answer, whatever torch's algorithm:
 *    a second pass finds the index of each of its k keys (equality with a
 *    unique key).  A lane with a tie among its first m keys (torch's order
 *    of equal elements shows, or NaNs, which share one key) is left to the
 *    caller: sr_topk reports it and the per-row kernel redoes that row.
 *
 * Portable target: the same code over an 8-lane struct (plain loops).
 */
#ifndef KWK_SHORT_ROWS_H
#define KWK_SHORT_ROWS_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "row_io.h"
#include "select_words.h"
#include "transpose8.h"
#include "short_sort_network.h"

enum {
    SR_LANES = 8,
    SR_SORT_MAX = 16,     /* = KWK_STD_SORT_THRESHOLD: stable in torch */
    SR_TOPK_MAX_K = 8,
    SR_TOPK_MAX_LEN = 256,
    SR_MIN_ROWS = 8,
    SR_PACKED_MIN_K = 2, /* sr_topk packs positions into the keys from this k */
};

#if defined(__GNUC__)
#define SR_INLINE static inline __attribute__((always_inline))
#else
#define SR_INLINE static inline
#endif

/* ------------------------------------------------------------ 8 x int32 */
#if defined(__AVX2__)
#include <immintrin.h>
typedef __m256i sr_v;
static inline sr_v sr_load(const int32_t *p) { return _mm256_loadu_si256((const __m256i *)p); }
static inline void sr_store(int32_t *p, sr_v v) { _mm256_storeu_si256((__m256i *)p, v); }
static inline sr_v sr_set1(int32_t x) { return _mm256_set1_epi32(x); }
static inline sr_v sr_min(sr_v a, sr_v b) { return _mm256_min_epi32(a, b); }
static inline sr_v sr_max(sr_v a, sr_v b) { return _mm256_max_epi32(a, b); }
static inline sr_v sr_gt(sr_v a, sr_v b) { return _mm256_cmpgt_epi32(a, b); }
static inline sr_v sr_eq(sr_v a, sr_v b) { return _mm256_cmpeq_epi32(a, b); }
static inline sr_v sr_add(sr_v a, sr_v b) { return _mm256_add_epi32(a, b); }
static inline sr_v sr_sub(sr_v a, sr_v b) { return _mm256_sub_epi32(a, b); }
static inline sr_v sr_or(sr_v a, sr_v b) { return _mm256_or_si256(a, b); }
static inline sr_v sr_and(sr_v a, sr_v b) { return _mm256_and_si256(a, b); }
static inline sr_v sr_xor(sr_v a, sr_v b) { return _mm256_xor_si256(a, b); }
/* logical shifts by s (0..31) */
static inline sr_v sr_srl(sr_v a, int s) { return _mm256_srl_epi32(a, _mm_cvtsi32_si128(s)); }
static inline sr_v sr_sll(sr_v a, int s) { return _mm256_sll_epi32(a, _mm_cvtsi32_si128(s)); }
/* m ? b : a, lane by lane (m all ones or zero) */
static inline sr_v sr_blend(sr_v a, sr_v b, sr_v m) { return _mm256_blendv_epi8(a, b, m); }
static inline unsigned sr_mask(sr_v m) { return (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(m)); }
#else
typedef struct { int32_t l[SR_LANES]; } sr_v;
#define SR_LANEWISE(EXPR)                                                     \
    sr_v r_;                                                                  \
    for (int l = 0; l < SR_LANES; ++l) r_.l[l] = (EXPR);                      \
    return r_;
static inline sr_v sr_load(const int32_t *p) { sr_v r; memcpy(r.l, p, sizeof r.l); return r; }
static inline void sr_store(int32_t *p, sr_v v) { memcpy(p, v.l, sizeof v.l); }
static inline sr_v sr_set1(int32_t x) { SR_LANEWISE(x) }
static inline sr_v sr_min(sr_v a, sr_v b) { SR_LANEWISE(a.l[l] < b.l[l] ? a.l[l] : b.l[l]) }
static inline sr_v sr_max(sr_v a, sr_v b) { SR_LANEWISE(a.l[l] < b.l[l] ? b.l[l] : a.l[l]) }
static inline sr_v sr_gt(sr_v a, sr_v b) { SR_LANEWISE(a.l[l] > b.l[l] ? -1 : 0) }
static inline sr_v sr_eq(sr_v a, sr_v b) { SR_LANEWISE(a.l[l] == b.l[l] ? -1 : 0) }
/* ranks and masks stay tiny: no overflow, but go through uint32 anyway */
static inline sr_v sr_add(sr_v a, sr_v b) { SR_LANEWISE((int32_t)((uint32_t)a.l[l] + (uint32_t)b.l[l])) }
static inline sr_v sr_sub(sr_v a, sr_v b) { SR_LANEWISE((int32_t)((uint32_t)a.l[l] - (uint32_t)b.l[l])) }
static inline sr_v sr_or(sr_v a, sr_v b) { SR_LANEWISE(a.l[l] | b.l[l]) }
static inline sr_v sr_and(sr_v a, sr_v b) { SR_LANEWISE(a.l[l] & b.l[l]) }
static inline sr_v sr_xor(sr_v a, sr_v b) { SR_LANEWISE(a.l[l] ^ b.l[l]) }
static inline sr_v sr_srl(sr_v a, int s) { SR_LANEWISE((int32_t)((uint32_t)a.l[l] >> s)) }
static inline sr_v sr_sll(sr_v a, int s) { SR_LANEWISE((int32_t)((uint32_t)a.l[l] << s)) }
static inline sr_v sr_blend(sr_v a, sr_v b, sr_v m) { SR_LANEWISE(m.l[l] ? b.l[l] : a.l[l]) }
static inline unsigned sr_mask(sr_v m)
{
    unsigned r = 0;
    for (int l = 0; l < SR_LANES; ++l) r |= (unsigned)(m.l[l] != 0) << l;
    return r;
}
#undef SR_LANEWISE
#endif

/* ------------------------------------------------------------ row groups */

/* Eight rows of a call (the last group repeats its last row in the unused
 * lanes, which are never written back). */
typedef struct {
    const char *src[SR_LANES];
    int64_t dst[SR_LANES]; /* element offset of the output row */
    int count;             /* real rows in the group */
} sr_group;

/* Walks the rows of a call, row t being (t / inner, t % inner), without a
 * division per row (a quarter of the time of 8-element rows). */
typedef struct {
    const char *src;
    int64_t es, inner, src_so, src_si, dst_so, dst_si;
    int64_t rows, t, o, i; /* next row: t = o * inner + i */
} sr_walk;

static void sr_walk_init(sr_walk *w, const void *src, int64_t es, int64_t outer, int64_t inner,
                         int64_t src_so, int64_t src_si, int64_t dst_so, int64_t dst_si)
{
    w->src = (const char *)src;
    w->es = es;
    w->inner = inner;
    w->src_so = src_so;
    w->src_si = src_si;
    w->dst_so = dst_so;
    w->dst_si = dst_si;
    w->rows = outer * inner;
    w->t = w->o = w->i = 0;
}

/* The next (up to) eight rows; 0 when none are left. */
SR_INLINE int sr_next_group(sr_walk *w, sr_group *g)
{
    if (w->t >= w->rows) return 0;
    g->count = w->rows - w->t < SR_LANES ? (int)(w->rows - w->t) : SR_LANES;
    if (w->inner == 1) { /* rows along the last dim (or one inner row): row t = o */
        for (int l = 0; l < g->count; ++l) {
            g->src[l] = w->src + (w->o + l) * w->src_so * w->es;
            g->dst[l] = (w->o + l) * w->dst_so;
        }
        w->o += g->count;
    } else {
        for (int l = 0; l < g->count; ++l) {
        g->src[l] = w->src + (w->o * w->src_so + w->i * w->src_si) * w->es;
        g->dst[l] = w->o * w->dst_so + w->i * w->dst_si;
            if (++w->i == w->inner) {
                w->i = 0;
                ++w->o;
            }
        }
    }
    for (int l = g->count; l < SR_LANES; ++l) {
        g->src[l] = g->src[g->count - 1];
        g->dst[l] = g->dst[g->count - 1];
    }
    w->t += g->count;
    return 1;
}

#if defined(__AVX2__)
/* Columns j..j+7 of eight rows r[] (each holding elements j..j+7 of its
 * row) into col, only the first `cols` of them. */
static inline void sr_transpose8(__m256i r[8], int64_t j, int cols, int32_t *col)
{
    kwk_transpose8_epi32(r);
    for (int c = 0; c < cols; ++c) _mm256_storeu_si256((__m256i *)(col + (j + c) * 8), r[c]);
}
#endif

/* col[j * 8 + l] = element j of row l (32-bit elements, contiguous rows):
 * eight rows of n to columns.  AVX2: 8x8 blocks, the last one read with a
 * masked load (nothing past a row's end is touched). */
static void sr_transpose(const char *const *rows, int64_t n, int32_t *col)
{
    int64_t j = 0;
#if defined(__AVX2__)
    __m256i r[8];
    for (; j + 8 <= n; j += 8) {
        for (int l = 0; l < 8; ++l) r[l] = _mm256_loadu_si256((const __m256i *)(rows[l] + j * 4));
        sr_transpose8(r, j, 8, col);
    }
    if (j < n) {
        const int cols = (int)(n - j);
        const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(cols),
                                                _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        for (int l = 0; l < 8; ++l)
            r[l] = _mm256_maskload_epi32((const int *)(const void *)(rows[l] + j * 4), mask);
        sr_transpose8(r, j, cols, col);
        j = n;
    }
#endif
    for (; j < n; ++j)
        for (int l = 0; l < SR_LANES; ++l) memcpy(col + j * SR_LANES + l, rows[l] + j * 4, 4);
}

/* float32 columns keyed eight at a time (kwk_keys8_f32): sk_f32's branches
 * keep the compiler from vectorising the loop below, which was the largest
 * part of a topk of 4096x8 (k = 2: 26.9 -> 22.7 us a call, 16384x8 92 -> 73;
 * the corpus's dsv3_gate_group_select 35.5 -> 28.6 us).  Rows of up to 16
 * only: on qwen3's router rows (4096x128, k = 8, torch order) the same
 * change made the whole call 12% slower (738 -> 829 us, the time going to
 * the emulation of the tied rows, whose inputs and count it does not
 * change: keys checked equal over 8e7 random patterns).  Built with
 * -falign-functions=64 -falign-loops=64 the two measured alike (843/774
 * vs 787/795 us): code placement, most likely, not the keying itself. */
#if defined(__AVX2__)
static inline int sr_keys8_f32(int32_t *col, int64_t n, uint32_t x)
{
    const __m256i xv = _mm256_set1_epi32((int)x);
    for (int64_t j = 0; j < n; ++j) {
        __m256i *p = (__m256i *)(void *)(col + j * SR_LANES);
        _mm256_storeu_si256(p, _mm256_xor_si256(kwk_keys8_f32(_mm256_loadu_si256(p)), xv));
    }
    return 1;
}
#define SR_KEYS8_F32(DTYPE, col, n, x) ((DTYPE) == KWK_FLOAT32 && (n) <= 16 && sr_keys8_f32(col, n, x))
#else
#define SR_KEYS8_F32(DTYPE, col, n, x) 0
#endif

/* The keys of sixteen 16-bit elements (select_words.h's sk_<SUF>), lane
 * by lane. */
#if defined(__AVX2__)
static inline __m256i sr_keys16(int dtype, __m256i b)
{
    if (dtype == KWK_UINT16) return b;
    if (dtype == KWK_INT16) return _mm256_xor_si256(b, _mm256_set1_epi16((short)0x8000));
    return kwk_keys16_h16(b, dtype == KWK_BFLOAT16 ? 0x7F80 : 0x7C00);
}
#define SR_KEYS16_SHORT(DTYPE) ((DTYPE) == KWK_UINT16 || (DTYPE) == KWK_INT16 || \
                                (DTYPE) == KWK_FLOAT16 || (DTYPE) == KWK_BFLOAT16)
/* out[0..n) = keys of the n (8 or 16) 16-bit elements at t, ^ x, as int32 */
#define SR_KEY_ROW16(DTYPE, t, n, x, out)                                     \
    do {                                                                      \
        const __m256i x_ = _mm256_set1_epi32((int)(x));                        \
        const __m256i b_ = (n) == 16 ? _mm256_loadu_si256((const __m256i *)(const void *)(t)) \
                                     : _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)(t))); \
        const __m256i k_ = sr_keys16(DTYPE, b_);                              \
        _mm256_storeu_si256((__m256i *)(void *)(out),                         \
                            _mm256_xor_si256(_mm256_cvtepu16_epi32(_mm256_castsi256_si128(k_)), x_)); \
        if ((n) == 16)                                                        \
            _mm256_storeu_si256((__m256i *)(void *)((out) + 8),               \
                                _mm256_xor_si256(_mm256_cvtepu16_epi32(_mm256_extracti128_si256(k_, 1)), x_)); \
    } while (0)
#else
#define SR_KEYS16_SHORT(DTYPE) 0
#define SR_KEY_ROW16(DTYPE, t, n, x, out) ((void)0)
#endif

/* col[j * 8 + l] = key of element j of lane l's row, flipped, as a signed
 * int32 (sign bit flipped: signed order == key order).  UT is the key
 * width, KEY the dtype's key function (select_words.h).  Contiguous rows of
 * 32-bit elements are transposed first, then keyed in one vectorised
 * pass. */
#define SR_DEFINE_LOAD(SUF, UT, KEY, DTYPE)                                   \
    static void sr_load_##SUF(const sr_group *g, int64_t n, int64_t step, uint32_t flip, \
                              int32_t *col)                                   \
    {                                                                         \
        const uint32_t x = flip ^ 0x80000000u;                                \
        if (sizeof(UT) == 4 && step == 4) {                                   \
            /* the bits to columns, then their keys in one contiguous pass */ \
            sr_transpose(g->src, n, col);                                     \
            if (SR_KEYS8_F32(DTYPE, col, n, x)) return;                       \
            for (int64_t j = 0; j < n * SR_LANES; ++j) {                      \
                UT v;                                                         \
                memcpy(&v, col + j, sizeof(UT));                              \
                col[j] = (int32_t)((uint32_t)KEY(v) ^ x);                     \
            }                                                                 \
            return;                                                           \
        }                                                                     \
        if (SR_KEYS16_SHORT(DTYPE) && step == 2 && (n == 8 || n == 16)) {     \
            /* 16-bit rows of 8 or 16 (MoE routers' experts): each row's    \
             * keys by whole vectors (sr_keys16), then the same transpose;  \
             * element by element they were most of a topk of bfloat16      \
             * 4096x8.  (Other lengths would need a copy of each row, not   \
             * to read past its end: slower than the elements one by one.) */ \
            int32_t keyed[SR_LANES][16];                                      \
            const char *rows[SR_LANES];                                       \
            for (int l = 0; l < SR_LANES; ++l) {                              \
                SR_KEY_ROW16(DTYPE, g->src[l], n, x, keyed[l]);               \
                rows[l] = (const char *)keyed[l];                             \
            }                                                                 \
            sr_transpose(rows, n, col);                                       \
            return;                                                           \
        }                                                                     \
        if (sizeof(UT) < 4 && step == (int64_t)sizeof(UT) && n >= 16 &&      \
            n <= SR_TOPK_MAX_LEN) {                                           \
            /* narrower contiguous rows: each row's keys in one vectorised    \
             * pass, then the same transpose, where element by element to   \
             * the columns was half of the call (AMD Zen 4, topk k = 2 of    \
             * 4096x16: float16 75.9 -> 47.8 us, bfloat16 84.5 -> 56.3;      \
             * k = 8 of 4096x64 bfloat16 504 -> 423).  Rows of 8 measured    \
             * 0.95x (their keying loop too short for the vector loop). */   \
            int32_t keyed[SR_LANES][SR_TOPK_MAX_LEN];                         \
            const char *rows[SR_LANES];                                       \
            for (int l = 0; l < SR_LANES; ++l) {                              \
                const char *row = g->src[l];                                  \
                for (int64_t j = 0; j < n; ++j) {                             \
                    UT v;                                                     \
                    memcpy(&v, row + j * (int64_t)sizeof(UT), sizeof(UT));    \
                    keyed[l][j] = (int32_t)((uint32_t)KEY(v) ^ x);            \
                }                                                             \
                rows[l] = (const char *)keyed[l];                             \
            }                                                                 \
            sr_transpose(rows, n, col);                                       \
            return;                                                           \
        }                                                                     \
        for (int l = 0; l < SR_LANES; ++l) {                                  \
            const char *row = g->src[l];                                      \
            for (int64_t j = 0; j < n; ++j) {                                 \
                UT v;                                                         \
                memcpy(&v, row + j * step, sizeof(UT));                       \
                col[j * SR_LANES + l] = (int32_t)((uint32_t)KEY(v) ^ x);      \
            }                                                                 \
        }                                                                     \
    }

/* The dtypes with keys of at most 32 bits, for a macro X(suffix, element
 * type, key function, dtype): one list for the kernels of this file and
 * topk_threshold.h. */
#define SR_NARROW_DTYPES(X)                                                   \
    X(bool, uint8_t, sk_bool, KWK_BOOL)                                       \
    X(u8, uint8_t, sk_u8, KWK_UINT8)                                          \
    X(i8, uint8_t, sk_i8, KWK_INT8)                                           \
    X(u16, uint16_t, sk_u16, KWK_UINT16)                                      \
    X(i16, uint16_t, sk_i16, KWK_INT16)                                       \
    X(f16, uint16_t, sk_f16, KWK_FLOAT16)                                     \
    X(bf16, uint16_t, sk_bf16, KWK_BFLOAT16)                                  \
    X(u32, uint32_t, sk_u32, KWK_UINT32)                                      \
    X(i32, uint32_t, sk_i32, KWK_INT32)                                       \
    X(f32, uint32_t, sk_f32, KWK_FLOAT32)

SR_NARROW_DTYPES(SR_DEFINE_LOAD)
#undef SR_DEFINE_LOAD

typedef void (*sr_load_fn)(const sr_group *, int64_t, int64_t, uint32_t, int32_t *);

/* The column loader of a dtype with keys of at most 32 bits, else NULL. */
static sr_load_fn sr_loader(int dtype)
{
    switch (dtype) {
#define SR_LOADER_CASE(SUF, UT, KEY, DT) case DT: return sr_load_##SUF;
    SR_NARROW_DTYPES(SR_LOADER_CASE)
#undef SR_LOADER_CASE
    default: return NULL;
    }
}

/* ------------------------------------------------------------ output */

/* Write a group's rows, per element size T (the size switch outside the
 * loops: a third of the time of 8-element rows otherwise).  sorted: element
 * j of lane l goes to position rank[j * 8 + l]; top: position p takes
 * element at[p * 8 + l], for the lanes not in `skip`.  canon: bfloat16 NaN
 * written as 0x7FC0, as torch.topk's bfloat16 path does. */
#define SR_DEFINE_EMIT(T, SUF)                                                \
    static void sr_emit_sorted_##SUF(const sr_group *g, const int32_t *rank, int n, \
                                     int64_t sstep, char *values, int64_t *indices, \
                                     int64_t dsl)                             \
    {                                                                         \
        for (int l = 0; l < g->count; ++l) {                                  \
            const char *row = g->src[l];                                      \
            T *vals = values ? (T *)(void *)(values + g->dst[l] * (int64_t)sizeof(T)) : NULL; \
            int64_t *inds = indices ? indices + g->dst[l] : NULL;             \
            if (vals && inds && dsl == 1) { /* dense outputs: no test, no stride */ \
                for (int j = 0; j < n; ++j) {                                 \
                    const int64_t at = rank[j * SR_LANES + l];                \
                    memcpy(vals + at, row + j * sstep, sizeof(T));            \
                    inds[at] = j;                                             \
                }                                                             \
                continue;                                                     \
            }                                                                 \
            for (int j = 0; j < n; ++j) {                                     \
                const int64_t at = (int64_t)rank[j * SR_LANES + l] * dsl;     \
                if (vals) memcpy(vals + at, row + j * sstep, sizeof(T));      \
                if (inds) inds[at] = j;                                       \
            }                                                                 \
        }                                                                     \
    }                                                                         \
    static void sr_emit_top_##SUF(const sr_group *g, unsigned skip, const int32_t *at, int k, \
                                  int64_t sstep, char *values, int64_t *indices, \
                                  int64_t dsl, int canon)                     \
    {                                                                         \
        for (int l = 0; l < g->count; ++l) {                                  \
            if (skip >> l & 1) continue;                                      \
            const char *row = g->src[l];                                      \
            T *vals = values ? (T *)(void *)(values + g->dst[l] * (int64_t)sizeof(T)) : NULL; \
            int64_t *inds = indices ? indices + g->dst[l] : NULL;             \
            for (int p = 0; p < k; ++p) {                                     \
                const int64_t j = at[p * SR_LANES + l];                       \
                if (vals) {                                                   \
                    T v;                                                      \
                    memcpy(&v, row + j * sstep, sizeof(T));                   \
                    if (canon && (v & 0x7FFFu) > 0x7F80u) v = (T)0x7FC0u;     \
                    memcpy(vals + p * dsl, &v, sizeof(T));                    \
                }                                                             \
                if (inds) inds[p * dsl] = j;                                  \
            }                                                                 \
        }                                                                     \
    }

SR_DEFINE_EMIT(uint8_t, u8)
SR_DEFINE_EMIT(uint16_t, u16)
SR_DEFINE_EMIT(uint32_t, u32)
#undef SR_DEFINE_EMIT

/* ------------------------------------------------------------ sort */

/* Whether sr_sort takes this call. */
static int sr_sort_applies(int dtype, int64_t len, int64_t rows)
{
    return len >= 2 && len <= SR_SORT_MAX && rows >= SR_MIN_ROWS && sr_loader(dtype) != NULL;
}

/* rank[j * 8 + l]: the stable rank of element j of lane l's row. */

SR_INLINE void sr_stable_ranks_n(const int32_t *col, const int n, int32_t *rank)
{
    sr_v key[SR_SORT_MAX], r[SR_SORT_MAX];
    for (int j = 0; j < n; ++j) {
        key[j] = sr_load(col + j * SR_LANES);
        r[j] = sr_set1(j); /* every earlier element counted as before j ... */
    }
    for (int i = 0; i < n; ++i)
        for (int j = i + 1; j < n; ++j) {
            /* ... unless it is greater (then j goes before it instead) */
            const sr_v gt = sr_gt(key[i], key[j]); /* -1 where key(j) < key(i) */
            r[j] = sr_add(r[j], gt);
            r[i] = sr_sub(r[i], gt);
        }
    for (int j = 0; j < n; ++j) sr_store(rank + j * SR_LANES, r[j]);
}

/* The same with n a constant in each case: the compiler then keeps the
 * vectors in registers (with n a variable they live in memory, and every
 * compare waits on a store). */
static void sr_stable_ranks(const int32_t *col, int n, int32_t *rank)
{
    switch (n) {
#define SR_CASE(N) case N: sr_stable_ranks_n(col, N, rank); break;
    SR_CASE(2) SR_CASE(3) SR_CASE(4) SR_CASE(5) SR_CASE(6) SR_CASE(7) SR_CASE(8) SR_CASE(9)
    SR_CASE(10) SR_CASE(11) SR_CASE(12) SR_CASE(13) SR_CASE(14) SR_CASE(15) SR_CASE(16)
#undef SR_CASE
    default: break;
    }
}

/* Sort rows of 2..SR_SORT_MAX elements of a dtype with keys of <= 32 bits
 * (sr_sort_applies); arguments as impl_sort's. */
static int sr_sort(int dtype, const void *src, int64_t outer, int64_t len, int64_t inner,
                   int64_t src_so, int64_t src_sl, int64_t src_si, void *values,
                   int64_t *indices, int64_t dst_so, int64_t dst_sl, int64_t dst_si,
                   int descending)
{
    const sr_load_fn load = sr_loader(dtype);
    const int es = KWK_DTYPES[dtype].elem_size;
    const uint32_t flip = descending ? (uint32_t)kwk_width_mask(KWK_DTYPES[dtype].key_bits) : 0;
    const int n = (int)len;
    kwk_count(KWK_COUNT_SHORT_SORT_ROWS, outer * inner);
    if (outer == 1 && inner > 1 && src_sl == 1 && dst_sl == 1) {
        /* rows of contiguous elements src_si / dst_si apart (the sort dim
         * the first, of stride 1, as in torch.msort(x.t()), whose outputs
         * torch lays out like its input): the same rows indexed by outer */
        outer = inner;
        src_so = src_si;
        dst_so = dst_si;
        inner = 1;
        src_si = dst_si = 0;
    }
#if defined(KWK_HAVE_SORT_NETWORK)
    /* 32- and 16-bit elements in layouts read and written by whole
     * vectors: the network (short_sort_network.h); what it leaves (fewer
     * than eight rows) continues below */
    const int sn_mode = sn_applies(dtype, len, inner, src_sl, src_si, dst_so, dst_sl, dst_si);
    if (sn_mode != SN_NONE) {
        if (sn_mode == SN_ROWS) {
            const int64_t done = sn_sort_rows(dtype, src, outer, n, src_so, values, indices,
                                              descending);
            if (done == outer) return KWK_OK;
            src = (const char *)src + done * src_so * es;
            if (values) values = (char *)values + done * dst_so * es;
            if (indices) indices += done * dst_so;
            outer -= done;
        } else {
            const int64_t done = sn_sort_columns(dtype, src, outer, n, inner, src_so, src_sl,
                                                 values, indices, dst_so, dst_sl, descending);
            if (done == inner) return KWK_OK;
            src = (const char *)src + done * es; /* src_si == dst_si == 1 */
            if (values) values = (char *)values + done * es;
            if (indices) indices += done;
            inner -= done;
        }
    }
#endif
    int32_t col[SR_SORT_MAX * SR_LANES], rank[SR_SORT_MAX * SR_LANES];
    sr_walk w;
    sr_group g;
    sr_walk_init(&w, src, es, outer, inner, src_so, src_si, dst_so, dst_si);
    while (sr_next_group(&w, &g)) {
        load(&g, n, src_sl * es, flip, col);
        sr_stable_ranks(col, n, rank);
        const int64_t sstep = src_sl * es;
        if (es == 1) sr_emit_sorted_u8(&g, rank, n, sstep, (char *)values, indices, dst_sl);
        else if (es == 2) sr_emit_sorted_u16(&g, rank, n, sstep, (char *)values, indices, dst_sl);
        else sr_emit_sorted_u32(&g, rank, n, sstep, (char *)values, indices, dst_sl);
    }
    return KWK_OK;
}

/* ------------------------------------------------------------ topk */

/* Whether sr_topk takes this call: short rows, small k, keys of <= 32
 * bits, and an order that is sorted for tie-free rows (torch's
 * nth_element branch leaves sorted=False rows in introselect order). */
static int sr_topk_applies(int dtype, int64_t rows, int64_t len, int64_t k, int sorted,
                           int order)
{
    const int heap_path = k * 64 <= len;
    if (order == KWK_ORDER_TORCH && !sorted && !heap_path && k > 1) return 0;
    return rows >= SR_MIN_ROWS && len >= 1 && len <= SR_TOPK_MAX_LEN && k >= 1 && k <= SR_TOPK_MAX_K &&
           sr_loader(dtype) != NULL;
}

/* Each lane's list best[0..m) of the smallest keys seen, ascending, after
 * x is sunk into it (the largest of the m + 1 falls out): 2m min/max.
 * Lists start as m INT32_MAX sentinels, pushed out by the n >= m keys.
 * No skip test for a vector that enters no lane's list: with eight lanes
 * one usually enters, and the branch cost more than it saved (measured
 * 4096x64..256). */
SR_INLINE void sr_sink(sr_v *best, const int m, sr_v x)
{
    for (int p = 0; p < m; ++p) {
        const sr_v b = best[p];
        best[p] = sr_min(b, x);
        x = sr_max(b, x);
    }
}

/* For each of the group's lanes: the m smallest keys in order (best[0..m)),
 * and the index of each of the first k (idx[p]) when those m keys are
 * pairwise distinct.  Returns the lanes with a tie among them. */
SR_INLINE unsigned sr_smallest_mk(const int32_t *col, int64_t n, const int m, const int k,
                                  int32_t *at)
{
    sr_v best[SR_TOPK_MAX_K + 1];
    for (int p = 0; p < m; ++p) best[p] = sr_set1(INT32_MAX);
    /* equal keys are the same key: only values matter in this pass */
    for (int64_t j = 0; j < n; ++j) sr_sink(best, m, sr_load(col + j * SR_LANES));
    sr_v tie = sr_set1(0);
    for (int p = 0; p + 1 < m; ++p) tie = sr_or(tie, sr_eq(best[p], best[p + 1]));
    /* each of the k best keys' index, by equality (a scan of hit masks
     * with a search per hit was slower: its branches mispredict) */
    sr_v idx[SR_TOPK_MAX_K];
    for (int p = 0; p < k; ++p) idx[p] = sr_set1(0);
    for (int64_t j = 0; j < n; ++j) {
        const sr_v x = sr_load(col + j * SR_LANES), jv = sr_set1((int32_t)j);
        for (int p = 0; p < k; ++p) idx[p] = sr_blend(idx[p], jv, sr_eq(x, best[p]));
    }
    for (int p = 0; p < k; ++p) sr_store(at + p * SR_LANES, idx[p]);
    return sr_mask(tie);
}

/* The dispatch of sr_smallest and sr_smallest_packed: `return CALL(M, K)`
 * with M and K constants, for each k of 1..SR_TOPK_MAX_K and m = k + 1 or
 * m = k (= n), so each copy of the kernel keeps its lists in registers;
 * every lane tied (all rows redone) for any other k. */
_Static_assert(SR_TOPK_MAX_K == 8, "SR_SWITCH_K lists k = 1..8");
#define SR_K_CASE(K, m, CALL) case K: return (m) == K ? CALL(K, K) : CALL(K + 1, K);
#define SR_SWITCH_K(k, m, CALL)                                               \
    switch (k) {                                                              \
    SR_K_CASE(1, m, CALL) SR_K_CASE(2, m, CALL) SR_K_CASE(3, m, CALL)         \
    SR_K_CASE(4, m, CALL) SR_K_CASE(5, m, CALL) SR_K_CASE(6, m, CALL)         \
    SR_K_CASE(7, m, CALL) SR_K_CASE(8, m, CALL)                               \
    default: return (1u << SR_LANES) - 1;                                     \
    }

/* sr_smallest_mk with m and k constants (m = k + 1, or m = k = n). */
static unsigned sr_smallest(const int32_t *col, int64_t n, int m, int k, int32_t *at)
{
#define SR_CALL(M, K) sr_smallest_mk(col, n, M, K, at)
    SR_SWITCH_K(k, m, SR_CALL)
#undef SR_CALL
}

/* sr_smallest_mk on packed words, which carry their positions (no second
 * pass to find them): each key of col (n per lane) becomes key << 16 | j
 * for keys of <= 16 bits (`narrow`; exact: n <= SR_TOPK_MAX_LEN), else the
 * key with its low `sh` bits (those of n - 1) replaced by j, both in
 * signed order.  A row's words are distinct and ordered by (key, j)
 * wherever the keys (or their kept bits) differ.  The m smallest words of
 * each lane in order, their positions to at[p * SR_LANES] for p < k.
 * Returns the lanes where two of the m share their key bits (a true tie,
 * or for 32-bit keys two keys too close for the packed order to be
 * theirs): those rows are the caller's to redo, as sr_smallest's tied
 * ones. */
SR_INLINE unsigned sr_smallest_packed_mk(const int32_t *col, int64_t n, const int m, const int k,
                                         int narrow, int sh, int32_t *at)
{
    sr_v best[SR_TOPK_MAX_K + 1];
    for (int p = 0; p < m; ++p) best[p] = sr_set1(INT32_MAX);
    const sr_v keep = sr_set1((int32_t)~((1u << sh) - 1)), sign = sr_set1(INT32_MIN),
               one = sr_set1(1);
    sr_v jv = sr_set1(0);
    for (int64_t j = 0; j < n; ++j) {
        const sr_v c = sr_load(col + j * SR_LANES);
        sr_sink(best, m, sr_or(narrow ? sr_xor(sr_sll(c, 16), sign) : sr_and(c, keep), jv));
        jv = sr_add(jv, one);
    }
    sr_v tie = sr_set1(0);
    for (int p = 0; p + 1 < m; ++p)
        tie = sr_or(tie, sr_eq(sr_srl(best[p], sh), sr_srl(best[p + 1], sh)));
    const sr_v low = sr_set1((int32_t)((1u << sh) - 1));
    for (int p = 0; p < k; ++p) sr_store(at + p * SR_LANES, sr_and(best[p], low));
    return sr_mask(tie);
}

/* sr_smallest_packed_mk with m and k constants (as sr_smallest). */
static unsigned sr_smallest_packed(const int32_t *col, int64_t n, int m, int k, int narrow, int sh,
                                   int32_t *at)
{
#define SR_CALL(M, K) sr_smallest_packed_mk(col, n, M, K, narrow, sh, at)
    SR_SWITCH_K(k, m, SR_CALL)
#undef SR_CALL
}
#undef SR_SWITCH_K
#undef SR_K_CASE

#if defined(__AVX2__)
/* Dense output of rows of 32-bit elements (AVX2): a full group of eight
 * consecutive rows, `so` elements apart, writes one contiguous block of
 * 8 * k values and 8 * k indices, position q = l * k + p taking element
 * at[p * 8 + l] of row l.  The values of each rank p are one gather from
 * the rows (lane l at l * so + at[p][l]); then the k vectors of ranks are
 * transposed to rows of k: by shuffles for k = 1, 2, 4, 8, else by a
 * gather per output vector from a copy (pos[c] = p * 8 + l per lane).  A
 * scalar loop per element was half the time of 4096 rows of 8. */
typedef struct {
    __m256i row, pos[SR_TOPK_MAX_K];
} sr_dense_plan;

/* Whether the plan serves this call (the gather offsets fit in int32). */
static int sr_dense_plan_init(sr_dense_plan *d, int k, int64_t so, int64_t len)
{
    if (so < 0 || so > (INT32_MAX - len) / SR_LANES) return 0;
    int32_t row[SR_LANES];
    for (int l = 0; l < SR_LANES; ++l) row[l] = (int32_t)(l * so);
    d->row = _mm256_loadu_si256((const __m256i *)row);
    for (int c = 0; c < k; ++c) {
        int32_t pos[SR_LANES];
        for (int i = 0; i < SR_LANES; ++i) {
            const int q = c * SR_LANES + i;
            pos[i] = (q % k) * SR_LANES + q / k;
        }
        d->pos[c] = _mm256_loadu_si256((const __m256i *)pos);
    }
    return 1;
}

/* x[p] (lane l: rank p of row l) -> x[c] (positions 8c..8c+7 of the rows
 * of k), k in 1, 2, 4, 8. */
SR_INLINE void sr_ranks_to_rows(__m256i *x, int k)
{
    if (k == 2) {
        const __m256i a = _mm256_unpacklo_epi32(x[0], x[1]), b = _mm256_unpackhi_epi32(x[0], x[1]);
        x[0] = _mm256_permute2x128_si256(a, b, 0x20);
        x[1] = _mm256_permute2x128_si256(a, b, 0x31);
    } else if (k == 4) {
        const __m256i t0 = _mm256_unpacklo_epi32(x[0], x[1]), t1 = _mm256_unpacklo_epi32(x[2], x[3]);
        const __m256i t2 = _mm256_unpackhi_epi32(x[0], x[1]), t3 = _mm256_unpackhi_epi32(x[2], x[3]);
        const __m256i u0 = _mm256_unpacklo_epi64(t0, t1), u1 = _mm256_unpackhi_epi64(t0, t1);
        const __m256i u2 = _mm256_unpacklo_epi64(t2, t3), u3 = _mm256_unpackhi_epi64(t2, t3);
        x[0] = _mm256_permute2x128_si256(u0, u1, 0x20);
        x[1] = _mm256_permute2x128_si256(u2, u3, 0x20);
        x[2] = _mm256_permute2x128_si256(u0, u1, 0x31);
        x[3] = _mm256_permute2x128_si256(u2, u3, 0x31);
    } else if (k == 8) {
        kwk_transpose8_epi32(x);
    }
}

SR_INLINE void sr_emit_dense32(const sr_dense_plan *d, const char *src, const int32_t *at, int k,
                               char *values, int64_t *indices)
{
    __m256i v[SR_TOPK_MAX_K], j[SR_TOPK_MAX_K];
    for (int p = 0; p < k; ++p) {
        j[p] = _mm256_loadu_si256((const __m256i *)(at + p * SR_LANES));
        v[p] = _mm256_i32gather_epi32((const int *)(const void *)src,
                                      _mm256_add_epi32(d->row, j[p]), 4);
    }
    if (k == 1 || k == 2 || k == 4 || k == 8) {
        sr_ranks_to_rows(v, k);
        sr_ranks_to_rows(j, k);
    } else {
        int32_t tv[SR_TOPK_MAX_K * SR_LANES];
        for (int p = 0; p < k; ++p) _mm256_storeu_si256((__m256i *)(tv + p * SR_LANES), v[p]);
        for (int c = 0; c < k; ++c) {
            v[c] = _mm256_i32gather_epi32((const int *)tv, d->pos[c], 4);
            j[c] = _mm256_i32gather_epi32((const int *)at, d->pos[c], 4);
        }
    }
    for (int c = 0; c < k; ++c) {
        _mm256_storeu_si256((__m256i *)(void *)(values + c * 32), v[c]);
        _mm256_storeu_si256((__m256i *)(void *)(indices + c * 8),
                            _mm256_cvtepi32_epi64(_mm256_castsi256_si128(j[c])));
        _mm256_storeu_si256((__m256i *)(void *)(indices + c * 8 + 4),
                            _mm256_cvtepi32_epi64(_mm256_extracti128_si256(j[c], 1)));
    }
}
#endif

/* Write a group's top-k rows: position p of lane l's row takes element
 * at[p * 8 + l], for the lanes not in `skip`.  With `dense_plan` (an
 * sr_dense_plan, AVX2 only: rows of 32-bit elements along the last dim,
 * dense outputs of rows of k) a full group is written by gathers, skipped
 * lanes too (their rows are redone afterwards). */
static void sr_emit_group_top(const sr_group *g, unsigned skip, const int32_t *at, int k,
                              int es, int64_t sstep, int dtype, char *values, int64_t *indices,
                              int64_t dst_sl, const void *dense_plan)
{
#if defined(__AVX2__)
    if (dense_plan && g->count == SR_LANES) {
        sr_emit_dense32((const sr_dense_plan *)dense_plan, g->src[0], at, k,
                        values + g->dst[0] * 4, indices + g->dst[0]);
        return;
    }
#else
    (void)dense_plan;
#endif
    if (es == 1)
        sr_emit_top_u8(g, skip, at, k, sstep, values, indices, dst_sl, 0);
    else if (es == 2)
        sr_emit_top_u16(g, skip, at, k, sstep, values, indices, dst_sl, dtype == KWK_BFLOAT16);
    else
        sr_emit_top_u32(g, skip, at, k, sstep, values, indices, dst_sl, 0);
}

/* Storage for an AVX2 dense plan (an empty stand-in elsewhere). */
typedef struct {
#if defined(__AVX2__)
    sr_dense_plan plan;
#else
    int unused;
#endif
} sr_plan_storage;

/* The dense plan for sr_emit_group_top when the call's layout allows it
 * (AVX2: 32-bit elements, rows contiguous along the last dim, dense
 * outputs of rows of k; the gather offsets fit in int32), else NULL. */
static const void *sr_dense_plan_for(sr_plan_storage *st, int es, int64_t src_sl, int64_t inner,
                                     int64_t src_so, int64_t len, int64_t k, int64_t dst_so,
                                     int64_t dst_sl, const void *values, const int64_t *indices)
{
    memset(st, 0, sizeof *st);
#if defined(__AVX2__)
    if (es == 4 && src_sl == 1 && inner == 1 && dst_sl == 1 && dst_so == k && values &&
        indices && sr_dense_plan_init(&st->plan, (int)k, src_so, len))
        return &st->plan;
#else
    (void)es, (void)src_sl, (void)inner, (void)src_so, (void)len, (void)k, (void)dst_so;
    (void)dst_sl, (void)values, (void)indices;
#endif
    return NULL;
}

/* topk over the rows sr_topk_applies to.  A row with a tie among its first
 * min(k + 1, len) keys is not written: its flat row number goes to
 * redo[*nredo] (redo has room for every row) for the per-row kernel. */
static int sr_topk(int dtype, const void *src, int64_t outer, int64_t len, int64_t inner,
                   int64_t src_so, int64_t src_sl, int64_t src_si, int64_t k, void *values,
                   int64_t *indices, int64_t dst_so, int64_t dst_sl, int64_t dst_si,
                   int largest, int64_t *redo, int64_t *nredo)
{
    const sr_load_fn load = sr_loader(dtype);
    const int es = KWK_DTYPES[dtype].elem_size;
    const uint32_t flip = largest ? (uint32_t)kwk_width_mask(KWK_DTYPES[dtype].key_bits) : 0;
    const int m = (int)(k < len ? k + 1 : len);
    int32_t *col = (int32_t *)malloc((size_t)len * SR_LANES * sizeof(int32_t));
    if (!col) return KWK_E_NOMEM;
    int32_t at[SR_TOPK_MAX_K * SR_LANES];
    sr_walk w;
    sr_group g;
    sr_walk_init(&w, src, es, outer, inner, src_so, src_si, dst_so, dst_si);
    *nredo = 0;
    /* the gather emit for full groups (a tie lane is written too, then
     * redone) */
    sr_plan_storage plan;
    const void *dense_plan = sr_dense_plan_for(&plan, es, src_sl, inner, src_so, len, k, dst_so,
                                               dst_sl, values, indices);
    /* positions packed into the keys from k = 2 (k = 1: the one equality
     * pass is as cheap as packing), for keys of <= 16 bits (exact) and
     * float32 (the low bits given up are the mantissa's last: only values
     * within 2^-16 of each other collide, and are redone); not for 32-bit
     * integers, whose small values differ in exactly those bits */
    const int narrow = KWK_DTYPES[dtype].key_bits <= 16;
    const int packed = k >= SR_PACKED_MIN_K && (narrow || dtype == KWK_FLOAT32);
    const int sh = narrow ? 16 : kwk_bits_for((uint64_t)(len - 1));
    for (int64_t t0 = 0; sr_next_group(&w, &g); t0 += SR_LANES) {
        load(&g, len, src_sl * es, flip, col);
        unsigned tie;
        if (packed) {
            tie = sr_smallest_packed(col, len, m, (int)k, narrow, sh, at);
        } else {
            tie = sr_smallest(col, len, m, (int)k, at);
        }
        for (unsigned t = tie & ((1u << g.count) - 1); t; t &= t - 1)
            redo[(*nredo)++] = t0 + __builtin_ctz(t);
        sr_emit_group_top(&g, tie, at, (int)k, es, src_sl * es, dtype, (char *)values, indices,
                          dst_sl, dense_plan);
    }
    free(col);
    kwk_count(KWK_COUNT_SHORT_TOPK_ROWS, outer * inner);
    kwk_count(KWK_COUNT_SHORT_TOPK_REDONE, *nredo);
    return KWK_OK;
}

#endif
