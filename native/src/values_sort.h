/*
 * values_sort.h - sorts that return values only (msort; the values of
 * unique), without index work.
 *
 * A row is sorted as bare order keys (key_radix.h) and the keys are mapped
 * back to element bits.  That is exact when every key has one bit pattern in
 * the row, so then the order of equal elements cannot show (stable and torch
 * order give the same values).  Float rows holding both +0.0 and -0.0, or
 * NaNs with different bits, are left to the indexed sort (vs_row returns 0).
 */
#ifndef KWK_VALUES_SORT_H
#define KWK_VALUES_SORT_H

#include "fp_env.h"
#include "key_radix.h"
#include "keys.h"
#include "plain_loads.h"
#include "qsort_drivers.h" /* qs_par_cut, QS_PAR_MAX: on every target */
#include "simd_qsort.h"
#if defined(__AVX2__)
#include <immintrin.h>
#endif

/* A long row's quicksort on kwk_row_threads() threads (Python asks for
 * them for a sort of one row from 2^18 elements, kwker/ops/parallel.py):
 * the *_par forms cut the row into ranges by partitions around sampled
 * pivots (qsort_drivers.h qs_par_cut), then sort the ranges side by side. */
enum { VS_PAR_MIN_N = 1 << 17 };
#define VS_QSORT_THREADS(fn, a, n)                                                    \
    do {                                                                      \
        const int vs_threads_ = kwk_row_threads();                            \
        if (vs_threads_ > 1 && (n) >= VS_PAR_MIN_N)                           \
            fn##_par((a), (n), vs_threads_, kwk_run_parts);                   \
        else                                                                  \
            fn((a), (n));                                                     \
    } while (0)

/* The passes around that sort, in the same threads' slices: fn(ctx, p,
 * lo, hi) for slice p = [lo, hi) of [0, n), side by side for long rows
 * (one slice otherwise); returns the slice count. */
typedef struct {
    void (*fn)(void *ctx, int p, int64_t lo, int64_t hi);
    void *ctx;
    int64_t n;
    int parts;
} vs_slices;
static void vs_slice(void *c, int p)
{
    const vs_slices *s = (const vs_slices *)c;
    s->fn(s->ctx, p, s->n * p / s->parts, s->n * (p + 1) / s->parts);
}
__attribute__((unused)) static int vs_in_slices(int64_t n, void (*fn)(void *, int, int64_t, int64_t),
                                                void *ctx)
{
    int parts = n >= VS_PAR_MIN_N ? kwk_row_threads() : 1;
    if (parts > QS_PAR_MAX) parts = QS_PAR_MAX;
    if (parts <= 1) {
        fn(ctx, 0, 0, n);
        return 1;
    }
    vs_slices s = {fn, ctx, n, parts};
    kwk_run_parts(vs_slice, &s, parts);
    return parts;
}

/* Rows shorter than this take the indexed sort: the radix histograms cost
 * more than they save there. */
enum { VS_MIN_LEN = 256 };
/* Contiguous float32 rows from this length, where the vector quicksort is
 * compiled (vs_row_f32_contig: no histograms; native, values only, ns/el
 * indexed batch vs bare keys, min of 5 interleaved runs: 24 4.2 vs 5.7,
 * 32 4.0 vs 3.8, 48 3.2 vs 2.2, 64 3.3 vs 1.7-2.6, 96 4.1 vs 3.0, 160 4.8
 * vs 3.5, 255 6.7 vs 3.7). */
#if defined(KWK_HAVE_SIMD_QSORT) && defined(__AVX512F__)
/* AVX-512: from 17, where vs_row_32_net and vs_row_b32_contig's direct
 * network take the short rows (A/B through install(), msort of x.t(),
 * 4096 rows of n against the batch network's (key, index) pairs: int32
 * n = 17 1.23x, 20 1.39x, 31 2.43x, 47 2.19x; descending 1.06x, 1.21x,
 * 1.90x, 1.80x; uint32 1.17x .. 2.33x; float32 0.93x, 1.04x, 1.78x,
 * 1.74x) */
enum { VS_F32_MIN_LEN = 17 };
#elif defined(KWK_HAVE_SIMD_QSORT)
enum { VS_F32_MIN_LEN = 48 };
#else
enum { VS_F32_MIN_LEN = VS_MIN_LEN };
#endif

#if defined(__AVX512F__)
/* int32 / int64 ascending rows up to these lengths go from the row to dst
 * through one of simd_qsort.h's in-register networks (vs_row_b32_contig,
 * vs_row_b64_contig), no passes (A/B through install(), msort, Intel
 * AVX-512: int32 of full range 4096x48 1.40x, 4096x64 1.42x, 2048x128
 * 1.19x, 1024x256 1.09x; int64 4096x20 1.41-1.50x).  Longer int64 rows
 * on Intel's cores keep the range pass: there those spanning 32 bits or
 * less (token ids) sort as 32-bit offsets, faster than the 64-bit network
 * from 48 (0.73-0.82x).  AMD's Zen 5 runs the 64-bit network at full width
 * and takes it up to its QS_BASE_VECS vectors for every span (native
 * kwk_sort values only, 4096 rows of n, us, range pass -> network, min of
 * 30, two runs: within 32 bits n = 48 / 64 / 128 368-375 -> 254-264,
 * 415-417 -> 263-269, 743-744 -> 541-545; full range 297-302 -> 245-247,
 * 311-313 -> 250-254, 598-607 -> 524-532; 32 alike). */
enum { VS_NET32_MAX_N = QS_BASE_VECS * 16, VS_NET64_MAX_N = 32, VS_NET64_WIDE_MAX_N = QS_BASE_VECS * 8 };
static inline int64_t vs_net64_max_n(void)
{
    return qs_cpu_is_intel() ? VS_NET64_MAX_N : VS_NET64_WIDE_MAX_N;
}
/* The same cores' rows of 64-bit keys spanning 32 bits or less skip the
 * 32-bit offsets up to the quicksort's base case (two networks and a
 * merge: 4096 rows of 160 / 200 / 256, us, offsets -> keys, min of 5
 * alternating: descending 1450 -> 1216, ascending 1394 -> 1365, 1675 ->
 * 1491, descending 2105 -> 1889; 512 alike). */
static inline int vs_wide_keys_row(int64_t n)
{
    return n > VS_NET64_MAX_N && n <= 2 * QS_BASE_VECS * 8 && !qs_cpu_is_intel();
}
#endif

/* The 4-byte dtypes whose contiguous rows take the bare-key sort from
 * VS_F32_MIN_LEN: float32, and where vs_row_b32_contig is compiled (AVX2)
 * int32 and uint32 (native, values only, int32 of full range, ns/el,
 * batched network -> bare keys, min of 9: 4096x48 5.8 -> 3.0, 4096x64 5.1
 * -> 2.7, 4096x128 7.7 -> 4.6, 4096x256 8.7 -> 4.9, 2048x512 11.1 -> 6.8;
 * 4096x32 5.3 -> 4.8 is below the length, as for float32). */
static inline int vs_contig32_takes(int dtype)
{
#if defined(KWK_HAVE_SIMD_QSORT) && defined(__AVX2__)
    return dtype == KWK_FLOAT32 || dtype == KWK_INT32 || dtype == KWK_UINT32;
#else
    return dtype == KWK_FLOAT32;
#endif
}

/* Sort 32-bit keys a[0..n) (all in [lo, lo + 2^bits)); tmp holds n keys.
 * Where a quicksort is compiled (simd_qsort.h: AVX-512 or AVX2) it takes keys of
 * more than VS_QSORT_MIN_BITS bits (three or more radix passes); fewer
 * bits keep the radix sort's one or two passes.  Measured
 * (bench_simd_qsort.c, keys of randn float32, ns/key, radix vs quicksort,
 * noisy runs, AVX-512): 256: 7.7-10.4 vs 2.6-3.1, 1000: 5.7-9.5 vs 2.8-3.4, 100k:
 * 8.0-9.8 vs 3.9-5.1, 1M: 9.9-13.7 vs 6.4-7.0, 16M: 17.2-23.1 vs 7.5-10.0:
 * no length where the radix sort won; nor for AVX2 (simd_qsort_avx2.h). */
enum { VS_QSORT_MIN_BITS = 16 };
/* Whether keys of `bits` bits (at most VS_QSORT_MIN_BITS) take the radix
 * sort.  On AVX-512 only rows long against the 2^bits buckets do: the
 * quicksort's short rows beat the histograms (native, n keys of `bits`
 * random bits, ns/key, radix vs quicksort, min of 7: 8 bits 256 7.27 vs
 * 0.86, 2048 1.67 vs 1.58, 4096 1.04 vs 1.72; 9 bits 4096 1.73 vs 1.86,
 * 16384 0.80 vs 2.12; 12 bits 16384 2.58 vs 2.01, 65536 1.21 vs 2.38;
 * 16 bits 256 2.39 vs 0.86, 262144 3.50 vs 2.62; 4 bits 512 0.97 vs 1.03,
 * 2048 0.48 vs 1.60). */
static inline int vs_radix_pays(int64_t n, int bits)
{
#if defined(__AVX512F__)
    if (bits > VS_QSORT_MIN_BITS) return 0;
    const int64_t need = (int64_t)16 << bits;
    return n >= (need > 512 ? need : 512);
#else
    (void)n;
    return bits <= VS_QSORT_MIN_BITS;
#endif
}
static void vs_sort_u32(uint32_t *a, uint32_t *tmp, int64_t n, uint32_t lo, int bits)
{
#if defined(KWK_HAVE_SIMD_QSORT)
    if (!vs_radix_pays(n, bits)) {
        VS_QSORT_THREADS(simd_qsort_32, a, n);
        return;
    }
#endif
    key_radix_u32(a, tmp, n, lo, bits);
}

/* 64-bit keys spanning over 40 bits (float64 and int64 rows of spread
 * values) take the vector quicksort where one is compiled: the radix sort
 * needs six to eight passes, and the indexed sort it otherwise hands them
 * to carries an index per key (native, float64 rows of normal values: 32000 31 -> 14 ns/key, 1M 30 -> 17). */
#if defined(KWK_HAVE_SIMD_QSORT)
#define VS_QSORT64 1
static void vs_qsort_u64(uint64_t *a, int64_t n) { VS_QSORT_THREADS(simd_qsort_64, a, n); }
#else
#define VS_QSORT64 0
static void vs_qsort_u64(uint64_t *a, int64_t n) { (void)a; (void)n; }
#endif

/* Contiguous 64-bit rows of 8..16 elements too take the bare keys where
 * vs_row_b64_contig is compiled (AVX2, also on AVX-512): their indexed sort (the stable
 * ranks of sort_short_wide_row, n^2 compares) costs more from 8 (native,
 * values only, full-range int64 / float64 of randn, ns/el, ranks -> bare
 * keys, two runs: 4096x8 13.0 -> 6.7-11.0 / 13.6-14.4 -> 12.7-13.3, 4096x12
 * 12.1 -> 9.6-9.9 / 10.4-14.1 -> 10.6-11.3, 4096x16 13.1-13.8 -> 5.7-7.5 /
 * 14.1-14.6 -> 8.0-8.7); shorter rows less (4096x5 14.5 -> 18.5, 4096x2
 * 15 -> 45: the quicksort's setup for a row of a vector or two). */
#if defined(KWK_HAVE_SIMD_QSORT) && defined(__AVX512F__)
/* AVX-512 (its indexed sort of short rows is quicker): from 12 (python,
 * kwker.sort_values 4096 x n, us, ranks vs bare keys, two runs: int64 8
 * 191-213 vs 238-244, 12 279-308 vs 264-272, 16 401-446 vs 277-284;
 * float64 alike) */
enum { VS_B64_MIN_LEN = 12 };
#elif defined(KWK_HAVE_SIMD_QSORT) && defined(__AVX2__)
enum { VS_B64_MIN_LEN = 8 };
#else
enum { VS_B64_MIN_LEN = 17 };
#endif

/* On AVX2 (four 64-bit lanes a vector) the quicksort of wide 64-bit keys
 * loses to the indexed sort's leading-bits-first radix sort on rows of
 * VS_QSORT64_MAX_N + 1 .. VS_INDEXED64_MAX_N keys, which go there instead.
 * Measured (native, values-only kwk_sort of int64 of 62 random bits,
 * ns/element, quicksort vs indexed, two interleaved runs): 16384 9.4-14.2
 * vs 9.0-10.7, 32768 11.0-11.2 alike, 65536 12.5-12.9 vs 8.1-8.5, 131072
 * 13.1-13.3 vs 8.8-14.7, 262144 14.9-18.6 vs 15.2-24.1, 1M 17.8-22.0 vs
 * 20.7-22.3.  AVX-512's quicksort keeps every length. */
#if defined(KWK_HAVE_SIMD_QSORT) && !defined(__AVX512F__)
enum { VS_QSORT64_MAX_N = 32768, VS_INDEXED64_MAX_N = 1 << 17 };
#else
enum { VS_QSORT64_MAX_N = INT32_MAX, VS_INDEXED64_MAX_N = 0 };
#endif

/* KIND: 0 unsigned (key = bits), 1 signed (key = bits ^ SIGN), 2 float. */
#define VS_DEFINE(NAME, UT, SUF, KIND, SIGN, KEYFN)                           \
    static int vs_row_##NAME(const char *row, int64_t step, int64_t n, char *dst, \
                             int64_t dstep, int descending, UT *key, UT *tmp) \
    {                                                                         \
        const UT flip = descending ? (UT)~(UT)0 : (UT)0;                      \
        const UT nan_key = (UT)~(UT)0, sign = (UT)(SIGN);                     \
        UT lo = (UT)~(UT)0, hi = 0, pz = 0, nz = 0, nan_bits = 0;             \
        int have_nan = 0, nan_mixed = 0;                                      \
        for (int64_t j = 0; j < n; ++j) {                                     \
            UT b;                                                             \
            memcpy(&b, row + j * step, sizeof(UT));                           \
            UT k = KIND == 0 ? b : KIND == 1 ? (UT)(b ^ sign) : (UT)KEYFN(b); \
            if (KIND == 2) {                                                  \
                pz |= b == 0;                                                 \
                nz |= b == sign;                                              \
                if (k == nan_key) { /* rare: a branch is fine */              \
                    nan_mixed |= have_nan && b != nan_bits;                   \
                    nan_bits = b;                                             \
                    have_nan = 1;                                             \
                }                                                             \
            }                                                                 \
            k ^= flip;                                                        \
            key[j] = k;                                                       \
            lo = k < lo ? k : lo;                                             \
            hi = k > hi ? k : hi;                                             \
        }                                                                     \
        if (KIND == 2 && ((pz && nz) || nan_mixed)) return 0;                 \
        const int bits_ = kwk_bits_for((uint64_t)(UT)(hi - lo));              \
        /* 64-bit keys spanning at most 32 bits (token ids, positions) are   \
         * sorted as 32-bit offsets from lo: half the memory traffic */      \
        /* wide 64-bit keys without a quicksort, in rows below the MSD     \
         * size: 6-8 LSD passes; the indexed sort's leading-bits-first order \
         * is faster (measured 244x4096 int64 full range: 11.8 vs 19.6       \
         * ns/elem).  With the AVX2 quicksort: VS_INDEXED64_MAX_N above. */  \
        if (sizeof(UT) == 8 && bits_ > 40 &&                                  \
            (VS_QSORT64 ? n > VS_QSORT64_MAX_N && n <= VS_INDEXED64_MAX_N     \
                        : n < KEY_MSD_MIN_N))                                 \
            return -1;                                                        \
        const int narrow = sizeof(UT) == 8 && bits_ <= 32;                    \
        uint32_t *k32 = (uint32_t *)(void *)tmp;                              \
        if (narrow) {                                                         \
            for (int64_t j = 0; j < n; ++j) k32[j] = (uint32_t)(key[j] - lo); \
            vs_sort_u32(k32, (uint32_t *)(void *)key, n, 0, bits_);           \
        } else if (sizeof(UT) == 4) {                                         \
            vs_sort_u32((uint32_t *)(void *)key, (uint32_t *)(void *)tmp, n,  \
                        (uint32_t)lo, bits_);                                 \
        } else if (VS_QSORT64 && sizeof(UT) == 8 && bits_ > 40) {             \
            vs_qsort_u64((uint64_t *)(void *)key, n);                         \
        } else {                                                              \
            key_radix_##SUF(key, tmp, n, lo, bits_);                          \
        }                                                                     \
        for (int64_t j = 0; j < n; ++j) {                                     \
            const UT k = (narrow ? (UT)(k32[j] + lo) : key[j]) ^ flip;        \
            UT b;                                                             \
            if (KIND == 0) b = k;                                             \
            else if (KIND == 1) b = (UT)(k ^ sign);                           \
            else if (k == nan_key) b = nan_bits;                              \
            else if (k == sign) b = nz ? sign : (UT)0; /* the zeros' key */   \
            else b = (k & sign) ? (UT)(k ^ sign) : (UT)~k;                    \
            memcpy(dst + j * dstep, &b, sizeof(UT));                          \
        }                                                                     \
        return 1;                                                             \
    }

#define VS_NO_KEY(b) (b)
VS_DEFINE(u8, uint8_t, u8, 0, 0, VS_NO_KEY)
VS_DEFINE(i8, uint8_t, u8, 1, 0x80u, VS_NO_KEY)
VS_DEFINE(u16, uint16_t, u16, 0, 0, VS_NO_KEY)
VS_DEFINE(i16, uint16_t, u16, 1, 0x8000u, VS_NO_KEY)
VS_DEFINE(f16, uint16_t, u16, 2, 0x8000u, kwk_key_f16)
VS_DEFINE(bf16, uint16_t, u16, 2, 0x8000u, kwk_key_bf16)
VS_DEFINE(u32, uint32_t, u32, 0, 0, VS_NO_KEY)
VS_DEFINE(i32, uint32_t, u32, 1, 0x80000000u, VS_NO_KEY)
VS_DEFINE(f32, uint32_t, u32, 2, 0x80000000u, kwk_key_f32)
VS_DEFINE(u64, uint64_t, u64, 0, 0, VS_NO_KEY)
VS_DEFINE(i64, uint64_t, u64, 1, 0x8000000000000000ull, VS_NO_KEY)
VS_DEFINE(f64, uint64_t, u64, 2, 0x8000000000000000ull, kwk_key_f64)
#undef VS_NO_KEY

#if defined(__AVX2__)
/* The contiguous rows' passes below are written in AVX2 and serve the
 * AVX-512 target too: they are memory passes around the sort, and both
 * quicksorts take their biased keys (simd_qsort_*_biased).  On AVX-512 they
 * replaced its own float32 pass and the scalar VS_DEFINE passes of the
 * other dtypes (python, kwker.sort_values vs np.sort, one thread, before ->
 * after: int32 4096x64 704 -> 297 us, float64 1M 14.4 -> 9.3 ms, int64
 * 4096x16 401 -> 266 us, bfloat16 1M 2.59 -> 1.09 ms, float16 64x4096
 * 1.50 -> 0.65 ms; float32 alike, 1M 4.8-5.0 -> 4.5 ms).
 *
 * Where the biased keys of a contiguous row go: dst itself when it does not
 * overlap the row (sorted there, mapped back in place: no workspace pass),
 * else the workspace. */
static void *vs_key_home(const void *src, void *dst, int64_t bytes, void *key)
{
    const uintptr_t s0 = (uintptr_t)src, d0 = (uintptr_t)dst, b = (uintptr_t)bytes;
    return d0 + b <= s0 || s0 + b <= d0 ? dst : key;
}

/* vs_row_f32_contig, 8 keys a vector (the scalar loops were a fifth of a
 * 100k-element values-only sort); the last partial vector through
 * maskload/maskstore, its lanes kept out of the zero test and the range.
 * The keys are made biased (key ^ the sign bit, signed compares order them:
 * simd_qsort_avx2.h) and, when dst does not overlap the row, in dst itself,
 * sorted there and mapped back in place: no bias passes and no workspace
 * touched (128256 float32 keys, native: 8.1 -> 6.2 ns/element). */
static void vs_sort_u32_biased(uint32_t *a, uint32_t *tmp, int64_t n, uint32_t lo, int bits)
{
    if (!vs_radix_pays(n, bits)) {
        VS_QSORT_THREADS(simd_qsort_32_biased, a, n);
        return;
    }
    key_radix_u32(a, tmp, n, lo, bits); /* it reads only key - lo: bias-blind */
}

/* The NaNs of p[l] for the set bits l of mask: the first one's bits, and
 * whether any other differs (the row then takes the indexed sort). */
static void vs_note_nans32(const uint32_t *p, unsigned mask, uint32_t *nan_bits, int *have_nan,
                           int *nan_mixed)
{
    for (; mask; mask &= mask - 1) {
        uint32_t bits;
        memcpy(&bits, p + __builtin_ctz(mask), 4);
        *nan_mixed |= *have_nan && bits != *nan_bits;
        *nan_bits = bits;
        *have_nan = 1;
    }
}

#if defined(__AVX512F__)
/* Ascending values-only sort of contiguous float64 rows by the floats'
 * own order (simd_qsort.h's 64f): one pass copies the row
 * to where it is sorted (dst unless it overlaps the row) and checks that
 * the floats' order is the keys' there: no NaN, not both zero signs (the
 * float order has them equal: a min and a max could then return the same
 * one), and (the callers' check) no subnormal read as zero.  No key
 * passes, and the float min/max run on two ports where the integer ones
 * have one (simd_qsort.h: QS_FORDER).  Returns 0, the row untouched, when
 * it does not apply, or when the keys span few bits (the radix sort's
 * rows: vs_row_b64_contig's).  Measured (torch.msort of x.t() under
 * install(), Intel Xeon AVX-512, A/B against the key passes, min of 3
 * alternating processes): float64 4096x64 1.21x, 512x256 1.29x, 64x1000
 * 1.18x, 64x4096 1.11x, 4x65536 1.12x, 1M 1.09x.  float32 the same way
 * gained 0.99-1.07x from 256 (its key passes are cheaper, vs_row_f32_fast)
 * and lost at 64 (0.84x: the small networks wait on the float min/max's
 * latency), so it keeps its keys. */
/* vs_row_f64_native's copy of a slice [from, to) of the row (into buf,
 * padded with +inf, for a short row; else into kd), with what it finds:
 * NaN, the zeros' signs, the range (no NaN enters a min or max) */
typedef struct {
    const uint64_t *src;
    double *buf, *kd;
    __mmask8 nan[QS_PAR_MAX], pz[QS_PAR_MAX], nz[QS_PAR_MAX];
    double lo[QS_PAR_MAX], hi[QS_PAR_MAX];
} vs_f64_scan;
static void vs_f64_copy(void *ctx, int p, int64_t from, int64_t to)
{
    vs_f64_scan *c = (vs_f64_scan *)ctx;
    const __m512i zero = _mm512_setzero_si512(), sign = _mm512_set1_epi64(INT64_MIN);
    const __m512d pad = _mm512_set1_pd(INFINITY);
    __m512d lo = _mm512_set1_pd(INFINITY), hi = _mm512_set1_pd(-INFINITY);
    __mmask8 nan = 0, pz = 0, nz = 0;
    for (int64_t j = from; j < to; j += 8) {
        const int64_t left = to - j;
        const __mmask8 m = left >= 8 ? (__mmask8)0xFF : (__mmask8)((1u << left) - 1);
        const __m512i b = kwk_loadz_epi64(m, c->src + j, c->src + to);
        const __m512d f = _mm512_castsi512_pd(b);
        nan |= _mm512_cmp_pd_mask(f, f, _CMP_UNORD_Q);
        pz |= _mm512_mask_cmpeq_epi64_mask(m, b, zero);
        nz |= _mm512_cmpeq_epi64_mask(b, sign);
        lo = _mm512_mask_min_pd(lo, m, lo, f);
        hi = _mm512_mask_max_pd(hi, m, hi, f);
        if (c->buf) _mm512_storeu_pd(c->buf + j, _mm512_mask_mov_pd(pad, m, f));
        else _mm512_mask_storeu_epi64(c->kd + j, m, b);
    }
    c->nan[p] = nan;
    c->pz[p] = pz;
    c->nz[p] = nz;
    c->lo[p] = _mm512_reduce_min_pd(lo);
    c->hi[p] = _mm512_reduce_max_pd(hi);
}
static int vs_row_f64_native(const uint64_t *src, int64_t n, uint64_t *dst, uint64_t *key)
{
    /* Rows of 17..63: one network, sorted in buf, a whole-vector copy of
     * the row padded with +inf (never stored), as vs_row_32_net: the
     * masked store of the row's last vector into kd could not be
     * forwarded to the network's load (A/B through install(), msort, 4096
     * rows of 17 / 20 / 31 / 47: 1.35x, 1.35x, 1.30x, 1.05x; from 64
     * alike).  Longer rows are copied to kd and sorted there. */
    const int short_row = n < 64;
    double buf[64];
    double *kd = (double *)vs_key_home(src, dst, n * 8, key);
    vs_f64_scan c;
    c.src = src;
    c.buf = short_row ? buf : NULL;
    c.kd = kd;
    const int slices = vs_in_slices(n, vs_f64_copy, &c);
    __mmask8 nan = c.nan[0], pz = c.pz[0], nz = c.nz[0];
    double flo = c.lo[0], fhi = c.hi[0];
    for (int p = 1; p < slices; ++p) {
        nan |= c.nan[p];
        pz |= c.pz[p];
        nz |= c.nz[p];
        flo = c.lo[p] < flo ? c.lo[p] : flo;
        fhi = c.hi[p] > fhi ? c.hi[p] : fhi;
    }
    if (nan || (pz && nz)) return 0;
    if (short_row) {
        qs64f_sort_net(buf, buf, (n + 7) & ~(int64_t)7);
        memcpy(dst, buf, (size_t)n * 8);
        return 1;
    }
    uint64_t blo, bhi;
    memcpy(&blo, &flo, 8);
    memcpy(&bhi, &fhi, 8);
    /* vs_row_b64_contig's quicksort span: narrower keys take its offsets or its radix sort */
    if (kwk_bits_for(kwk_key_f64(bhi) - kwk_key_f64(blo)) <= 40) return 0;
    VS_QSORT_THREADS(simd_qsort_64f, kd, n);
    if ((void *)kd != (void *)dst) memcpy(dst, kd, (size_t)n * 8);
    return 1;
}
#endif

#if defined(__AVX512F__)
/* The first try of a contiguous float32 row, in sixteen lanes: each key is
 * its bits' order key (no -0.0 -> +0.0, no NaN key) and the passes track
 * only the range, since what the checks look for shows afterwards:
 *  - a NaN's key lies past +inf's (positive NaN) or before -inf's
 *    (negative), so the range says whether the row has one; then the
 *    careful pass (vs_row_f32_careful) redoes the row (-1 returned);
 *  - -0.0's key and +0.0's are neighbours, so both occur in the row iff the
 *    sorted keys hold both, next to each other: a binary search finds out,
 *    and such a row goes to the indexed sort (0; src is untouched).
 * Otherwise every key is one bit pattern of the row and maps back to it:
 * 9 operations a vector in the two passes against the careful one's 17
 * (float32 64x1000: the passes took a tenth of the sort; A/B through
 * install(), msort, Intel AVX-512: 4096x64 1.08x, 512x256 1.10x, 64x1000
 * 1.07x, 64x4096 / 4x65536 1.04x, 1M alike). */
/* vs_row_f32_fast's two passes over a slice [lo, hi): the keys (and their
 * range, per slice), then the keys' bits mapped back */
typedef struct {
    const uint32_t *src;
    uint32_t *kd, *dst;
    uint32_t bias;
    int32_t lo[QS_PAR_MAX], hi[QS_PAR_MAX];
} vs_f32_passes;
static void vs_f32_keys(void *ctx, int p, int64_t from, int64_t to)
{
    vs_f32_passes *c = (vs_f32_passes *)ctx;
    const __m512i absm = _mm512_set1_epi32(0x7FFFFFFF), bv = _mm512_set1_epi32((int)c->bias);
    __m512i lo = _mm512_set1_epi32(INT32_MAX), hi = _mm512_set1_epi32(INT32_MIN);
    for (int64_t j = from; j < to; j += 16) {
        const int64_t left = to - j;
        const __mmask16 m = left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1);
        const __m512i b = kwk_loadz_epi32(m, c->src + j, c->src + to);
        /* b ^ (b's sign spread & 0x7FFFFFFF) ^ bias (ternary logic 0x78: x ^ (y & z)) */
        const __m512i k = _mm512_xor_si512(_mm512_ternarylogic_epi32(b, _mm512_srai_epi32(b, 31), absm, 0x78), bv);
        _mm512_mask_storeu_epi32(c->kd + j, m, k);
        lo = _mm512_mask_min_epi32(lo, m, lo, k);
        hi = _mm512_mask_max_epi32(hi, m, hi, k);
    }
    c->lo[p] = _mm512_reduce_min_epi32(lo);
    c->hi[p] = _mm512_reduce_max_epi32(hi);
}
static void vs_f32_bits(void *ctx, int p, int64_t from, int64_t to)
{
    (void)p;
    const vs_f32_passes *c = (const vs_f32_passes *)ctx;
    const __m512i absm = _mm512_set1_epi32(0x7FFFFFFF), bv = _mm512_set1_epi32((int)c->bias);
    for (int64_t j = from; j < to; j += 16) {
        const int64_t left = to - j;
        const __mmask16 m = left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1);
        const __m512i k = _mm512_xor_si512(kwk_loadz_epi32(m, c->kd + j, c->kd + to), bv);
        /* k is the bits of a non-negative float as they are; a negative one's with the low 31 flipped */
        _mm512_mask_storeu_epi32(c->dst + j, m, _mm512_ternarylogic_epi32(k, _mm512_srai_epi32(k, 31), absm, 0x78));
    }
}
static int vs_row_f32_fast(const uint32_t *src, int64_t n, uint32_t *dst, int descending,
                           uint32_t *key, uint32_t *tmp)
{
    /* biased key = order key ^ sign (^ ~0 descending) = x ^ (x negative ? 0x7FFFFFFF : 0) ^ bias */
    const uint32_t bias = descending ? 0xFFFFFFFFu : 0u;
    uint32_t *kd = (uint32_t *)vs_key_home(src, dst, n * 4, key);
    vs_f32_passes c;
    c.src = src;
    c.kd = kd;
    c.dst = dst;
    c.bias = bias;
    const int slices = vs_in_slices(n, vs_f32_keys, &c);
    int32_t klo = c.lo[0], khi = c.hi[0];
    for (int p = 1; p < slices; ++p) {
        klo = c.lo[p] < klo ? c.lo[p] : klo;
        khi = c.hi[p] > khi ? c.hi[p] : khi;
    }
    /* the biased keys of -inf and +inf in this direction */
    const int32_t kninf = (int32_t)(0xFF800000u ^ 0x7FFFFFFFu ^ bias), kpinf = (int32_t)(0x7F800000u ^ bias);
    const int32_t kfirst = descending ? kpinf : kninf, klast = descending ? kninf : kpinf;
    if (klo < kfirst || khi > klast) return -1; /* a NaN */
    vs_sort_u32_biased(kd, tmp, n, (uint32_t)klo, kwk_bits_for((uint64_t)(uint32_t)((uint32_t)khi - (uint32_t)klo)));
    /* both zeros: keys -1 and 0 (-0.0 and +0.0 ascending, the other way
     * round descending), side by side once sorted */
    /* the first key >= 0, branch-free (a branch on each probe was
     * mispredicted half the time: 4096 rows of 64 lost 18 ns a row) */
    int64_t a = 0;
    for (int64_t len = n; len > 1;) {
        const int64_t half = len / 2;
        a = (int32_t)kd[a + half] < 0 ? a + half : a;
        len -= half;
    }
    a += (int32_t)kd[a] < 0;
    if (a > 0 && a < n && kd[a - 1] == 0xFFFFFFFFu && kd[a] == 0) return 0;
    vs_in_slices(n, vs_f32_bits, &c);
    return 1;
}
/* 32-bit rows of one network (n <= VS_NET32_MAX_N): the keys (a float's
 * as vs_row_f32_fast makes them, an integer's x ^ bias as
 * vs_row_b32_contig's) into a buffer of whole vectors, the lanes
 * past the row INT32_MAX, so that no masked store is read back (a masked
 * store cannot be forwarded to the load after it: rows of 17..31 cost
 * what rows of 64 did), sorted there by the network, mapped back into
 * dst.  -1 for a float row with a NaN or both zero signs (the careful
 * pass decides). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
/* buf's lanes past the row are written too (INT32_MAX) before the network
 * reads the first nv, which GCC cannot see through the masked loads */
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
static int vs_row_32_net(const uint32_t *src, int64_t n, uint32_t *dst, int is_float, uint32_t bias)
{
    enum { NB = VS_NET32_MAX_N };
    int32_t buf[NB];
    const __m512i absm = _mm512_set1_epi32(0x7FFFFFFF), inf = _mm512_set1_epi32(0x7F800000);
    const __m512i zero = _mm512_setzero_si512(), sign = _mm512_set1_epi32((int)0x80000000u);
    const __m512i bv = _mm512_set1_epi32((int)bias), pad = _mm512_set1_epi32(INT32_MAX);
    /* an integer key: x ^ bias; a float's: the bits with the low 31 flipped when negative, ^ bias */
    const __m512i fm = is_float ? absm : zero;
    __mmask16 pz = 0, nz = 0;
    for (int64_t j = 0; j < n; j += 16) {
        const int64_t left = n - j;
        const __mmask16 m = left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1);
        const __m512i b = kwk_loadz_epi32(m, src + j, src + n);
        if (is_float) {
            if (_mm512_cmpgt_epi32_mask(_mm512_and_si512(b, absm), inf)) return -1; /* a NaN: rare */
            pz |= _mm512_mask_cmpeq_epi32_mask(m, b, zero);
            nz |= _mm512_cmpeq_epi32_mask(b, sign);
        }
        const __m512i k = _mm512_xor_si512(_mm512_ternarylogic_epi32(b, _mm512_srai_epi32(b, 31), fm, 0x78), bv);
        _mm512_storeu_si512((void *)(buf + j), _mm512_mask_mov_epi32(pad, m, k));
    }
    if (pz && nz) return -1;
    const int64_t nv = (n + 15) & ~(int64_t)15;
    qs32s_sort_net(buf, buf, nv);
    for (int64_t j = 0; j < n; j += 16) {
        const int64_t left = n - j;
        const __mmask16 m = left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1);
        const __m512i c = _mm512_xor_si512(_mm512_loadu_si512((const void *)(buf + j)), bv);
        _mm512_mask_storeu_epi32(dst + j, m, _mm512_ternarylogic_epi32(c, _mm512_srai_epi32(c, 31), fm, 0x78));
    }
    return 1;
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
/* The same in sixteen lanes, masks in mask registers (the range and
 * mapping passes were a tenth of a values-only float32 sort; A/B, native,
 * rows of 300 .. 1M: 1.02-1.05x). */
static int vs_row_f32_careful(const uint32_t *src, int64_t n, uint32_t *dst, int descending,
                             uint32_t *key, uint32_t *tmp)
{
    const __m512i zero = _mm512_setzero_si512(), sign = _mm512_set1_epi32((int)0x80000000u);
    const __m512i absm = _mm512_set1_epi32(0x7FFFFFFF), inf = _mm512_set1_epi32(0x7F800000);
    const __m512i ones = _mm512_set1_epi32(-1);
    /* what turns an order key into a biased one and back */
    const __m512i bias = _mm512_xor_si512(descending ? ones : zero, sign);
    uint32_t *kd = (uint32_t *)vs_key_home(src, dst, n * 4, key);
    __m512i lo = _mm512_set1_epi32(INT32_MAX), hi = _mm512_set1_epi32(INT32_MIN);
    __mmask16 pz = 0, nz = 0;
    uint32_t nan_bits = 0;
    int have_nan = 0, nan_mixed = 0;
    for (int64_t j = 0; j < n; j += 16) {
        const int64_t left = n - j;
        const __mmask16 m = left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1);
        const __m512i b = kwk_loadz_epi32(m, src + j, src + n);
        const __m512i a = _mm512_and_si512(b, absm);
        const __mmask16 nan = _mm512_cmpgt_epi32_mask(a, inf); /* masked-off lanes are 0 */
        if (nan) vs_note_nans32(src + j, nan, &nan_bits, &have_nan, &nan_mixed); /* rare */
        pz |= _mm512_mask_cmpeq_epi32_mask(m, b, zero);
        nz |= _mm512_mask_cmpeq_epi32_mask(m, b, sign);
        const __m512i v = _mm512_maskz_mov_epi32(_mm512_cmpneq_epi32_mask(a, zero), b); /* -0 -> +0 */
        __m512i k = _mm512_xor_si512(v, _mm512_or_si512(_mm512_srai_epi32(v, 31), sign));
        k = _mm512_xor_si512(_mm512_mask_mov_epi32(k, nan, ones), bias);
        _mm512_mask_storeu_epi32(kd + j, m, k);
        lo = _mm512_mask_min_epi32(lo, m, lo, k);
        hi = _mm512_mask_max_epi32(hi, m, hi, k);
    }
    if ((pz && nz) || nan_mixed) return 0;
    const int32_t klo = _mm512_reduce_min_epi32(lo), khi = _mm512_reduce_max_epi32(hi);
    vs_sort_u32_biased(kd, tmp, n, (uint32_t)klo, kwk_bits_for((uint64_t)(uint32_t)((uint32_t)khi - (uint32_t)klo)));
    const __m512i zbits = nz ? sign : zero, nbits = _mm512_set1_epi32((int)nan_bits);
    for (int64_t j = 0; j < n; j += 16) {
        const int64_t left = n - j;
        const __mmask16 m = left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1);
        const __m512i k = _mm512_xor_si512(kwk_loadz_epi32(m, kd + j, kd + n), bias);
        /* (k & sign) ? k ^ sign : ~k, then the zeros' key and the NaN key */
        __m512i b = _mm512_xor_si512(k, _mm512_or_si512(_mm512_xor_si512(_mm512_srai_epi32(k, 31), ones), sign));
        b = _mm512_mask_mov_epi32(b, _mm512_cmpeq_epi32_mask(k, sign), zbits);
        b = _mm512_mask_mov_epi32(b, _mm512_cmpeq_epi32_mask(k, ones), nbits);
        _mm512_mask_storeu_epi32(dst + j, m, b);
    }
    return 1;
}
static int vs_row_f32_contig(const uint32_t *src, int64_t n, uint32_t *dst, int descending,
                             uint32_t *key, uint32_t *tmp)
{
    const int r = n <= VS_NET32_MAX_N ? vs_row_32_net(src, n, dst, 1, descending ? 0xFFFFFFFFu : 0u)
                                      : vs_row_f32_fast(src, n, dst, descending, key, tmp);
    return r >= 0 ? r : vs_row_f32_careful(src, n, dst, descending, key, tmp);
}
#else
static int vs_row_f32_contig(const uint32_t *src, int64_t n, uint32_t *dst, int descending,
                             uint32_t *key, uint32_t *tmp)
{
    const __m256i zero = _mm256_setzero_si256(), ones = _mm256_set1_epi32(-1);
    const __m256i sign = _mm256_set1_epi32((int)0x80000000u), absm = _mm256_set1_epi32(0x7FFFFFFF);
    const __m256i inf = _mm256_set1_epi32(0x7F800000), flip = descending ? ones : zero;
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i imax = _mm256_set1_epi32(INT32_MAX), imin = _mm256_set1_epi32(INT32_MIN);
    /* what turns an order key into a biased one and back */
    const __m256i bias = _mm256_xor_si256(flip, sign);
    uint32_t *kd = (uint32_t *)vs_key_home(src, dst, n * 4, key);
    __m256i lo = imax, hi = imin, pz = zero, nz = zero;
    uint32_t nan_bits = 0;
    int have_nan = 0, nan_mixed = 0;
    for (int64_t j = 0; j < n; j += 8) {
        const int64_t left = n - j;
        const __m256i m = left >= 8 ? ones : _mm256_cmpgt_epi32(_mm256_set1_epi32((int)left), lane);
        const __m256i b = left >= 8 ? _mm256_loadu_si256((const __m256i *)(src + j))
                                    : _mm256_maskload_epi32((const int *)(src + j), m);
        const __m256i a = _mm256_and_si256(b, absm);
        const __m256i nan = _mm256_cmpgt_epi32(a, inf); /* masked-off lanes are 0: never NaN */
        const unsigned nanm = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(nan));
        if (nanm) vs_note_nans32(src + j, nanm, &nan_bits, &have_nan, &nan_mixed); /* rare */
        pz = _mm256_or_si256(pz, _mm256_and_si256(m, _mm256_cmpeq_epi32(b, zero)));
        nz = _mm256_or_si256(nz, _mm256_cmpeq_epi32(b, sign));
        const __m256i v = _mm256_andnot_si256(_mm256_cmpeq_epi32(a, zero), b); /* -0 -> +0 */
        __m256i k = _mm256_xor_si256(v, _mm256_or_si256(_mm256_srai_epi32(v, 31), sign));
        k = _mm256_xor_si256(_mm256_or_si256(k, nan), bias);
        if (left >= 8) {
            _mm256_storeu_si256((__m256i *)(kd + j), k);
            lo = _mm256_min_epi32(lo, k);
            hi = _mm256_max_epi32(hi, k);
        } else {
            _mm256_maskstore_epi32((int *)(kd + j), m, k);
            lo = _mm256_min_epi32(lo, _mm256_blendv_epi8(imax, k, m));
            hi = _mm256_max_epi32(hi, _mm256_blendv_epi8(imin, k, m));
        }
    }
    const int any_pz = !_mm256_testz_si256(pz, pz), any_nz = !_mm256_testz_si256(nz, nz);
    if ((any_pz && any_nz) || nan_mixed) return 0;
    int32_t klo, khi;
    kwk_hminmax32(lo, hi, &klo, &khi);
    vs_sort_u32_biased(kd, tmp, n, (uint32_t)klo, kwk_bits_for((uint64_t)(uint32_t)((uint32_t)khi - (uint32_t)klo)));
    const __m256i zbits = any_nz ? sign : zero, nbits = _mm256_set1_epi32((int)nan_bits);
    for (int64_t j = 0; j < n; j += 8) {
        const int64_t left = n - j;
        const __m256i m = left >= 8 ? ones : _mm256_cmpgt_epi32(_mm256_set1_epi32((int)left), lane);
        const __m256i k = _mm256_xor_si256(left >= 8 ? _mm256_loadu_si256((const __m256i *)(kd + j))
                                                     : _mm256_maskload_epi32((const int *)(kd + j), m),
                                           bias);
        /* (k & sign) ? k ^ sign : ~k, then the zeros' key and the NaN key */
        __m256i b = _mm256_xor_si256(k, _mm256_or_si256(_mm256_xor_si256(_mm256_srai_epi32(k, 31), ones), sign));
        b = _mm256_blendv_epi8(b, zbits, _mm256_cmpeq_epi32(k, sign));
        b = _mm256_blendv_epi8(b, nbits, _mm256_cmpeq_epi32(k, ones));
        if (left >= 8) _mm256_storeu_si256((__m256i *)(dst + j), b);
        else _mm256_maskstore_epi32((int *)(dst + j), m, b);
    }
    return 1;
}
#endif
#endif

#if defined(__AVX2__)
/* vs_row_f16 / vs_row_bf16 for contiguous rows, 16 keys a vector
 * (inf: the format's infinity bits).  The scalar loops (a branch per NaN,
 * a compare per zero) took most of a 32000-element sort.  Keys too many
 * for the counting sort (key_radix.h) are widened to 32 bits for the vector
 * quicksort: two LSD passes over float keys wait on their crowded top
 * digit's counts.  Native, bfloat16 of randn, ns/key: 1000 10.1 -> 4.2, 4096 7.0 -> 3.7,
 * 32000 10.2 -> 6.8-7.1, 128256 12.8 -> 4.3-4.7, 1M 4.9 -> 1.5. */
static uint16_t vs_h16_bits(uint16_t k, uint16_t zbits, uint16_t nan_bits)
{
    if (k == 0xFFFFu) return nan_bits;
    if (k == 0x8000u) return zbits;
    return (k & 0x8000u) ? (uint16_t)(k ^ 0x8000u) : (uint16_t)~k;
}
static __m256i vs_h16_bits_vec(__m256i k, __m256i zbits, __m256i nbits)
{
    const __m256i sign = _mm256_set1_epi16((short)0x8000), ones = _mm256_set1_epi16(-1);
    __m256i b = _mm256_xor_si256(k, _mm256_or_si256(_mm256_xor_si256(_mm256_srai_epi16(k, 15), ones), sign));
    b = _mm256_blendv_epi8(b, zbits, _mm256_cmpeq_epi16(k, sign));
    return _mm256_blendv_epi8(b, nbits, _mm256_cmpeq_epi16(k, ones));
}
#if defined(__AVX512F__)
/* float16 / bfloat16 rows of one 32-bit network (n <= VS_H16_NET_MAX_N;
 * A/B through install(), msort of x.t(), against vs_row_h16_contig:
 * 4096x32 1.50x, 4096x64 1.40x, 2048x128 1.15x, 1024x256 1.08x, and as
 * fast per element as float32 there):
 * each key made and widened to 32 bits in one pass into tmp, sorted there
 * by simd_qsort.h's network, narrowed back to bits into dst: three passes
 * where vs_row_h16_contig makes six (keys, range, offsets, widen, sort,
 * narrow) for a sort the network does whatever the keys' span.  A row
 * holding both zero signs or a NaN is left to vs_row_h16_contig (-1); with
 * one zero sign and no NaN each key is one bit pattern of the row, so no
 * canonical zero is needed. */
enum { VS_H16_NET_MIN_LEN = 17, VS_H16_NET_MAX_N = QS_BASE_VECS * 16 };
static int vs_row_h16_net(const uint16_t *src, int64_t n, uint16_t *dst, int descending, uint32_t *tmp,
                          uint16_t inf)
{
    const __m512i zero = _mm512_setzero_si512(), sign = _mm512_set1_epi32(0x8000);
    const __m512i absm = _mm512_set1_epi32(0x7FFF), infv = _mm512_set1_epi32(inf);
    const __m512i flip = _mm512_set1_epi32(descending ? 0xFFFF : 0);
    __mmask16 pz = 0, nz = 0;
    for (int64_t j = 0; j < n; j += 16) {
        const int64_t left = n - j;
        const __mmask16 m = left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1);
        const __m512i b = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, src + j));
        if (_mm512_cmpgt_epi32_mask(_mm512_and_si512(b, absm), infv)) return -1; /* a NaN: rare */
        pz |= _mm512_mask_cmpeq_epi32_mask(m, b, zero);
        nz |= _mm512_cmpeq_epi32_mask(b, sign);
        /* key = b ^ (negative ? 0xFFFF : 0x8000), ^ 0xFFFF descending: 0 .. 0xFFFF */
        const __m512i neg = _mm512_srai_epi32(_mm512_slli_epi32(b, 16), 31);
        const __m512i k = _mm512_xor_si512(b, _mm512_xor_si512(_mm512_or_si512(_mm512_and_si512(neg, absm), sign), flip));
        /* whole vectors, the lanes past the row INT32_MAX (they sort last
         * and are never stored): a masked store read back by the network's
         * loads cannot be forwarded (vs_row_32_net) */
        _mm512_storeu_si512((void *)(tmp + j), _mm512_mask_mov_epi32(_mm512_set1_epi32(INT32_MAX), m, k));
    }
    if (pz && nz) return -1;
    const int64_t nv = (n + 15) & ~(int64_t)15; /* tmp holds 2n >= nv keys (n >= 16) */
    qs32s_sort_net((const int32_t *)(const void *)tmp, (int32_t *)(void *)tmp, nv);
    for (int64_t j = 0; j < n; j += 16) {
        const int64_t left = n - j;
        const __mmask16 m = left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1);
        const __m512i k = _mm512_xor_si512(_mm512_loadu_si512((const void *)(tmp + j)), flip);
        /* bit 15 set: a non-negative float, b = k ^ 0x8000; else b = k ^ 0xFFFF */
        const __m512i pos = _mm512_srai_epi32(_mm512_slli_epi32(k, 16), 31);
        const __m512i b = _mm512_xor_si512(k, _mm512_or_si512(_mm512_andnot_si512(pos, absm), sign));
        _mm256_mask_storeu_epi16(dst + j, m, _mm512_cvtepi32_epi16(b));
    }
    return 1;
}
#endif
static int vs_row_h16_contig(const uint16_t *src, int64_t n, uint16_t *dst, int descending,
                             uint16_t *key, uint32_t *tmp, uint16_t inf)
{
    const __m256i zero = _mm256_setzero_si256(), ones = _mm256_set1_epi16(-1);
    const __m256i sign = _mm256_set1_epi16((short)0x8000), absm = _mm256_set1_epi16(0x7FFF);
    const __m256i infv = _mm256_set1_epi16((short)inf), flip = descending ? ones : zero;
    __m256i lo = ones, hi = zero, pz = zero, nz = zero;
    uint16_t nan_bits = 0, slo = 0xFFFFu, shi = 0;
    int have_nan = 0, nan_mixed = 0, spz = 0, snz = 0;
    const uint16_t sflip = descending ? 0xFFFFu : 0;
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
        const __m256i b = _mm256_loadu_si256((const __m256i *)(src + j));
        const __m256i a = _mm256_and_si256(b, absm);
        const __m256i nan = _mm256_cmpgt_epi16(a, infv);
        if (!_mm256_testz_si256(nan, nan)) { /* rare */
            for (int l = 0; l < 16; ++l) {
                if ((src[j + l] & 0x7FFFu) <= inf) continue;
                nan_mixed |= have_nan && src[j + l] != nan_bits;
                nan_bits = src[j + l];
                have_nan = 1;
            }
        }
        pz = _mm256_or_si256(pz, _mm256_cmpeq_epi16(b, zero));
        nz = _mm256_or_si256(nz, _mm256_cmpeq_epi16(b, sign));
        const __m256i v = _mm256_andnot_si256(_mm256_cmpeq_epi16(a, zero), b); /* -0 -> +0 */
        __m256i k = _mm256_xor_si256(v, _mm256_or_si256(_mm256_srai_epi16(v, 15), sign));
        k = _mm256_xor_si256(_mm256_or_si256(k, nan), flip);
        _mm256_storeu_si256((__m256i *)(key + j), k);
        lo = _mm256_min_epu16(lo, k);
        hi = _mm256_max_epu16(hi, k);
    }
    for (; j < n; ++j) { /* the last few, through keys.h's one definition */
        const uint16_t b = src[j];
        uint16_t k = inf == 0x7C00u ? kwk_key_f16(b) : kwk_key_bf16(b);
        if (k == 0xFFFFu) { /* NaN */
            nan_mixed |= have_nan && b != nan_bits;
            nan_bits = b;
            have_nan = 1;
        }
        spz |= b == 0;
        snz |= b == 0x8000u;
        k ^= sflip;
        key[j] = k;
        slo = k < slo ? k : slo;
        shi = k > shi ? k : shi;
    }
    const int any_pz = spz || !_mm256_testz_si256(pz, pz), any_nz = snz || !_mm256_testz_si256(nz, nz);
    if ((any_pz && any_nz) || nan_mixed) return 0;
    uint16_t lov[16], hiv[16];
    _mm256_storeu_si256((__m256i *)lov, lo);
    _mm256_storeu_si256((__m256i *)hiv, hi);
    for (int l = 0; l < 16; ++l) {
        slo = lov[l] < slo ? lov[l] : slo;
        shi = hiv[l] > shi ? hiv[l] : shi;
    }
    const int bits = kwk_bits_for((uint64_t)(uint16_t)(shi - slo));
    const uint16_t zb = any_nz ? 0x8000u : 0;
    const __m256i zbits = _mm256_set1_epi16((short)zb), nbits = _mm256_set1_epi16((short)nan_bits);
    const __m256i lov16 = _mm256_set1_epi16((short)slo);
    /* the keys made relative to the row's smallest */
    for (j = 0; j + 16 <= n; j += 16)
        _mm256_storeu_si256((__m256i *)(key + j),
                            _mm256_sub_epi16(_mm256_loadu_si256((const __m256i *)(key + j)), lov16));
    for (; j < n; ++j) key[j] = (uint16_t)(key[j] - slo);
    /* tmp holds n 8-byte words: counts of the span's buckets fit while
     * 2n >= the span, and then the walk over them costs at most 2n */
    const int64_t span = (int64_t)(uint16_t)(shi - slo) + 1;
    if (bits <= 8 || (int64_t)n * 2 >= span) {
        if (bits <= 8) key_radix_u16(key, (uint16_t *)(void *)tmp, n, 0, bits);
        else key_count_sort_u16(key, tmp, n * 8, n, bits, span);
        for (j = 0; j + 16 <= n; j += 16) {
            const __m256i k = _mm256_add_epi16(_mm256_loadu_si256((const __m256i *)(key + j)), lov16);
            _mm256_storeu_si256((__m256i *)(dst + j),
                                vs_h16_bits_vec(_mm256_xor_si256(k, flip), zbits, nbits));
        }
    } else {
        /* keys - lo < 2^16: as int32 they are non-negative, so the
         * quicksort's signed order is theirs, no bias needed */
        for (j = 0; j + 16 <= n; j += 16) {
            const __m256i k = _mm256_loadu_si256((const __m256i *)(key + j));
            _mm256_storeu_si256((__m256i *)(tmp + j), _mm256_cvtepu16_epi32(_mm256_castsi256_si128(k)));
            _mm256_storeu_si256((__m256i *)(tmp + j + 8), _mm256_cvtepu16_epi32(_mm256_extracti128_si256(k, 1)));
        }
        for (; j < n; ++j) tmp[j] = key[j];
        VS_QSORT_THREADS(simd_qsort_32_biased, tmp, n);
        for (j = 0; j + 16 <= n; j += 16) {
            const __m256i w = _mm256_packus_epi32(_mm256_loadu_si256((const __m256i *)(tmp + j)),
                                                  _mm256_loadu_si256((const __m256i *)(tmp + j + 8)));
            const __m256i k = _mm256_add_epi16(_mm256_permute4x64_epi64(w, 0xD8), lov16);
            _mm256_storeu_si256((__m256i *)(dst + j),
                                vs_h16_bits_vec(_mm256_xor_si256(k, flip), zbits, nbits));
        }
        for (int64_t i = j; i < n; ++i) key[i] = (uint16_t)tmp[i];
    }
    for (; j < n; ++j) dst[j] = vs_h16_bits((uint16_t)((uint16_t)(key[j] + slo) ^ sflip), zb, nan_bits);
    return 1;
}
#endif

#if defined(__AVX2__)
/* vs_row_i32 / vs_row_u32 for contiguous rows.  An int32's bits
 * are already a key the quicksort's signed compares order (a uint32's
 * after flipping its top bit, a descending row's after flipping all bits),
 * so the row is one xor pass in, the sort, one xor pass out; vs_row_i32's
 * scalar passes, and the unbiased keys' two bias passes, are gone (native,
 * values only, int32 of full range, ns/el before -> after, min of 9: 64x1000
 * 4.5-7.0 -> 5.0-5.5, 64x4096 8.8 -> 6.2, 1M 12.9 -> 11.9; uint32 alike;
 * rows of 48..512, batched before, see vs_contig32_takes). */
static int vs_row_b32_contig(const uint32_t *src, int64_t n, uint32_t *dst, int descending,
                             uint32_t top, uint32_t *key, uint32_t *tmp)
{
    const uint32_t bias = top ^ (descending ? 0xFFFFFFFFu : 0u);
#if defined(__AVX512F__)
    /* int32 ascending rows of one network: the values are the keys, sorted
     * from the row straight into dst (the network loads every vector
     * before it stores), no passes */
    if (bias == 0 && n <= VS_NET32_MAX_N) {
        qs32s_sort_net((const int32_t *)(const void *)src, (int32_t *)(void *)dst, n);
        return 1;
    }
    if (top != 0 && !descending && n <= VS_NET32_MAX_N) { /* uint32 ascending: the unsigned network */
        qs32_sort_net(src, dst, n);
        return 1;
    }
    if (n <= VS_NET32_MAX_N) return vs_row_32_net(src, n, dst, 0, bias); /* descending */
#endif
    const __m256i bv = _mm256_set1_epi32((int)bias);
    uint32_t *kd = (uint32_t *)vs_key_home(src, dst, n * 4, key);
    __m256i lo = _mm256_set1_epi32(INT32_MAX), hi = _mm256_set1_epi32(INT32_MIN);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        const __m256i k = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(src + j)), bv);
        _mm256_storeu_si256((__m256i *)(kd + j), k);
        lo = _mm256_min_epi32(lo, k);
        hi = _mm256_max_epi32(hi, k);
    }
    int32_t klo, khi;
    kwk_hminmax32(lo, hi, &klo, &khi);
    for (; j < n; ++j) {
        const int32_t k = (int32_t)(src[j] ^ bias);
        kd[j] = (uint32_t)k;
        klo = k < klo ? k : klo;
        khi = k > khi ? k : khi;
    }
    vs_sort_u32_biased(kd, tmp, n, (uint32_t)klo, kwk_bits_for((uint64_t)(uint32_t)((uint32_t)khi - (uint32_t)klo)));
    if (bias == 0 && kd == dst) return 1; /* int32 ascending: the keys are the values */
    for (j = 0; j + 8 <= n; j += 8)
        _mm256_storeu_si256((__m256i *)(dst + j),
                            _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(kd + j)), bv));
    for (; j < n; ++j) dst[j] = kd[j] ^ bias;
    return 1;
}

/* vs_row_i64 / u64 / f64 for contiguous rows, four keys a vector:
 * keys made biased (signed 64-bit compares order them; a float's is its
 * bits with the 63 low bits flipped when negative, -0.0 as +0.0, NaN the
 * largest) in one pass that also finds the range, both zeros and the NaN
 * bits; then the same choice as VS_DEFINE's: 32-bit offsets where the
 * range fits, the indexed sort (-1) for the lengths where AVX2's
 * quicksort of wide keys loses, the quicksort of the biased keys past 40
 * bits, the radix sort of offsets between; one pass maps keys back.  The
 * scalar passes (and the quicksort's own two bias passes) were half of a
 * 4096x64 float64 sort (native, values only, ns/el before -> after, two
 * runs, min of 7: float64 of randn 4096x64 13.3-15.1 -> 10.2-10.3, 64x1000
 * 17.0-17.5 -> 11.4-12.9, 64x4096 19.0-19.6 -> 14.5-14.9; int64 of full
 * range 1M 27.3-27.6 -> 22.8-23.2; int64 of a 20-bit span 4096x64 4.2 ->
 * 3.1-3.2). */
/* (AVX-512VL has the 64-bit min and max: one uop instead of a compare and
 * a blend, whose latency chained the range pass through lo and hi) */
#if defined(__AVX512VL__)
static inline __m256i vs_min64(__m256i a, __m256i b) { return _mm256_min_epi64(a, b); }
static inline __m256i vs_max64(__m256i a, __m256i b) { return _mm256_max_epi64(a, b); }
#else
static inline __m256i vs_min64(__m256i a, __m256i b) { return _mm256_blendv_epi8(a, b, _mm256_cmpgt_epi64(a, b)); }
static inline __m256i vs_max64(__m256i a, __m256i b) { return _mm256_blendv_epi8(b, a, _mm256_cmpgt_epi64(a, b)); }
#endif

#if defined(__AVX512F__)
/* vs_row_b64_contig's float64 passes in eight lanes, over the whole
 * vectors of the row (the rest left to its four-lane loop and scalar
 * tail): the keys into kd with their range, the zeros of either sign and
 * the NaNs folded into the four-lane accumulators; returns how many keys
 * it made.  (The conversions were an eighth of a 64x1000 float64
 * values-only sort in four lanes.) */
static int64_t vs_f64_keys512(const uint64_t *src, int64_t n, uint64_t *kd, uint64_t bias,
                              __m256i *lo, __m256i *hi, __m256i *pz, __m256i *nz, __m256i *anynan)
{
    const __m512i zero = _mm512_setzero_si512(), lowv = _mm512_set1_epi64(INT64_MAX);
    const __m512i signv = _mm512_set1_epi64(INT64_MIN), inf = _mm512_set1_epi64(0x7FF0000000000000ll);
    const __m512i bv = _mm512_set1_epi64((long long)bias);
    __m512i l = _mm512_set1_epi64(INT64_MAX), h = _mm512_set1_epi64(INT64_MIN);
    __mmask8 p = 0, z = 0, na = 0;
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        const __m512i b = _mm512_loadu_si512((const void *)(src + j));
        const __m512i a = _mm512_and_si512(b, lowv);
        const __mmask8 nan = _mm512_cmpgt_epi64_mask(a, inf);
        p |= _mm512_cmpeq_epi64_mask(b, zero);
        z |= _mm512_cmpeq_epi64_mask(b, signv);
        na |= nan;
        const __m512i v = _mm512_maskz_mov_epi64(_mm512_cmpneq_epi64_mask(a, zero), b); /* -0 -> +0 */
        __m512i k = _mm512_xor_si512(v, _mm512_and_si512(_mm512_srai_epi64(v, 63), lowv));
        k = _mm512_xor_si512(_mm512_mask_mov_epi64(k, nan, lowv), bv); /* NaN: INT64_MAX */
        _mm512_storeu_si512((void *)(kd + j), k);
        l = _mm512_min_epi64(l, k);
        h = _mm512_max_epi64(h, k);
    }
    *lo = _mm256_min_epi64(*lo, _mm256_min_epi64(_mm512_castsi512_si256(l), _mm512_extracti64x4_epi64(l, 1)));
    *hi = _mm256_max_epi64(*hi, _mm256_max_epi64(_mm512_castsi512_si256(h), _mm512_extracti64x4_epi64(h, 1)));
    const __m256i ones = _mm256_set1_epi64x(-1);
    if (p) *pz = ones;
    if (z) *nz = ones;
    if (na) *anynan = ones;
    return j;
}
/* the keys back to bits: the zeros' bits zb, the NaNs' nan_bits */
static int64_t vs_f64_bits512(const uint64_t *kd, int64_t n, uint64_t *dst, uint64_t bias, uint64_t zb,
                              uint64_t nan_bits)
{
    const __m512i zero = _mm512_setzero_si512(), lowv = _mm512_set1_epi64(INT64_MAX);
    const __m512i bv = _mm512_set1_epi64((long long)bias), zbits = _mm512_set1_epi64((long long)zb);
    const __m512i nbits = _mm512_set1_epi64((long long)nan_bits);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        const __m512i c = _mm512_xor_si512(_mm512_loadu_si512((const void *)(kd + j)), bv);
        __m512i b = _mm512_xor_si512(c, _mm512_and_si512(_mm512_srai_epi64(c, 63), lowv));
        b = _mm512_mask_mov_epi64(b, _mm512_cmpeq_epi64_mask(c, zero), zbits);
        b = _mm512_mask_mov_epi64(b, _mm512_cmpeq_epi64_mask(c, lowv), nbits);
        _mm512_storeu_si512((void *)(dst + j), b);
    }
    return j;
}
#endif

/* vs_row_b64_contig's simple passes over a slice [from, to): 64-bit keys
 * to 32-bit offsets from lo and back, and keys to values (^ bias) */
typedef struct {
    uint64_t *kd;
    uint32_t *k32;
    uint64_t lo; /* the smallest key, or the bias */
    uint64_t *dst;
} vs_offsets64;
static void vs_offsets_down(void *ctx, int p, int64_t from, int64_t to)
{
    (void)p;
    const vs_offsets64 *c = (const vs_offsets64 *)ctx;
    for (int64_t i = from; i < to; ++i) c->k32[i] = (uint32_t)(c->kd[i] - c->lo);
}
static void vs_offsets_up(void *ctx, int p, int64_t from, int64_t to)
{
    (void)p;
    const vs_offsets64 *c = (const vs_offsets64 *)ctx;
    for (int64_t i = from; i < to; ++i) c->kd[i] = c->lo + c->k32[i];
}
static void vs_unbias64(void *ctx, int p, int64_t from, int64_t to)
{
    (void)p;
    const vs_offsets64 *c = (const vs_offsets64 *)ctx;
    for (int64_t i = from; i < to; ++i) c->dst[i] = c->kd[i] ^ c->lo;
}

static int vs_row_b64_contig(int dtype, const uint64_t *src, int64_t n, uint64_t *dst, int descending,
                             uint64_t *key, uint64_t *tmp)
{
    const int is_float = dtype == KWK_FLOAT64;
    const uint64_t sign = 0x8000000000000000ull, low63 = ~sign, flip = descending ? ~(uint64_t)0 : 0;
    /* integers: key ^ bias; floats: (canonical bits ^ negative-mask & low63) ^ flip */
    const uint64_t bias = (dtype == KWK_UINT64 ? sign : 0) ^ flip;
#if defined(__AVX512F__)
    if (dtype == KWK_INT64 && bias == 0 && n <= vs_net64_max_n()) { /* as vs_row_b32_contig's */
        qs64s_sort_net((const int64_t *)(const void *)src, (int64_t *)(void *)dst, n);
        return 1;
    }
#endif
    const __m256i zero = _mm256_setzero_si256(), lowv = _mm256_set1_epi64x((long long)low63);
    const __m256i bv = _mm256_set1_epi64x((long long)bias), signv = _mm256_set1_epi64x((long long)sign);
    const __m256i inf = _mm256_set1_epi64x(0x7FF0000000000000ll);
    uint64_t *kd = (uint64_t *)vs_key_home(src, dst, n * 8, key);
    __m256i lo = _mm256_set1_epi64x(INT64_MAX), hi = _mm256_set1_epi64x(INT64_MIN);
    __m256i pz = zero, nz = zero, anynan = zero;
    int64_t j = 0;
#if defined(__AVX512F__)
    if (is_float) /* eight keys a vector, masks in mask registers (vs_f64_keys512) */
        j = vs_f64_keys512(src, n, kd, bias, &lo, &hi, &pz, &nz, &anynan);
#endif
    for (; j + 4 <= n; j += 4) {
        const __m256i b = _mm256_loadu_si256((const __m256i *)(src + j));
        __m256i k;
        if (is_float) {
            const __m256i a = _mm256_and_si256(b, lowv);
            const __m256i nan = _mm256_cmpgt_epi64(a, inf);
            const __m256i isz = _mm256_cmpeq_epi64(a, zero);
            pz = _mm256_or_si256(pz, _mm256_cmpeq_epi64(b, zero));
            nz = _mm256_or_si256(nz, _mm256_cmpeq_epi64(b, signv));
            anynan = _mm256_or_si256(anynan, nan);
            const __m256i v = _mm256_andnot_si256(isz, b); /* -0 -> +0 */
            k = _mm256_xor_si256(v, _mm256_and_si256(_mm256_cmpgt_epi64(zero, v), lowv));
            k = _mm256_blendv_epi8(k, lowv, nan); /* NaN: INT64_MAX, the largest */
            k = _mm256_xor_si256(k, bv);
        } else {
            k = _mm256_xor_si256(b, bv);
        }
        _mm256_storeu_si256((__m256i *)(kd + j), k);
        lo = vs_min64(lo, k);
        hi = vs_max64(hi, k);
    }
    int64_t klo, khi;
    kwk_hminmax64(lo, hi, &klo, &khi);
    int spz = !_mm256_testz_si256(pz, pz), snz = !_mm256_testz_si256(nz, nz);
    int have_nan = 0, nan_mixed = 0;
    uint64_t nan_bits = 0;
    if (is_float && !_mm256_testz_si256(anynan, anynan)) { /* rare: which NaN bits */
        for (int64_t i = 0; i < j; ++i)
            if ((src[i] & low63) > 0x7FF0000000000000ull) {
                nan_mixed |= have_nan && src[i] != nan_bits;
                nan_bits = src[i];
                have_nan = 1;
            }
    }
    for (; j < n; ++j) { /* the last few, through keys.h's one definition */
        const uint64_t b = src[j];
        uint64_t ok = b;
        if (is_float) {
            spz |= b == 0;
            snz |= b == sign;
            ok = kwk_key_f64(b) ^ sign; /* the order key, biased */
            if (ok == low63) { /* NaN */
                nan_mixed |= have_nan && b != nan_bits;
                nan_bits = b;
                have_nan = 1;
            }
        }
        const int64_t k = (int64_t)(ok ^ bias);
        kd[j] = (uint64_t)k;
        klo = k < klo ? k : klo;
        khi = k > khi ? k : khi;
    }
    if (is_float && ((spz && snz) || nan_mixed)) return 0;
    const uint64_t span = (uint64_t)khi - (uint64_t)klo;
    const int bits = kwk_bits_for(span);
    if (bits > 40 && n > VS_QSORT64_MAX_N && n <= VS_INDEXED64_MAX_N) return -1;
#if defined(__AVX512F__)
    const int wide_keys_row = VS_QSORT64 && vs_wide_keys_row(n);
#else
    const int wide_keys_row = 0;
#endif
    if (bits <= 32 && !wide_keys_row) {
        /* offsets from the smallest, sorted as 32-bit keys: the offsets in
         * tmp's first half, the radix sort's n keys of scratch in its second */
        uint32_t *k32 = (uint32_t *)(void *)tmp, *t32 = k32 + n;
        vs_offsets64 c = {kd, k32, (uint64_t)klo, 0};
        vs_in_slices(n, vs_offsets_down, &c);
        vs_sort_u32(k32, t32, n, 0, bits);
        vs_in_slices(n, vs_offsets_up, &c);
    } else if (bits > 40 || wide_keys_row) {
        VS_QSORT_THREADS(simd_qsort_64_biased, kd, n);
    } else {
        for (int64_t i = 0; i < n; ++i) kd[i] -= (uint64_t)klo;
        key_radix_u64(kd, tmp, n, 0, bits);
        for (int64_t i = 0; i < n; ++i) kd[i] += (uint64_t)klo;
    }
    if (!is_float) {
        if (bias == 0 && kd == dst) return 1; /* int64 ascending: the keys are the values */
        vs_offsets64 c = {kd, NULL, bias, dst};
        vs_in_slices(n, vs_unbias64, &c);
        return 1;
    }
    const uint64_t zb = snz ? sign : 0;
    const __m256i zbits = _mm256_set1_epi64x((long long)zb), nbits = _mm256_set1_epi64x((long long)nan_bits);
    j = 0;
#if defined(__AVX512F__)
    j = vs_f64_bits512(kd, n, dst, bias, zb, nan_bits);
#endif
    for (; j + 4 <= n; j += 4) {
        const __m256i c = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(kd + j)), bv);
        __m256i b = _mm256_xor_si256(c, _mm256_and_si256(_mm256_cmpgt_epi64(zero, c), lowv));
        b = _mm256_blendv_epi8(b, zbits, _mm256_cmpeq_epi64(c, zero));
        b = _mm256_blendv_epi8(b, nbits, _mm256_cmpeq_epi64(c, lowv));
        _mm256_storeu_si256((__m256i *)(dst + j), b);
    }
    for (; j < n; ++j) {
        const uint64_t c = kd[j] ^ bias;
        dst[j] = c == low63 ? nan_bits : c == 0 ? zb : (c & sign) ? c ^ low63 : c;
    }
    return 1;
}
#endif

/* Contiguous float16 and bfloat16 rows from VS_H16_MIN_LEN take the bare
 * keys too (vs_row_h16_contig: counting sort or the 32-bit quicksort),
 * where the batch network's (key, index) pairs had taken rows up to 512.
 * Measured (torch.msort of x.t() under install(), AVX-512, us, min of 3
 * alternating runs, batch -> bare keys): float16 4096x24 225 -> 270 (so
 * not there), 4096x32 353 -> 195, 4096x64 782 -> 353 (numpy's np.sort
 * 228), 4096x128 1915 -> 620, 1024x256 1181 -> 338; bfloat16 4096x64 874
 * -> 353, 2048x200 1752 -> 683, 512x512 1361 -> 419. */
#if defined(__AVX2__)
#define VS_H16_CONTIG 1
#else
#define VS_H16_CONTIG 0
#endif
#if defined(__AVX512F__)
/* from 17 where vs_row_h16_net takes the short rows (A/B through
 * install(), msort of x.t(), bfloat16, 4096 rows of 20 / 24 / 31: 1.27x,
 * 1.57x, 2.17x against the batch network's (key, index) pairs; rows of
 * 16 or fewer go to the short-row kernels before this) */
enum { VS_H16_MIN_LEN = VS_H16_NET_MIN_LEN };
#else
#if defined(__AVX512F__)
/* from 17 where vs_row_h16_net takes the short rows (A/B through
 * install(), msort of x.t(), bfloat16, 4096 rows of 20 / 24 / 31: 1.27x,
 * 1.57x, 2.17x against the batch network's (key, index) pairs; rows of
 * 16 or fewer go to the short-row kernels before this) */
enum { VS_H16_MIN_LEN = VS_H16_NET_MIN_LEN };
#else
enum { VS_H16_MIN_LEN = 32 };
#endif
#endif

/* Whether a values-only row of this dtype and length (src_sl: its
 * element step, 1 when contiguous) takes the bare-key sort at all; the
 * others keep the indexed sort from the start. */
static int vs_takes(int dtype, int64_t len, int64_t src_sl)
{
    if (len >= VS_MIN_LEN) return 1;
    if (KWK_DTYPES[dtype].elem_size == 8)
        return VS_QSORT64 && (len > 16 || (src_sl == 1 && len >= VS_B64_MIN_LEN));
    if (VS_H16_CONTIG && (dtype == KWK_FLOAT16 || dtype == KWK_BFLOAT16))
        return src_sl == 1 && len >= VS_H16_MIN_LEN;
    return src_sl == 1 && vs_contig32_takes(dtype) && len >= VS_F32_MIN_LEN;
}

/* Sort one row's values into dst (step in bytes) if vs_row can do it
 * exactly; returns 1 when done, 0 to use the indexed sort, -1 to use the
 * indexed sort in any order of equal keys (their elements have one bit
 * pattern each, so no order of them shows in the values: wide 64-bit
 * keys, which the indexed sort orders faster).  key and tmp
 * hold len elements of the widest key (8 bytes).  bool (any nonzero byte is
 * true; its bits are copied as they are) takes the indexed sort. */
static int vs_sort_values(int dtype, const char *row, int64_t step, int64_t n, char *dst,
                          int64_t dstep, int descending, void *key, void *tmp)
{
    switch (dtype) {
    case KWK_UINT8: return vs_row_u8(row, step, n, dst, dstep, descending, key, tmp);
    case KWK_INT8: return vs_row_i8(row, step, n, dst, dstep, descending, key, tmp);
    case KWK_UINT16: return vs_row_u16(row, step, n, dst, dstep, descending, key, tmp);
    case KWK_INT16: return vs_row_i16(row, step, n, dst, dstep, descending, key, tmp);
#if defined(__AVX2__)
    case KWK_FLOAT16:
    case KWK_BFLOAT16:
        if (step == 2 && dstep == 2) {
#if defined(__AVX512F__)
            if (n <= VS_H16_NET_MAX_N &&
                vs_row_h16_net((const uint16_t *)(const void *)row, n, (uint16_t *)(void *)dst, descending, tmp,
                               dtype == KWK_FLOAT16 ? 0x7C00u : 0x7F80u) > 0)
                return 1;
#endif
            return vs_row_h16_contig((const uint16_t *)(const void *)row, n, (uint16_t *)(void *)dst,
                                     descending, key, tmp, dtype == KWK_FLOAT16 ? 0x7C00u : 0x7F80u);
        }
        return dtype == KWK_FLOAT16 ? vs_row_f16(row, step, n, dst, dstep, descending, key, tmp)
                                    : vs_row_bf16(row, step, n, dst, dstep, descending, key, tmp);
#else
    case KWK_FLOAT16: return vs_row_f16(row, step, n, dst, dstep, descending, key, tmp);
    case KWK_BFLOAT16: return vs_row_bf16(row, step, n, dst, dstep, descending, key, tmp);
#endif
    case KWK_UINT32:
    case KWK_INT32:
#if defined(__AVX2__)
        if (step == 4 && dstep == 4)
            return vs_row_b32_contig((const uint32_t *)(const void *)row, n, (uint32_t *)(void *)dst,
                                     descending, dtype == KWK_UINT32 ? 0x80000000u : 0u, key, tmp);
#endif
        return dtype == KWK_UINT32 ? vs_row_u32(row, step, n, dst, dstep, descending, key, tmp)
                                   : vs_row_i32(row, step, n, dst, dstep, descending, key, tmp);
    case KWK_FLOAT32:
#if defined(__AVX2__)
        if (step == 4 && dstep == 4)
            return vs_row_f32_contig((const uint32_t *)(const void *)row, n, (uint32_t *)(void *)dst,
                                     descending, key, tmp);
#endif
        return vs_row_f32(row, step, n, dst, dstep, descending, key, tmp);
    case KWK_UINT64:
    case KWK_INT64:
    case KWK_FLOAT64:
#if defined(__AVX512F__)
        if (dtype == KWK_FLOAT64 && step == 8 && dstep == 8 && !descending && !kwk_fp_flushes_denormals() &&
            vs_row_f64_native((const uint64_t *)(const void *)row, n, (uint64_t *)(void *)dst, key))
            return 1;
#endif
#if defined(__AVX2__)
        if (step == 8 && dstep == 8)
            return vs_row_b64_contig(dtype, (const uint64_t *)(const void *)row, n,
                                     (uint64_t *)(void *)dst, descending, key, tmp);
#endif
        return dtype == KWK_UINT64  ? vs_row_u64(row, step, n, dst, dstep, descending, key, tmp)
               : dtype == KWK_INT64 ? vs_row_i64(row, step, n, dst, dstep, descending, key, tmp)
                                    : vs_row_f64(row, step, n, dst, dstep, descending, key, tmp);
    default: return 0;
    }
}

#endif
