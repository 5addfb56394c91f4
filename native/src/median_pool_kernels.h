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

#if defined(__AVX2__)
#include <immintrin.h>

/* The 3x3 row at stride 1, 8 float32 outputs a step: the same steps as
 * mp_row3x3 (network on values, stable-rank position by counting, first
 * NaN), lane-parallel.  min/max may swap the signs of equal zeros inside
 * the network; only comparisons read its result, and the value written is
 * re-read from the input at the chosen position. */
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

static int64_t mp_row3x3_f32_avx2(const float *r0, const float *r1, const float *r2,
                                  int64_t ow, float *out, int64_t *index)
{
    const float *rows[3] = {r0, r1, r2};
    int64_t x = 0;
    for (; x + 8 <= ow; x += 8) {
        __m256 a[9], s[9];
        for (int k = 0; k < 9; k++) s[k] = a[k] = _mm256_loadu_ps(rows[k / 3] + x + k % 3);
        MP_VMEDIAN9(_mm256_min_ps, _mm256_max_ps, s);
        __m256i need = _mm256_set1_epi32(4), seen = _mm256_setzero_si256();
        __m256i none = _mm256_set1_epi32(9), pick = none, first_nan = none;
        for (int k = 0; k < 9; k++) /* a true comparison is -1 */
            need = _mm256_add_epi32(need, _mm256_castps_si256(_mm256_cmp_ps(a[k], s[4], _CMP_LT_OQ)));
        for (int k = 0; k < 9; k++) {
            __m256i eq = _mm256_castps_si256(_mm256_cmp_ps(a[k], s[4], _CMP_EQ_OQ));
            __m256i hit = _mm256_and_si256(_mm256_and_si256(eq, _mm256_cmpeq_epi32(seen, need)),
                                           _mm256_cmpeq_epi32(pick, none));
            pick = _mm256_blendv_epi8(pick, _mm256_set1_epi32(k), hit);
            seen = _mm256_sub_epi32(seen, eq);
        }
        for (int k = 8; k >= 0; k--)
            first_nan = _mm256_blendv_epi8(first_nan, _mm256_set1_epi32(k),
                _mm256_castps_si256(_mm256_cmp_ps(a[k], a[k], _CMP_UNORD_Q)));
        pick = _mm256_blendv_epi8(pick, first_nan, _mm256_cmpgt_epi32(none, first_nan));
        __m256 v = a[0];
        for (int k = 1; k < 9; k++)
            v = _mm256_blendv_ps(v, a[k], _mm256_castsi256_ps(
                _mm256_cmpeq_epi32(pick, _mm256_set1_epi32(k))));
        _mm256_storeu_ps(out + x, v);
        _mm256_storeu_si256((__m256i *)(index + x),
                            _mm256_cvtepi32_epi64(_mm256_castsi256_si128(pick)));
        _mm256_storeu_si256((__m256i *)(index + x + 4),
                            _mm256_cvtepi32_epi64(_mm256_extracti128_si256(pick, 1)));
    }
    return x;
}

static int64_t mp_row3x3_f64_avx2(const double *r0, const double *r1, const double *r2,
                                  int64_t ow, double *out, int64_t *index)
{
    const double *rows[3] = {r0, r1, r2};
    int64_t x = 0;
    for (; x + 4 <= ow; x += 4) {
        __m256d a[9], s[9];
        for (int k = 0; k < 9; k++) s[k] = a[k] = _mm256_loadu_pd(rows[k / 3] + x + k % 3);
        MP_VMEDIAN9(_mm256_min_pd, _mm256_max_pd, s);
        __m256i need = _mm256_set1_epi64x(4), seen = _mm256_setzero_si256();
        __m256i none = _mm256_set1_epi64x(9), pick = none, first_nan = none;
        for (int k = 0; k < 9; k++)
            need = _mm256_add_epi64(need, _mm256_castpd_si256(_mm256_cmp_pd(a[k], s[4], _CMP_LT_OQ)));
        for (int k = 0; k < 9; k++) {
            __m256i eq = _mm256_castpd_si256(_mm256_cmp_pd(a[k], s[4], _CMP_EQ_OQ));
            __m256i hit = _mm256_and_si256(_mm256_and_si256(eq, _mm256_cmpeq_epi64(seen, need)),
                                           _mm256_cmpeq_epi64(pick, none));
            pick = _mm256_blendv_epi8(pick, _mm256_set1_epi64x(k), hit);
            seen = _mm256_sub_epi64(seen, eq);
        }
        for (int k = 8; k >= 0; k--)
            first_nan = _mm256_blendv_epi8(first_nan, _mm256_set1_epi64x(k),
                _mm256_castpd_si256(_mm256_cmp_pd(a[k], a[k], _CMP_UNORD_Q)));
        pick = _mm256_blendv_epi8(pick, first_nan, _mm256_cmpgt_epi64(none, first_nan));
        __m256d v = a[0];
        for (int k = 1; k < 9; k++)
            v = _mm256_blendv_pd(v, a[k], _mm256_castsi256_pd(
                _mm256_cmpeq_epi64(pick, _mm256_set1_epi64x(k))));
        _mm256_storeu_pd(out + x, v);
        _mm256_storeu_si256((__m256i *)(index + x), pick);
    }
    return x;
}
#define MP_ROW3X3_VECTOR(S, r0, r1, r2, ow, out, index)                       \
    mp_row3x3_##S##_avx2(r0, r1, r2, ow, out, index)
#else
#define MP_ROW3X3_VECTOR(S, r0, r1, r2, ow, out, index) ((void)(out), (int64_t)0)
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
static void mp_fill_padded_##S(const T *plane, T *pad, const int64_t *rows,    \
                               const int64_t *cols, int64_t hp, int64_t wp,    \
                               int64_t w)                                      \
{                                                                              \
    for (int64_t ph = 0; ph < hp; ph++) {                                      \
        T *dst = pad + ph * wp;                                                \
        if (rows[ph] < 0) {                                                    \
            for (int64_t pw = 0; pw < wp; pw++) dst[pw] = (T)0;                \
            continue;                                                          \
        }                                                                      \
        const T *src = plane + rows[ph] * w;                                   \
        for (int64_t pw = 0; pw < wp; pw++)                                    \
            dst[pw] = cols[pw] < 0 ? (T)0 : src[cols[pw]];                     \
    }                                                                          \
}                                                                              \
                                                                               \
/* One output row of a 3x3 window: r0..r2 are the window's padded rows.   \
 * Outputs go in blocks of MP_LANES, each step a loop over the block's     \
 * lanes, on order keys (keys.h: -0.0 as +0.0, NaN largest), whose integer \
 * min/max compile without branches: the median key from the network, then \
 * its stable-rank position (the (4 - #smaller)-th element of equal key, in \
 * window order), then the first NaN's position when the window has one.   \
 * The value written is the input element at that position, bits and all.  \
 * The AVX2 target does stride-1 rows with intrinsics first. */             \
static void mp_row3x3_##S(const T *r0, const T *r1, const T *r2, int64_t ow,   \
                          int64_t sw, T *out, int64_t *index)                  \
{                                                                              \
    UT key[9][MP_LANES], s[9][MP_LANES];                                       \
    int32_t need[MP_LANES], seen[MP_LANES], pick[MP_LANES], nan_at[MP_LANES];  \
    int64_t x0 = sw == 1 ? MP_ROW3X3_VECTOR(S, r0, r1, r2, ow, out, index) : 0; \
    for (int64_t o0 = x0; o0 < ow; o0 += MP_LANES) {                           \
        int64_t n = ow - o0 < MP_LANES ? ow - o0 : MP_LANES;                   \
        for (int l = 0; l < MP_LANES; l++) nan_at[l] = 9;                      \
        for (int k = 8; k >= 0; k--) {                                         \
            const T *r = (k < 3 ? r0 : k < 6 ? r1 : r2) + o0 * sw + k % 3;     \
            for (int64_t l = 0; l < n; l++) {                                  \
                T e = r[l * sw];                                               \
                UT b;                                                          \
                memcpy(&b, &e, sizeof b);                                      \
                key[k][l] = KEY(b);                                            \
                nan_at[l] = e != e ? k : nan_at[l];                            \
            }                                                                  \
            for (int64_t l = n; l < MP_LANES; l++) key[k][l] = 0; /* unused */ \
        }                                                                      \
        memcpy(s, key, sizeof key);                                            \
        MP_MEDIAN9(UT, s);                                                     \
        for (int l = 0; l < MP_LANES; l++) {                                   \
            need[l] = 4;                                                       \
            seen[l] = 0;                                                       \
            pick[l] = 9;                                                       \
        }                                                                      \
        for (int k = 0; k < 9; k++)                                            \
            for (int l = 0; l < MP_LANES; l++) need[l] -= key[k][l] < s[4][l]; \
        for (int k = 0; k < 9; k++)                                            \
            for (int l = 0; l < MP_LANES; l++) {                               \
                int32_t eq = key[k][l] == s[4][l];                             \
                pick[l] = (eq & (seen[l] == need[l]) & (pick[l] == 9)) ? k : pick[l]; \
                seen[l] += eq;                                                 \
            }                                                                  \
        for (int64_t l = 0; l < n; l++) {                                      \
            int32_t p = nan_at[l] < 9 ? nan_at[l] : pick[l];                   \
            out[o0 + l] = (p < 3 ? r0 : p < 6 ? r1 : r2)[(o0 + l) * sw + p % 3]; \
            index[o0 + l] = p;                                                 \
        }                                                                      \
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
    for (int64_t c = 0; c < planes; c++) {                                     \
        mp_fill_padded_##S(src + c * h * w, pad, maps, maps + hp, hp, wp, w);  \
        T *o = out + c * oh * ow;                                              \
        int64_t *ix = index + c * oh * ow;                                     \
        for (int64_t y = 0; y < oh; y++) {                                     \
            const T *top = pad + y * sh * wp;                                  \
            if (kh == 3 && kw == 3)                                            \
                mp_row3x3_##S(top, top + wp, top + 2 * wp, ow, sw,             \
                              o + y * ow, ix + y * ow);                        \
            else                                                               \
                mp_row_any_##S(top, wp, kh, kw, ow, sw, vals, pos,             \
                               o + y * ow, ix + y * ow);                       \
        }                                                                      \
    }                                                                          \
    free(pad); free(maps); free(vals); free(pos);                              \
    return KWK_OK;                                                             \
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
                T *dst = gi + rows[ph] * w;                                    \
                for (int64_t pw = 0; pw < wp; pw++)                            \
                    if (cols[pw] >= 0) dst[cols[pw]] += acc[pw];               \
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
            T *dst = gi + rows[ph] * w;                                        \
            for (int64_t pw = 0; pw < wp; pw++)                                \
                if (cols[pw] >= 0) dst[cols[pw]] += pad[ph * wp + pw];         \
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
