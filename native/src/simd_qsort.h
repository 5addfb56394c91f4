/*
 * simd_qsort.h - AVX-512 quicksort of bare unsigned keys: uint64_t (the
 * packed key << ibits | index words of indexed sorts, all distinct) and
 * uint32_t (values-only sorts, where keys repeat); each also in signed
 * order (simd_qsort_*_biased, for biased keys); and doubles in the floats'
 * own order (simd_qsort_64f: values_sort.h's float64 rows with no NaN and
 * one zero sign, QS_FORDER).  Compiled only where
 * __AVX512F__ is on (targets/avx512.c); defines KWK_HAVE_SIMD_QSORT.
 *
 * - Ranges of at most QS_BASE_VECS vectors are sorted in registers (masked
 *   loads pad the tail with the largest key).  From 4 vectors, columns
 *   first (qs*_sort_cols): each lane's column across the vectors by
 *   whole-vector min/max, then blocks of 2, 4, .. lanes merged, then a
 *   transpose to rows.  That needs far fewer lane permutations than the
 *   first design (each vector sorted by a bitonic network of permutations,
 *   then bitonic merges across vectors ending each round with log2(lanes)
 *   in-vector stages), kept for 1 and 2 vectors (qs*_sort_nvec).  Measured
 *   (native, random keys sorted in blocks of B, ns/key, before -> after):
 *   u64 B=32 1.95 -> 1.07, 64 2.25 -> 1.23, 128 2.45 -> 1.56; u32 B=64
 *   0.86 -> 0.53, 128 1.09 -> 0.70, 256 1.43 -> 0.86 (numpy's sort of
 *   x86-simd-sort, rows of B in the same shape: u64 1.17, 1.29, 1.58; u32
 *   0.62, 0.65, 0.77); whole sorts of 1M keys u64 7.6 -> 6.3, u32 3.6 ->
 *   3.0 (numpy 6.4, 3.3).
 * - Ranges of up to twice that are two such sorts and a merge of the two
 *   (qs*_sort_base): a partition of so few keys cost as much as a network.
 *   Measured on AMD Zen 4 with the merge then used (qs*_merge2: a block of
 *   L at a time from whichever run comes next; native, blocks of n random
 *   keys, ns/key, alternating runs): u64 n=256 3.03 -> 2.25, 512 3.54 ->
 *   3.24, 2048 4.19 -> 3.95, 16384 5.23 -> 4.93 (129: 2.72 -> 2.81); u32
 *   n=512 1.76 -> 1.34, 2048 2.16 -> 1.87, 16384 2.54 -> 2.33.  (One
 *   network of 32 vectors instead cost 700 ns whatever the range's length:
 *   spills.)  The merge is now one bitonic merge of the two runs' 2 *
 *   QS_BASE_VECS vectors (qs*_sort_pair: throughput where merge2 waits on
 *   each block's choice; Intel Xeon, AVX-512, native, random keys in rows
 *   of n, ns/key, merge2 -> bitonic, min of 7: u32 512 1.19 -> 1.06, 1000
 *   1.53 -> 1.42, 4096 1.79 -> 1.69, 65536 2.36 -> 2.25; u64 256 2.20 ->
 *   1.97, 512 2.90 -> 2.76, 1000 3.22 -> 3.05, 4096 3.84 -> 3.65).
 * - Larger ranges are partitioned around the median of one vector of
 *   samples: QS_UNROLL vectors are held back from each end, then QS_UNROLL
 *   vectors at a time are read from whichever end has less free room and
 *   each is written with two compress stores (vpcompress to memory: faster
 *   here than compressing in a register and storing the whole vector,
 *   4.0 vs 4.6 ns/element for 100k u32 keys), into room already read.
 *   Elements <= pivot go left.  When that is all of them (the pivot is the
 *   range's largest key) the range is partitioned again by < pivot and the
 *   right part, all equal to the pivot, is done: repeated keys cannot make
 *   the sort quadratic, an all-equal range costs two passes.
 * - Past 2 * log2(n) + 4 levels a range goes to a heap sort, so the worst
 *   case stays O(n log n).
 * - simd_qsort_*_par: a long row on several threads (values_sort.h), cut
 *   into ranges by partitions around the median of 127 sampled keys, each
 *   range's keys at or below the next's (qsort_drivers.h qs_par_cut), the
 *   ranges sorted side by side by the caller's runner.
 * The smaller side recurses, the larger loops: stack depth O(log n).
 */
#ifndef KWK_SIMD_QSORT_H
#define KWK_SIMD_QSORT_H

#if defined(__AVX512F__)
#include <immintrin.h>
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include "qsort_drivers.h"
#include "sn_pairs.h"

#define KWK_HAVE_SIMD_QSORT 1
/* the longest row of packed words the quicksort takes (sort_kernels.h) */
#define KWK_SIMD_QSORT64_MAX_N (1 << 24)

/* QS_BASE_VECS: 16 vectors (128 u64 / 256 u32 keys) fit the 32 zmm
 * registers with room for the merge's temporaries (8 measured: slower at
 * 256 keys, alike above).  QS_UNROLL: vectors read per step of the
 * partition loop (2, 4, 8 measured: on AMD Zen 4 4 and 8 alike, 2 slower;
 * on an Intel Xeon 8 ahead of 4 from 4096 keys: native, random keys,
 * ns/key, 4 -> 8, min of 7, two runs: u32 65536 2.19 -> 2.10, 1M 2.80-2.83
 * -> 2.75-2.79; u64 4096 3.56-3.60 -> 3.44, 65536 4.70 -> 4.42, 1M 6.14 ->
 * 5.85-5.94; 2 slower). */
enum { QS_BASE_VECS = 16, QS_UNROLL = 8 };

#define QS_INLINE static inline __attribute__((always_inline))

/* How the partition stores a vector's lanes (qs*_cstore): Intel's cores
 * run a compress to memory well, and there it beat a compress in a
 * register and a masked store (native, random keys, ns/key, register ->
 * memory, min of 7: u32 4096 1.87 -> 1.77, 65536 2.50 -> 2.27, 1M 3.23 ->
 * 2.82; u64 4096 3.95 -> 3.66, 65536 5.23 -> 4.67, 1M 6.72 -> 5.96); AMD's
 * Zen 4 runs the memory form as microcode (qs*_cstore).  The CPU is
 * asked once (relaxed atomics: racing first calls store the same answer;
 * values_sort.h asks the same); tests set qs_compress_memory_form (1
 * memory, 0 register) to check both. */
static _Atomic int qs_intel_core = -1;
static inline int qs_cpu_is_intel(void)
{
    int v = atomic_load_explicit(&qs_intel_core, memory_order_relaxed);
    if (v < 0) {
        __builtin_cpu_init();
        v = __builtin_cpu_is("intel") != 0;
        atomic_store_explicit(&qs_intel_core, v, memory_order_relaxed);
    }
    return v;
}
static _Atomic int qs_compress_memory_form = -1;
static inline int qs_compress_to_memory(void)
{
    const int v = atomic_load_explicit(&qs_compress_memory_form, memory_order_relaxed);
    return v < 0 ? qs_cpu_is_intel() : v;
}

/* ---- per-type primitives: 8 x u64 and 16 x u32 lanes ------------------ */

QS_INLINE __m512i qs64_swap(__m512i v, int j) /* lane i <- lane i ^ j */
{
    switch (j) {
    case 4: return _mm512_shuffle_i64x2(v, v, 0x4E);
    case 2: return _mm512_shuffle_i64x2(v, v, 0xB1);
    default: return _mm512_shuffle_epi32(v, _MM_PERM_BADC);
    }
}
QS_INLINE __m512i qs32_swap(__m512i v, int j)
{
    switch (j) {
    case 8: return _mm512_shuffle_i64x2(v, v, 0x4E);
    case 4: return _mm512_shuffle_i64x2(v, v, 0xB1);
    case 2: return _mm512_shuffle_epi32(v, _MM_PERM_BADC);
    default: return _mm512_shuffle_epi32(v, _MM_PERM_CDAB);
    }
}
QS_INLINE __m512i qs64_rev(__m512i v)
{
    return _mm512_permutexvar_epi64(_mm512_set_epi64(0, 1, 2, 3, 4, 5, 6, 7), v);
}
QS_INLINE __m512i qs32_rev(__m512i v)
{
    return _mm512_permutexvar_epi32(
        _mm512_set_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), v);
}
/* Per-lane primitives of one instantiation S: element type T, lane width
 * W (64 or 32 bits, MASK its mask type), C the order of compares, min and
 * max (epu: unsigned keys; epi: signed, for the biased keys of
 * simd_qsort_*_biased, whose API is simd_qsort_avx2.h's, so values_sort.h's
 * contiguous row passes, which make biased keys since AVX2 has no unsigned
 * compares, serve both targets; F: floats themselves, QS_FORDER).  Loads,
 * stores and moves (QS_MOVES) are the same for every order. */
#define QS_ORDER(S, T, W, MASK, C)                                            \
    QS_INLINE __m512i qs##S##_min(__m512i a, __m512i b) { return _mm512_min_##C##W(a, b); } \
    QS_INLINE __m512i qs##S##_max(__m512i a, __m512i b) { return _mm512_max_##C##W(a, b); } \
    /* lanes in m take max(a, b), others src */                             \
    QS_INLINE __m512i qs##S##_mask_max(__m512i src, uint32_t m, __m512i a, __m512i b) \
    {                                                                         \
        return _mm512_mask_max_##C##W(src, (MASK)m, a, b);                    \
    }                                                                         \
    QS_INLINE __m512i qs##S##_set1(T x) { return _mm512_set1_epi##W(x); }    \
    QS_INLINE uint32_t qs##S##_le(__m512i v, __m512i p) { return _mm512_cmple_##C##W##_mask(v, p); } \
    QS_INLINE uint32_t qs##S##_lt(__m512i v, __m512i p) { return _mm512_cmplt_##C##W##_mask(v, p); }
/* The order of floats (F: ps or pd), for rows with no NaN, no subnormal
 * read as zero, and zeros of one sign (values_sort.h checks): then two
 * lanes compare equal only when their bits are equal, so a min or max that
 * returns either gives the same bits.  On Intel's cores the float min and
 * max run on two ports where the integer ones have one (a register-only
 * loop of independent minima, ns/op: vminps / vminpd 0.155, vpminsd /
 * vpminsq 0.245), and the keys need no conversion passes. */
#define QS_FORDER(S, T, MASK, F)                                              \
    QS_INLINE __m512i qs##S##_min(__m512i a, __m512i b)                       \
    {                                                                         \
        return _mm512_cast##F##_si512(_mm512_min_##F(_mm512_castsi512_##F(a), _mm512_castsi512_##F(b))); \
    }                                                                         \
    QS_INLINE __m512i qs##S##_max(__m512i a, __m512i b)                       \
    {                                                                         \
        return _mm512_cast##F##_si512(_mm512_max_##F(_mm512_castsi512_##F(a), _mm512_castsi512_##F(b))); \
    }                                                                         \
    QS_INLINE __m512i qs##S##_mask_max(__m512i src, uint32_t m, __m512i a, __m512i b) \
    {                                                                         \
        return _mm512_cast##F##_si512(_mm512_mask_max_##F(_mm512_castsi512_##F(src), (MASK)m, \
                                                            _mm512_castsi512_##F(a), _mm512_castsi512_##F(b))); \
    }                                                                         \
    QS_INLINE __m512i qs##S##_set1(T x) { return _mm512_cast##F##_si512(_mm512_set1_##F(x)); } \
    QS_INLINE uint32_t qs##S##_le(__m512i v, __m512i p)                       \
    {                                                                         \
        return _mm512_cmp_##F##_mask(_mm512_castsi512_##F(v), _mm512_castsi512_##F(p), _CMP_LE_OQ); \
    }                                                                         \
    QS_INLINE uint32_t qs##S##_lt(__m512i v, __m512i p)                       \
    {                                                                         \
        return _mm512_cmp_##F##_mask(_mm512_castsi512_##F(v), _mm512_castsi512_##F(p), _CMP_LT_OQ); \
    }
#define QS_MOVES(S, T, W, MASK)                                               \
    QS_INLINE __m512i qs##S##_load(const T *p) { return _mm512_loadu_si512((const void *)p); } \
    QS_INLINE void qs##S##_store(T *p, __m512i v) { _mm512_storeu_si512((void *)p, v); } \
    /* masked-out lanes are not read (no fault) and take fill */            \
    QS_INLINE __m512i qs##S##_mload(const T *p, uint32_t m, __m512i fill)     \
    {                                                                         \
        return _mm512_mask_loadu_epi##W(fill, (MASK)m, p);                    \
    }                                                                         \
    QS_INLINE void qs##S##_mstore(T *p, uint32_t m, __m512i v) { _mm512_mask_storeu_epi##W(p, (MASK)m, v); } \
    /* the lanes in m take p[0], p[1], .. in order, the others fill */     \
    QS_INLINE __m512i qs##S##_xload(__m512i fill, uint32_t m, const T *p)     \
    {                                                                         \
        return _mm512_mask_expandloadu_epi##W(fill, (MASK)m, p);              \
    }                                                                         \
    /* compressed in a register, then a masked store of the first          \
     * popcount(m) lanes: the bytes a compress store to memory writes, but   \
     * AMD's Zen 4 runs that form as microcode (its optimisation guide says  \
     * to avoid it): values-only sort of 1M float32 there 34.6 -> 4.05 ms.   \
     * Merge masking (v as the source): Zen 5's zero-masking compress has a  \
     * false dependency (LLVM #206849); alike on Zen 4.  Intel's cores run  \
     * the memory form well (mem: qs_compress_to_memory) */                 \
    QS_INLINE void qs##S##_cstore(T *p, uint32_t m, __m512i v, const int mem) \
    {                                                                         \
        const MASK k = (MASK)m; /* the vector's lanes only (callers pass ~m) */ \
        if (mem) {                                                            \
            _mm512_mask_compressstoreu_epi##W(p, k, v);                       \
            return;                                                           \
        }                                                                     \
        const uint32_t low = (uint32_t)((1ull << __builtin_popcount(k)) - 1); \
        _mm512_mask_storeu_epi##W(p, (MASK)low, _mm512_mask_compress_epi##W(v, k, v)); \
    }
QS_ORDER(64, uint64_t, 64, __mmask8, epu)
QS_ORDER(32, uint32_t, 32, __mmask16, epu)
QS_ORDER(64s, int64_t, 64, __mmask8, epi)
QS_ORDER(32s, int32_t, 32, __mmask16, epi)
QS_FORDER(64f, double, __mmask8, pd)
QS_MOVES(64, uint64_t, 64, __mmask8)
QS_MOVES(32, uint32_t, 32, __mmask16)
QS_MOVES(64s, int64_t, 64, __mmask8)
QS_MOVES(32s, int32_t, 32, __mmask16)
QS_MOVES(64f, double, 64, __mmask8)
#undef QS_ORDER
#undef QS_FORDER
#undef QS_MOVES
#define qs64s_swap qs64_swap
#define qs64f_swap qs64_swap
#define qs32s_swap qs32_swap
#define qs64s_rev qs64_rev
#define qs64f_rev qs64_rev
#define qs32s_rev qs32_rev
/* Bitonic sort of one vector: stage (k, j) compares lanes i and i ^ j;
 * lane i keeps the larger when (i & j) != 0 differs from (i & k) != 0.
 * The masks are that rule written out (k = 2, 4, .. L; j = k/2 .. 1). */
#define QS_CX(S, v, j, m)                                                     \
    do {                                                                      \
        const __m512i p_ = qs##S##_swap(v, j);                                \
        v = qs##S##_mask_max(qs##S##_min(v, p_), m, v, p_);                   \
    } while (0)
#define QS_VEC_SORTS64(S64)                                                   \
    QS_INLINE __m512i qs##S64##_merge_vec(__m512i v) /* bitonic -> ascending */ \
    {                                                                         \
        QS_CX(S64, v, 4, 0xf0); QS_CX(S64, v, 2, 0xcc); QS_CX(S64, v, 1, 0xaa); \
        return v;                                                             \
    }                                                                         \
    QS_INLINE __m512i qs##S64##_sort_vec(__m512i v)                           \
    {                                                                         \
        QS_CX(S64, v, 1, 0x66);                                               \
        QS_CX(S64, v, 2, 0x3c); QS_CX(S64, v, 1, 0x5a);                       \
        return qs##S64##_merge_vec(v);                                        \
    }
#define QS_VEC_SORTS32(S32)                                                   \
    QS_INLINE __m512i qs##S32##_merge_vec(__m512i v)                          \
    {                                                                         \
        QS_CX(S32, v, 8, 0xff00); QS_CX(S32, v, 4, 0xf0f0);                   \
        QS_CX(S32, v, 2, 0xcccc); QS_CX(S32, v, 1, 0xaaaa);                   \
        return v;                                                             \
    }                                                                         \
    QS_INLINE __m512i qs##S32##_sort_vec(__m512i v)                           \
    {                                                                         \
        QS_CX(S32, v, 1, 0x6666);                                             \
        QS_CX(S32, v, 2, 0x3c3c); QS_CX(S32, v, 1, 0x5a5a);                   \
        QS_CX(S32, v, 4, 0x0ff0); QS_CX(S32, v, 2, 0x33cc); QS_CX(S32, v, 1, 0x55aa); \
        return qs##S32##_merge_vec(v);                                        \
    }
QS_VEC_SORTS64(64)
QS_VEC_SORTS64(64s)
QS_VEC_SORTS64(64f)
QS_VEC_SORTS32(32)
QS_VEC_SORTS32(32s)
#undef QS_VEC_SORTS64
#undef QS_VEC_SORTS32

/* Lane moves of the column-first base case (qs*_sort_cols below).
 * revblk(v, s): lanes reversed within each block of s lanes. */
QS_INLINE __m512i qs64_revblk(__m512i v, int s)
{
    switch (s) {
    case 2: return _mm512_shuffle_epi32(v, _MM_PERM_BADC);
    case 4: return _mm512_permutex_epi64(v, 0x1B);
    default: return qs64_rev(v);
    }
}
QS_INLINE __m512i qs32_revblk(__m512i v, int s)
{
    switch (s) {
    case 2: return _mm512_shuffle_epi32(v, _MM_PERM_CDAB);
    case 4: return _mm512_shuffle_epi32(v, _MM_PERM_ABCD);
    case 8: return _mm512_permutexvar_epi32(
                _mm512_set_epi32(8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7), v);
    default: return qs32_rev(v);
    }
}
#define qs64s_revblk qs64_revblk
#define qs64f_revblk qs64_revblk
#define qs32s_revblk qs32_revblk
/* the lanes i with (i & d) != 0: the upper lane of each pair d apart */
QS_INLINE uint32_t qs64_dmask(int d) { return d == 1 ? 0xAAu : d == 2 ? 0xCCu : 0xF0u; }
QS_INLINE uint32_t qs32_dmask(int d)
{
    return d == 1 ? 0xAAAAu : d == 2 ? 0xCCCCu : d == 4 ? 0xF0F0u : 0xFF00u;
}
#define qs64s_dmask qs64_dmask
#define qs64f_dmask qs64_dmask
#define qs32s_dmask qs32_dmask
/* Column-major to rows (sort_cols' last step): v[0..NV) hold NV rows of a
 * matrix sorted column by column (position = column * NV + row); o[k]
 * receives positions k * L .. k * L + L - 1.  Built from in-lane unpacks
 * and 128-bit chunk shuffles; QS_SHUF4(a, b, lo) is the 4 x 4 chunk
 * transpose step [a.0, a.2, b.0, b.2] (lo) or [a.1, a.3, b.1, b.3]. */
#define QS_SHUF4(a, b, lo) _mm512_shuffle_i64x2(a, b, (lo) ? 0x88 : 0xDD)
/* o[0..4) from x[0..4) whose chunk L holds, in order, the pieces of rows
 * L (x[0].L, x[1].L, x[2].L, x[3].L): a 4 x 4 transpose of chunks */
QS_INLINE void qs_chunks4(__m512i x0, __m512i x1, __m512i x2, __m512i x3, __m512i *o)
{
    const __m512i a = QS_SHUF4(x0, x1, 1), b = QS_SHUF4(x0, x1, 0);
    const __m512i c = QS_SHUF4(x2, x3, 1), d = QS_SHUF4(x2, x3, 0);
    o[0] = QS_SHUF4(a, c, 1);
    o[2] = QS_SHUF4(a, c, 0);
    o[1] = QS_SHUF4(b, d, 1);
    o[3] = QS_SHUF4(b, d, 0);
}
QS_INLINE void qs64_to_rows(const __m512i *v, __m512i *o, const int NV)
{
    if (NV == 4) { /* row k = columns 2k, 2k + 1 */
        const __m512i t0 = _mm512_unpacklo_epi64(v[0], v[1]), t1 = _mm512_unpackhi_epi64(v[0], v[1]);
        const __m512i t2 = _mm512_unpacklo_epi64(v[2], v[3]), t3 = _mm512_unpackhi_epi64(v[2], v[3]);
        qs_chunks4(t0, t2, t1, t3, o);
        return;
    }
    /* 8 x 8 transposes: NV = 16 has two, row k then being column k / 2's
     * first (k even) or last (k odd) eight */
    for (int h = 0; h < NV / 8; ++h) {
        const __m512i *r = v + 8 * h;
        __m512i t[8], u[8];
        for (int k = 0; k < 4; ++k) {
            t[2 * k] = _mm512_unpacklo_epi64(r[2 * k], r[2 * k + 1]);
            t[2 * k + 1] = _mm512_unpackhi_epi64(r[2 * k], r[2 * k + 1]);
        }
        /* u[c], chunk L: column 2L + c's pieces: c = 0, 1 from rows 0-3, 4-7 */
        for (int g = 0; g < 2; ++g) {
            u[4 * g + 0] = QS_SHUF4(t[4 * g + 0], t[4 * g + 2], 1);
            u[4 * g + 1] = QS_SHUF4(t[4 * g + 0], t[4 * g + 2], 0);
            u[4 * g + 2] = QS_SHUF4(t[4 * g + 1], t[4 * g + 3], 1);
            u[4 * g + 3] = QS_SHUF4(t[4 * g + 1], t[4 * g + 3], 0);
        }
        __m512i c[8];
        c[0] = QS_SHUF4(u[0], u[4], 1);
        c[4] = QS_SHUF4(u[0], u[4], 0);
        c[2] = QS_SHUF4(u[1], u[5], 1);
        c[6] = QS_SHUF4(u[1], u[5], 0);
        c[1] = QS_SHUF4(u[2], u[6], 1);
        c[5] = QS_SHUF4(u[2], u[6], 0);
        c[3] = QS_SHUF4(u[3], u[7], 1);
        c[7] = QS_SHUF4(u[3], u[7], 0);
        for (int j = 0; j < 8; ++j) o[NV == 16 ? 2 * j + h : j] = c[j];
    }
}
QS_INLINE void qs32_to_rows(const __m512i *v, __m512i *o, const int NV)
{
    /* t: pairs of rows interleaved; q[4m + c], chunk L: column 4L + c,
     * rows 4m .. 4m + 3 */
    __m512i t[16], q[16];
    for (int k = 0; k < NV / 2; ++k) {
        t[2 * k] = _mm512_unpacklo_epi32(v[2 * k], v[2 * k + 1]);
        t[2 * k + 1] = _mm512_unpackhi_epi32(v[2 * k], v[2 * k + 1]);
    }
    for (int m = 0; m < NV / 4; ++m) {
        q[4 * m + 0] = _mm512_unpacklo_epi64(t[4 * m], t[4 * m + 2]);
        q[4 * m + 1] = _mm512_unpackhi_epi64(t[4 * m], t[4 * m + 2]);
        q[4 * m + 2] = _mm512_unpacklo_epi64(t[4 * m + 1], t[4 * m + 3]);
        q[4 * m + 3] = _mm512_unpackhi_epi64(t[4 * m + 1], t[4 * m + 3]);
    }
    if (NV == 4) { /* row k = columns 4k .. 4k + 3 */
        qs_chunks4(q[0], q[1], q[2], q[3], o);
    } else if (NV == 8) { /* row 2L + c / 2 = columns 4L + c, 4L + c + 1 (c = 0, 2) */
        for (int c = 0; c < 4; c += 2) {
            __m512i r[4];
            qs_chunks4(q[c], q[4 + c], q[c + 1], q[4 + c + 1], r);
            for (int l = 0; l < 4; ++l) o[2 * l + c / 2] = r[l];
        }
    } else { /* NV = 16: row 4L + c = column 4L + c */
        for (int c = 0; c < 4; ++c) {
            __m512i r[4];
            qs_chunks4(q[c], q[4 + c], q[8 + c], q[12 + c], r);
            for (int l = 0; l < 4; ++l) o[4 * l + c] = r[l];
        }
    }
}
#define qs64s_to_rows qs64_to_rows
#define qs64f_to_rows qs64_to_rows
#define qs32s_to_rows qs32_to_rows

/* ---- the generic parts ------------------------------------------------- */

#define QS_UNROLL_LOOP _Pragma("GCC unroll 16")
/* The columns' sorting network of sort_cols (below): Batcher's odd-even
 * merge sort of 4, 8 or 16 inputs (sn_pairs.h: 5, 19 and 63
 * compare-exchanges; the bitonic network it replaces had 6, 24 and 80),
 * each pair (i, j) leaving v[i] <= v[j].  A loop over a constant range of
 * the pairs table, which GCC unrolls whole, the table reads folded: the
 * bitonic loops nested three deep (stage, block, pair) were left partly
 * rolled by GCC 12, the vectors kept in a stack array, every
 * compare-exchange a load and a store (native, L1-resident rows, ns a
 * row before -> after, AMD Zen 5: u64 64 65 -> 41, 128 131 -> 75, 256
 * 300 -> 193, 1000 2192 -> 1679; u32 128 76 -> 53, 256 138 -> 75, 1000
 * 1051 -> 798). */
#define QS_COLUMN_NETWORK(S, v, NV)                                           \
    do {                                                                      \
        /* (the bounds plain variables: with an expression in the loop's     \
         * test GCC ignored the pragma) */                                    \
        const int first_ = SN_AT[NV], end_ = SN_AT[(NV) + 1];                 \
        _Pragma("GCC unroll 64")                                              \
        for (int c_ = first_; c_ < end_; ++c_) {                              \
            const int i_ = SN_PAIRS[c_][0], j_ = SN_PAIRS[c_][1];             \
            const __m512i lo_ = qs##S##_min(v[i_], v[j_]);                    \
            v[j_] = qs##S##_max(v[i_], v[j_]);                                \
            v[i_] = lo_;                                                      \
        }                                                                     \
    } while (0)

/* The half-cleaner loops across vectors are written out in each network
 * (sort_nvec, sort_cols): moved into one always-inline helper taking the
 * vector array, GCC unrolled them worse (native, blocks of 32 u64 and 64
 * u32, the 4-vector base case: 1.17 -> 1.29, 0.59 -> 0.64 ns/key). */
#define QS_DEFINE(S, T, L, TMIN, TMAX)                                \
    /* sort a[0..n), n <= NV * L, NV a power of two, in registers */          \
    QS_INLINE void qs##S##_sort_nvec(const T *a, T *dst, int64_t n, const int NV) \
    {                                                                         \
        __m512i v[16], t[8];                         \
        const __m512i fill = qs##S##_set1(TMAX); /* sorts last */            \
        QS_UNROLL_LOOP                                                        \
        for (int i = 0; i < NV; ++i) {                                        \
            const int64_t c = n - (int64_t)i * L;                             \
            const uint32_t m = c >= L ? (uint32_t)((1ull << L) - 1)           \
                               : c > 0 ? (uint32_t)((1u << c) - 1) : 0u;      \
            v[i] = qs##S##_sort_vec(qs##S##_mload(a + (c > 0 ? i * L : 0), m, fill)); \
        }                                                                     \
        QS_UNROLL_LOOP                                                        \
        for (int w = 1; w < NV; w *= 2) {                                     \
            QS_UNROLL_LOOP                                                    \
            for (int b = 0; b < NV; b += 2 * w) {                             \
                QS_UNROLL_LOOP                                                \
                for (int i = 0; i < w; ++i) t[i] = qs##S##_rev(v[b + 2 * w - 1 - i]); \
                QS_UNROLL_LOOP                                                \
                for (int i = 0; i < w; ++i) {                                 \
                    v[b + w + i] = qs##S##_max(v[b + i], t[i]);               \
                    v[b + i] = qs##S##_min(v[b + i], t[i]);                   \
                }                                                             \
                QS_UNROLL_LOOP                                                \
                for (int h = w / 2; h >= 1; h /= 2)                           \
                    QS_UNROLL_LOOP                                            \
                    for (int i = b; i < b + 2 * w; ++i)                       \
                        if (((i - b) & h) == 0) {                             \
                            const __m512i lo = qs##S##_min(v[i], v[i + h]);   \
                            v[i + h] = qs##S##_max(v[i], v[i + h]);           \
                            v[i] = lo;                                        \
                        }                                                     \
                QS_UNROLL_LOOP                                                \
                for (int i = b; i < b + 2 * w; ++i) v[i] = qs##S##_merge_vec(v[i]); \
            }                                                                 \
        }                                                                     \
        QS_UNROLL_LOOP                                                        \
        for (int i = 0; i < NV; ++i) {                                        \
            const int64_t c = n - (int64_t)i * L;                             \
            if (c >= L) qs##S##_store(dst + i * L, v[i]);                       \
            else if (c > 0) qs##S##_mstore(dst + i * L, (uint32_t)((1u << c) - 1), v[i]); \
        }                                                                     \
    }                                                                         \
    /* Sort a[0..n), n <= NV * L (NV = 4, 8 or 16), columns                 \
     * first: (1) each lane's column across the NV vectors sorted by a      \
     * network of whole-vector min/max (no lane moves: QS_COLUMN_NETWORK);  \
     * (2) blocks of s = 2, 4, .. L lanes merged, each block sorted        \
     * column-major                                                         \
     * (position = column * NV + row): the two sorted half-blocks meet by    \
     * one flip step (row i, column c against row NV-1-i, column s-1-c: a    \
     * lane reversal within blocks), then the half-cleaners, first across    \
     * columns (lanes d apart) and then across rows (vectors h apart);       \
     * (3) the column-major result transposed to rows.  Fewer lane moves    \
     * than sorting each vector and merging vectors (qs*_sort_nvec: every    \
     * merge round ends with log2(L) in-vector stages); measured in         \
     * simd_qsort.h's header. */                                             \
    QS_INLINE void qs##S##_sort_cols(const T *a, T *dst, int64_t n, const int NV) \
    {                                                                         \
        __m512i v[16];                                                        \
        const __m512i fill = qs##S##_set1(TMAX);                              \
        QS_UNROLL_LOOP                                                        \
        for (int i = 0; i < NV; ++i) {                                        \
            const int64_t c = n - (int64_t)i * L;                             \
            const uint32_t m = c >= L ? (uint32_t)((1ull << L) - 1)           \
                               : c > 0 ? (uint32_t)((1u << c) - 1) : 0u;      \
            v[i] = qs##S##_mload(a + (c > 0 ? i * L : 0), m, fill);           \
        }                                                                     \
        QS_COLUMN_NETWORK(S, v, NV);                                          \
        QS_UNROLL_LOOP                                                        \
        for (int s = 2; s <= L; s *= 2) {                                     \
            const uint32_t up = qs##S##_dmask(s / 2);                         \
            const uint32_t low = ~up & (uint32_t)((1ull << L) - 1);           \
            QS_UNROLL_LOOP                                                    \
            for (int i = 0; i < NV / 2; ++i) {                                \
                const __m512i x = v[i], y = qs##S##_revblk(v[NV - 1 - i], s); \
                const __m512i mn = qs##S##_min(x, y);                         \
                v[i] = qs##S##_mask_max(mn, up, x, y);                        \
                v[NV - 1 - i] = qs##S##_revblk(qs##S##_mask_max(mn, low, x, y), s); \
            }                                                                 \
            QS_UNROLL_LOOP                                                    \
            for (int d = s / 4; d >= 1; d /= 2)                               \
                QS_UNROLL_LOOP                                                \
                for (int i = 0; i < NV; ++i) QS_CX(S, v[i], d, qs##S##_dmask(d)); \
            QS_UNROLL_LOOP                                                    \
            for (int h = NV / 2; h >= 1; h /= 2)                              \
                QS_UNROLL_LOOP                                                \
                for (int i = 0; i < NV; ++i)                                  \
                    if ((i & h) == 0) {                                       \
                        const __m512i lo = qs##S##_min(v[i], v[i + h]);       \
                        v[i + h] = qs##S##_max(v[i], v[i + h]);               \
                        v[i] = lo;                                            \
                    }                                                         \
        }                                                                     \
        __m512i o[16];                                                        \
        qs##S##_to_rows(v, o, NV);                                            \
        QS_UNROLL_LOOP                                                        \
        for (int k = 0; k < NV; ++k) {                                        \
            const int64_t c = n - (int64_t)k * L;                             \
            if (c >= L) qs##S##_store(dst + k * L, o[k]);                       \
            else if (c > 0) qs##S##_mstore(dst + k * L, (uint32_t)((1u << c) - 1), o[k]); \
        }                                                                     \
    }                                                                         \
    /* a[0..n) sorted into dst (which may be a), n <= QS_BASE_VECS * L */    \
    static void qs##S##_sort_net(const T *a, T *dst, int64_t n)               \
    {                                                                         \
        if (n <= 1) {                                                         \
            if (n == 1) dst[0] = a[0];                                        \
            return;                                                           \
        }                                                                     \
        if (n <= L) qs##S##_sort_nvec(a, dst, n, 1);                          \
        else if (n <= 2 * L) qs##S##_sort_nvec(a, dst, n, 2);                 \
        else if (n <= 4 * L) qs##S##_sort_cols(a, dst, n, 4);                 \
        else if (n <= 8 * L) qs##S##_sort_cols(a, dst, n, 8);                 \
        else qs##S##_sort_cols(a, dst, n, 16);                                \
    }                                                                         \
    /* x[0..nx) and y[0..ny), ascending (nx, ny >= L), merged into out a    \
     * block of L at a time: the carried block and the next block of the    \
     * run whose next key comes first, by one bitonic merge (the second     \
     * reversed, min and max, each half sorted).  Two chains side by side   \
     * (each step waits on its last carry): the front one emits the f =     \
     * L * (n / 2L) smallest keys from out[0] up, the back one, mirrored,   \
     * the rest from out[n] down.  Partial blocks read the missing keys as  \
     * TMAX (front) or TMIN (back): they sort past the keys the chain       \
     * emits and are never stored (a real key of that value has the same   \
     * bits). */                                                             \
    QS_INLINE void qs##S##_merge2(const T *x, int64_t nx, const T *y, int64_t ny, T *out) \
    {                                                                         \
        const int64_t n = nx + ny, f = (int64_t)L * (n / (2 * L));            \
        const uint32_t full = (uint32_t)((1ull << L) - 1);                    \
        const __m512i top = qs##S##_set1(TMAX), bottom = qs##S##_set1(TMIN); \
        __m512i t = qs##S##_rev(qs##S##_load(y)), u = qs##S##_load(x);         \
        __m512i cf = qs##S##_merge_vec(qs##S##_max(u, t));                     \
        qs##S##_store(out, qs##S##_merge_vec(qs##S##_min(u, t)));              \
        t = qs##S##_rev(qs##S##_load(y + ny - L));                            \
        u = qs##S##_load(x + nx - L);                                         \
        __m512i cb = qs##S##_merge_vec(qs##S##_min(u, t));                     \
        qs##S##_store(out + n - L, qs##S##_merge_vec(qs##S##_max(u, t)));      \
        /* front: x[ia..), y[ib..) unread, out[0..of) written; back:        \
         * x[..ja), y[..jb) unread, out[ob..n) written */                     \
        int64_t ia = L, ib = L, of = L, ja = nx - L, jb = ny - L, ob = n - L; \
        while (of < f || ob > f) {                                            \
            if (of < f) {                                                     \
                const T xa = ia < nx ? x[ia] : (T)(TMAX), yb = ib < ny ? y[ib] : (T)(TMAX); \
                const int take_x = xa < yb || (xa == yb && ia < nx);          \
                const T *p = take_x ? x + ia : y + ib;                        \
                const int64_t left = take_x ? nx - ia : ny - ib;              \
                ia += take_x ? L : 0;                                         \
                ib += take_x ? 0 : L;                                         \
                const __m512i b = left >= L ? qs##S##_load(p)                 \
                                            : qs##S##_mload(p, (1u << left) - 1, top); \
                t = qs##S##_rev(b);                                           \
                qs##S##_store(out + of, qs##S##_merge_vec(qs##S##_min(cf, t))); \
                cf = qs##S##_merge_vec(qs##S##_max(cf, t));                   \
                of += L;                                                      \
            }                                                                 \
            if (ob > f) {                                                     \
                const T xa = ja > 0 ? x[ja - 1] : (T)(TMIN), yb = jb > 0 ? y[jb - 1] : (T)(TMIN); \
                const int take_x = xa > yb || (xa == yb && ja > 0);           \
                const T *p = take_x ? x : y;                                  \
                const int64_t end = take_x ? ja : jb;                         \
                ja -= take_x ? (ja < L ? ja : L) : 0;                         \
                jb -= take_x ? 0 : (jb < L ? jb : L);                         \
                const __m512i b = end >= L ? qs##S##_load(p + end - L)        \
                                           : qs##S##_xload(bottom, (full << (L - end)) & full, p); \
                t = qs##S##_rev(b);                                           \
                const __m512i h = qs##S##_merge_vec(qs##S##_max(cb, t));      \
                cb = qs##S##_merge_vec(qs##S##_min(cb, t));                   \
                if (ob - f >= L) {                                            \
                    qs##S##_store(out + ob - L, h);                           \
                    ob -= L;                                                  \
                } else { /* the last ob - f keys: h's top lanes */          \
                    qs##S##_mstore(out + ob - L, (full << (L - (ob - f))) & full, h); \
                    ob = f;                                                   \
                }                                                             \
            }                                                                 \
        }                                                                     \
    }                                                                         \
    /* Half-cleaners across the vectors of v[0..NV) (a bitonic run of      \
     * NV * L keys), then merge_vec in each: the run ascending (sort_cols    \
     * writes its own copy of the loop out: QS_UNROLL_LOOP's note) */       \
    QS_INLINE void qs##S##_merge_run(__m512i *v, const int NV)                \
    {                                                                         \
        QS_UNROLL_LOOP                                                        \
        for (int h = NV / 2; h >= 1; h /= 2)                                  \
            QS_UNROLL_LOOP                                                    \
            for (int i = 0; i < NV; ++i)                                      \
                if ((i & h) == 0) {                                           \
                    const __m512i lo = qs##S##_min(v[i], v[i + h]);           \
                    v[i + h] = qs##S##_max(v[i], v[i + h]);                   \
                    v[i] = lo;                                                \
                }                                                             \
        QS_UNROLL_LOOP                                                        \
        for (int i = 0; i < NV; ++i) v[i] = qs##S##_merge_vec(v[i]);          \
    }                                                                         \
    /* a[0..n), NV * L < n <= 2 * NV * L (NV = QS_BASE_VECS): the first NV   \
     * vectors and the rest each sorted by the network, then one bitonic     \
     * merge of the 2 * NV vectors (the rest read padded with TMAX): the     \
     * flip step (first run's vector i against the second's NV - 1 - i,     \
     * reversed) leaves two bitonic halves, the low one stored back while   \
     * the high one is merged in registers. */                                \
    static void qs##S##_sort_pair(T *a, int64_t n)                            \
    {                                                                         \
        enum { NV = QS_BASE_VECS };                                           \
        T lo[NV * L], hb[NV * L];                                             \
        const int64_t nb = n - NV * L;                                        \
        qs##S##_sort_net(a, lo, NV * L);                                      \
        qs##S##_sort_net(a + NV * L, hb, nb);                                 \
        const __m512i top = qs##S##_set1(TMAX);                               \
        __m512i v[NV];                                                        \
        QS_UNROLL_LOOP                                                        \
        for (int i = 0; i < NV; ++i) {                                        \
            const int j = NV - 1 - i;                                         \
            const int64_t c = nb - (int64_t)j * L;                            \
            const __m512i b = c >= L ? qs##S##_load(hb + j * L)               \
                              : c > 0 ? qs##S##_mload(hb + j * L, (uint32_t)((1u << c) - 1), top) \
                                      : top;                                  \
            const __m512i x = qs##S##_load(lo + i * L), y = qs##S##_rev(b);   \
            v[i] = qs##S##_max(x, y);                                         \
            qs##S##_store(lo + i * L, qs##S##_min(x, y));                     \
        }                                                                     \
        qs##S##_merge_run(v, NV);                                             \
        QS_UNROLL_LOOP                                                        \
        for (int i = 0; i < NV; ++i) {                                        \
            const int64_t c = nb - (int64_t)i * L;                            \
            if (c >= L) qs##S##_store(a + NV * L + i * L, v[i]);              \
            else if (c > 0) qs##S##_mstore(a + NV * L + i * L, (uint32_t)((1u << c) - 1), v[i]); \
        }                                                                     \
        QS_UNROLL_LOOP                                                        \
        for (int i = 0; i < NV; ++i) v[i] = qs##S##_load(lo + i * L);         \
        qs##S##_merge_run(v, NV);                                             \
        QS_UNROLL_LOOP                                                        \
        for (int i = 0; i < NV; ++i) qs##S##_store(a + i * L, v[i]);          \
    }                                                                         \
    /* Sort a[0..n), n <= 2 * QS_BASE_VECS * L: by the network, or, past    \
     * its QS_BASE_VECS vectors, by two networks and a bitonic merge          \
     * (sort_pair).  A partition there, the quicksort's step, cost about     \
     * what the whole network does (native, blocks of n random u64, ns/key: \
     * 129 2.76, 256 3.14 against 1.67 at 128). */                           \
    static void qs##S##_sort_base(T *a, int64_t n)                            \
    {                                                                         \
        if (n <= QS_BASE_VECS * L) qs##S##_sort_net(a, a, n);                 \
        else qs##S##_sort_pair(a, n);                                         \
    }                                                                         \
    static void qs##S##_sift(T *a, int64_t root, int64_t n)                   \
    {                                                                         \
        const T x = a[root];                                                  \
        for (;;) {                                                            \
            int64_t child = 2 * root + 1;                                     \
            if (child >= n) break;                                            \
            if (child + 1 < n && a[child + 1] > a[child]) ++child;            \
            if (a[child] <= x) break;                                         \
            a[root] = a[child];                                               \
            root = child;                                                     \
        }                                                                     \
        a[root] = x;                                                          \
    }                                                                         \
    static void qs##S##_heap_sort(T *a, int64_t n)                            \
    {                                                                         \
        for (int64_t k = n / 2; k > 0;) qs##S##_sift(a, --k, n);              \
        for (int64_t e = n - 1; e > 0; --e) {                                 \
            const T top = a[0];                                               \
            a[0] = a[e];                                                      \
            a[e] = top;                                                       \
            qs##S##_sift(a, 0, e);                                            \
        }                                                                     \
    }                                                                         \
    /* median of L keys spread over a[0..n) */                                \
    static T qs##S##_pivot(const T *a, int64_t n)                             \
    {                                                                         \
        T s[L];                                                               \
        QS_UNROLL_LOOP                                                        \
        for (int i = 0; i < L; ++i) s[i] = a[(int64_t)i * (n / L) + n / (2 * L)]; \
        const __m512i v = qs##S##_sort_vec(qs##S##_load(s));                  \
        qs##S##_store(s, v);                                                  \
        return s[L / 2];                                                      \
    }                                                                         \
    /* write one vector's lanes m to a[*ls..), the others to a[..*rs)      \
     * (compress stores: exactly the lanes' count, into room already read) */ \
    QS_INLINE void qs##S##_put(T *a, __m512i v, uint32_t m, int64_t *ls, int64_t *rs, \
                               const int mem)                                 \
    {                                                                         \
        const int c = __builtin_popcount(m);                                  \
        qs##S##_cstore(a + *ls, m, v, mem);                                   \
        qs##S##_cstore(a + *rs - (L - c), ~m, v, mem);                        \
        *ls += c;                                                             \
        *rs -= L - c;                                                         \
    }                                                                         \
    /* the same for a partial vector: mm = the lanes that hold keys */      \
    QS_INLINE void qs##S##_put_exact(T *a, __m512i v, uint32_t m, uint32_t mm, \
                                     int64_t *ls, int64_t *rs, const int mem)  \
    {                                                                         \
        m &= mm;                                                              \
        const uint32_t g = ~m & mm;                                           \
        qs##S##_cstore(a + *ls, m, v, mem);                                   \
        *ls += __builtin_popcount(m);                                         \
        *rs -= __builtin_popcount(g);                                         \
        qs##S##_cstore(a + *rs, g, v, mem);                                   \
    }                                                                         \
    /* partition a[0..n), n >= 2 * QS_UNROLL * L: returns k with a[0..k)      \
     * the keys <= p (< p when strict); mem: how lanes are stored (cstore) */ \
    QS_INLINE int64_t qs##S##_partition_as(T *a, int64_t n, T p, int strict, const int mem) \
    {                                                                         \
        enum { U = QS_UNROLL };                                               \
        const __m512i pv = qs##S##_set1(p);                                   \
        __m512i keep[2 * U];                                                  \
        QS_UNROLL_LOOP                                                        \
        for (int i = 0; i < U; ++i) {                                         \
            keep[i] = qs##S##_load(a + i * L);                                \
            keep[U + i] = qs##S##_load(a + n - (int64_t)(i + 1) * L);         \
        }                                                                     \
        int64_t l = U * L, r = n - U * L, ls = 0, rs = n;                     \
        while (r - l >= U * L) {                                              \
            __m512i v[U];                                                     \
            if (l - ls <= rs - r) {                                           \
                QS_UNROLL_LOOP                                                \
                for (int i = 0; i < U; ++i) v[i] = qs##S##_load(a + l + i * L); \
                l += U * L;                                                   \
            } else {                                                          \
                r -= U * L;                                                   \
                QS_UNROLL_LOOP                                                \
                for (int i = 0; i < U; ++i) v[i] = qs##S##_load(a + r + i * L); \
            }                                                                 \
            QS_UNROLL_LOOP                                                    \
            for (int i = 0; i < U; ++i) {                                     \
                const uint32_t m = strict ? qs##S##_lt(v[i], pv) : qs##S##_le(v[i], pv); \
                qs##S##_put(a, v[i], m, &ls, &rs, mem);                            \
            }                                                                 \
        }                                                                     \
        /* fewer than U vectors left unread: read them all, then [ls, rs)   \
         * is free and exactly as long as what is left to write */          \
        __m512i v[U];                                                         \
        uint32_t vm[U];                                                       \
        QS_UNROLL_LOOP                                                        \
        for (int i = 0; i < U; ++i) {                                         \
            const int64_t c = r - l - (int64_t)i * L;                         \
            vm[i] = c >= L ? (uint32_t)((1ull << L) - 1) : c > 0 ? (uint32_t)((1u << c) - 1) : 0u; \
            v[i] = qs##S##_mload(a + (c > 0 ? l + i * L : 0), vm[i], pv);     \
        }                                                                     \
        QS_UNROLL_LOOP                                                        \
        for (int i = 0; i < U; ++i) {                                         \
            const uint32_t m = strict ? qs##S##_lt(v[i], pv) : qs##S##_le(v[i], pv); \
            qs##S##_put_exact(a, v[i], m, vm[i], &ls, &rs, mem);                   \
        }                                                                     \
        QS_UNROLL_LOOP                                                        \
        for (int i = 0; i < 2 * U; ++i) {                                     \
            const uint32_t m = strict ? qs##S##_lt(keep[i], pv) : qs##S##_le(keep[i], pv); \
            qs##S##_put_exact(a, keep[i], m, (uint32_t)((1ull << L) - 1), &ls, &rs, mem); \
        }                                                                     \
        return ls;                                                            \
    }                                                                         \
    static int64_t qs##S##_partition_mem(T *a, int64_t n, T p, int strict)    \
    {                                                                         \
        return qs##S##_partition_as(a, n, p, strict, 1);                      \
    }                                                                         \
    static int64_t qs##S##_partition_reg(T *a, int64_t n, T p, int strict)    \
    {                                                                         \
        return qs##S##_partition_as(a, n, p, strict, 0);                      \
    }                                                                         \
    static int64_t qs##S##_partition(T *a, int64_t n, T p, int strict)        \
    {                                                                         \
        return qs_compress_to_memory() ? qs##S##_partition_mem(a, n, p, strict) \
                                       : qs##S##_partition_reg(a, n, p, strict); \
    }                                                                         \
    /* One partition step of a[0..n): k with [0, k) <= p < [k, n) (0 < k < n: \
     * p itself went left), or 0 when p, the pivot, is the largest key: then  \
     * [n', n) all equal p (in place) and *n becomes n', the rest to sort */  \
    static inline int64_t qs##S##_split(T *a, int64_t *n)                     \
    {                                                                         \
        const T p = qs##S##_pivot(a, *n);                                     \
        const int64_t k = qs##S##_partition(a, *n, p, 0);                     \
        if (k < *n) return k;                                                 \
        *n = qs##S##_partition(a, *n, p, 1);                                  \
        return 0;                                                             \
    }                                                                         \
    QS_DRIVERS2(qs##S, T, 2 * QS_BASE_VECS * L, QS_BASE_VECS * L)            \
    /* sort a[0..n) ascending */                                              \
    static void simd_qsort_##S(T *a, int64_t n)                               \
    {                                                                         \
        int depth = 4;                                                        \
        for (int64_t m = n; m > 1; m >>= 1) depth += 2;                       \
        qs##S##_rec(a, n, depth);                                             \
    }                                                                         \
    /* the range a[0..n) cut at k: [0, k) <= [k, n), 0 < k < n, around the  \
     * median of QS_PAR_SAMPLES spread keys; 0 when every key is equal */   \
    static int64_t qs##S##_par_split(void *base, int64_t n)                   \
    {                                                                         \
        T *a = (T *)base;                                                     \
        T s[QS_PAR_SAMPLES];                                                  \
        for (int i = 0; i < QS_PAR_SAMPLES; ++i)                              \
            s[i] = a[(int64_t)i * (n / QS_PAR_SAMPLES) + n / (2 * QS_PAR_SAMPLES)]; \
        simd_qsort_##S(s, QS_PAR_SAMPLES);                                    \
        const T p = s[QS_PAR_SAMPLES / 2];                                    \
        const int64_t k = qs##S##_partition(a, n, p, 0); /* <= p left */      \
        if (k < n) return k;                                                  \
        return qs##S##_partition(a, n, p, 1); /* p the largest: < p left */   \
    }                                                                         \
    /* a long row on up to `parts` threads (a row shorter than QS_PAR_MIN  \
     * is one range) */                                                      \
    QS_PAR_DEFINE(qs##S, simd_qsort_##S##_par, T, simd_qsort_##S, qs##S##_par_split) \
    /* the key of rank r of a[0..n) (a reordered) */                          \
    __attribute__((unused)) static T simd_select_##S(T *a, int64_t n, int64_t r) \
    {                                                                         \
        int depth = 4;                                                        \
        for (int64_t i = n; i > 1; i >>= 1) depth += 2;                       \
        return qs##S##_select(a, n, r, depth);                                \
    }                                                                         \
    /* a[0..m) = the m smallest of a[0..n), ascending */                      \
    __attribute__((unused)) static void simd_qsort_##S##_first(T *a, int64_t n, int64_t m) \
    {                                                                         \
        int depth = 4;                                                        \
        for (int64_t i = n; i > 1; i >>= 1) depth += 2;                       \
        qs##S##_first(a, n, m, depth);                                        \
    }

QS_DEFINE(64, uint64_t, 8, 0, UINT64_MAX)
QS_DEFINE(32, uint32_t, 16, 0, UINT32_MAX)
QS_DEFINE(64s, int64_t, 8, INT64_MIN, INT64_MAX)
QS_DEFINE(32s, int32_t, 16, INT32_MIN, INT32_MAX)
QS_DEFINE(64f, double, 8, -INFINITY, INFINITY)

/* biased keys (signed order) of uint32_t / uint64_t arrays: the signed
 * and unsigned variants of one type may alias */
static void simd_qsort_32_biased(uint32_t *a, int64_t n) { simd_qsort_32s((int32_t *)(void *)a, n); }
static void simd_qsort_64_biased(uint64_t *a, int64_t n) { simd_qsort_64s((int64_t *)(void *)a, n); }
__attribute__((unused)) static void simd_qsort_32_biased_par(uint32_t *a, int64_t n, int parts,
                                                             kwk_parts_fn run)
{
    simd_qsort_32s_par((int32_t *)(void *)a, n, parts, run);
}
__attribute__((unused)) static void simd_qsort_64_biased_par(uint64_t *a, int64_t n, int parts,
                                                             kwk_parts_fn run)
{
    simd_qsort_64s_par((int64_t *)(void *)a, n, parts, run);
}
#undef QS_DEFINE
#undef QS_CX
#undef QS_SHUF4
#undef QS_UNROLL_LOOP
#undef QS_INLINE

#endif /* __AVX512F__ */

/* AVX2 without AVX-512: the same sorts in 256-bit vectors */
#include "simd_qsort_avx2.h"
#endif
