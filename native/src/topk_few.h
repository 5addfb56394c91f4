/*
 * topk_few.h - topk with k = 2 or 3 of contiguous float32 rows (k = 2 of
 * bfloat16 ones): MoE routers' top-2 of 128 experts, top-3 of 256.  One
 * pass over the row, as topk_top1.h does for k = 1.
 *
 *  1. Each element's key is its bits with the sign bit spread over the
 *     rest (x ^ ((x >> 31) & 0x7FFFFFFF), ~ that for the smallest): a signed
 *     compare of those orders the floats as torch does, save two cases
 *     taken apart in step 2: -0.0's key is next to +0.0's (-1 and 0), and a
 *     NaN's lies outside the infinities'.  Each vector lane keeps the k + 1
 *     largest keys it has seen as a sorted list (a key is sunk through it
 *     by 2k + 1 integer min/max, no compare or mask), the position of its
 *     largest (one compare, one masked move), and its least key.
 *  2. The lanes' lists are merged into the row's k + 1 largest keys g[0] >=
 *     .. >= g[k].  A NaN (g[0] above +inf's key, or a lane's least below
 *     -inf's) or a tie among them (equal keys, or -0.0 next to +0.0) hands
 *     the row back to the caller, which redoes it in the order asked for.
 *     Otherwise the answer is unique (SEMANTICS.md: exact when the k
 *     values are pairwise distinct and better than the (k+1)-th, in torch's
 *     partial_sort and nth_element branches alike, sorted).
 *  3. Each g[p] that is a lane's largest key takes that lane's position.
 *     When one is not (a lane held two of them: a row in 16 for k = 2 on
 *     AVX-512), a second pass over the row (in L1 by then) finds it: the
 *     one lane whose key equals it.
 *
 * Integer keys: the float min/max version measured 0.5-1.0x (Zen 4 runs
 * half as many float min/max a cycle), and keys.h's exact keys cost 7
 * operations a vector where these cost 2.  (Callers hand calls made with
 * denormals flushed to torch: these keys order denormals as the numbers
 * they are.)
 *
 * The lanes' lists hold the right keys only when every lane sees at least
 * k + 1 of the row's elements: n >= (k + 1) * TF_W (the row's last, partial
 * vector is read overlapping the one before, its repeated lanes set to
 * INT32_MIN, below every key that can be g[k-1] > g[k]).
 */
#ifndef KWK_TOPK_FEW_H
#define KWK_TOPK_FEW_H

#include <stdint.h>

#include "kwker.h" /* KWK_ORDER_TORCH, dtype codes */
#include "topk_top1.h" /* t1_vec_<SUF>: T1_W elements' bits as 32-bit lanes */
#if defined(__AVX2__)
#include <immintrin.h>
#endif

enum { TF_MAX_K = 3 };
/* The keys of +inf and -inf; flipped (~), those of -inf and +inf, so one
 * pair of bounds serves both directions. */
enum { TF_KEY_INF = 0x7F800000, TF_KEY_MINUS_INF = (int32_t)0x807FFFFF };

#if defined(__AVX2__)
#if defined(__AVX512F__)
enum { TF_W = T1_W }; /* 16: t1_vec_<SUF>'s lanes */
typedef __m512i tf_v;
#define tf_max(a, b) _mm512_max_epi32(a, b)
#define tf_min(a, b) _mm512_min_epi32(a, b)
#define tf_set1(x) _mm512_set1_epi32((int)(x))
/* The keys of x's floats, ~ those when `flip` (a constant in each caller:
 * the compiler makes one ternary logic operation of the xors). */
static inline tf_v tf_keys(tf_v x, int flip)
{
    const tf_v k = _mm512_xor_si512(
        x, _mm512_and_si512(_mm512_srai_epi32(x, 31), _mm512_set1_epi32(0x7FFFFFFF)));
    return flip ? _mm512_xor_si512(k, _mm512_set1_epi32(-1)) : k;
}
/* lanes [0, from) of v set to INT32_MIN */
static inline tf_v tf_drop_below(tf_v v, int from)
{
    return _mm512_mask_mov_epi32(_mm512_set1_epi32(INT32_MIN), (__mmask16)(0xFFFFu << from), v);
}
static inline tf_v tf_iota(void)
{
    return _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
}
#define tf_add(a, b) _mm512_add_epi32(a, b)
/* where, with the lanes of v equal to x taking pos's */
static inline tf_v tf_take_equal(tf_v where, tf_v v, int32_t x, tf_v pos)
{
    return _mm512_mask_mov_epi32(where, _mm512_cmpeq_epi32_mask(v, _mm512_set1_epi32(x)), pos);
}
static inline int32_t tf_hmax(tf_v v) { return _mm512_reduce_max_epi32(v); }
/* head, with the lanes where x > b taking pos's */
static inline tf_v tf_take_above(tf_v head, tf_v x, tf_v b, tf_v pos)
{
    return _mm512_mask_mov_epi32(head, _mm512_cmpgt_epi32_mask(x, b), pos);
}
/* the lanes of v equal to x, as bits */
static inline unsigned tf_equal(tf_v v, int32_t x)
{
    return _mm512_cmpeq_epi32_mask(v, _mm512_set1_epi32(x));
}
/* v's lowest lane of `lanes` (not 0) */
static inline int32_t tf_lane(tf_v v, unsigned lanes)
{
    return _mm_cvtsi128_si32(
        _mm512_castsi512_si128(_mm512_maskz_compress_epi32((__mmask16)(lanes & -lanes), v)));
}
static inline int32_t tf_hmin(tf_v v) { return _mm512_reduce_min_epi32(v); }
#else
enum { TF_W = T1_W }; /* 8 */
typedef __m256i tf_v;
#define tf_max(a, b) _mm256_max_epi32(a, b)
#define tf_min(a, b) _mm256_min_epi32(a, b)
#define tf_set1(x) _mm256_set1_epi32((int)(x))
static inline tf_v tf_keys(tf_v x, int flip)
{
    const tf_v k = _mm256_xor_si256(
        x, _mm256_and_si256(_mm256_srai_epi32(x, 31), _mm256_set1_epi32(0x7FFFFFFF)));
    return flip ? _mm256_xor_si256(k, _mm256_set1_epi32(-1)) : k;
}
static inline tf_v tf_drop_below(tf_v v, int from)
{
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_blendv_epi8(_mm256_set1_epi32(INT32_MIN), v,
                              _mm256_cmpgt_epi32(lane, _mm256_set1_epi32(from - 1)));
}
static inline tf_v tf_iota(void) { return _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7); }
#define tf_add(a, b) _mm256_add_epi32(a, b)
static inline tf_v tf_take_equal(tf_v where, tf_v v, int32_t x, tf_v pos)
{
    return _mm256_blendv_epi8(where, pos, _mm256_cmpeq_epi32(v, _mm256_set1_epi32(x)));
}
static inline int32_t tf_hmax(tf_v v)
{
    __m128i h = _mm_max_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    h = _mm_max_epi32(h, _mm_shuffle_epi32(h, 0x4E));
    h = _mm_max_epi32(h, _mm_shuffle_epi32(h, 0xB1));
    return _mm_cvtsi128_si32(h);
}
static inline tf_v tf_take_above(tf_v head, tf_v x, tf_v b, tf_v pos)
{
    return _mm256_blendv_epi8(head, pos, _mm256_cmpgt_epi32(x, b));
}
static inline unsigned tf_equal(tf_v v, int32_t x)
{
    return (unsigned)_mm256_movemask_ps(
        _mm256_castsi256_ps(_mm256_cmpeq_epi32(v, _mm256_set1_epi32(x))));
}
static inline int32_t tf_lane(tf_v v, unsigned lanes)
{
    return _mm_cvtsi128_si32(_mm256_castsi256_si128(
        _mm256_permutevar8x32_epi32(v, _mm256_set1_epi32(__builtin_ctz(lanes)))));
}
static inline int32_t tf_hmin(tf_v v)
{
    __m128i h = _mm_min_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    h = _mm_min_epi32(h, _mm_shuffle_epi32(h, 0x4E));
    h = _mm_min_epi32(h, _mm_shuffle_epi32(h, 0xB1));
    return _mm_cvtsi128_si32(h);
}
#endif

/* The K largest keys of two lists a[0..K) and b[0..K) (each descending,
 * lane by lane) into a: max(a[p], b[K-1-p]) are those K keys, then sorted
 * by compare-exchanges.  At the width of MAX/MIN's vectors. */
#define TF_MERGE(a, b, K, MAX, MIN)                                           \
    do {                                                                      \
        for (int p_ = 0; p_ < (K); ++p_) a[p_] = MAX(a[p_], b[(K) - 1 - p_]); \
        for (int i_ = 0; i_ + 1 < (K); ++i_)                                  \
            for (int j_ = (K) - 1; j_ > i_; --j_) {                           \
                const __typeof__(a[0]) hi_ = MAX(a[j_ - 1], a[j_]);           \
                a[j_] = MIN(a[j_ - 1], a[j_]);                                \
                a[j_ - 1] = hi_;                                              \
            }                                                                 \
    } while (0)

/* Steps 2 and 3 (n >= K * TF_W): the positions of the k = K - 1 largest
 * keys into at[0..k), largest first (-1 where step 1 did not see it, and
 * then returns -1); 0 when two of the K largest tie or the row has a NaN. */
static inline __attribute__((always_inline)) int tf_answer(const tf_v *best, tf_v head,
                                                          const int K, tf_v low,
                                                          int64_t *at, int32_t *g)
{
    const int k = K - 1;
    /* the lists folded in halves down to four lanes (narrower vectors cost
     * less), then each lane with its partner 2 and 1 lanes away, after which
     * every lane holds the row's K largest keys */
    __m128i q[TF_MAX_K + 1], o[TF_MAX_K + 1];
#if defined(__AVX512F__)
    __m256i h[TF_MAX_K + 1], u[TF_MAX_K + 1];
    for (int p = 0; p < K; ++p) {
        h[p] = _mm512_castsi512_si256(best[p]);
        u[p] = _mm512_extracti64x4_epi64(best[p], 1);
    }
    TF_MERGE(h, u, K, _mm256_max_epi32, _mm256_min_epi32);
#else
    const __m256i *h = best;
#endif
    for (int p = 0; p < K; ++p) {
        q[p] = _mm256_castsi256_si128(h[p]);
        o[p] = _mm256_extracti128_si256(h[p], 1);
    }
    TF_MERGE(q, o, K, _mm_max_epi32, _mm_min_epi32);
    for (int p = 0; p < K; ++p) o[p] = _mm_shuffle_epi32(q[p], 0x4E);
    TF_MERGE(q, o, K, _mm_max_epi32, _mm_min_epi32);
    for (int p = 0; p < K; ++p) o[p] = _mm_shuffle_epi32(q[p], 0xB1);
    TF_MERGE(q, o, K, _mm_max_epi32, _mm_min_epi32);
    for (int p = 0; p < K; ++p) g[p] = _mm_cvtsi128_si32(q[p]);
    /* a NaN's key lies above +inf's or below -inf's (either way round) */
    if (g[0] > TF_KEY_INF || tf_hmin(low) < TF_KEY_MINUS_INF) return 0;
    for (int p = 0; p < k; ++p) /* a tie, or -0.0 and +0.0 (either way round) */
        if (g[p] == g[p + 1] || (g[p] == 0 && g[p + 1] == -1)) return 0;
    /* where each of the k largest keys is: a lane's largest key has its
     * position in head; one found deeper in a lane's list (a lane holding
     * two of them: 1 row in 16 for k = 2 on AVX-512) is left to the
     * caller's scan, -1 */
    int missing = 0;
    for (int p = 0; p < k; ++p) {
        const unsigned lanes = tf_equal(best[0], g[p]);
        at[p] = lanes ? tf_lane(head, lanes) : -1;
        missing |= !lanes;
    }
    return missing ? -1 : 1;
}

/* tf_row_<SUF>_<L>(row, n, k, at): the positions of the row's k best
 * values (the largest: L = 1) into at[0..k), best first; 0 for a row with
 * a NaN or a tie among its k + 1 best.
 * One instance per dtype and direction, K a constant in each of its two
 * cases. */
#define TF_DEFINE_ROW(SUF, L)                                                 \
    static inline __attribute__((always_inline)) int tf_row_k_##SUF##_##L(  \
        const char *row, int64_t n, const int K, int64_t *at)                 \
    {                                                                         \
        tf_v best[TF_MAX_K + 1];                                              \
        tf_v low = tf_set1(INT32_MAX), head = tf_set1(0), pos = tf_iota();   \
        for (int p = 0; p < K; ++p) best[p] = tf_set1(INT32_MIN);             \
        for (int64_t i = 0;; i += TF_W) {                                     \
            tf_v x;                                                           \
            if (i + TF_W <= n) {                                              \
                x = tf_keys(t1_vec_##SUF(row, i), !L);                        \
                low = tf_min(low, x);                                         \
            } else if (i < n) { /* the last W, lanes before i seen */         \
                x = tf_keys(t1_vec_##SUF(row, n - TF_W), !L);                 \
                low = tf_min(low, x);                                         \
                x = tf_drop_below(x, (int)(i - (n - TF_W)));                  \
                pos = tf_add(tf_iota(), tf_set1((int32_t)(n - TF_W)));        \
            } else                                                            \
                break;                                                        \
            head = tf_take_above(head, x, best[0], pos);                      \
            pos = tf_add(pos, tf_set1(TF_W));                                 \
            for (int p = 0; p < K; ++p) {                                     \
                const tf_v b = best[p];                                       \
                best[p] = tf_max(b, x);                                       \
                x = tf_min(b, x);                                             \
            }                                                                 \
        }                                                                     \
        int32_t g[TF_MAX_K + 1];                                              \
        const int found = tf_answer(best, head, K, low, at, g);               \
        if (found >= 0) return found;                                         \
        /* the scan: each of the k keys occurs once (no tie), so the one lane \
         * that meets it holds its position */                                \
        tf_v where[TF_MAX_K];                                                 \
        for (int p = 0; p < K - 1; ++p) where[p] = tf_set1(-1);               \
        for (int64_t i = 0; i < n; i += TF_W) {                               \
            const int64_t s = i + TF_W <= n ? i : n - TF_W;                   \
            const tf_v x = tf_drop_below(tf_keys(t1_vec_##SUF(row, s), !L), (int)(i - s)); \
            const tf_v ps = tf_add(tf_iota(), tf_set1((int32_t)s));           \
            for (int p = 0; p < K - 1; ++p)                                   \
                if (at[p] < 0) where[p] = tf_take_equal(where[p], x, g[p], ps); \
        }                                                                     \
        for (int p = 0; p < K - 1; ++p)                                       \
            if (at[p] < 0) at[p] = tf_hmax(where[p]);                         \
        return 1;                                                             \
    }                                                                         \
    static int tf_row_##SUF##_##L(const char *row, int64_t n, int k, int64_t *at) \
    {                                                                         \
        return k == 2 ? tf_row_k_##SUF##_##L(row, n, 3, at)                   \
                      : tf_row_k_##SUF##_##L(row, n, 4, at);                  \
    }
TF_DEFINE_ROW(f32, 1)
TF_DEFINE_ROW(f32, 0)
TF_DEFINE_ROW(bf16, 1)
TF_DEFINE_ROW(bf16, 0)
#undef TF_DEFINE_ROW

/* The k best of a contiguous row (as tf_row_<SUF>_<L>). */
static int tf_row(int dtype, const char *row, int64_t n, int k, int largest, int64_t *at)
{
    if (dtype == KWK_BFLOAT16)
        return largest ? tf_row_bf16_1(row, n, k, at) : tf_row_bf16_0(row, n, k, at);
    return largest ? tf_row_f32_1(row, n, k, at) : tf_row_f32_0(row, n, k, at);
}
#endif /* __AVX2__ */

/* Where it was measured faster than the kernels before it (sr_topk's
 * columns to 256, tt_row's threshold from there; Intel Xeon, 2.6 GHz,
 * native, one thread, 2^19-element inputs of randn rows, ns a row, min of
 * 5 interleaved runs, "cold": 8 inputs cycled, "hot": one):
 *   AVX-512, float32, k = 2, cold: x96 34.0 -> 31.4, x128 41.3 -> 36.3,
 *     x256 74.9 -> 54.7, x1024 236 -> 164, x4096 824 -> 598; x64 alike
 *     (hot 22.2 -> 26.5 in a single run), x8192 alike (hot 988 -> 1038).
 *     Hot: x128 37.4 -> 32.5, x256 72.8 -> 47.4, x1024 210 -> 139.
 *   k = 3, cold: x160 62.2 -> 55.9, x256 90.0 -> 75.7, x1024 260 -> 208,
 *     x4096 998 -> 742; x128 alike; hot x64 27.9 -> 37.6, x8192 1083 -> 1333.
 *   k = 4 lost everywhere (hot x256 78 -> 89): TF_MAX_K is 3.
 *   bfloat16 (bf16-rounded randn: rows with ties), k = 2, cold: x128 58.3
 *     -> 43.4, x256 80.1 -> 64.0, x1024 229 -> 191, x2048 375 -> 338; x4096
 *     alike (hot 564 -> 652); k = 3 lost or tied (hot x256 101 -> 105).
 *   AVX2, float32, k = 2, cold: x96 36.9 -> 30.8, x256 96.4 -> 64.3, x2048
 *     580 -> 416; hot x4096 609 -> 782.  k = 3, cold: x256 118 -> 86, x2048
 *     640 -> 558; x192 and below alike or slower (hot x128 47 -> 50).
 *   AVX2, bfloat16, k = 2, cold: x384 152 -> 140, x512 189 -> 169, but
 *     x1024 324 -> 352 (hot 308 -> 256), x256 alike. */
#if defined(__AVX512F__)
enum { TF_MIN_LEN_K2 = 96, TF_MIN_LEN_K3 = 160, TF_MAX_LEN = 4096,
       TF_MIN_LEN_BF16 = 128, TF_MAX_LEN_BF16 = 2048 };
#else
enum { TF_MIN_LEN_K2 = 96, TF_MIN_LEN_K3 = 256, TF_MAX_LEN = 2048,
       TF_MIN_LEN_BF16 = 384, TF_MAX_LEN_BF16 = 512 };
#endif

/* Whether topk_few_rows takes the call: k = 2..TF_MAX_K of contiguous
 * float32 rows (bfloat16: k = 2) in the lengths above, on the SIMD
 * targets; in torch order sorted, or in partial_sort's branch (k * 64 <=
 * len), which sorts whatever `sorted` says: nth_element's leaves a
 * sorted=False row in introselect order.  (Every lane sees k + 1 elements:
 * 96 >= 3 * 16, 160 >= 4 * 16.) */
static inline int tf_applies(int dtype, int64_t len, int64_t k, int64_t src_sl, int sorted,
                             int order)
{
#if defined(__AVX2__)
    if (k < 2 || k > TF_MAX_K || src_sl != 1) return 0;
    if (order == KWK_ORDER_TORCH && !sorted && k * 64 > len) return 0;
    if (dtype == KWK_BFLOAT16) return k == 2 && len >= TF_MIN_LEN_BF16 && len <= TF_MAX_LEN_BF16;
    return dtype == KWK_FLOAT32 && len >= (k == 2 ? TF_MIN_LEN_K2 : TF_MIN_LEN_K3) &&
           len <= TF_MAX_LEN;
#else
    (void)dtype, (void)len, (void)k, (void)src_sl, (void)sorted, (void)order;
    return 0;
#endif
}

#endif
