/*
 * median_pool_kernels.h - the median filter over 2-d planes (median_pool2d),
 * forward and backward, in one pass over each plane.
 *
 * Semantics are those of the plain-torch reference (pad, unfold, median):
 * each output is the lower median of its window, the element at stable rank
 * (n-1)//2 when the window's elements are ordered by (value, position in the
 * window, row-major); a window holding a NaN gives its first NaN.  The index
 * written is that position in the window (what torch.median(dim) returns on
 * the unfolded windows).  Padded elements are read through per-axis maps
 * (padded coordinate -> input coordinate, -1 for a zero of zero padding).
 *
 * The backward adds the gradients in the order the reference's backward
 * does, so the sums round identically: first into the padded plane, window
 * offset by window offset (col2im's order), then from the padded plane into
 * the input in the padded plane's row-major order (the pad's backward).
 * At stride 1 each padded row gathers its windows' gradients (offsets in
 * ascending order, the same sums) instead of scattering them.
 */
#include <stdlib.h>
#include <string.h>
#include "keys.h"

/* A median-of-9 selection network (19 compare-exchanges, Paeth's) over
 * MP_LANES windows at once, on order keys (the AVX2 path below runs the same
 * network on float vectors); wire 4 ends holding the median.  Equal values are
 * interchangeable here: which of them is the stable-rank element is found
 * afterwards by counting.  Checked on all 2^9 zero-one windows by
 * tests/test_nn.py (by the zero-one principle it then selects the median
 * of any totally ordered input). */
#define MP_LANES 16 /* outputs per block of the portable 3x3 path: 64 bytes of
                       float32, whole vectors for every common width */
#define MP_CE(T, s, i, j)                                                     \
    for (int l_ = 0; l_ < MP_LANES; l_++) {                                    \
        T a_ = s[i][l_], b_ = s[j][l_];                                         \
        s[i][l_] = b_ < a_ ? b_ : a_;                                           \
        s[j][l_] = b_ < a_ ? a_ : b_;                                           \
    }
#define MP_MEDIAN9(T, s)                                                      \
    MP_CE(T, s, 1, 2) MP_CE(T, s, 4, 5) MP_CE(T, s, 7, 8)                     \
    MP_CE(T, s, 0, 1) MP_CE(T, s, 3, 4) MP_CE(T, s, 6, 7)                     \
    MP_CE(T, s, 1, 2) MP_CE(T, s, 4, 5) MP_CE(T, s, 7, 8)                     \
    MP_CE(T, s, 0, 3) MP_CE(T, s, 5, 8) MP_CE(T, s, 4, 7)                     \
    MP_CE(T, s, 3, 6) MP_CE(T, s, 1, 4) MP_CE(T, s, 2, 5)                     \
    MP_CE(T, s, 4, 7) MP_CE(T, s, 4, 2) MP_CE(T, s, 6, 4)                     \
    MP_CE(T, s, 4, 2)

/* ---- windows other than 3x3: a generated median selection network ----
 * For a window of n <= MP_NET_MAX elements, the comparators of Batcher's
 * odd-even merge sort over the next power of two N >= n, keeping those
 * that matter to output wire (n - 1) / 2:
 * - wires n..N-1 stand for +inf: a comparator touching one leaves both
 *   wires as they were (i < j, so the +inf is already on the max side), so
 *   it is dropped and the rest sorts n wires;
 * - walking backwards from the median wire, a comparator neither of whose
 *   outputs is needed later is dropped.
 * The result selects the median of any totally ordered input (zero-one
 * principle: native/tests/test_median_net.c checks every zero-one window up
 * to n = 25 and random ones beyond).  5x5: Batcher's 191 comparators on 32
 * wires, 140 on 25, 113 for the median (the best known network has 99).
 * Run lane-parallel like the 3x3 network, then the same stable-rank count
 * and first-NaN rule. */
enum { MP_NET_MAX = 128, MP_NET_OPS_MAX = 1471 /* Batcher's count for 128 wires */ };

typedef struct {
    int n, rank, count;
    uint8_t i[MP_NET_OPS_MAX], j[MP_NET_OPS_MAX]; /* comparator q: min to i, max to j */
} mp_net;

/* The network for n elements (1 <= n <= MP_NET_MAX).  A kept comparator
 * may have one output that nothing reads later (the liveness walk keeps it
 * for the other); it is still computed, a branch-free step, and overwriting
 * that dead wire is harmless. */
static void mp_median_network(int n, mp_net *net)
{
    int wires = 1;
    while (wires < n) wires <<= 1;
    uint8_t ci[MP_NET_OPS_MAX], cj[MP_NET_OPS_MAX];
    int c = 0;
    for (int p = 1; p < wires; p <<= 1)
        for (int k = p; k >= 1; k >>= 1)
            for (int j = k % p; j + k < wires; j += 2 * k)
                for (int i = 0; i < k && i + j + k < wires; i++)
                    if ((i + j) / (2 * p) == (i + j + k) / (2 * p) && i + j + k < n) {
                        ci[c] = (uint8_t)(i + j);
                        cj[c] = (uint8_t)(i + j + k);
                        c++;
                    }
    uint8_t live[MP_NET_MAX] = {0}, keep[MP_NET_OPS_MAX];
    live[(n - 1) / 2] = 1;
    for (int q = c - 1; q >= 0; q--) {
        keep[q] = live[ci[q]] | live[cj[q]];
        if (keep[q]) live[ci[q]] = live[cj[q]] = 1;
    }
    net->n = n;
    net->rank = (n - 1) / 2;
    net->count = 0;
    for (int q = 0; q < c; q++)
        if (keep[q]) {
            net->i[net->count] = ci[q];
            net->j[net->count] = cj[q];
            net->count++;
        }
}

/* mp_median_network(25, .) written out (5x5 windows, the common case past
 * 3x3): with the wires known at compile time the 25 vectors live in
 * registers, about twice as fast as the generic loop through memory.
 * native/tests/test_median_net.c checks it is that network, op for op. */
#define MP_NET25(CE) \
    CE(0,1) CE(2,3) CE(4,5) CE(6,7) CE(8,9) CE(10,11) CE(12,13) CE(14,15) CE(16,17) \
    CE(18,19) CE(20,21) CE(22,23) CE(0,2) CE(1,3) CE(4,6) CE(5,7) CE(8,10) CE(9,11) \
    CE(12,14) CE(13,15) CE(16,18) CE(17,19) CE(20,22) CE(21,23) CE(1,2) CE(5,6) CE(9,10) \
    CE(13,14) CE(17,18) CE(21,22) CE(0,4) CE(1,5) CE(2,6) CE(3,7) CE(8,12) CE(9,13) \
    CE(10,14) CE(11,15) CE(16,20) CE(17,21) CE(18,22) CE(19,23) CE(2,4) CE(3,5) CE(10,12) \
    CE(11,13) CE(18,20) CE(19,21) CE(1,2) CE(3,4) CE(5,6) CE(9,10) CE(11,12) CE(13,14) \
    CE(17,18) CE(19,20) CE(21,22) CE(0,8) CE(1,9) CE(2,10) CE(3,11) CE(4,12) CE(5,13) \
    CE(6,14) CE(7,15) CE(16,24) CE(4,8) CE(5,9) CE(6,10) CE(7,11) CE(20,24) CE(2,4) \
    CE(3,5) CE(6,8) CE(7,9) CE(10,12) CE(11,13) CE(18,20) CE(19,21) CE(22,24) CE(1,2) \
    CE(3,4) CE(5,6) CE(7,8) CE(9,10) CE(11,12) CE(13,14) CE(17,18) CE(19,20) CE(21,22) \
    CE(23,24) CE(0,16) CE(1,17) CE(2,18) CE(3,19) CE(4,20) CE(5,21) CE(6,22) CE(7,23) \
    CE(8,24) CE(8,16) CE(9,17) CE(10,18) CE(11,19) CE(12,20) CE(13,21) CE(6,10) CE(7,11) \
    CE(12,16) CE(13,17) CE(10,12) CE(11,13) CE(11,12)

#if defined(__AVX2__)
#include <immintrin.h>

/* MP_MEDIAN9's steps on vectors, for the AVX2 3x3 rows (mp_row3x3_*_avx2,
 * in MP_ROW_NET_AVX2 below). */
#define MP_VCE(MIN, MAX, a, b)                                                \
    do {                                                                      \
        __typeof__(a) lo_ = MIN(a, b);                                        \
        b = MAX(a, b);                                                        \
        a = lo_;                                                              \
    } while (0)
#define MP_VMEDIAN9(MIN, MAX, s)                                              \
    MP_VCE(MIN, MAX, s[1], s[2]); MP_VCE(MIN, MAX, s[4], s[5]);               \
    MP_VCE(MIN, MAX, s[7], s[8]); MP_VCE(MIN, MAX, s[0], s[1]);               \
    MP_VCE(MIN, MAX, s[3], s[4]); MP_VCE(MIN, MAX, s[6], s[7]);               \
    MP_VCE(MIN, MAX, s[1], s[2]); MP_VCE(MIN, MAX, s[4], s[5]);               \
    MP_VCE(MIN, MAX, s[7], s[8]); MP_VCE(MIN, MAX, s[0], s[3]);               \
    MP_VCE(MIN, MAX, s[5], s[8]); MP_VCE(MIN, MAX, s[4], s[7]);               \
    MP_VCE(MIN, MAX, s[3], s[6]); MP_VCE(MIN, MAX, s[1], s[4]);               \
    MP_VCE(MIN, MAX, s[2], s[5]); MP_VCE(MIN, MAX, s[4], s[7]);               \
    MP_VCE(MIN, MAX, s[4], s[2]); MP_VCE(MIN, MAX, s[6], s[4]);               \
    MP_VCE(MIN, MAX, s[4], s[2])

#define MP_ROW3X3_VECTOR(S, r0, r1, r2, ow, out, index)                       \
    mp_row3x3_##S##_avx2(r0, r1, r2, ow, out, index)

/* Any other window of at most MP_NET_MAX elements at stride 1: the
 * generated network (mp_median_network) over vectors of outputs, then the
 * 3x3 row's count, first-NaN rule and re-read.  `off[k]`: element k's
 * offset from the window's top-left corner in the padded plane. */
#define MP_ROW_NET_AVX2(S, T, V, L, LOADU, STOREU, MIN, MAX, CMP, CASTI, BLENDV, \
                        SET1I, ADDI, SUBI, CMPEQI, CMPGTI, STORE_INDEX, ZEROV) \
/* One vector of outputs from the window's elements a[0..n) and the        \
 * network's median `med`: the position is the (rank - #smaller)-th of     \
 * the elements equal to med, in window order (exactly one k has eq_k and  \
 * seen_k == need, so the hits are or-ed in); the value is med itself,     \
 * whose bits are the element's, unless med is a zero (-0.0 == +0.0: the   \
 * element's sign) or the window holds a NaN (its first NaN wins, and min  \
 * and max made med meaningless): then, for the whole vector, the first    \
 * NaN's position and the value re-read by position. */                    \
static inline __attribute__((always_inline)) void                              \
mp_net_finish_##S##_avx2(const V *a, const int n, const int rank, const V med, \
                         T *out, int64_t *index)                               \
{                                                                              \
    __m256i need = SET1I(rank), seen = _mm256_setzero_si256();                 \
    __m256i pick = _mm256_setzero_si256(), nan = _mm256_setzero_si256();       \
    for (int k = 0; k < n; k++) { /* a true comparison is -1 */              \
        need = ADDI(need, CASTI(CMP(a[k], med, _CMP_LT_OQ)));                 \
        nan = _mm256_or_si256(nan, CASTI(CMP(a[k], a[k], _CMP_UNORD_Q)));      \
    }                                                                          \
    for (int k = 0; k < n; k++) {                                              \
        const __m256i eq = CASTI(CMP(a[k], med, _CMP_EQ_OQ));                  \
        pick = _mm256_or_si256(pick, _mm256_and_si256(_mm256_and_si256(eq, CMPEQI(seen, need)), \
                                                      SET1I(k)));              \
        seen = SUBI(seen, eq);                                                 \
    }                                                                          \
    V v = med;                                                                 \
    const __m256i redo = _mm256_or_si256(nan, CASTI(CMP(med, ZEROV(), _CMP_EQ_OQ))); \
    if (!_mm256_testz_si256(redo, redo)) {                                     \
        const __m256i none = SET1I(n);                                         \
        __m256i first_nan = none;                                              \
        for (int k = n - 1; k >= 0; k--)                                       \
            first_nan = _mm256_blendv_epi8(first_nan, SET1I(k),               \
                                           CASTI(CMP(a[k], a[k], _CMP_UNORD_Q))); \
        pick = _mm256_blendv_epi8(pick, first_nan, CMPGTI(none, first_nan));   \
        v = a[0];                                                              \
        for (int k = 1; k < n; k++)                                            \
            v = BLENDV(v, a[k], CMPEQI(pick, SET1I(k)));                       \
    }                                                                          \
    STOREU(out, v);                                                            \
    STORE_INDEX(index, pick);                                                  \
}                                                                              \
                                                                               \
/* The 3x3 row at stride 1, L outputs a step: the network on values        \
 * (min/max may swap the signs of equal zeros inside it; only comparisons  \
 * read its result, and a zero is re-read from the window), then the      \
 * count as above. */                                                      \
static int64_t mp_row3x3_##S##_avx2(const T *r0, const T *r1, const T *r2,     \
                                    int64_t ow, T *out, int64_t *index)        \
{                                                                              \
    const T *rows[3] = {r0, r1, r2};                                           \
    int64_t x = 0;                                                             \
    for (; x + L <= ow; x += L) {                                              \
        V a[9], s[9];                                                          \
        for (int k = 0; k < 9; k++) s[k] = a[k] = LOADU(rows[k / 3] + x + k % 3); \
        MP_VMEDIAN9(MIN, MAX, s);                                              \
        mp_net_finish_##S##_avx2(a, 9, 4, s[4], out + x, index + x);           \
    }                                                                          \
    return x;                                                                  \
}                                                                              \
                                                                               \
/* U vectors of outputs from x on, the network read from net: U            \
 * independent chains through each comparator (its steps go through       \
 * memory, s[], and one chain would wait on store-to-load forwarding). */  \
static inline __attribute__((always_inline)) void                              \
mp_net_block_##S##_avx2(const T *top, const int64_t *off, int64_t x,           \
                        const mp_net *net, T *out, int64_t *index, const int U) \
{                                                                              \
    const int n = net->n;                                                      \
    V a[MP_NET_U][MP_NET_MAX], s[MP_NET_U][MP_NET_MAX];                        \
    /* (s[u][rank], rank < n, is loaded below; GCC cannot tell it is set) */ \
    for (int u = 0; u < U; u++) s[u][net->rank] = ZEROV();                     \
    for (int k = 0; k < n; k++)                                                \
        for (int u = 0; u < U; u++) s[u][k] = a[u][k] = LOADU(top + off[k] + x + u * L); \
    for (int q = 0; q < net->count; q++) {                                     \
        const int i = net->i[q], j = net->j[q];                                \
        for (int u = 0; u < U; u++) {                                          \
            const V lo = MIN(s[u][i], s[u][j]);                                \
            s[u][j] = MAX(s[u][i], s[u][j]);                                   \
            s[u][i] = lo;                                                      \
        }                                                                      \
    }                                                                          \
    for (int u = 0; u < U; u++)                                                \
        mp_net_finish_##S##_avx2(a[u], n, net->rank, s[u][net->rank],         \
                                 out + x + u * L, index + x + u * L);          \
}                                                                              \
                                                                               \
/* The same for 25 elements, the network written out (MP_NET25). */         \
static inline __attribute__((always_inline)) void                              \
mp_net25_block_##S##_avx2(const T *top, const int64_t *off, int64_t x, T *out,   \
                          int64_t *index)                                      \
{                                                                              \
    V a[25], s[25];                                                            \
    for (int k = 0; k < 25; k++) s[k] = a[k] = LOADU(top + off[k] + x);        \
    MP_NET25(MP_NET_CE_AT)                                                     \
    mp_net_finish_##S##_avx2(a, 25, 12, s[12], out + x, index + x);           \
}                                                                              \
                                                                               \
static int64_t mp_row_net25_##S##_avx2(const T *top, const int64_t *off, int64_t ow, \
                                       T *out, int64_t *index)                 \
{                                                                              \
    int64_t x = 0;                                                             \
    for (; x + L <= ow; x += L) mp_net25_block_##S##_avx2(top, off, x, out, index); \
    return x;                                                                  \
}                                                                              \
                                                                               \
static int64_t mp_row_net_##S##_avx2(const T *top, const int64_t *off, int64_t ow, \
                                     const mp_net *net, T *out, int64_t *index) \
{                                                                              \
    int64_t x = 0;                                                             \
    if (net->n == 25) return mp_row_net25_##S##_avx2(top, off, ow, out, index); \
    for (; x + MP_NET_U * L <= ow; x += MP_NET_U * L)                          \
        mp_net_block_##S##_avx2(top, off, x, net, out, index, MP_NET_U);       \
    for (; x + L <= ow; x += L)                                                \
        mp_net_block_##S##_avx2(top, off, x, net, out, index, 1);              \
    return x;                                                                  \
}

enum { MP_NET_U = 4 };
/* a compare-exchange of s[i] and s[j], float or double vectors */
#define MP_VMIN(a, b) _Generic((a), __m256: _mm256_min_ps, __m256d: _mm256_min_pd)(a, b)
#define MP_VMAX(a, b) _Generic((a), __m256: _mm256_max_ps, __m256d: _mm256_max_pd)(a, b)
#define MP_NET_CE_AT(i, j)                                                     \
    {                                                                          \
        __typeof__(s[0]) lo_ = MP_VMIN(s[i], s[j]);                            \
        s[j] = MP_VMAX(s[i], s[j]);                                            \
        s[i] = lo_;                                                            \
    }
#define MP_STORE_INDEX_32(dst, pick)                                           \
    do {                                                                       \
        _mm256_storeu_si256((__m256i *)(dst), _mm256_cvtepi32_epi64(_mm256_castsi256_si128(pick))); \
        _mm256_storeu_si256((__m256i *)((dst) + 4),                           \
                            _mm256_cvtepi32_epi64(_mm256_extracti128_si256(pick, 1))); \
    } while (0)
#define MP_STORE_INDEX_64(dst, pick) _mm256_storeu_si256((__m256i *)(dst), pick)
#define MP_BLENDV_PS_I(a, b, m) _mm256_blendv_ps(a, b, _mm256_castsi256_ps(m))
#define MP_BLENDV_PD_I(a, b, m) _mm256_blendv_pd(a, b, _mm256_castsi256_pd(m))
MP_ROW_NET_AVX2(f32, float, __m256, 8, _mm256_loadu_ps, _mm256_storeu_ps, _mm256_min_ps,
                _mm256_max_ps, _mm256_cmp_ps, _mm256_castps_si256, MP_BLENDV_PS_I,
                _mm256_set1_epi32, _mm256_add_epi32, _mm256_sub_epi32, _mm256_cmpeq_epi32,
                _mm256_cmpgt_epi32, MP_STORE_INDEX_32, _mm256_setzero_ps)
MP_ROW_NET_AVX2(f64, double, __m256d, 4, _mm256_loadu_pd, _mm256_storeu_pd, _mm256_min_pd,
                _mm256_max_pd, _mm256_cmp_pd, _mm256_castpd_si256, MP_BLENDV_PD_I,
                _mm256_set1_epi64x, _mm256_add_epi64, _mm256_sub_epi64, _mm256_cmpeq_epi64,
                _mm256_cmpgt_epi64, MP_STORE_INDEX_64, _mm256_setzero_pd)
#define MP_ROW_NET_VECTOR(S, top, off, ow, net, out, index)                   \
    mp_row_net_##S##_avx2(top, off, ow, net, out, index)
#else
#define MP_ROW3X3_VECTOR(S, r0, r1, r2, ow, out, index) ((void)(out), (int64_t)0)
#define MP_ROW_NET_VECTOR(S, top, off, ow, net, out, index) ((void)(out), (int64_t)0)
#endif

static void mp_axis_map(int64_t *map, int64_t padded, int64_t before, int64_t n, int mode)
{
    for (int64_t i = 0; i < padded; i++) {
        int64_t s = i - before;
        if (s < 0 || s >= n) {
            if (mode == KWK_PAD_REFLECT) s = s < 0 ? -s : 2 * (n - 1) - s;
            else if (mode == KWK_PAD_REPLICATE) s = s < 0 ? 0 : n - 1;
            else if (mode == KWK_PAD_CIRCULAR) s = (s % n + n) % n;
            else s = -1;
        }
        map[i] = s;
    }
}

#define MP_DEFINE(T, S, UT, KEY)                                                      \
/* The padded plane; columns left..left+w-1 of a padded row are the input \
 * row itself (the column map is the identity there), copied whole: by    \
 * the map, element by element, this copy was a third of a 3x3 forward. */ \
static void mp_fill_padded_##S(const T *plane, T *pad, const int64_t *rows,    \
                               const int64_t *cols, int64_t hp, int64_t wp,    \
                               int64_t w, int64_t left)                        \
{                                                                              \
    for (int64_t ph = 0; ph < hp; ph++) {                                      \
        T *dst = pad + ph * wp;                                                \
        if (rows[ph] < 0) {                                                    \
            for (int64_t pw = 0; pw < wp; pw++) dst[pw] = (T)0;                \
            continue;                                                          \
        }                                                                      \
        const T *src = plane + rows[ph] * w;                                   \
        for (int64_t pw = 0; pw < left; pw++)                                  \
            dst[pw] = cols[pw] < 0 ? (T)0 : src[cols[pw]];                     \
        memcpy(dst + left, src, (size_t)w * sizeof(T));                        \
        for (int64_t pw = left + w; pw < wp; pw++)                             \
            dst[pw] = cols[pw] < 0 ? (T)0 : src[cols[pw]];                     \
    }                                                                          \
}                                                                              \
                                                                               \
/* The portable rows: outputs in blocks of MP_LANES, each step a loop over \
 * the block's lanes, on order keys (keys.h: -0.0 as +0.0, NaN largest),   \
 * whose integer min/max compile without branches: the median key from a  \
 * network, then its stable-rank position (the (rank - #smaller)-th        \
 * element of equal key, in window order), then the first NaN's position  \
 * when the window has one.  The value written is the input element at    \
 * that position, bits and all.  `off[k]`: window element k's offset from  \
 * the window's top-left corner in the padded plane.                       \
 *                                                                         \
 * mp_block_keys: the keys of the block's m windows of n elements (unused  \
 * lanes 0) and each lane's first NaN (n if none). */                      \
static inline void mp_block_keys_##S(const T *top, const int64_t *off, int n,  \
                                     int64_t o0, int64_t sw, int64_t m,        \
                                     UT key[][MP_LANES], int32_t *nan_at)      \
{                                                                              \
    for (int l = 0; l < MP_LANES; l++) nan_at[l] = n;                          \
    for (int k = n - 1; k >= 0; k--) {                                         \
        const T *r = top + off[k] + o0 * sw;                                   \
        for (int64_t l = 0; l < m; l++) {                                      \
            T e = r[l * sw];                                                   \
            UT b;                                                              \
            memcpy(&b, &e, sizeof b);                                          \
            key[k][l] = KEY(b);                                                \
            nan_at[l] = e != e ? k : nan_at[l];                                \
        }                                                                      \
        for (int64_t l = m; l < MP_LANES; l++) key[k][l] = 0; /* unused */     \
    }                                                                          \
}                                                                              \
                                                                               \
/* mp_block_finish: the block's outputs from the median keys med[]. */      \
static inline void mp_block_finish_##S(const T *top, const int64_t *off, int n, \
                                       int rank, const UT key[][MP_LANES],     \
                                       const UT *med, const int32_t *nan_at,   \
                                       int64_t o0, int64_t sw, int64_t m,      \
                                       T *out, int64_t *index)                 \
{                                                                              \
    int32_t need[MP_LANES], seen[MP_LANES], pick[MP_LANES];                    \
    for (int l = 0; l < MP_LANES; l++) {                                       \
        need[l] = rank;                                                        \
        seen[l] = 0;                                                           \
        pick[l] = n;                                                           \
    }                                                                          \
    for (int k = 0; k < n; k++)                                                \
        for (int l = 0; l < MP_LANES; l++) need[l] -= key[k][l] < med[l];      \
    for (int k = 0; k < n; k++)                                                \
        for (int l = 0; l < MP_LANES; l++) {                                   \
            int32_t eq = key[k][l] == med[l];                                  \
            pick[l] = (eq & (seen[l] == need[l]) & (pick[l] == n)) ? k : pick[l]; \
            seen[l] += eq;                                                     \
        }                                                                      \
    for (int64_t l = 0; l < m; l++) {                                          \
        int32_t p = nan_at[l] < n ? nan_at[l] : pick[l];                       \
        out[o0 + l] = top[off[p] + (o0 + l) * sw];                             \
        index[o0 + l] = p;                                                     \
    }                                                                          \
}                                                                              \
                                                                               \
/* A 3x3 row (off: the 9 offsets), with MP_MEDIAN9; the AVX2 target does   \
 * stride-1 rows with intrinsics first. */                                 \
static void mp_row3x3_##S(const T *top, const int64_t *off, int64_t ow,        \
                          int64_t sw, T *out, int64_t *index)                  \
{                                                                              \
    UT key[9][MP_LANES], s[9][MP_LANES];                                       \
    int32_t nan_at[MP_LANES];                                                  \
    int64_t x0 = sw == 1 ? MP_ROW3X3_VECTOR(S, top, top + off[3], top + off[6], \
                                            ow, out, index) : 0;               \
    for (int64_t o0 = x0; o0 < ow; o0 += MP_LANES) {                           \
        int64_t m = ow - o0 < MP_LANES ? ow - o0 : MP_LANES;                   \
        mp_block_keys_##S(top, off, 9, o0, sw, m, key, nan_at);                \
        memcpy(s, key, sizeof key);                                            \
        MP_MEDIAN9(UT, s);                                                     \
        mp_block_finish_##S(top, off, 9, 4, key, s[4], nan_at, o0, sw, m, out, index); \
    }                                                                          \
}                                                                              \
                                                                               \
/* Any window of at most MP_NET_MAX elements, with the generated network   \
 * (mp_median_network); the AVX2 target does stride-1 rows with           \
 * intrinsics first. */                                                    \
static void mp_row_net_##S(const T *top, const int64_t *off, int64_t ow,       \
                           int64_t sw, const mp_net *net, T *out,              \
                           int64_t *index)                                     \
{                                                                              \
    const int n = net->n;                                                      \
    UT key[MP_NET_MAX][MP_LANES], s[MP_NET_MAX][MP_LANES];                     \
    int32_t nan_at[MP_LANES];                                                  \
    int64_t x0 = sw == 1 ? MP_ROW_NET_VECTOR(S, top, off, ow, net, out, index) : 0; \
    for (int64_t o0 = x0; o0 < ow; o0 += MP_LANES) {                           \
        int64_t m = ow - o0 < MP_LANES ? ow - o0 : MP_LANES;                   \
        mp_block_keys_##S(top, off, n, o0, sw, m, key, nan_at);                \
        memcpy(s, key, (size_t)n * sizeof key[0]);                             \
        for (int q = 0; q < net->count; q++) {                                 \
            UT *u = s[net->i[q]], *w = s[net->j[q]];                           \
            for (int l = 0; l < MP_LANES; l++) {                               \
                UT a_ = u[l], b_ = w[l];                                       \
                u[l] = b_ < a_ ? b_ : a_;                                      \
                w[l] = b_ < a_ ? a_ : b_;                                      \
            }                                                                  \
        }                                                                      \
        mp_block_finish_##S(top, off, n, net->rank, key, s[net->rank], nan_at, \
                            o0, sw, m, out, index);                            \
    }                                                                          \
}                                                                              \
                                                                               \
/* Any window: insertion sort of (value, position) pairs, then the rank. */   \
static void mp_row_any_##S(const T *top, int64_t wp, int64_t kh, int64_t kw,   \
                           int64_t ow, int64_t sw, T *vals, int32_t *pos,      \
                           T *out, int64_t *index)                             \
{                                                                              \
    int64_t n = kh * kw, rank = (n - 1) / 2;                                   \
    for (int64_t x = 0; x < ow; x++) {                                         \
        int64_t m = 0, first_nan = -1;                                         \
        for (int64_t ki = 0; ki < kh; ki++)                                    \
            for (int64_t kj = 0; kj < kw; kj++, m++) {                         \
                T e = top[ki * wp + x * sw + kj];                              \
                if (e != e && first_nan < 0) first_nan = m;                    \
                int64_t j = m;                                                 \
                while (j > 0 && e < vals[j - 1]) { /* ties stay behind */      \
                    vals[j] = vals[j - 1];                                     \
                    pos[j] = pos[j - 1];                                       \
                    j--;                                                       \
                }                                                              \
                vals[j] = e;                                                   \
                pos[j] = (int32_t)m;                                           \
            }                                                                  \
        if (first_nan >= 0) {                                                  \
            out[x] = top[(first_nan / kw) * wp + x * sw + first_nan % kw];     \
            index[x] = first_nan;                                              \
        } else {                                                               \
            out[x] = vals[rank];                                               \
            index[x] = pos[rank];                                              \
        }                                                                      \
    }                                                                          \
}                                                                              \
                                                                               \
static int mp_forward_##S(const T *src, int64_t planes, int64_t h, int64_t w,  \
                          const int64_t *g, int mode, T *out, int64_t *index)  \
{                                                                              \
    /* g: kh, kw, sh, sw, top, bottom, left, right, hp, wp, oh, ow */          \
    int64_t kh = g[0], kw = g[1], sh = g[2], sw = g[3];                        \
    int64_t hp = g[8], wp = g[9], oh = g[10], ow = g[11];                      \
    T *pad = malloc((size_t)(hp * wp) * sizeof(T));                            \
    int64_t *maps = malloc((size_t)(hp + wp) * sizeof(int64_t));               \
    T *vals = malloc((size_t)(kh * kw) * sizeof(T));                           \
    int32_t *pos = malloc((size_t)(kh * kw) * sizeof(int32_t));                \
    if (!pad || !maps || !vals || !pos) {                                      \
        free(pad); free(maps); free(vals); free(pos);                          \
        return KWK_E_NOMEM;                                                    \
    }                                                                          \
    mp_axis_map(maps, hp, g[4], h, mode);                                      \
    mp_axis_map(maps + hp, wp, g[6], w, mode);                                 \
    const int is3x3 = kh == 3 && kw == 3, use_net = kh * kw <= MP_NET_MAX && !is3x3; \
    mp_net net = {0};                                                          \
    int64_t off[MP_NET_MAX];                                                   \
    if (use_net) mp_median_network((int)(kh * kw), &net);                      \
    if (use_net || is3x3)                                                      \
        for (int64_t k = 0; k < kh * kw; k++) off[k] = (k / kw) * wp + k % kw; \
    for (int64_t c = 0; c < planes; c++) {                                     \
        mp_fill_padded_##S(src + c * h * w, pad, maps, maps + hp, hp, wp, w, g[6]); \
        T *o = out + c * oh * ow;                                              \
        int64_t *ix = index + c * oh * ow;                                     \
        for (int64_t y = 0; y < oh; y++) {                                     \
            const T *top = pad + y * sh * wp;                                  \
            if (is3x3)                                                         \
                mp_row3x3_##S(top, off, ow, sw, o + y * ow, ix + y * ow);      \
            else if (use_net)                                                  \
                mp_row_net_##S(top, off, ow, sw, &net, o + y * ow, ix + y * ow); \
            else                                                               \
                mp_row_any_##S(top, wp, kh, kw, ow, sw, vals, pos,             \
                               o + y * ow, ix + y * ow);                       \
        }                                                                      \
    }                                                                          \
    free(pad); free(maps); free(vals); free(pos);                              \
    return KWK_OK;                                                             \
}                                                                              \
                                                                               \
/* dst (an input row) += the padded row src through the column map, in the  \
 * padded row's order (the pad's backward); the interior, columns          \
 * left..left+w-1, maps to the row itself and is added as a block: per     \
 * element the adds come in the same order (left border, interior, right   \
 * border), so the sums are the same. */                                   \
static void mp_add_padded_row_##S(T *dst, const T *src, const int64_t *cols,   \
                                  int64_t wp, int64_t w, int64_t left)         \
{                                                                              \
    for (int64_t pw = 0; pw < left; pw++)                                      \
        if (cols[pw] >= 0) dst[cols[pw]] += src[pw];                           \
    for (int64_t c = 0; c < w; c++) dst[c] += src[left + c];                   \
    for (int64_t pw = left + w; pw < wp; pw++)                                 \
        if (cols[pw] >= 0) dst[cols[pw]] += src[pw];                           \
}                                                                              \
                                                                               \
static int mp_backward_##S(const T *grad, const int64_t *index,                \
                           int64_t planes, int64_t h, int64_t w,               \
                           const int64_t *g, int mode, T *grad_input)          \
{                                                                              \
    int64_t kh = g[0], kw = g[1], sh = g[2], sw = g[3];                        \
    int64_t hp = g[8], wp = g[9], oh = g[10], ow = g[11];                      \
    T *pad = malloc((size_t)(hp * wp) * sizeof(T));                            \
    int64_t *maps = malloc((size_t)(hp + wp) * sizeof(int64_t));              \
    if (!pad || !maps) {                                                       \
        free(pad); free(maps);                                                 \
        return KWK_E_NOMEM;                                                    \
    }                                                                          \
    mp_axis_map(maps, hp, g[4], h, mode);                                      \
    mp_axis_map(maps + hp, wp, g[6], w, mode);                                 \
    const int64_t *rows = maps, *cols = maps + hp;                             \
    for (int64_t c = 0; c < planes; c++) {                                     \
        const T *gr = grad + c * oh * ow;                                      \
        const int64_t *ix = index + c * oh * ow;                               \
        T *gi = grad_input + c * h * w;                                        \
        for (int64_t i = 0; i < h * w; i++) gi[i] = (T)0;                      \
        if (sh == 1 && sw == 1) {                                              \
            /* stride 1: one padded row at a time, each element gathering its \
             * windows' gradients in window-offset order (col2im's); adding  \
             * the zeros col2im adds too changes nothing */                   \
            for (int64_t ph = 0; ph < hp; ph++) {                              \
                T *acc = pad;                                                  \
                for (int64_t pw = 0; pw < wp; pw++) acc[pw] = (T)0;            \
                for (int64_t ki = 0; ki < kh; ki++) {                          \
                    int64_t y = ph - ki;                                       \
                    if (y < 0 || y >= oh) continue;                            \
                    const int64_t *ixr = ix + y * ow;                          \
                    const T *grr = gr + y * ow;                                \
                    for (int64_t kj = 0; kj < kw; kj++) {                      \
                        const int64_t off = ki * kw + kj;                      \
                        T *dst = acc + kj; /* output x feeds padded x + kj */  \
                        for (int64_t x = 0; x < ow; x++)                       \
                            dst[x] += ixr[x] == off ? grr[x] : (T)0;           \
                    }                                                          \
                }                                                              \
                if (rows[ph] < 0) continue;                                    \
                mp_add_padded_row_##S(gi + rows[ph] * w, acc, cols, wp, w, g[6]); \
            }                                                                  \
            continue;                                                          \
        }                                                                      \
        for (int64_t i = 0; i < hp * wp; i++) pad[i] = (T)0;                   \
        for (int64_t off = 0; off < kh * kw; off++) {                          \
            T *base = pad + (off / kw) * wp + off % kw;                        \
            for (int64_t y = 0; y < oh; y++)                                   \
                for (int64_t x = 0; x < ow; x++)                               \
                    if (ix[y * ow + x] == off)                                 \
                        base[y * sh * wp + x * sw] += gr[y * ow + x];          \
        }                                                                      \
        for (int64_t ph = 0; ph < hp; ph++) {                                  \
            if (rows[ph] < 0) continue;                                        \
            mp_add_padded_row_##S(gi + rows[ph] * w, pad + ph * wp, cols, wp, w, g[6]); \
        }                                                                      \
    }                                                                          \
    free(pad); free(maps);                                                     \
    return KWK_OK;                                                             \
}

MP_DEFINE(float, f32, uint32_t, kwk_key_f32)
MP_DEFINE(double, f64, uint64_t, kwk_key_f64)

static int impl_median_pool2d(int dtype, const void *src, int64_t planes, int64_t h,
                              int64_t w, const int64_t *geometry, int mode, void *out,
                              int64_t *index)
{
    if (dtype == KWK_FLOAT32)
        return mp_forward_f32(src, planes, h, w, geometry, mode, out, index);
    return mp_forward_f64(src, planes, h, w, geometry, mode, out, index);
}

static int impl_median_pool2d_backward(int dtype, const void *grad, const int64_t *index,
                                       int64_t planes, int64_t h, int64_t w,
                                       const int64_t *geometry, int mode, void *grad_input)
{
    if (dtype == KWK_FLOAT32)
        return mp_backward_f32(grad, index, planes, h, w, geometry, mode, grad_input);
    return mp_backward_f64(grad, index, planes, h, w, geometry, mode, grad_input);
}
