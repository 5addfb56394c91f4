/*
 * unique_runs.h - torch.unique's compaction of a sorted array, in one pass.
 *
 * torch.unique (sorted, flattened) sorts the input, then marks where a run
 * of equal values starts (torch.ne of neighbours), gathers each run's first
 * value, numbers the runs for return_inverse (a cumsum scattered back through
 * the sort's permutation) and measures them for return_counts.  Built from
 * torch's element-wise ops that was five passes and three temporaries, more
 * than the sort itself on 10^5 elements; here it is one pass for the runs and
 * the inverse, one for the values and counts.
 *
 * Equal as torch.ne says: -0.0 == +0.0, a NaN equals nothing (each NaN is a
 * run of its own).  On order keys (keys.h) that is: equal keys, and not the
 * NaN key.  Integer and bool elements compare by their bits.
 */
#ifndef KWK_UNIQUE_RUNS_H
#define KWK_UNIQUE_RUNS_H

#include <stdint.h>
#include <string.h>
#include "keys.h"
#include "sort_kernels.h"
#include "torch_order.h"

/* KEY(bits) of the element type T; NANKEY the NaN key (no NaN: a value no
 * key takes is not needed, NAN_OK 0 skips the test). */
#define UR_DEFINE(T, SUF, KEY, NAN_OK, NANKEY)                                \
    static int64_t ur_runs_##SUF(const T *v, int64_t n, const int64_t *perm,  \
                                 int64_t *inverse, int *shows)                \
    {                                                                         \
        int64_t run = 0;                                                      \
        T prev = KEY(v[0]), prev_bits = v[0];                                 \
        int order = 0;                                                        \
        if (inverse) inverse[perm[0]] = 0;                                    \
        for (int64_t i = 1; i < n; ++i) {                                     \
            const T k = KEY(v[i]);                                            \
            run += k != prev || (NAN_OK && k == (T)(NANKEY));                 \
            /* equal keys, other bits: -0.0 next to +0.0 (or two NaNs) */    \
            order |= NAN_OK && k == prev && v[i] != prev_bits;                \
            order |= NAN_OK && k == (T)(NANKEY) && prev == (T)(NANKEY);       \
            prev = k;                                                         \
            prev_bits = v[i];                                                 \
            if (inverse) inverse[perm[i]] = run;                              \
        }                                                                     \
        *shows = order;                                                       \
        return run + 1;                                                       \
    }                                                                         \
    /* KWK_E_ARG, having written `runs` of them, when there are more */    \
    static int ur_fill_##SUF(const T *v, int64_t n, int64_t runs, T *out,     \
                             int64_t *counts)                                 \
    {                                                                         \
        int64_t run = 0, start = 0;                                           \
        T prev = KEY(v[0]);                                                   \
        if (out) out[0] = v[0];                                               \
        for (int64_t i = 1; i < n; ++i) {                                     \
            const T k = KEY(v[i]);                                            \
            if (k != prev || (NAN_OK && k == (T)(NANKEY))) {                  \
                if (counts) counts[run] = i - start;                          \
                if (++run >= runs) return KWK_E_ARG;                          \
                start = i;                                                    \
                if (out) out[run] = v[i];                                     \
            }                                                                 \
            prev = k;                                                         \
        }                                                                     \
        if (counts) counts[run] = n - start;                                  \
        return run + 1 == runs ? KWK_OK : KWK_E_ARG;                          \
    }

#define UR_SAME(b) (b)
UR_DEFINE(uint8_t, u8, UR_SAME, 0, 0)
UR_DEFINE(uint16_t, u16, UR_SAME, 0, 0)
UR_DEFINE(uint32_t, u32, UR_SAME, 0, 0)
UR_DEFINE(uint64_t, u64, UR_SAME, 0, 0)
UR_DEFINE(uint16_t, f16, kwk_key_f16, 1, 0xFFFFu)
UR_DEFINE(uint16_t, bf16, kwk_key_bf16, 1, 0xFFFFu)
UR_DEFINE(uint32_t, f32, kwk_key_f32, 1, 0xFFFFFFFFu)
UR_DEFINE(uint64_t, f64, kwk_key_f64, 1, ~(uint64_t)0)
#undef UR_SAME
#undef UR_DEFINE

/* Whether any order of n (unsorted) float elements could show in
 * torch.unique's result: 1 when both -0.0 and +0.0 are among them, plus 2
 * when two NaNs are.  One branch-free pass, so that the common input pays
 * for no second sort. */
#define UR_DEFINE_SCAN(T, SUF, SIGN, INF)                                     \
    static int ur_order_matters_##SUF(const T *v, int64_t n)                  \
    {                                                                         \
        int64_t nans = 0;                                                     \
        int pos_zero = 0, neg_zero = 0;                                       \
        for (int64_t i = 0; i < n; ++i) {                                     \
            const T a = (T)(v[i] & (T)~(T)(SIGN));                            \
            nans += a > (T)(INF);                                             \
            pos_zero |= v[i] == 0;                                            \
            neg_zero |= v[i] == (T)(SIGN);                                    \
        }                                                                     \
        return (pos_zero && neg_zero) | (nans > 1) << 1;                      \
    }
UR_DEFINE_SCAN(uint16_t, f16, 0x8000u, 0x7C00u)
UR_DEFINE_SCAN(uint16_t, bf16, 0x8000u, 0x7F80u)
UR_DEFINE_SCAN(uint32_t, f32, 0x80000000u, 0x7F800000u)
UR_DEFINE_SCAN(uint64_t, f64, 0x8000000000000000ull, 0x7FF0000000000000ull)
#undef UR_DEFINE_SCAN

static int impl_unique_order_matters(int dtype, const void *values, int64_t n)
{
    switch (dtype) {
    case KWK_FLOAT16: return ur_order_matters_f16(values, n);
    case KWK_BFLOAT16: return ur_order_matters_bf16(values, n);
    case KWK_FLOAT32: return ur_order_matters_f32(values, n);
    case KWK_FLOAT64: return ur_order_matters_f64(values, n);
    default: return 0; /* integers: equal values have equal bits */
    }
}

/* The number of runs of values[0..n) (n >= 1); inverse[perm[i]] = the run of
 * element i when both are given (perm validated by the caller).  *shows: 1
 * when the result depends on the sort's order of equal elements (-0.0 next
 * to +0.0: the run shows the first one's sign; two NaNs: which is first). */
static int64_t impl_unique_runs(int dtype, const void *values, int64_t n, const int64_t *perm,
                                int64_t *inverse, int *shows)
{
    switch (dtype) {
    case KWK_FLOAT16: return ur_runs_f16(values, n, perm, inverse, shows);
    case KWK_BFLOAT16: return ur_runs_bf16(values, n, perm, inverse, shows);
    case KWK_FLOAT32: return ur_runs_f32(values, n, perm, inverse, shows);
    case KWK_FLOAT64: return ur_runs_f64(values, n, perm, inverse, shows);
    default: break;
    }
    switch (KWK_DTYPES[dtype].elem_size) {
    case 1: return ur_runs_u8(values, n, perm, inverse, shows);
    case 2: return ur_runs_u16(values, n, perm, inverse, shows);
    case 4: return ur_runs_u32(values, n, perm, inverse, shows);
    default: return ur_runs_u64(values, n, perm, inverse, shows);
    }
}

/* Each run's first value (its bits) to out, its length to counts (either
 * may be NULL; each has room for `runs`, n >= 1 elements give runs >= 1);
 * KWK_E_ARG when the values hold another number of runs. */
static int impl_unique_fill(int dtype, const void *values, int64_t n, int64_t runs, void *out,
                            int64_t *counts)
{
    switch (dtype) {
    case KWK_FLOAT16: return ur_fill_f16(values, n, runs, out, counts);
    case KWK_BFLOAT16: return ur_fill_bf16(values, n, runs, out, counts);
    case KWK_FLOAT32: return ur_fill_f32(values, n, runs, out, counts);
    case KWK_FLOAT64: return ur_fill_f64(values, n, runs, out, counts);
    default: break;
    }
    switch (KWK_DTYPES[dtype].elem_size) {
    case 1: return ur_fill_u8(values, n, runs, out, counts);
    case 2: return ur_fill_u16(values, n, runs, out, counts);
    case 4: return ur_fill_u32(values, n, runs, out, counts);
    default: return ur_fill_u64(values, n, runs, out, counts);
    }
}

/* torch.unique's zero when -0.0 and +0.0 both occur (and at most one
 * NaN): the one its std::sort puts first, and only that, shows.  Given the
 * result of any sort's compaction (`out`, `runs` sorted entries), writes
 * that zero's bits into the zero entry: the torch-order sort is followed
 * down to the first zero alone (wemu_first_of_key), not run.  KWK_DEFER
 * when keys cannot be packed with their index (float64 of a wide range:
 * sort in torch's order instead); KWK_OK, changing nothing, without a
 * zero. */
#define UR_DEFINE_ZERO(T, SUF, KEY)                                           \
    static int ur_torch_zero_##SUF(const T *v, int64_t n, T *out, int64_t runs) \
    {                                                                         \
        int64_t z = 0;                                                        \
        while (z < n && KEY(v[z]) != KEY((T)0)) ++z;                          \
        if (z == n) return KWK_OK;                                            \
        uint64_t *words = (uint64_t *)malloc((size_t)n * sizeof(uint64_t));  \
        if (!words) return KWK_E_NOMEM;                                       \
        sort_row r;                                                           \
        sort_load(KWK_DTYPE_##SUF, (const char *)v, n, (int64_t)sizeof(T), 0, words, &r); \
        if (!r.packed) {                                                      \
            free(words);                                                      \
            return KWK_DEFER;                                                 \
        }                                                                     \
        const uint64_t w = wemu_first_of_key(words, n, r.ibits, words[z] >> r.ibits); \
        const T bits = v[(int64_t)(w & r.mask)];                              \
        free(words);                                                          \
        int64_t lo = 0, hi = runs; /* the first entry of key >= zero's */     \
        while (lo < hi) {                                                     \
            const int64_t mid = lo + (hi - lo) / 2;                           \
            if (KEY(out[mid]) < KEY((T)0)) lo = mid + 1;                      \
            else hi = mid;                                                    \
        }                                                                     \
        if (lo == runs || KEY(out[lo]) != KEY((T)0)) return KWK_E_ARG;        \
        out[lo] = bits;                                                       \
        return KWK_OK;                                                        \
    }
enum { KWK_DTYPE_f16 = KWK_FLOAT16, KWK_DTYPE_bf16 = KWK_BFLOAT16, KWK_DTYPE_f32 = KWK_FLOAT32,
       KWK_DTYPE_f64 = KWK_FLOAT64 };
UR_DEFINE_ZERO(uint16_t, f16, kwk_key_f16)
UR_DEFINE_ZERO(uint16_t, bf16, kwk_key_bf16)
UR_DEFINE_ZERO(uint32_t, f32, kwk_key_f32)
UR_DEFINE_ZERO(uint64_t, f64, kwk_key_f64)
#undef UR_DEFINE_ZERO

static int impl_unique_torch_zero(int dtype, const void *values, int64_t n, void *out,
                                  int64_t runs)
{
    switch (dtype) {
    case KWK_FLOAT16: return ur_torch_zero_f16(values, n, out, runs);
    case KWK_BFLOAT16: return ur_torch_zero_bf16(values, n, out, runs);
    case KWK_FLOAT32: return ur_torch_zero_f32(values, n, out, runs);
    case KWK_FLOAT64: return ur_torch_zero_f64(values, n, out, runs);
    default: return KWK_OK; /* integers: no signed zero */
    }
}

#endif
