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
 */
#include <stdlib.h>
#include <string.h>

#define MP_LANES 16 /* outputs per block of the 3x3 network: one cache line of
                       float32 values, enough lanes for 256-bit vectors */

/* One compare-exchange of the 3x3 network over a block of lanes: the
 * smaller (value, position) pair to wire i.  Equal values order by
 * position, so the network selects the element the stable rank names. */
#define MP_CE(T, v, p, i, j)                                                  \
    for (int l = 0; l < MP_LANES; l++) {                                       \
        T a_ = v[i][l], b_ = v[j][l];                                           \
        int32_t pa_ = p[i][l], pb_ = p[j][l];                                   \
        int s_ = (b_ < a_) | ((b_ == a_) & (pb_ < pa_));                       \
        v[i][l] = s_ ? b_ : a_;                                                 \
        v[j][l] = s_ ? a_ : b_;                                                 \
        p[i][l] = s_ ? pb_ : pa_;                                               \
        p[j][l] = s_ ? pa_ : pb_;                                               \
    }

/* A median-of-9 selection network (19 compare-exchanges, Paeth's); wire 4
 * ends holding the median.  Checked on all 2^9 zero-one inputs by
 * tests/test_nn.py (the zero-one principle covers every total order). */
#define MP_MEDIAN9(T, v, p)                                                   \
    MP_CE(T, v, p, 1, 2) MP_CE(T, v, p, 4, 5) MP_CE(T, v, p, 7, 8)            \
    MP_CE(T, v, p, 0, 1) MP_CE(T, v, p, 3, 4) MP_CE(T, v, p, 6, 7)            \
    MP_CE(T, v, p, 1, 2) MP_CE(T, v, p, 4, 5) MP_CE(T, v, p, 7, 8)            \
    MP_CE(T, v, p, 0, 3) MP_CE(T, v, p, 5, 8) MP_CE(T, v, p, 4, 7)            \
    MP_CE(T, v, p, 3, 6) MP_CE(T, v, p, 1, 4) MP_CE(T, v, p, 2, 5)            \
    MP_CE(T, v, p, 4, 7) MP_CE(T, v, p, 4, 2) MP_CE(T, v, p, 6, 4)            \
    MP_CE(T, v, p, 4, 2)

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

#define MP_DEFINE(T, S)                                                        \
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
/* One output row of a 3x3 window: r0..r2 are the window's padded rows. */    \
static void mp_row3x3_##S(const T *r0, const T *r1, const T *r2, int64_t ow,   \
                          int64_t sw, T *out, int64_t *index)                  \
{                                                                              \
    T v[9][MP_LANES];                                                          \
    int32_t p[9][MP_LANES];                                                    \
    for (int64_t o0 = 0; o0 < ow; o0 += MP_LANES) {                            \
        int64_t n = ow - o0 < MP_LANES ? ow - o0 : MP_LANES;                   \
        int nan_seen = 0;                                                      \
        for (int k = 0; k < 9; k++) {                                          \
            const T *r = (k < 3 ? r0 : k < 6 ? r1 : r2) + o0 * sw + k % 3;     \
            for (int l = 0; l < MP_LANES; l++) {                               \
                T x = l < n ? r[l * sw] : (T)0; /* unused lanes: any value */  \
                v[k][l] = x;                                                   \
                p[k][l] = k;                                                   \
                nan_seen |= x != x;                                            \
            }                                                                  \
        }                                                                      \
        MP_MEDIAN9(T, v, p)                                                    \
        for (int64_t l = 0; l < n; l++) {                                      \
            out[o0 + l] = v[4][l];                                             \
            index[o0 + l] = p[4][l];                                           \
        }                                                                      \
        if (!nan_seen) continue;                                               \
        for (int64_t l = 0; l < n; l++) /* a NaN window: its first NaN */      \
            for (int k = 0; k < 9; k++) {                                      \
                T x = (k < 3 ? r0 : k < 6 ? r1 : r2)[(o0 + l) * sw + k % 3];   \
                if (x != x) {                                                  \
                    out[o0 + l] = x;                                           \
                    index[o0 + l] = k;                                         \
                    break;                                                     \
                }                                                              \
            }                                                                  \
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
        for (int64_t i = 0; i < hp * wp; i++) pad[i] = (T)0;                   \
        for (int64_t off = 0; off < kh * kw; off++) {                          \
            T *base = pad + (off / kw) * wp + off % kw;                        \
            for (int64_t y = 0; y < oh; y++)                                   \
                for (int64_t x = 0; x < ow; x++)                               \
                    if (ix[y * ow + x] == off)                                 \
                        base[y * sh * wp + x * sw] += gr[y * ow + x];          \
        }                                                                      \
        for (int64_t i = 0; i < h * w; i++) gi[i] = (T)0;                      \
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

MP_DEFINE(float, f32)
MP_DEFINE(double, f64)

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
