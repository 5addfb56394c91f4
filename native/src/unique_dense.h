/*
 * unique_dense.h - torch.unique of integers whose values lie in a short
 * range, through a bitmap of that range: sorted output without a sort.
 *
 * Node ids sampled from a graph, token ids of a vocabulary, row indices:
 * many distinct values, yet all of them inside a range not much longer than
 * the input.  One pass sets a bit per value in a bitmap of the range, one
 * pass over the bitmap's words counts the bits below each word (a value's
 * place in the output is that count plus the bits below it in its word),
 * and the set bits, read in order, are the sorted distinct values.  The
 * inverse is that place for each element, the counts a histogram of it.
 * Every step is linear in the input or the range, and the result is the
 * same whatever order any sort would give equal elements, so it serves
 * install() and torch.ops.kwker alike (integers and bool: no -0.0, no NaN).
 * Short ranges (labels, cluster and segment ids, bytes, bool) count each
 * value in a table (ud_table_*); they took a table indexed by key - min in
 * the hash pass before, then a sort of the distinct values and a
 * renumbering pass (through torch.unique: 50000 cluster ids with the
 * inverse 0.134 -> 0.112 ms, 1M random bools with the inverse and counts
 * 2.5 -> 1.6 ms, an 800x1066 segmentation map of 50 values, values only,
 * 0.77 -> 0.79 ms).
 *
 * The pass declines (KWK_DEFER, nothing written to rely on) when the range
 * is too wide for the input's length (UD_NEAR_WORDS: the per-word work and
 * the cache misses would outweigh the sort or hash saved), or when the
 * caller's room for distinct values is too small.  The range is found
 * UD_STEP elements at a time, so that a wide input stops early.
 */
#ifndef KWK_UNIQUE_DENSE_H
#define KWK_UNIQUE_DENSE_H

#include <stdint.h>
#include <string.h>

#include "row_io.h"

/* The range's words (64 values each) at most: one per element while the
 * bitmap stays near the L2 cache (UD_NEAR_WORDS: 768 KiB of bits and
 * counts, a range of 4M values), one per UD_FAR_ELEMENTS elements past it,
 * where every lookup may miss the cache: few distinct values spread over a
 * wide range are then hashed instead (1M int64 of 100 values in a range of
 * 60M, with the inverse and counts: 5.0 ms so, 2.7 ms hashed).  Measured
 * through torch.unique: pyg's sampled node ids (153600 int64 in a range of
 * 2.45M, 85063 distinct, inverse) 2.05 ms sorted, 0.75 ms so; 2048 token
 * ids of a 128k vocabulary, values only, 25 us either way (the native call
 * 8 us of it). */
#define UD_NEAR_WORDS ((uint64_t)1 << 16)
#define UD_FAR_ELEMENTS 4
/* and 2^22 words in all: a range of 2^28 values, 48 MiB of workspace (only
 * inputs of 2^24 or more elements, 128 MiB of int64, may use that much) */
#define UD_MAX_WORDS ((uint64_t)1 << 22)
#define UD_STEP 4096
/* Ranges of fewer than UD_TABLE_MAX values and twice the element count
 * (labels, segment and cluster ids, bytes, bool) take a table of a 32-bit
 * count per value instead of the bitmap: 256 KiB at most, in the L2 cache.
 * UD_SPLIT tables for ranges of up to UD_SPLIT_MAX values (64 KiB). */
#define UD_TABLE_MAX ((uint64_t)1 << 16)
#define UD_SPLIT 4
#define UD_SPLIT_MAX ((uint64_t)1 << 12)

/* The place of key k among the distinct values: the values present in the
 * words before its word, and those below it in its word. */
static inline uint64_t ud_place(const uint64_t *bits, const uint32_t *below, uint64_t k)
{
    return below[k >> 6]
           + (uint64_t)__builtin_popcountll(bits[k >> 6] & (((uint64_t)1 << (k & 63)) - 1));
}

/* T: the elements' bits as unsigned; KEY(x, flip): an element's key, which
 * orders as the values do (the sign bit flipped for signed types; bool: its
 * truth, a byte other than 0 or 1 being True as torch counts it), and which
 * is also the output value's bits once flipped back. */
#define UD_KEY_INT(x, flip) ((x) ^ (flip))
/* (the truth as arithmetic: written `(x) != 0`, gcc turned the table
 * lookups into a branch, mispredicted on random bools: 1M with the inverse,
 * native, 3.7 ms, 1.4 ms so) */
#define UD_KEY_TRUTH(x, flip) ((uint8_t)((uint8_t)((x) | (uint8_t)(0u - (x))) >> 7))
/* an element's offset from the range's lowest key (inside UD_DEFINE) */
#define UD_OFF(T, KEY, x) ((T)((T)KEY((x), flip) - lo))
#define UD_DEFINE(T, SUF, KEY)                                                         \
    /* A range of `span` <= UD_TABLE_MAX values from lo: a table entry per  \
     * value (no bits to count): each value's count (or a mark, for the     \
     * values alone), then its place.  Ranges of up to UD_SPLIT_MAX values   \
     * are counted in UD_SPLIT tables, element i in table i % UD_SPLIT, so   \
     * that a value repeating close by (bool: every other element) does not \
     * wait on its own count's store, and summed after. */                  \
    static int ud_table_##SUF(const T *v, int64_t n, T flip, T lo, uint64_t span,  \
                              int64_t room, T *out, int64_t *counts, int64_t *inverse, \
                              int64_t *u)                                         \
    {                                                                             \
        const uint64_t tables = span <= UD_SPLIT_MAX ? UD_SPLIT : 1;              \
        size_t bytes = 0;                                                         \
        uint32_t *t = workspace_alloc((size_t)(span * tables) * sizeof(uint32_t), &bytes); \
        if (!t) return KWK_E_NOMEM;                                               \
        memset(t, 0, (size_t)(span * tables) * sizeof(uint32_t));                  \
        int64_t i = 0;                                                            \
        if (!counts) { /* marks: stores only */                                  \
            for (; i < n; ++i) t[UD_OFF(T, KEY, v[i])] = 1;               \
        } else if (tables == UD_SPLIT) {                                          \
            for (; i + UD_SPLIT <= n; i += UD_SPLIT)                              \
                for (int s = 0; s < UD_SPLIT; ++s)                                \
                    ++t[(uint64_t)s * span + UD_OFF(T, KEY, v[i + s])];   \
            for (uint64_t k = 0; k < span; ++k)                                   \
                for (int s = 1; s < UD_SPLIT; ++s) t[k] += t[(uint64_t)s * span + k]; \
        }                                                                         \
        for (; counts && i < n; ++i) ++t[UD_OFF(T, KEY, v[i])];          \
        uint64_t seen = 0;                                                        \
        for (uint64_t k = 0; k < span; ++k) seen += t[k] != 0;                    \
        int status = KWK_OK;                                                      \
        if (seen > (uint64_t)room) { status = KWK_DEFER; goto done; }             \
        for (uint64_t k = 0, o = 0; k < span; ++k) {                              \
            if (t[k] == 0) continue;                                              \
            out[o] = (T)((T)(lo + (T)k) ^ flip);                                  \
            if (counts) counts[o] = t[k];                                         \
            t[k] = (uint32_t)o++; /* now its place (only present values are    \
                                   * looked up) */                              \
        }                                                                         \
        if (inverse)                                                              \
            for (int64_t j = 0; j < n; ++j) inverse[j] = t[UD_OFF(T, KEY, v[j])]; \
        *u = (int64_t)seen;                                                       \
    done:                                                                         \
        kwk_ws_give(t, bytes);                                                    \
        return status;                                                            \
    }                                                                             \
                                                                                  \
    static int ud_build_##SUF(const T *v, int64_t n, T flip, int64_t room, T *out,  \
                              int64_t *counts, int64_t *inverse, int64_t *u)        \
    {                                                                               \
        T lo = (T)KEY(v[0], flip), hi = lo;                                           \
        const uint64_t near = (uint64_t)n < UD_NEAR_WORDS ? (uint64_t)n : UD_NEAR_WORDS; \
        const uint64_t far = (uint64_t)n / UD_FAR_ELEMENTS;                         \
        uint64_t most = near > far ? near : far;                                    \
        if (most > UD_MAX_WORDS) most = UD_MAX_WORDS;                               \
        for (int64_t i0 = 0; i0 < n; i0 += UD_STEP) {                               \
            const int64_t e = n - i0 < UD_STEP ? n - i0 : UD_STEP;                  \
            T l = lo, h = hi;                                                       \
            for (int64_t i = i0; i < i0 + e; ++i) {                                 \
                const T key = (T)KEY(v[i], flip);                                     \
                l = key < l ? key : l;                                              \
                h = key > h ? key : h;                                              \
            }                                                                       \
            lo = l;                                                                 \
            hi = h;                                                                 \
            if (((uint64_t)(T)(hi - lo) >> 6) >= most) return KWK_DEFER;            \
        }                                                                           \
        const uint64_t gap = (uint64_t)(T)(hi - lo);                                \
        if (gap < UD_TABLE_MAX && gap < (uint64_t)n * 2 && (uint64_t)n < ((uint64_t)1 << 32)) \
            return ud_table_##SUF(v, n, flip, lo, gap + 1, room, out, counts, inverse, u); \
        const uint64_t words = (gap >> 6) + 1;                                      \
        /* the bits, then the counts below each word (32 bits: the range    \
         * has at most 2^28 values): apart, so that setting the bits        \
         * touches half the memory */                                        \
        size_t bytes = 0;                                                           \
        uint64_t *bits = workspace_alloc((size_t)words * 12, &bytes);               \
        if (!bits) return KWK_E_NOMEM;                                              \
        uint32_t *below = (uint32_t *)(bits + words);                               \
        memset(bits, 0, (size_t)words * sizeof(uint64_t));                          \
        /* runs of one value (segment maps, sorted ids) set their bit once: \
         * setting it again would wait on the store before */                \
        for (int64_t i = 0; i < n; ++i) {                                           \
            if (i > 0 && v[i] == v[i - 1]) continue;                                \
            const uint64_t k = UD_OFF(T, KEY, v[i]);                          \
            bits[k >> 6] |= (uint64_t)1 << (k & 63);                                \
        }                                                                           \
        uint64_t seen = 0;                                                          \
        for (uint64_t j = 0; j < words; ++j) {                                      \
            below[j] = (uint32_t)seen;                                              \
            seen += (uint64_t)__builtin_popcountll(bits[j]);                        \
        }                                                                           \
        int status = KWK_OK;                                                        \
        if (seen > (uint64_t)room) { status = KWK_DEFER; goto done; }               \
        /* a word's values four at a time, whole groups while there is room \
         * past the last: one loop exit per word (most words hold a few     \
         * values) instead of one mispredicted exit per value */            \
        uint64_t o = 0, j = 0;                                                      \
        for (; j < words && o + 68 <= (uint64_t)room; ++j) {                        \
            uint64_t b = bits[j];                                                   \
            const T base = (T)(lo + (T)(j * 64));                                   \
            const uint64_t end = o + (uint64_t)__builtin_popcountll(b);             \
            for (; o < end; o += 4) {                                               \
                out[o] = (T)((T)(base + (T)__builtin_ctzll(b | ((uint64_t)1 << 63))) ^ flip); \
                b &= b - 1;                                                         \
                out[o + 1] = (T)((T)(base + (T)__builtin_ctzll(b | ((uint64_t)1 << 63))) ^ flip); \
                b &= b - 1;                                                         \
                out[o + 2] = (T)((T)(base + (T)__builtin_ctzll(b | ((uint64_t)1 << 63))) ^ flip); \
                b &= b - 1;                                                         \
                out[o + 3] = (T)((T)(base + (T)__builtin_ctzll(b | ((uint64_t)1 << 63))) ^ flip); \
                b &= b - 1;                                                         \
            }                                                                       \
            o = end;                                                                \
        }                                                                           \
        for (; j < words; ++j)                                                      \
            for (uint64_t b = bits[j]; b; b &= b - 1)                               \
                out[o++] = (T)((T)(lo + (T)(j * 64 + (uint64_t)__builtin_ctzll(b))) ^ flip); \
        if (inverse)                                                                \
            for (int64_t i = 0; i < n; ++i)                                         \
                inverse[i] = (int64_t)ud_place(bits, below, UD_OFF(T, KEY, v[i])); \
        if (counts) {                                                               \
            memset(counts, 0, (size_t)seen * sizeof(int64_t));                      \
            if (inverse)                                                            \
                for (int64_t i = 0; i < n; ++i) ++counts[inverse[i]];               \
            else                                                                    \
                for (int64_t i = 0; i < n; ++i)                                     \
                    ++counts[ud_place(bits, below, UD_OFF(T, KEY, v[i]))];    \
        }                                                                           \
        *u = (int64_t)seen;                                                         \
    done:                                                                           \
        kwk_ws_give(bits, bytes);                                                      \
        return status;                                                              \
    }

UD_DEFINE(uint8_t, bool, UD_KEY_TRUTH)
UD_DEFINE(uint8_t, u8, UD_KEY_INT)
UD_DEFINE(uint16_t, u16, UD_KEY_INT)
UD_DEFINE(uint32_t, u32, UD_KEY_INT)
UD_DEFINE(uint64_t, u64, UD_KEY_INT)
#undef UD_DEFINE
#undef UD_KEY_INT
#undef UD_KEY_TRUTH
#undef UD_OFF

/* n >= 1 elements of an integer or bool dtype (the caller's checks);
 * room >= 0. */
static int impl_unique_dense(int dtype, const void *values, int64_t n, int64_t room, void *out,
                             int64_t *counts, int64_t *inverse, int64_t *u)
{
    switch (dtype) {
    case KWK_BOOL: return ud_build_bool(values, n, 0, room, out, counts, inverse, u);
    case KWK_UINT8: return ud_build_u8(values, n, 0, room, out, counts, inverse, u);
    case KWK_INT8: return ud_build_u8(values, n, 0x80u, room, out, counts, inverse, u);
    case KWK_UINT16: return ud_build_u16(values, n, 0, room, out, counts, inverse, u);
    case KWK_INT16: return ud_build_u16(values, n, 0x8000u, room, out, counts, inverse, u);
    case KWK_UINT32: return ud_build_u32(values, n, 0, room, out, counts, inverse, u);
    case KWK_INT32: return ud_build_u32(values, n, 0x80000000u, room, out, counts, inverse, u);
    case KWK_UINT64: return ud_build_u64(values, n, 0, room, out, counts, inverse, u);
    case KWK_INT64:
        return ud_build_u64(values, n, (uint64_t)1 << 63, room, out, counts, inverse, u);
    default: return KWK_E_DTYPE;
    }
}

#endif
