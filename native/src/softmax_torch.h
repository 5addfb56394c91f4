/*
 * softmax_torch.h - torch.softmax(x, -1) of contiguous float32 rows, bit for
 * bit as torch 2.13's CPU kernel computes it (ATen's _vec_softmax_lastdim),
 * for the MoE router layer (topk_layers: its weights are the softmax's).
 *
 * torch's kernel works on vectors of `lanes` floats (16 where ATen runs its
 * AVX-512 kernels, 8 for AVX2; the caller passes torch's), row by row:
 *   m = the row's maximum (exact in any order; the sign of a zero maximum
 *       does not change x - m's exponential);
 *   e_i = exp(x_i - m), exp being SLEEF's single-precision expf (1.0-ULP
 *       variant, with fused multiply-adds), which torch's vector exp calls;
 *   s = the sum of the e_i: rows shorter than `lanes` add them in order
 *       (ATen's vec_reduce_all for a partial vector); longer rows keep
 *       `lanes` partial sums (lane l takes e_l, e_{l+lanes}, ..., and the
 *       row's tail adds into its first lanes only), then fold them in halves
 *       (lane l + lane l + lanes/2, ..., down to lane 0);
 *   out_i = e_i * (1 / s).
 * exp below makes the same operations as that expf (same constants, same
 * order, same fused steps), so its results are the same floats; the tests
 * compare with torch.softmax (every 61st negative float as x_i - m, the
 * softmax domain; all 1.1e9 of them matched once) and the caller checks a
 * probe against torch once per process before it uses this kernel.
 *
 * Rows holding a NaN or an infinite maximum are not computed (torch's NaN
 * payloads there are its own): the call returns KWK_DEFER and the caller
 * runs torch.
 */
#ifndef KWK_SOFTMAX_TORCH_H
#define KWK_SOFTMAX_TORCH_H

#include <math.h>
#include <stdint.h>
#include <string.h>
#include "kwker.h"
#include "torch_sum.h"

#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

/* the expf's constants: 1/ln 2, ln 2 in two parts, and its polynomial */
#define SX_R_LN2 1.442695040888963407359924681001892137f
#define SX_L2U 0.693145751953125f
#define SX_L2L 1.428606765330187045e-06f
#define SX_C5 0.000198527617612853646278381f
#define SX_C4 0.00139304355252534151077271f
#define SX_C3 0.00833336077630519866943359f
#define SX_C2 0.0416664853692054748535156f
#define SX_C1 0.166666671633720397949219f
#define SX_C0 0.5f

static inline float sx_pow2i(int q) /* 2^q for -126 <= q <= 127 */
{
    const uint32_t b = (uint32_t)(q + 127) << 23;
    float f;
    memcpy(&f, &b, 4);
    return f;
}

/* exp(d): q = round(d / ln 2), s = d - q ln 2 (two fused steps), a degree-7
 * polynomial in s, times 2^q as two halves (so results near the subnormal
 * range round as the vector code's two multiplies do); 0 below -104,
 * infinity above 100.  d is never NaN here. */
static inline float sx_expf(float d)
{
    if (d < -104.0f) return 0.0f; /* (also keeps the conversion below in range) */
    if (100.0f < d) return INFINITY;
    const float qf = nearbyintf(d * SX_R_LN2);
    const int q = (int)qf;
    float s = fmaf(qf, -SX_L2U, d);
    s = fmaf(qf, -SX_L2L, s);
    float u = SX_C5;
    u = fmaf(u, s, SX_C4);
    u = fmaf(u, s, SX_C3);
    u = fmaf(u, s, SX_C2);
    u = fmaf(u, s, SX_C1);
    u = fmaf(u, s, SX_C0);
    u = 1.0f + fmaf(s * s, u, s);
    const int h = q >> 1;
    return u * sx_pow2i(h) * sx_pow2i(q - h);
}

/* sx_expf's steps on one vector of the intrinsics family P (_mm256_ or
 * _mm512_; V the float vector, VI the integer one, CAST its cast to V),
 * before the ends of the range: u = exp(d) for -104 <= d <= 100. */
#define SX_EXPF_VEC(P, V, VI, CAST, d, u)                                     \
    do {                                                                      \
        const VI q_ = P##cvtps_epi32(P##mul_ps(d, P##set1_ps(SX_R_LN2)));     \
        const V qf_ = P##cvtepi32_ps(q_);                                     \
        V s_ = P##fmadd_ps(qf_, P##set1_ps(-SX_L2U), d);                      \
        s_ = P##fmadd_ps(qf_, P##set1_ps(-SX_L2L), s_);                       \
        u = P##set1_ps(SX_C5);                                                \
        u = P##fmadd_ps(u, s_, P##set1_ps(SX_C4));                            \
        u = P##fmadd_ps(u, s_, P##set1_ps(SX_C3));                            \
        u = P##fmadd_ps(u, s_, P##set1_ps(SX_C2));                            \
        u = P##fmadd_ps(u, s_, P##set1_ps(SX_C1));                            \
        u = P##fmadd_ps(u, s_, P##set1_ps(SX_C0));                            \
        u = P##add_ps(P##set1_ps(1.0f), P##fmadd_ps(P##mul_ps(s_, s_), u, s_)); \
        const VI h_ = P##srai_epi32(q_, 1);                                   \
        const VI bias_ = P##set1_epi32(127);                                  \
        const VI q2_ = P##sub_epi32(q_, h_);                                  \
        u = P##mul_ps(u, CAST(P##slli_epi32(P##add_epi32(h_, bias_), 23)));  \
        u = P##mul_ps(u, CAST(P##slli_epi32(P##add_epi32(q2_, bias_), 23))); \
    } while (0)

#if defined(__AVX512F__)
static inline __m512 sx_expf16(__m512 d)
{
    __m512 u;
    SX_EXPF_VEC(_mm512_, __m512, __m512i, _mm512_castsi512_ps, d, u);
    u = _mm512_maskz_mov_ps(~_mm512_cmp_ps_mask(d, _mm512_set1_ps(-104.0f), _CMP_LT_OQ), u);
    return _mm512_mask_mov_ps(u, _mm512_cmp_ps_mask(_mm512_set1_ps(100.0f), d, _CMP_LT_OQ),
                              _mm512_set1_ps(INFINITY));
}
#endif

#if defined(__AVX2__)
/* the same on eight lanes (AVX2 with FMA) */
static inline __m256 sx_expf8(__m256 d)
{
    __m256 u;
    SX_EXPF_VEC(_mm256_, __m256, __m256i, _mm256_castsi256_ps, d, u);
    u = _mm256_andnot_ps(_mm256_cmp_ps(d, _mm256_set1_ps(-104.0f), _CMP_LT_OQ), u);
    return _mm256_blendv_ps(u, _mm256_set1_ps(INFINITY),
                            _mm256_cmp_ps(_mm256_set1_ps(100.0f), d, _CMP_LT_OQ));
}
#endif
#undef SX_EXPF_VEC

/* e[i] = exp(x[i] - m) for i < n (m finite) */
static void sx_exp_row(const float *x, int64_t n, float m, float *e)
{
    int64_t i = 0;
#if defined(__AVX512F__)
    const __m512 mv = _mm512_set1_ps(m);
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(e + i, sx_expf16(_mm512_sub_ps(_mm512_loadu_ps(x + i), mv)));
    if (i < n) {
        const __mmask16 k = (__mmask16)_bzhi_u32(0xFFFFu, (unsigned)(n - i));
        const __m512 d = _mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), mv);
        _mm512_mask_storeu_ps(e + i, k, sx_expf16(d));
    }
#endif
    for (; i < n; ++i) e[i] = sx_expf(x[i] - m);
}

/* The row's maximum, or NaN when it holds a NaN. */
static float sx_row_max(const float *x, int64_t n)
{
    int64_t i = 0;
    float m = -INFINITY;
    int nan = 0;
#if defined(__AVX512F__)
    __m512 mv = _mm512_set1_ps(-INFINITY);
    __mmask16 unordered = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 v = _mm512_loadu_ps(x + i);
        unordered |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
        mv = _mm512_max_ps(mv, v);
    }
    m = _mm512_reduce_max_ps(mv);
    nan = unordered != 0;
#elif defined(__AVX2__)
    __m256 mv = _mm256_set1_ps(-INFINITY), unordered = _mm256_setzero_ps();
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        unordered = _mm256_or_ps(unordered, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        mv = _mm256_max_ps(mv, v);
    }
    float lanes[8];
    _mm256_storeu_ps(lanes, mv);
    for (int l = 0; l < 8; ++l) m = lanes[l] > m ? lanes[l] : m;
    nan = _mm256_movemask_ps(unordered) != 0;
#endif
    for (; i < n; ++i) {
        nan |= x[i] != x[i];
        m = x[i] > m ? x[i] : m;
    }
    return nan ? NAN : m;
}

/* ATen's sum of e[0..n) for vectors of L floats (8 or 16): rows shorter
 * than L in order; longer ones in L partial sums (the tail into the first
 * lanes), folded in halves: lane l + lane l + L/2, ..., down to lane 0
 * (ATen's shuffles; each fold adds the same pairs). */
/* Not inlined: GCC 12.2 at -O3 miscompiled the inlined copies (with the
 * 8- and 16-lane callers in one unit, rows of 9..15 summed only their
 * first 7 or 8 elements; reproduced in a file of its own, right at -O2,
 * nothing from UBSan).  The tests take every row length to 40. */
static __attribute__((noinline)) float sx_sum_in_order(const float *e, int64_t n)
{
    float s = e[0];
    for (int64_t i = 1; i < n; ++i) s += e[i];
    return s;
}

#if defined(__AVX2__)
static inline float sx_fold8(__m256 v)
{
    v = _mm256_add_ps(v, _mm256_permute2f128_ps(v, v, 0x1));
    v = _mm256_add_ps(v, _mm256_shuffle_ps(v, v, 0x4E));
    v = _mm256_add_ps(v, _mm256_shuffle_ps(v, v, 0xB1));
    return _mm256_cvtss_f32(v);
}

/* e[d..n) (fewer than 8) added into the first lanes of acc */
static inline __m256 sx_add_tail8(__m256 acc, const float *e, int64_t r)
{
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i in = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)r), lane);
    const __m256 tail = _mm256_maskload_ps(e, in);
    return _mm256_blendv_ps(acc, _mm256_add_ps(acc, tail), _mm256_castsi256_ps(in));
}

static float sx_row_sum8(const float *e, int64_t n)
{
    if (n < 8) return sx_sum_in_order(e, n);
    __m256 acc = _mm256_loadu_ps(e);
    int64_t d = 8;
    for (; d + 8 <= n; d += 8) acc = _mm256_add_ps(acc, _mm256_loadu_ps(e + d));
    if (d < n) acc = sx_add_tail8(acc, e + d, n - d);
    return sx_fold8(acc);
}

static float sx_row_sum16(const float *e, int64_t n)
{
    if (n < 16) return sx_sum_in_order(e, n);
#if defined(__AVX512F__)
    __m512 acc = _mm512_loadu_ps(e);
    int64_t d = 16;
    for (; d + 16 <= n; d += 16) acc = _mm512_add_ps(acc, _mm512_loadu_ps(e + d));
    if (d < n) {
        const __mmask16 k = (__mmask16)_bzhi_u32(0xFFFFu, (unsigned)(n - d));
        acc = _mm512_mask_add_ps(acc, k, acc, _mm512_maskz_loadu_ps(k, e + d));
    }
    acc = _mm512_add_ps(acc, _mm512_shuffle_f32x4(acc, acc, 0x4E));
    acc = _mm512_add_ps(acc, _mm512_shuffle_f32x4(acc, acc, 0xB1));
    acc = _mm512_add_ps(acc, _mm512_shuffle_ps(acc, acc, 0x4E));
    acc = _mm512_add_ps(acc, _mm512_shuffle_ps(acc, acc, 0xB1));
    return _mm512_cvtss_f32(acc);
#else
    /* lanes 0-7 and 8-15 as two vectors; the first fold adds them */
    __m256 lo = _mm256_loadu_ps(e), hi = _mm256_loadu_ps(e + 8);
    int64_t d = 16;
    for (; d + 16 <= n; d += 16) {
        lo = _mm256_add_ps(lo, _mm256_loadu_ps(e + d));
        hi = _mm256_add_ps(hi, _mm256_loadu_ps(e + d + 8));
    }
    const int64_t r = n - d;
    if (r >= 8) {
        lo = _mm256_add_ps(lo, _mm256_loadu_ps(e + d));
        if (r > 8) hi = sx_add_tail8(hi, e + d + 8, r - 8);
    } else if (r > 0) {
        lo = sx_add_tail8(lo, e + d, r);
    }
    return sx_fold8(_mm256_add_ps(lo, hi));
#endif
}
#else
#define SX_DEFINE_ROW_SUM(L)                                                  \
    static float sx_row_sum##L(const float *e, int64_t n)                     \
    {                                                                         \
        if (n < L) return sx_sum_in_order(e, n);                              \
        float acc[L];                                                         \
        for (int l = 0; l < L; ++l) acc[l] = e[l];                            \
        int64_t d = L;                                                        \
        for (; d + L <= n; d += L)                                            \
            for (int l = 0; l < L; ++l) acc[l] += e[d + l];                   \
        for (int l = 0; d + l < n; ++l) acc[l] += e[d + l];                   \
        for (int half = L / 2; half >= 1; half /= 2)                          \
            for (int l = 0; l < half; ++l) acc[l] += acc[l + half];           \
        return acc[0];                                                        \
    }
SX_DEFINE_ROW_SUM(8)
SX_DEFINE_ROW_SUM(16)
#undef SX_DEFINE_ROW_SUM
#endif

#if defined(__AVX512F__)
/* Rows shorter than torch's vector (n < 16), each in one register: no
 * function call or pass per step, so consecutive rows overlap in the
 * core (MoE routers over 8 experts: 93 -> ~30 us for 4096 rows).  The
 * sum is still the in-order one, from the exponentials stored. */
static int sx_softmax_short_rows(const float *x, int64_t rows, int64_t n, float *out)
{
    const __mmask16 k = (__mmask16)_bzhi_u32(0xFFFFu, (unsigned)n);
    float e[16];
    for (int64_t r = 0; r < rows; ++r) {
        const __m512 v = _mm512_maskz_loadu_ps(k, x + r * n);
        if (_mm512_mask_cmp_ps_mask(k, v, v, _CMP_UNORD_Q)) return KWK_DEFER;
        const float m = _mm512_mask_reduce_max_ps(k, v);
        if (!isfinite(m)) return KWK_DEFER;
        const __m512 ev = sx_expf16(_mm512_sub_ps(v, _mm512_set1_ps(m)));
        _mm512_storeu_ps(e, ev);
        float sum = e[0];
        for (int64_t i = 1; i < n; ++i) sum += e[i];
        _mm512_mask_storeu_ps(out + r * n, k, _mm512_mul_ps(ev, _mm512_set1_ps(1.0f / sum)));
    }
    return KWK_OK;
}
#endif

enum { SX_GROUP = 4 }; /* rows softmaxed side by side (below) */

/* The group's exponentials over its rows' whole vectors (row q from x + q *
 * n, into out), each row's sum acc[q] in the vector's L lanes starting
 * from its first vector, as torch's; P, V, EXP: the vector family. */
#define SX_GROUP_EXP_SUMS(P, V, EXP, L)                                       \
    do {                                                                      \
        for (int q = 0; q < SX_GROUP; ++q) {                                  \
            acc[q] = EXP(P##sub_ps(P##loadu_ps(x + q * n), mm[q]));           \
            P##storeu_ps(out + q * n, acc[q]);                                \
        }                                                                     \
        for (int64_t i = L; i < body; i += L)                                 \
            for (int q = 0; q < SX_GROUP; ++q) {                              \
                const V e = EXP(P##sub_ps(P##loadu_ps(x + q * n + i), mm[q])); \
                P##storeu_ps(out + q * n + i, e);                             \
                acc[q] = P##add_ps(acc[q], e);                                \
            }                                                                 \
    } while (0)

#if defined(__AVX512F__)
/* SX_GROUP rows of n >= 16 at once, torch's 16-lane sums: each step (the
 * maxima, the exponentials and their sums, the scaling) runs over the
 * group's rows side by side, so one row's reductions and division overlap
 * the others' work, where a row alone waits on each (rows of 64: 52 ns a
 * row, about three times its arithmetic).  Each row's operations are the
 * single-row ones in the same order: the same bits.  KWK_DEFER as below. */
static int sx_softmax_group16(const float *x, int64_t n, float *out)
{
    __m512 mv[SX_GROUP], acc[SX_GROUP], mm[SX_GROUP], inv[SX_GROUP];
    __mmask16 unordered = 0;
    const int64_t body = n & ~(int64_t)15;
    const __mmask16 tk = (__mmask16)_bzhi_u32(0xFFFFu, (unsigned)(n - body));
    for (int q = 0; q < SX_GROUP; ++q) mv[q] = _mm512_set1_ps(-INFINITY);
    for (int64_t i = 0; i < body; i += 16)
        for (int q = 0; q < SX_GROUP; ++q) {
            const __m512 v = _mm512_loadu_ps(x + q * n + i);
            unordered |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
            mv[q] = _mm512_max_ps(mv[q], v);
        }
    for (int q = 0; q < SX_GROUP; ++q) {
        if (tk) {
            const __m512 v = _mm512_maskz_loadu_ps(tk, x + q * n + body);
            unordered |= _mm512_mask_cmp_ps_mask(tk, v, v, _CMP_UNORD_Q);
            mv[q] = _mm512_mask_max_ps(mv[q], tk, mv[q], v);
        }
        const float m = _mm512_reduce_max_ps(mv[q]);
        if (unordered || !isfinite(m)) return KWK_DEFER;
        mm[q] = _mm512_set1_ps(m);
    }
    SX_GROUP_EXP_SUMS(_mm512_, __m512, sx_expf16, 16);
    for (int q = 0; q < SX_GROUP; ++q) {
        __m512 a = acc[q];
        if (tk) { /* the tail into the first lanes, as sx_row_sum16 */
            const __m512 e = sx_expf16(_mm512_sub_ps(_mm512_maskz_loadu_ps(tk, x + q * n + body),
                                                     mm[q]));
            _mm512_mask_storeu_ps(out + q * n + body, tk, e);
            a = _mm512_mask_add_ps(a, tk, a, e);
        }
        a = _mm512_add_ps(a, _mm512_shuffle_f32x4(a, a, 0x4E));
        a = _mm512_add_ps(a, _mm512_shuffle_f32x4(a, a, 0xB1));
        a = _mm512_add_ps(a, _mm512_shuffle_ps(a, a, 0x4E));
        a = _mm512_add_ps(a, _mm512_shuffle_ps(a, a, 0xB1));
        inv[q] = _mm512_set1_ps(1.0f / _mm512_cvtss_f32(a));
    }
    for (int64_t i = 0; i < body; i += 16)
        for (int q = 0; q < SX_GROUP; ++q) {
            float *o = out + q * n + i;
            _mm512_storeu_ps(o, _mm512_mul_ps(_mm512_loadu_ps(o), inv[q]));
        }
    if (tk)
        for (int q = 0; q < SX_GROUP; ++q) {
            float *o = out + q * n + body;
            _mm512_mask_storeu_ps(o, tk, _mm512_mul_ps(_mm512_maskz_loadu_ps(tk, o), inv[q]));
        }
    return KWK_OK;
}
#endif

#if defined(__AVX2__)
/* sx_softmax_group16 for torch's 8-lane sums (sx_row_sum8's order), rows
 * of n >= 8: the exponentials in sx_expf8, the maxima, sums and scaling on
 * eight lanes. */
static int sx_softmax_group8(const float *x, int64_t n, float *out)
{
    __m256 mv[SX_GROUP], acc[SX_GROUP], mm[SX_GROUP], inv[SX_GROUP];
    __m256 unordered = _mm256_setzero_ps();
    const int64_t body = n & ~(int64_t)7, r = n - body;
    for (int q = 0; q < SX_GROUP; ++q) mv[q] = _mm256_set1_ps(-INFINITY);
    for (int64_t i = 0; i < body; i += 8)
        for (int q = 0; q < SX_GROUP; ++q) {
            const __m256 v = _mm256_loadu_ps(x + q * n + i);
            unordered = _mm256_or_ps(unordered, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
            mv[q] = _mm256_max_ps(mv[q], v);
        }
    for (int q = 0; q < SX_GROUP; ++q) {
        float lanes[8], m = -INFINITY;
        _mm256_storeu_ps(lanes, mv[q]);
        for (int l = 0; l < 8; ++l) m = lanes[l] > m ? lanes[l] : m;
        for (int64_t i = body; i < n; ++i) {
            const float v = x[q * n + i];
            if (v != v) return KWK_DEFER;
            m = v > m ? v : m;
        }
        if (_mm256_movemask_ps(unordered) || !isfinite(m)) return KWK_DEFER;
        mm[q] = _mm256_set1_ps(m);
    }
    SX_GROUP_EXP_SUMS(_mm256_, __m256, sx_expf8, 8);
    for (int q = 0; q < SX_GROUP; ++q) {
        float *o = out + q * n;
        if (r) { /* the tail into the first lanes, as sx_row_sum8 */
            const __m256i in = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)r),
                                                  _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
            const __m256 d = _mm256_sub_ps(_mm256_maskload_ps(x + q * n + body, in), mm[q]);
            _mm256_maskstore_ps(o + body, in, sx_expf8(d));
            acc[q] = sx_add_tail8(acc[q], o + body, r);
        }
        inv[q] = _mm256_set1_ps(1.0f / sx_fold8(acc[q]));
    }
    for (int64_t i = 0; i < body; i += 8)
        for (int q = 0; q < SX_GROUP; ++q) {
            float *o = out + q * n + i;
            _mm256_storeu_ps(o, _mm256_mul_ps(_mm256_loadu_ps(o), inv[q]));
        }
    for (int q = 0; q < SX_GROUP; ++q)
        for (int64_t i = body; i < n; ++i) out[q * n + i] *= _mm256_cvtss_f32(inv[q]);
    return KWK_OK;
}
#endif

#undef SX_GROUP_EXP_SUMS

/* out = torch.softmax(x, -1) for `rows` contiguous rows of n > 0 floats;
 * KWK_DEFER (out partly written) when a row holds a NaN or its maximum is
 * infinite. */
static int impl_softmax_f32(const float *x, int64_t rows, int64_t n, int lanes, float *out)
{
    int64_t r = 0;
#if defined(__AVX512F__)
    if (n < lanes) return sx_softmax_short_rows(x, rows, n, out);
    if (lanes == 16)
        for (; r + SX_GROUP <= rows; r += SX_GROUP)
            if (sx_softmax_group16(x + r * n, n, out + r * n) != KWK_OK) return KWK_DEFER;
#endif
#if defined(__AVX2__)
    if (lanes == 8 && n >= 8)
        for (; r + SX_GROUP <= rows; r += SX_GROUP)
            if (sx_softmax_group8(x + r * n, n, out + r * n) != KWK_OK) return KWK_DEFER;
#endif
    for (; r < rows; ++r) {
        const float *xr = x + r * n;
        float *o = out + r * n;
        const float m = sx_row_max(xr, n);
        if (!isfinite(m)) return KWK_DEFER;
        sx_exp_row(xr, n, m, o);
        const float inv = 1.0f / (lanes == 16 ? sx_row_sum16(o, n) : sx_row_sum8(o, n));
        for (int64_t i = 0; i < n; ++i) o[i] *= inv;
    }
    return KWK_OK;
}

/* The MoE router's top-1 with renormalisation (topk_softmax(x, 1,
 * renormalize=True)) needs no softmax where the row's largest logit m
 * stands clear: its one weight is p / p = 1 (p = 1 * (1 / s) >= 1 / n, a
 * normal float), and its id is the largest probability's, which is m's
 * column when every other logit x_j lies 2^-19 or more below m: then
 * x_j - m rounds to -2^-19 or less, e_j = exp(x_j - m) is at most 1 -
 * 1.9e-6 (SLEEF's expf errs by under one ulp, 6e-8 there), 30 ulps below
 * e = 1, and p_j = e_j * (1 / s) stays below p (one rounding moves it by
 * half an ulp): no tie among the probabilities, which rounding alone could
 * otherwise make.  The test: exactly one x_j >= t = fl(m - 2^-18); any
 * other x_j < t lies at least 2^-19 below m (t's rounding moves it by at
 * most 2^-19 while |m| < 32, and beyond, t is m or the float below it, at
 * least 2^-18 away).  ids[r] = m's column, or -1 for a row holding a NaN,
 * an infinite maximum or another logit from t up (the caller computes
 * those rows the long way); *unsettled = how many rows got -1. */
static int impl_router_top1_f32(const float *x, int64_t rows, int64_t n, int64_t *ids,
                                int64_t *unsettled)
{
    int64_t left = 0;
    for (int64_t r = 0; r < rows; ++r) {
        const float *xr = x + r * n;
        const float m = sx_row_max(xr, n); /* NaN where the row holds one */
        int64_t j = 0;
        /* (without branches: where m's column lies is a coin toss; with
         * exactly one hit, the sum of the hits' columns is it) */
        int64_t sum = 0, count = 0;
        if (isfinite(m)) {
            const float t = m - 0x1p-18f;
#if defined(__AVX512F__)
            /* the hits' count and columns summed in lanes (int32: rows
             * shorter than 2^30; only one hit's column is ever used) */
            if (n < ((int64_t)1 << 30)) {
                const __m512 tv = _mm512_set1_ps(t);
                const __m512i one = _mm512_set1_epi32(1), step = _mm512_set1_epi32(16);
                __m512i col = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
                __m512i cv = _mm512_setzero_si512(), sv = _mm512_setzero_si512();
                for (; j < n; j += 16) {
                    const int64_t c = n - j;
                    const __mmask16 k = c >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << c) - 1u);
                    const __mmask16 hit = _mm512_mask_cmp_ps_mask(k, _mm512_maskz_loadu_ps(k, xr + j), tv, _CMP_GE_OQ);
                    cv = _mm512_mask_add_epi32(cv, hit, cv, one);
                    sv = _mm512_mask_add_epi32(sv, hit, sv, col);
                    col = _mm512_add_epi32(col, step);
                }
                count = _mm512_reduce_add_epi32(cv);
                sum = (uint32_t)_mm512_reduce_add_epi32(sv);
            }
#elif defined(__AVX2__)
            const __m256 tv = _mm256_set1_ps(t);
            for (; j + 8 <= n; j += 8) {
                const unsigned hit = (unsigned)_mm256_movemask_ps(
                    _mm256_cmp_ps(_mm256_loadu_ps(xr + j), tv, _CMP_GE_OQ));
                sum += (hit != 0) * (j + __builtin_ctz(hit | 0x100u));
                count += __builtin_popcount(hit);
            }
#endif
            for (; j < n; ++j) {
                const int hit = xr[j] >= t;
                sum += hit * j;
                count += hit;
            }
        }
        const int settled = count == 1;
        ids[r] = settled ? sum : -1;
        left += !settled;
    }
    *unsettled = left;
    return KWK_OK;
}

/* The MoE router's backward (kwk_router_backward_f32): per row, the
 * gradient reaching the k selected probabilities, gt (with renormalize,
 * for k <= 8, made here from the weights' gradient g as torch's autograd
 * makes it: DivBackward's g / s and its other input's -g * ((t / s) / s)
 * summed over the row, added in that order; t = p[ids], s = their sum, both
 * sums torch's: torch_sum.h), scattered into zeros (topk's backward), then torch's
 * _softmax_backward_data on the last dim: dot = the sum of gp * p in
 * ATen's order for `lanes` (map2_reduce_all: sx_row_sum*'s order), gx =
 * (gp - dot) * p.  Every step one IEEE operation of torch's (no
 * contraction: the library builds with -ffp-contract=off), so the bits are
 * torch's, but for NaNs (below: such calls go to torch).
 *
 * Rows of one or two selected take the dot from their products alone
 * (rb_dot2) where every p is a finite float >= +0.0 (a softmax's): the
 * other products are then +0.0, which change no partial sum but a -0.0
 * (made +0.0).  Other rows sum every product, written into gx's row
 * (native, 4096x64, k = 2: 280 -> 67 us; k = 8 (dense) 121 us, where a
 * per-lane sum of the selected products, over set bits, took 619 us on
 * its mispredicted branches). */

/* The dot of rb's rows of k <= 2 products: wherever torch's lanes and
 * folds bring the two together, it is their one addition (the order of its
 * operands shows only in which of two different NaNs comes out, and calls
 * with NaNs are deferred: the NaNs arising here, inf - inf, all have the
 * same bits), and the +0.0 of every position not selected, which makes a
 * -0.0 +0.0. */
static float rb_dot2(const float *term, int64_t k, int64_t n)
{
    const float sum = k == 2 ? term[0] + term[1] : term[0];
    return k < n ? sum + 0.0f : sum;
}

/* The row's dot from every product, gx's row as their room. */
static float rb_dense_dot(const float *pr, const int64_t *ir, const float *gk, int64_t n,
                          int64_t k, int lanes, float *o)
{
    for (int64_t j = 0; j < n; ++j) o[j] = 0.0f * pr[j];
    for (int64_t i = 0; i < k; ++i) o[ir[i]] = gk[i] * pr[ir[i]];
    return lanes == 16 ? sx_row_sum16(o, n) : sx_row_sum8(o, n);
}

/* Whether x holds a NaN (bits: any exponent-all-ones with a mantissa). */
static int rb_has_nan(const float *x, int64_t n)
{
    uint32_t nan = 0;
    for (int64_t j = 0; j < n; ++j) {
        uint32_t b;
        memcpy(&b, x + j, 4);
        nan |= (b & 0x7FFFFFFFu) > 0x7F800000u;
    }
    return nan != 0;
}

static int impl_router_backward_f32(const float *p, const int64_t *ids, const float *g,
                                    int64_t rows, int64_t n, int64_t k, int renormalize,
                                    int lanes, float *gx)
{
    /* NaNs: where two with different bits meet in a sum, which one comes
     * out depends on the operands' order in the instruction, which
     * compilers may swap (a + b is commutative otherwise): such calls are
     * left to torch's own steps (KWK_DEFER, gx partly written) */
    if (rb_has_nan(g, rows * k)) return KWK_DEFER;
    for (int64_t r = 0; r < rows; ++r) {
        const float *pr = p + r * n;
        const int64_t *ir = ids + r * k;
        const float *gr = g + r * k;
        float *o = gx + r * n;
        float gt[KWK_TORCH_SHORT_SUM_MAX] = {0.0f};
        const float *gk = gr;
        for (int64_t i = 0; i < k; ++i)
            if (ir[i] < 0 || ir[i] >= n) return KWK_E_ARG;
        if (k == 2 && ir[0] == ir[1]) return KWK_E_ARG;
        if (renormalize && k <= 2) { /* torch_sum.h's sums, written out */
            const float t0 = pr[ir[0]], t1 = k == 2 ? pr[ir[1]] : 0.0f;
            const float s = (k == 2 ? t0 + t1 : t0) + 0.0f;
            const float b0 = -gr[0] * ((t0 / s) / s);
            const float b = (k == 2 ? b0 + -gr[1] * ((t1 / s) / s) : b0) + 0.0f;
            gt[0] = gr[0] / s + b;
            if (k == 2) gt[1] = gr[1] / s + b;
            gk = gt;
        } else if (renormalize) { /* k <= 8 */
            /* all eight lanes, whatever k (the unused are zeros, never
             * read), so the compiler makes each step one vector operation:
             * the 3 k divisions one at a time took 4096x8, k = 8, ~150 us
             * (native, with the rest of the row: 67 us without them) */
            float t[8] = {0.0f}, g8[8] = {0.0f}, back[8];
            for (int64_t i = 0; i < k; ++i) t[i] = pr[ir[i]], g8[i] = gr[i];
            const float s = kwk_torch_short_sum(t, k);
            for (int i = 0; i < 8; ++i) back[i] = -g8[i] * ((t[i] / s) / s);
            const float b = kwk_torch_short_sum(back, k);
            for (int i = 0; i < 8; ++i) gt[i] = g8[i] / s + b;
            gk = gt;
        }
        int sparse = k <= 2;
        float dot = 0.0f;
        if (sparse) {
            const float term[2] = {gk[0] * pr[ir[0]], k == 2 ? gk[1] * pr[ir[1]] : 0.0f};
            dot = rb_dot2(term, k, n);
            /* the other products were +0.0 iff every p is in [+0.0, inf):
             * checked on the bits in the pass that writes the row */
            const float rest = 0.0f - dot;
            uint32_t bad = 0;
            for (int64_t j = 0; j < n; ++j) {
                uint32_t b;
                memcpy(&b, pr + j, 4);
                bad |= b >= 0x7F800000u;
                o[j] = rest * pr[j];
            }
            sparse = !bad;
        }
        if (!sparse) {
            if (rb_has_nan(pr, n)) return KWK_DEFER;
            dot = rb_dense_dot(pr, ir, gk, n, k, lanes, o);
            const float rest = 0.0f - dot;
            for (int64_t j = 0; j < n; ++j) o[j] = rest * pr[j];
        }
        for (int64_t i = 0; i < k; ++i) o[ir[i]] = (gk[i] - dot) * pr[ir[i]];
    }
    return KWK_OK;
}

#endif
