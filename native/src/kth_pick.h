/*
 * kth_pick.h - the key at one stable rank of a long row, and the index of
 * the element holding it, without sorting or copying the row: a sorted
 * sample brackets the rank, one pass counts the keys below the bracket and
 * compresses those inside it (a few percent of the row), a radix select
 * among those survivors gives the key (kthvalue_kernels.h's step 1, and
 * the long rows of median and nanmedian, select_kernels.h).  8/16-bit keys
 * by two histograms instead.
 */
#ifndef KWK_KTH_PICK_H
#define KWK_KTH_PICK_H

#include "row_io.h"
#include "select_words.h"
#include "compress_lut.h"
#include "fp_env.h"
#include "plain_loads.h"

/* Sample size for the brackets of kth_pick and qk_ranks_src: 4 sqrt(n) (at
 * most 2048), four times sw_rank's, so each bracket (about 2 sigma of the
 * sampled rank each side) keeps about half as many keys to sort; the larger
 * sample costs little next to one pass over a long row. */
enum { QK_SAMPLE_MAX = SW_SRC_BLOCK }; /* buf doubles as the radix scratch */
static int64_t qk_sample_size(int64_t n)
{
    const int64_t s = 4 * sw_isqrt(n);
    return s > QK_SAMPLE_MAX ? QK_SAMPLE_MAX : s;
}

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
/* kth_bracket_u32 over n contiguous float32 (is_float) or int32 elements
 * of a row (row indices base + j), read in place.  float32: the bracket
 * tested on the elements themselves, with float compares against the
 * bracket's ends turned back into values, and the survivors' raw bits
 * compressed, made keys afterwards (a few percent of the row); int32: the
 * keys (sign flipped) made in the register.  Making
 * every element's key in the register first (kwk_keys16_f32: seven
 * operations, three on mask registers) took the pass from about 8 cycles a
 * vector of sixteen to 15 (AMD Zen 4, a test loop over 3M float32 held in
 * L3; torch.kthvalue under install(): ibert's 3145728 activations at
 * rank 99.9% 1013 -> 696 us, brevitas' 3211264 ReLU outputs 950 -> 613,
 * kornia's 20000 15.4 -> 13.9, median of 65536 35.3 -> 31.0).  The
 * compares give the keys' order: -0.0 equals +0.0, and NaN
 * (whatever its sign and payload: every NaN's key is all ones) fails
 * every ordered compare, so it is never below the bracket and is inside
 * it only when the bracket's top is a NaN's key (then the upper test is
 * dropped and the lower one taken unordered).  That holds while subnormals
 * are not flushed (fp_env.h); callers check (kth_bracket_row32_takes).
 * keys and idx need room for n + 16 entries.  c <= j, so the whole-vector
 * stores at keys + c stay inside keys + n + 16. */
static inline __attribute__((always_inline)) int64_t
kth_bracket_row32_in(const char *row, int64_t n, int is_float, int nan_in, uint32_t base,
                     uint32_t lo, uint32_t hi, uint32_t *keys, uint32_t *idx, int64_t *below,
                     int64_t *at_lo)
{
    const uint32_t sign = 0x80000000u;
    /* the bracket's ends as values: a key k >= sign is the float of bits
     * k ^ sign (>= +0.0), below it of bits ~k; lo under -inf's key (no
     * lower end) reads as -inf; nan_in: hi is a NaN's key (no upper end) */
    const uint32_t inf_key = 0x7F800000u ^ sign, ninf_key = ~0xFF800000u;
    const uint32_t lo_v = lo < ninf_key ? 0xFF800000u : lo >= sign ? lo ^ sign : ~lo;
    const uint32_t hi_v = hi >= inf_key ? 0x7F800000u : hi >= sign ? hi ^ sign : ~hi;
    /* keys equal to lo are counted, not kept (a key shared by much of
     * the row, ReLU zeros, sits at the bracket's low end; AMD Zen 4,
     * median of ReLU outputs, us: 4x2^20 along the rows 4901 -> 1514,
     * median() of 2^20 1253 -> 455, of 65536 81.6 -> 35.2): unless lo is
     * under every key (no lower end), when none equals it */
    const __mmask16 eq_on = lo >= ninf_key ? (__mmask16)0xFFFF : (__mmask16)0;
    const __m512 flo = _mm512_castsi512_ps(_mm512_set1_epi32((int)lo_v));
    const __m512 fhi = _mm512_castsi512_ps(_mm512_set1_epi32((int)hi_v));
    const __m512i vlo = _mm512_set1_epi32((int)lo), vspan = _mm512_set1_epi32((int)(hi - lo));
    const __m512i vsign = _mm512_set1_epi32((int)sign);
    const __m512i sixteen = _mm512_set1_epi32(16);
    __m512i vidx = _mm512_add_epi32(_mm512_set1_epi32((int)base),
                                    _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11,
                                                      12, 13, 14, 15));
    int64_t c = 0, j = 0, under = 0, equal = 0;
    for (; j < n; j += 16) {
        /* the last block by a masked load: lanes past n are out of both */
        const __mmask16 live = n - j >= 16 ? (__mmask16)0xFFFF
                                           : (__mmask16)((1u << (n - j)) - 1u);
        const __m512i v = kwk_loadz_epi32(live, row + 4 * j, row + 4 * n);
        __m512i kv;
        __mmask16 in, lt, eq;
        if (is_float) {
            const __m512 f = _mm512_castsi512_ps(v);
            lt = _mm512_mask_cmp_ps_mask(live, f, flo, _CMP_LT_OQ);
            eq = _mm512_mask_cmp_ps_mask(live & eq_on, f, flo, _CMP_EQ_OQ);
            in = _mm512_mask_cmp_ps_mask(live & ~eq, f, flo, _CMP_NLT_UQ);
            if (!nan_in) in = _mm512_mask_cmp_ps_mask(in, f, fhi, _CMP_LE_OQ);
            kv = v;
        } else {
            /* int32: the key (the bits with the sign flipped) in the register */
            kv = _mm512_xor_si512(v, vsign);
            lt = _mm512_mask_cmplt_epu32_mask(live, kv, vlo);
            eq = _mm512_mask_cmpeq_epi32_mask(live, kv, vlo);
            in = _mm512_mask_cmple_epu32_mask(live & ~eq, _mm512_sub_epi32(kv, vlo), vspan);
        }
        under += __builtin_popcount((unsigned)lt);
        equal += __builtin_popcount((unsigned)eq);
        _mm512_storeu_si512(keys + c, _mm512_maskz_compress_epi32(in, kv));
        _mm512_storeu_si512(idx + c, _mm512_maskz_compress_epi32(in, vidx));
        vidx = _mm512_add_epi32(vidx, sixteen);
        c += __builtin_popcount((unsigned)in);
    }
    /* the float survivors' bits made keys */
    for (int64_t t = 0; is_float && t < c; t += 16) {
        const __mmask16 live = c - t >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (c - t)) - 1u);
        const __m512i b = _mm512_maskz_loadu_epi32(live, keys + t);
        _mm512_mask_storeu_epi32(keys + t, live, kwk_keys16_f32(b));
    }
    *below += under;
    *at_lo += equal;
    return c;
}

/* The index of the occ-th (from 0) element of a contiguous float32
 * (is_float) or int32 row whose key is `key` (not a NaN's), sixteen at a
 * time; -1 if none: kth_bracket_row32's keys equal to the bracket's low
 * end, counted there and found here. */
static int64_t kth_find_row32(const char *row, int64_t n, int is_float, uint32_t key,
                              int64_t occ)
{
    const uint32_t sign = 0x80000000u;
    const __m512 fv = _mm512_castsi512_ps(_mm512_set1_epi32((int)(key >= sign ? key ^ sign : ~key)));
    const __m512i iv = _mm512_set1_epi32((int)(key ^ sign));
    for (int64_t j = 0; j < n; j += 16) {
        const __mmask16 live = n - j >= 16 ? (__mmask16)0xFFFF
                                           : (__mmask16)((1u << (n - j)) - 1u);
        const __m512i v = kwk_loadz_epi32(live, row + 4 * j, row + 4 * n);
        const unsigned eq = is_float
            ? (unsigned)_mm512_mask_cmp_ps_mask(live, _mm512_castsi512_ps(v), fv, _CMP_EQ_OQ)
            : (unsigned)_mm512_mask_cmpeq_epi32_mask(live, v, iv);
        const int c = __builtin_popcount(eq);
        if (occ < c) return j + __builtin_ctz(_pdep_u32(1u << occ, eq));
        occ -= c;
    }
    return -1;
}

/* Whether kth_bracket_row32 takes the bracket [lo, lo + span] of a row of
 * float32 (is_float) or int32 keys: not one whose low end is a NaN's key,
 * not while subnormals are flushed (the float compares would then see them
 * as zeros). */
static int kth_bracket_row32_takes(int is_float, uint32_t lo)
{
    return !is_float || (lo <= (0x7F800000u ^ 0x80000000u) && !kwk_fp_flushes_denormals());
}

static int64_t kth_bracket_row32(const char *row, int64_t n, int is_float, uint32_t base,
                                 uint32_t lo, uint32_t span, uint32_t *keys, uint32_t *idx,
                                 int64_t *below, int64_t *at_lo)
{
    const uint32_t hi = lo + span;
    if (!is_float)
        return kth_bracket_row32_in(row, n, 0, 0, base, lo, hi, keys, idx, below, at_lo);
    if (hi > (0x7F800000u ^ 0x80000000u))
        return kth_bracket_row32_in(row, n, 1, 1, base, lo, hi, keys, idx, below, at_lo);
    return kth_bracket_row32_in(row, n, 1, 0, base, lo, hi, keys, idx, below, at_lo);
}
#endif

static int64_t kth_bracket_u64(const uint64_t *buf, int64_t b, uint64_t lo, uint64_t span,
                               uint64_t *keys, uint32_t *idx, uint32_t base, int64_t *below)
{
    int64_t c = 0, j = 0, under = 0;
#if defined(__AVX512F__)
    /* eight lanes, as kth_bracket_u32's sixteen (keys: c <= j, whole-vector
     * stores inside keys + b; the indices compressed from 32-bit lanes and
     * stored as eight): AMD Zen 4, 2^20 elements, us: kthvalue int64 1180 ->
     * 479, float64 1206 -> 517; median int64 1136 -> 442, float64 1486 ->
     * 798 */
    {
        const __m512i vlo = _mm512_set1_epi64((long long)lo);
        const __m512i vspan = _mm512_set1_epi64((long long)span);
        __m256i vidx = _mm256_add_epi32(_mm256_set1_epi32((int)base),
                                        _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        const __m256i eight = _mm256_set1_epi32(8);
        for (; j + 8 <= b; j += 8) {
            const __m512i v = _mm512_loadu_si512(buf + j);
            const __mmask8 in = _mm512_cmple_epu64_mask(_mm512_sub_epi64(v, vlo), vspan);
            under += __builtin_popcount((unsigned)_mm512_cmplt_epu64_mask(v, vlo));
            _mm512_storeu_si512(keys + c, _mm512_maskz_compress_epi64(in, v));
            _mm256_storeu_si256((__m256i *)(void *)(idx + c), _mm256_maskz_compress_epi32(in, vidx));
            vidx = _mm256_add_epi32(vidx, eight);
            c += __builtin_popcount((unsigned)in);
        }
    }
#endif
    for (; j < b; ++j) {
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
            /* one key left in the bracket (a value shared by most of the     \
             * row, as ReLU zeros): every survivor is it */                   \
            if (span == 0) return lo;                                         \
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
            int64_t j = 0, at_lo = 0;                                         \
            for (; j + 4 <= c; j += 4) {                                      \
                count[0][(UT)(from[j] - lo) >> shift]++;                      \
                count[1][(UT)(from[j + 1] - lo) >> shift]++;                  \
                count[2][(UT)(from[j + 2] - lo) >> shift]++;                  \
                count[3][(UT)(from[j + 3] - lo) >> shift]++;                  \
                at_lo += (from[j] == lo) + (from[j + 1] == lo) + (from[j + 2] == lo) + \
                         (from[j + 3] == lo);                                 \
            }                                                                 \
            for (; j < c; ++j) {                                              \
                count[0][(UT)(from[j] - lo) >> shift]++;                      \
                at_lo += from[j] == lo;                                       \
            }                                                                 \
            /* rank rr among the keys equal to the bracket's least (the      \
             * sample's key below the rank, shared by much of the row: a     \
             * median of ReLU outputs, half +0.0) */                          \
            if (rr < at_lo) return lo;                                        \
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

/* kth_bracket_row32's is_float for a row gathered by g with this step, read
 * in place (-1: not read in place: 64-bit rows, strided rows, other
 * dtypes, the AVX2 and portable targets gather blocks). */
#if defined(__AVX512F__)
#define KTH_FUSED_KIND(g, step, es)                                           \
    ((es) != 4 || (step) != 4 ? -1                                            \
     : (void *)(g) == (void *)sw_gather_f32 ? 1                               \
     : (void *)(g) == (void *)sw_gather_i32 ? 0 : -1)
#else
#define KTH_FUSED_KIND(g, step, es) -1
#define kth_bracket_row32(row, n, is_float, base, lo, span, keys, idx, below, at_lo) 0
#define kth_find_row32(row, n, is_float, key, occ) -1
#define kth_bracket_row32_takes(is_float, lo) 0
#endif

/* Step 1 for 32/64-bit keys (rows shorter than 2^32).  s is initialised on
 * first use (a missed bracket).  KWK_E_NOMEM or KWK_OK; *index is the index
 * at stable rank r (always found here; the 8/16-bit histograms below leave
 * -1 for the caller's kth_find). */
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
        int64_t sa = centre - margin, sb = centre + margin;                   \
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
        /* a second pass, on the side where the rank fell, when the first   \
         * missed it (3-4% of random rows: a float32 row of 20000 at rank   \
         * n/3 took 32 us instead of 15 by the exact select) */               \
        kwk_count(KWK_COUNT_KTH_BRACKET_ROWS, 1);                             \
        for (int pass = 0; pass < 2; ++pass) {                                \
            const UT span = (UT)(hi - lo);                                    \
            /* room for the survivors expected (the bracket's sample keys   \
             * stand for n / ns each), grown if more come */                \
            const int64_t expect = (sb - sa + 1) * (n / ns + 1);             \
            if (kth_fit(ks, (expect < n ? expect : n) + SW_SRC_BLOCK + 16, 0) != KWK_OK) \
                return KWK_E_NOMEM;                                           \
            int fused = KTH_FUSED_KIND(g, step, sizeof(UT));                  \
            if (fused >= 0 && !kth_bracket_row32_takes(fused, (uint32_t)lo)) fused = -1; \
            int64_t below = 0, c = 0, eq = 0; /* eq: fused keys == lo, not kept */ \
            for (int64_t j0 = 0; j0 < n; j0 += SW_SRC_BLOCK) {                \
                const int64_t b = n - j0 < SW_SRC_BLOCK ? n - j0 : SW_SRC_BLOCK; \
                /* more survivors than predicted: a key shared by much of   \
                 * the row sits at the bracket's end; room for the rest of  \
                 * the row at once (one copy, not one per doubling) */      \
                if (c + b + 16 > ks->room &&                                  \
                    kth_fit(ks, c + (n - j0) + 16, c) != KWK_OK)              \
                    return KWK_E_NOMEM;                                       \
                UT *keys = (UT *)ks->keys;                                    \
                if (fused >= 0) {                                             \
                    c += kth_bracket_row32(row + j0 * 4, b, fused, (uint32_t)j0, \
                                           (uint32_t)lo, (uint32_t)span,      \
                                           (uint32_t *)(void *)(keys + c), ks->idx + c, \
                                           &below, &eq);                      \
                    continue;                                                 \
                }                                                             \
                g(row + j0 * step, step, b, (UT)0, buf);                      \
                c += kth_bracket_##SUF(buf, b, lo, span, keys + c, ks->idx + c, \
                                       (uint32_t)j0, &below);                 \
            }                                                                 \
            const UT *keys = (const UT *)ks->keys;                            \
            if (fused >= 0 && r >= below && r < below + eq) {                 \
                /* a key equal to the bracket's low end: counted, not kept */ \
                out->key = lo;                                                \
                out->count = eq;                                              \
                out->occ = r - below;                                         \
                *index = kth_find_row32(row, n, fused, (uint32_t)lo, out->occ); \
                return KWK_OK;                                                \
            }                                                                 \
            below += eq; /* the survivors: keys in (lo, hi] when fused */     \
            if (r >= below && r < below + c) {                                \
                if (kth_fit_sorted(ks, c) != KWK_OK) return KWK_E_NOMEM;      \
                const int64_t rr = r - below;                                 \
                const UT slo = eq ? (UT)(lo + 1) : lo, sspan = eq ? (UT)(span - 1) : span; \
                const UT v = kth_histogram_select_##SUF(keys, (UT *)ks->sorted, c, rr, slo, \
                                                        sspan);               \
                int64_t under = 0, same = 0;                                  \
                for (int64_t j = 0; j < c; ++j) {                             \
                    under += keys[j] < v;                                     \
                    same += keys[j] == v;                                     \
                }                                                             \
                out->key = v;                                                 \
                out->count = same;                                            \
                out->occ = rr - under;                                        \
                /* every key equal to v survived, in index order */          \
                for (int64_t j = 0, left = out->occ; j < c; ++j)              \
                    if (keys[j] == v && left-- == 0) { *index = ks->idx[j]; break; } \
                return KWK_OK;                                                \
            }                                                                 \
            if (pass == 1) break;                                             \
            kwk_count(KWK_COUNT_KTH_BRACKET_SECOND, 1);                       \
            /* the next bracket: the keys between the sample's, four        \
             * margins further out, and the bracket just passed (the sample \
             * keys below sa are at most lo, those above sb at least hi:    \
             * sw_qselect), unless a run of equal sample keys leaves it     \
             * empty */                                                     \
            if (r < below) {                                                  \
                const int64_t sa2 = sa - 4 * margin;                          \
                UT lo2 = 0;                                                   \
                if (sa2 > 0) {                                                \
                    sw_qselect_##SUF(sample, sa, sa2);                        \
                    lo2 = sample[sa2];                                        \
                }                                                             \
                if (lo2 >= lo) break;                                         \
                hi = (UT)(lo - 1);                                            \
                lo = lo2;                                                     \
                sb = sa;                                                      \
                sa = sa2;                                                     \
            } else {                                                          \
                const int64_t sb2 = sb + 4 * margin;                          \
                UT hi2 = (UT)~(UT)0;                                          \
                if (sb2 < ns - 1) {                                           \
                    sw_qselect_##SUF(sample + sb + 1, ns - sb - 1, sb2 - sb - 1); \
                    hi2 = sample[sb2];                                        \
                }                                                             \
                if (hi2 <= hi) break;                                         \
                lo = (UT)(hi + 1);                                            \
                hi = hi2;                                                     \
                sa = sb;                                                      \
                sb = sb2;                                                     \
            }                                                                 \
        }                                                                     \
        /* the sample misjudged the rank (rare): exact stable-rank select */  \
        kwk_count(KWK_COUNT_KTH_BRACKET_EXACT, 1);                            \
        if (!*have_s) {                                                       \
            /* set first: a part-made scratch is freed too */                \
            *have_s = 1;                                                      \
            if (sw_rank_scratch_init(s, n) != KWK_OK) return KWK_E_NOMEM;     \
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
        /* four interleaved counts per bin: keys crowd into few high bytes  \
         * (a float's sign and exponent), and each increment would wait on  \
         * the one before (AMD Zen 4, kthvalue at n / 10 of randn rows:    \
         * bfloat16 65536 238 -> 213 us, int16 of +-90 65536 226 -> 180) */ \
        int64_t h4[4][256], h[256];                                           \
        memset(h4, 0, sizeof h4);                                             \
        for (int64_t j0 = 0; j0 < n; j0 += SW_SRC_BLOCK) {                    \
            const int64_t b = n - j0 < SW_SRC_BLOCK ? n - j0 : SW_SRC_BLOCK;  \
            g(row + j0 * step, step, b, (UT)0, buf);                          \
            int64_t j = 0;                                                    \
            for (; j + 4 <= b; j += 4) {                                      \
                h4[0][buf[j] >> (HI_SHIFT)]++;                                \
                h4[1][buf[j + 1] >> (HI_SHIFT)]++;                            \
                h4[2][buf[j + 2] >> (HI_SHIFT)]++;                            \
                h4[3][buf[j + 3] >> (HI_SHIFT)]++;                            \
            }                                                                 \
            for (; j < b; ++j) h4[0][buf[j] >> (HI_SHIFT)]++;                 \
        }                                                                     \
        for (int v = 0; v < 256; ++v) h[v] = h4[0][v] + h4[1][v] + h4[2][v] + h4[3][v]; \
        int64_t below = 0, top = 0;                                           \
        while (below + h[top] <= r) below += h[top++];                        \
        if (HI_SHIFT == 0) {                                                  \
            out->key = (uint64_t)top;                                         \
            out->count = h[top];                                              \
            out->occ = r - below;                                             \
            return KWK_OK;                                                    \
        }                                                                     \
        memset(h4, 0, sizeof h4); /* the low bytes of the keys under top */  \
        for (int64_t j0 = 0; j0 < n; j0 += SW_SRC_BLOCK) {                    \
            const int64_t b = n - j0 < SW_SRC_BLOCK ? n - j0 : SW_SRC_BLOCK;  \
            g(row + j0 * step, step, b, (UT)0, buf);                          \
            int64_t j = 0;                                                    \
            for (; j + 4 <= b; j += 4)                                        \
                for (int q = 0; q < 4; ++q)                                   \
                    h4[q][buf[j + q] & 0xFF] += (buf[j + q] >> (HI_SHIFT)) == (UT)top; \
            for (; j < b; ++j) h4[0][buf[j] & 0xFF] += (buf[j] >> (HI_SHIFT)) == (UT)top; \
        }                                                                     \
        int64_t h2[256];                                                      \
        for (int v = 0; v < 256; ++v) h2[v] = h4[0][v] + h4[1][v] + h4[2][v] + h4[3][v]; \
        int64_t low = 0;                                                      \
        while (below + h2[low] <= r) below += h2[low++];                      \
        out->key = (uint64_t)top << (HI_SHIFT) | (uint64_t)low;               \
        out->count = h2[low];                                                 \
        out->occ = r - below;                                                 \
        return KWK_OK;                                                        \
    }

KTH_DEFINE_PICK_HIST(uint8_t, u8, 0)
KTH_DEFINE_PICK_HIST(uint16_t, u16, 8)

#endif
