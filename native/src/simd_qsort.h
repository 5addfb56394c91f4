/*
 * simd_qsort.h - AVX-512 quicksort of bare unsigned keys: uint64_t (the
 * packed key << ibits | index words of indexed sorts, all distinct) and
 * uint32_t (values-only sorts, where keys repeat); each also in signed
 * order (simd_qsort_*_biased, for biased keys).  Compiled only where
 * __AVX512F__ is on (targets/avx512.c); defines KWK_HAVE_SIMD_QSORT.
 *
 * - Ranges of at most QS_BASE_VECS vectors are sorted in registers: each
 *   vector by a bitonic network of lane permutations, then bitonic merges
 *   across vectors (masked loads pad the tail with the largest key).
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
 * The smaller side recurses, the larger loops: stack depth O(log n).
 */
#ifndef KWK_SIMD_QSORT_H
#define KWK_SIMD_QSORT_H

#if defined(__AVX512F__)
#include <immintrin.h>
#include <stdint.h>
#include "qsort_drivers.h"

#define KWK_HAVE_SIMD_QSORT 1
/* the longest row of packed words the quicksort takes (sort_kernels.h) */
#define KWK_SIMD_QSORT64_MAX_N (1 << 24)

/* QS_BASE_VECS: 16 vectors (128 u64 / 256 u32 keys) fit the 32 zmm
 * registers with room for the merge's temporaries (8 measured: slower at
 * 256 keys, alike above).  QS_UNROLL: vectors read per step of the
 * partition loop (2, 4, 8 measured: 4 and 8 alike, 2 slower). */
enum { QS_BASE_VECS = 16, QS_UNROLL = 4 };

#define QS_INLINE static inline __attribute__((always_inline))

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
QS_INLINE __m512i qs64_min(__m512i a, __m512i b) { return _mm512_min_epu64(a, b); }
QS_INLINE __m512i qs64_max(__m512i a, __m512i b) { return _mm512_max_epu64(a, b); }
QS_INLINE __m512i qs32_min(__m512i a, __m512i b) { return _mm512_min_epu32(a, b); }
QS_INLINE __m512i qs32_max(__m512i a, __m512i b) { return _mm512_max_epu32(a, b); }
/* lanes in m take max(a, b), others src */
QS_INLINE __m512i qs64_mask_max(__m512i src, uint32_t m, __m512i a, __m512i b) { return _mm512_mask_max_epu64(src, (__mmask8)m, a, b); }
QS_INLINE __m512i qs32_mask_max(__m512i src, uint32_t m, __m512i a, __m512i b) { return _mm512_mask_max_epu32(src, (__mmask16)m, a, b); }
QS_INLINE __m512i qs64_set1(uint64_t x) { return _mm512_set1_epi64((long long)x); }
QS_INLINE __m512i qs32_set1(uint32_t x) { return _mm512_set1_epi32((int)x); }
QS_INLINE __m512i qs64_load(const uint64_t *p) { return _mm512_loadu_si512((const void *)p); }
QS_INLINE __m512i qs32_load(const uint32_t *p) { return _mm512_loadu_si512((const void *)p); }
QS_INLINE void qs64_store(uint64_t *p, __m512i v) { _mm512_storeu_si512((void *)p, v); }
QS_INLINE void qs32_store(uint32_t *p, __m512i v) { _mm512_storeu_si512((void *)p, v); }
/* masked-out lanes are not read (no fault) and take fill */
QS_INLINE __m512i qs64_mload(const uint64_t *p, uint32_t m, __m512i fill) { return _mm512_mask_loadu_epi64(fill, (__mmask8)m, p); }
QS_INLINE __m512i qs32_mload(const uint32_t *p, uint32_t m, __m512i fill) { return _mm512_mask_loadu_epi32(fill, (__mmask16)m, p); }
QS_INLINE void qs64_mstore(uint64_t *p, uint32_t m, __m512i v) { _mm512_mask_storeu_epi64(p, (__mmask8)m, v); }
QS_INLINE void qs32_mstore(uint32_t *p, uint32_t m, __m512i v) { _mm512_mask_storeu_epi32(p, (__mmask16)m, v); }
QS_INLINE void qs64_cstore(uint64_t *p, uint32_t m, __m512i v) { _mm512_mask_compressstoreu_epi64(p, (__mmask8)m, v); }
QS_INLINE void qs32_cstore(uint32_t *p, uint32_t m, __m512i v) { _mm512_mask_compressstoreu_epi32(p, (__mmask16)m, v); }
QS_INLINE uint32_t qs64_le(__m512i v, __m512i p) { return _mm512_cmple_epu64_mask(v, p); }
QS_INLINE uint32_t qs32_le(__m512i v, __m512i p) { return _mm512_cmple_epu32_mask(v, p); }
QS_INLINE uint32_t qs64_lt(__m512i v, __m512i p) { return _mm512_cmplt_epu64_mask(v, p); }
QS_INLINE uint32_t qs32_lt(__m512i v, __m512i p) { return _mm512_cmplt_epu32_mask(v, p); }
/* Signed lanes (64s, 32s): the same sorts of biased keys (a key ^ its top
 * bit, or an int's own bits), in signed order, the API of
 * simd_qsort_avx2.h's simd_qsort_*_biased, so values_sort.h's contiguous
 * row passes (which make biased keys: AVX2 has no unsigned compares) serve
 * both targets.  Moves are the unsigned ones; compares, min and max differ. */
#define qs64s_swap qs64_swap
#define qs32s_swap qs32_swap
#define qs64s_rev qs64_rev
#define qs32s_rev qs32_rev
QS_INLINE __m512i qs64s_min(__m512i a, __m512i b) { return _mm512_min_epi64(a, b); }
QS_INLINE __m512i qs64s_max(__m512i a, __m512i b) { return _mm512_max_epi64(a, b); }
QS_INLINE __m512i qs32s_min(__m512i a, __m512i b) { return _mm512_min_epi32(a, b); }
QS_INLINE __m512i qs32s_max(__m512i a, __m512i b) { return _mm512_max_epi32(a, b); }
QS_INLINE __m512i qs64s_mask_max(__m512i src, uint32_t m, __m512i a, __m512i b) { return _mm512_mask_max_epi64(src, (__mmask8)m, a, b); }
QS_INLINE __m512i qs32s_mask_max(__m512i src, uint32_t m, __m512i a, __m512i b) { return _mm512_mask_max_epi32(src, (__mmask16)m, a, b); }
QS_INLINE __m512i qs64s_set1(int64_t x) { return _mm512_set1_epi64((long long)x); }
QS_INLINE __m512i qs32s_set1(int32_t x) { return _mm512_set1_epi32((int)x); }
QS_INLINE __m512i qs64s_load(const int64_t *p) { return _mm512_loadu_si512((const void *)p); }
QS_INLINE __m512i qs32s_load(const int32_t *p) { return _mm512_loadu_si512((const void *)p); }
QS_INLINE void qs64s_store(int64_t *p, __m512i v) { _mm512_storeu_si512((void *)p, v); }
QS_INLINE void qs32s_store(int32_t *p, __m512i v) { _mm512_storeu_si512((void *)p, v); }
QS_INLINE __m512i qs64s_mload(const int64_t *p, uint32_t m, __m512i fill) { return _mm512_mask_loadu_epi64(fill, (__mmask8)m, p); }
QS_INLINE __m512i qs32s_mload(const int32_t *p, uint32_t m, __m512i fill) { return _mm512_mask_loadu_epi32(fill, (__mmask16)m, p); }
QS_INLINE void qs64s_mstore(int64_t *p, uint32_t m, __m512i v) { _mm512_mask_storeu_epi64(p, (__mmask8)m, v); }
QS_INLINE void qs32s_mstore(int32_t *p, uint32_t m, __m512i v) { _mm512_mask_storeu_epi32(p, (__mmask16)m, v); }
QS_INLINE void qs64s_cstore(int64_t *p, uint32_t m, __m512i v) { _mm512_mask_compressstoreu_epi64(p, (__mmask8)m, v); }
QS_INLINE void qs32s_cstore(int32_t *p, uint32_t m, __m512i v) { _mm512_mask_compressstoreu_epi32(p, (__mmask16)m, v); }
QS_INLINE uint32_t qs64s_le(__m512i v, __m512i p) { return _mm512_cmple_epi64_mask(v, p); }
QS_INLINE uint32_t qs32s_le(__m512i v, __m512i p) { return _mm512_cmple_epi32_mask(v, p); }
QS_INLINE uint32_t qs64s_lt(__m512i v, __m512i p) { return _mm512_cmplt_epi64_mask(v, p); }
QS_INLINE uint32_t qs32s_lt(__m512i v, __m512i p) { return _mm512_cmplt_epi32_mask(v, p); }
/* Bitonic sort of one vector: stage (k, j) compares lanes i and i ^ j;
 * lane i keeps the larger when (i & j) != 0 differs from (i & k) != 0.
 * The masks are that rule written out (k = 2, 4, .. L; j = k/2 .. 1). */
#define QS_CX(S, v, j, m)                                                     \
    do {                                                                      \
        const __m512i p_ = qs##S##_swap(v, j);                                \
        v = qs##S##_mask_max(qs##S##_min(v, p_), m, v, p_);                   \
    } while (0)
QS_INLINE __m512i qs64_merge_vec(__m512i v) /* bitonic -> ascending */
{
    QS_CX(64, v, 4, 0xf0); QS_CX(64, v, 2, 0xcc); QS_CX(64, v, 1, 0xaa);
    return v;
}
QS_INLINE __m512i qs64_sort_vec(__m512i v)
{
    QS_CX(64, v, 1, 0x66);
    QS_CX(64, v, 2, 0x3c); QS_CX(64, v, 1, 0x5a);
    return qs64_merge_vec(v);
}
QS_INLINE __m512i qs32_merge_vec(__m512i v)
{
    QS_CX(32, v, 8, 0xff00); QS_CX(32, v, 4, 0xf0f0); QS_CX(32, v, 2, 0xcccc); QS_CX(32, v, 1, 0xaaaa);
    return v;
}
QS_INLINE __m512i qs32_sort_vec(__m512i v)
{
    QS_CX(32, v, 1, 0x6666);
    QS_CX(32, v, 2, 0x3c3c); QS_CX(32, v, 1, 0x5a5a);
    QS_CX(32, v, 4, 0x0ff0); QS_CX(32, v, 2, 0x33cc); QS_CX(32, v, 1, 0x55aa);
    return qs32_merge_vec(v);
}
QS_INLINE __m512i qs64s_merge_vec(__m512i v)
{
    QS_CX(64s, v, 4, 0xf0); QS_CX(64s, v, 2, 0xcc); QS_CX(64s, v, 1, 0xaa);
    return v;
}
QS_INLINE __m512i qs64s_sort_vec(__m512i v)
{
    QS_CX(64s, v, 1, 0x66);
    QS_CX(64s, v, 2, 0x3c); QS_CX(64s, v, 1, 0x5a);
    return qs64s_merge_vec(v);
}
QS_INLINE __m512i qs32s_merge_vec(__m512i v)
{
    QS_CX(32s, v, 8, 0xff00); QS_CX(32s, v, 4, 0xf0f0); QS_CX(32s, v, 2, 0xcccc); QS_CX(32s, v, 1, 0xaaaa);
    return v;
}
QS_INLINE __m512i qs32s_sort_vec(__m512i v)
{
    QS_CX(32s, v, 1, 0x6666);
    QS_CX(32s, v, 2, 0x3c3c); QS_CX(32s, v, 1, 0x5a5a);
    QS_CX(32s, v, 4, 0x0ff0); QS_CX(32s, v, 2, 0x33cc); QS_CX(32s, v, 1, 0x55aa);
    return qs32s_merge_vec(v);
}
#undef QS_CX

/* ---- the generic parts ------------------------------------------------- */

#define QS_UNROLL_LOOP _Pragma("GCC unroll 16")
#define QS_DEFINE(S, T, L, TMAX)                                      \
    /* sort a[0..n), n <= NV * L, NV a power of two, in registers */          \
    QS_INLINE void qs##S##_sort_nvec(T *a, int64_t n, const int NV)           \
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
            if (c >= L) qs##S##_store(a + i * L, v[i]);                       \
            else if (c > 0) qs##S##_mstore(a + i * L, (uint32_t)((1u << c) - 1), v[i]); \
        }                                                                     \
    }                                                                         \
    static void qs##S##_sort_base(T *a, int64_t n)                            \
    {                                                                         \
        if (n <= 1) return;                                                   \
        if (n <= L) qs##S##_sort_nvec(a, n, 1);                               \
        else if (n <= 2 * L) qs##S##_sort_nvec(a, n, 2);                      \
        else if (n <= 4 * L) qs##S##_sort_nvec(a, n, 4);                      \
        else if (n <= 8 * L) qs##S##_sort_nvec(a, n, 8);                      \
        else qs##S##_sort_nvec(a, n, 16);                                     \
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
    QS_INLINE void qs##S##_put(T *a, __m512i v, uint32_t m, int64_t *ls, int64_t *rs) \
    {                                                                         \
        const int c = __builtin_popcount(m);                                  \
        qs##S##_cstore(a + *ls, m, v);                                        \
        qs##S##_cstore(a + *rs - (L - c), ~m, v);                             \
        *ls += c;                                                             \
        *rs -= L - c;                                                         \
    }                                                                         \
    /* the same for a partial vector: mm = the lanes that hold keys */      \
    QS_INLINE void qs##S##_put_exact(T *a, __m512i v, uint32_t m, uint32_t mm, \
                                     int64_t *ls, int64_t *rs)                 \
    {                                                                         \
        m &= mm;                                                              \
        const uint32_t g = ~m & mm;                                           \
        qs##S##_cstore(a + *ls, m, v);                                        \
        *ls += __builtin_popcount(m);                                         \
        *rs -= __builtin_popcount(g);                                         \
        qs##S##_cstore(a + *rs, g, v);                                        \
    }                                                                         \
    /* partition a[0..n), n >= 2 * QS_UNROLL * L: returns k with a[0..k)      \
     * the keys <= p (< p when strict) */                                     \
    static int64_t qs##S##_partition(T *a, int64_t n, T p, int strict)        \
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
                qs##S##_put(a, v[i], m, &ls, &rs);                            \
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
            qs##S##_put_exact(a, v[i], m, vm[i], &ls, &rs);                   \
        }                                                                     \
        QS_UNROLL_LOOP                                                        \
        for (int i = 0; i < 2 * U; ++i) {                                     \
            const uint32_t m = strict ? qs##S##_lt(keep[i], pv) : qs##S##_le(keep[i], pv); \
            qs##S##_put_exact(a, keep[i], m, (uint32_t)((1ull << L) - 1), &ls, &rs); \
        }                                                                     \
        return ls;                                                            \
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
    QS_DRIVERS(qs##S, T, QS_BASE_VECS * L)                                   \
    /* sort a[0..n) ascending */                                              \
    static void simd_qsort_##S(T *a, int64_t n)                               \
    {                                                                         \
        int depth = 4;                                                        \
        for (int64_t m = n; m > 1; m >>= 1) depth += 2;                       \
        qs##S##_rec(a, n, depth);                                             \
    }                                                                         \
    /* a[0..m) = the m smallest of a[0..n), ascending */                      \
    __attribute__((unused)) static void simd_qsort_##S##_first(T *a, int64_t n, int64_t m) \
    {                                                                         \
        int depth = 4;                                                        \
        for (int64_t i = n; i > 1; i >>= 1) depth += 2;                       \
        qs##S##_first(a, n, m, depth);                                        \
    }

QS_DEFINE(64, uint64_t, 8, UINT64_MAX)
QS_DEFINE(32, uint32_t, 16, UINT32_MAX)
QS_DEFINE(64s, int64_t, 8, INT64_MAX)
QS_DEFINE(32s, int32_t, 16, INT32_MAX)

/* biased keys (signed order) of uint32_t / uint64_t arrays: the signed
 * and unsigned variants of one type may alias */
static void simd_qsort_32_biased(uint32_t *a, int64_t n) { simd_qsort_32s((int32_t *)(void *)a, n); }
static void simd_qsort_64_biased(uint64_t *a, int64_t n) { simd_qsort_64s((int64_t *)(void *)a, n); }
#undef QS_DEFINE
#undef QS_UNROLL_LOOP
#undef QS_INLINE

#endif /* __AVX512F__ */

/* AVX2 without AVX-512: the same sorts in 256-bit vectors */
#include "simd_qsort_avx2.h"
#endif
