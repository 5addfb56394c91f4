/*
 * torch_sum.h - torch 2.13's CPU sum of a short contiguous float32 row (the
 * reduction of x.sum(-1) over rows of k <= KWK_TORCH_SHORT_SUM_MAX
 * elements), in its order, so its bits: the MoE router's renormalisation
 * t / t.sum(-1) and its gradient's sum over the k experts.
 *
 * ATen's cascade_sum takes such rows one at a time (scalar_inner_sum):
 * row_sum keeps four partial sums, starting at +0.0, over the row's whole
 * groups of four (partial c takes elements c, c + 4, ...), adds the zero
 * partials of its unused levels to each, adds the row's last k % 4
 * elements into the first, then the other three into the first in order;
 * the output, filled with +0.0 first, adds that.  Rows of the float
 * vector's length or more take the vectorised path: torch 2.13's sum
 * kernel runs 8-lane vectors on AVX2 and AVX-512 machines alike (measured),
 * so a row of 8 is one vector whose lanes (each +0.0 plus its element, plus
 * three zero partials) are added in order to +0.0.  That holds for x86's
 * kernels only (the callers probe torch first); longer rows are not here.
 */
#ifndef KWK_TORCH_SUM_H
#define KWK_TORCH_SUM_H

#include <stdint.h>

enum { KWK_TORCH_SHORT_SUM_MAX = 8 };

/* x[0..k).sum() as torch computes it, k <= KWK_TORCH_SHORT_SUM_MAX */
static inline float kwk_torch_short_sum(const float *x, int64_t k)
{
    if (k <= 2) /* the same, shortened: the zeros only make a -0.0 +0.0 */
        return (k == 2 ? x[0] + x[1] : x[0]) + 0.0f;
    if (k == 8) {
        float s = 0.0f;
        for (int64_t i = 0; i < 8; ++i) s = s + (x[i] + 0.0f);
        return 0.0f + s;
    }
    float p0 = 0.0f, p1 = 0.0f, p2 = 0.0f, p3 = 0.0f;
    const int64_t groups = k / 4;
    for (int64_t i = 0; i < groups; ++i) {
        p0 = p0 + x[4 * i];
        p1 = p1 + x[4 * i + 1];
        p2 = p2 + x[4 * i + 2];
        p3 = p3 + x[4 * i + 3];
    }
    p0 = p0 + 0.0f, p1 = p1 + 0.0f, p2 = p2 + 0.0f, p3 = p3 + 0.0f;
    for (int64_t i = 4 * groups; i < k; ++i) p0 = p0 + x[i];
    p0 = p0 + p1;
    p0 = p0 + p2;
    p0 = p0 + p3;
    return 0.0f + p0;
}

#endif
