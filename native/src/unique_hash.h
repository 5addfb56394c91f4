/*
 * unique_hash.h - torch.unique without sorting the input, for inputs of few
 * distinct values.
 *
 * torch.unique sorts all n elements to find u distinct values.  When u is
 * small (segmentation maps of 25 ids, class labels, quantized scores) one
 * pass through a hash table of the distinct values finds them, counts them
 * and numbers each element's value; only the u distinct values are then
 * sorted (by the caller), and a second pass renumbers the elements by the
 * sorted order for return_inverse.  The result equals the sort's whenever
 * equal values have equal bits, which the pass checks for the float types:
 * an input holding both -0.0 and +0.0 (one entry in torch's result, showing
 * the sign its sort put first) or two NaNs (never merged; their order is the
 * sort's) is refused, and so is one with more than `limit` distinct values
 * (sorting is then cheaper; and early, when more than three in four of the
 * first 4096 elements, 8192, ... are distinct) or whose keys
 * collide so much that the probes run long (an adversarial input costs at
 * most a bounded number of probes).  (Integers of a short range, labels and
 * cluster ids among them, go to unique_dense.h first: kwker/ops/unique.py.)
 *
 * Open addressing with linear probing, at most a quarter full (grown as
 * distinct values come), the key's bits mixed, then Fibonacci hashing; runs
 * of one value (segment ids, sorted batch indices) skip the table.  The
 * tables come from the calling thread's workspace cache (row_io.h
 * workspace_alloc; huge pages from 4 MiB): a fresh calloc'd table was
 * faulted in page by page on every call, and those faults were half the
 * time of an input of 65k distinct 62-bit ids (262144 elements, native:
 * 11.5-17 -> 4.7-5.3 ms).  Bool
 * elements count by truth (a byte other than 0 or 1 is True, as torch's
 * bool unique counts it) and come out as 0 or 1.
 */
#ifndef KWK_UNIQUE_HASH_H
#define KWK_UNIQUE_HASH_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "row_io.h"

/* slot1: the entry's distinct value's number + 1 (0: an empty entry, so
 * a zeroed table is an empty one) */
typedef struct { uint32_t key, slot1; } uh_entry32;
typedef struct { uint64_t key, slot1; } uh_entry64;

#if defined(__GNUC__)
#define UH_NOINLINE __attribute__((noinline))
#else
#define UH_NOINLINE
#endif

static inline uint64_t uh_hash(uint64_t key, int shift)
{
    /* every key bit moved into the top bits taken (ids that differ only in
     * high or only in low bits, multiples of a power of two) */
    key ^= key >> 32;
    key *= 0xD6E8FEB86659FD93ull;
    key ^= key >> 32;
    return (key * 0x9E3779B97F4A7C15ull) >> shift;
}

#define UH_SAME(b) (b)
#define UH_TRUTH(b) ((uint32_t)((b) != 0))

/* The state of one pass: the table of `cap` entries (a power of two,
 * 64 - shift bits) holding distinct[0, used). */
#define UH_DEFINE(T, SUF, K, E, KEY, FLOAT, SIGN, INF)                          \
    typedef struct {                                                              \
        E *table;                                                                 \
        size_t table_bytes;  /* the block's size (workspace_alloc) */             \
        uint64_t cap;                                                             \
        int shift;                                                                \
        int zeros;           /* 1: +0.0 seen, 2: -0.0 seen */                     \
        int merge_zeros;     /* both zeros one value (else: defer) */             \
        int64_t used, limit; /* distinct values found; at most */                 \
        int64_t probes;      /* extra probes still allowed */                     \
        int64_t nan_slot;    /* the one NaN's number, or -1 */                    \
        T *distinct;                                                              \
        int64_t *counts;                                                          \
    } uh_state_##SUF;                                                             \
                                                                                  \
    static int uh_rebuild_##SUF(uh_state_##SUF *st, uint64_t cap, int shift)      \
    {                                                                             \
        size_t bytes = 0;                                                         \
        E *table = workspace_alloc((size_t)cap * sizeof(E), &bytes);              \
        if (!table) return KWK_E_NOMEM;                                           \
        memset(table, 0, (size_t)cap * sizeof(E));                                \
        for (int64_t s = 0; s < st->used; ++s) {                                  \
            if (s == st->nan_slot) continue; /* never in the table */             \
            const K key = KEY(st->distinct[s]);                                   \
            uint64_t h = uh_hash(key, shift);                                     \
            while (table[h].slot1 != 0) h = (h + 1) & (cap - 1);                  \
            table[h].key = key;                                                   \
            table[h].slot1 = (K)(s + 1);                                          \
        }                                                                         \
        kwk_ws_give(st->table, st->table_bytes);                                  \
        st->table = table;                                                        \
        st->table_bytes = bytes;                                                  \
        st->cap = cap;                                                            \
        st->shift = shift;                                                        \
        return KWK_OK;                                                            \
    }                                                                             \
                                                                                  \
    /* The number of element `x`'s value when its key is not at its first      \
     * probe: found further on, or entered as a new distinct value (the table   \
     * grown to stay at most a quarter full); or a negative status, KWK_DEFER       \
     * negated.  A NaN is never entered in the table, so that meeting it again \
     * comes here too (a second NaN: defer). */                                 \
    static UH_NOINLINE int64_t uh_slow_##SUF(uh_state_##SUF *st, T x)           \
    {                                                                             \
        const K key = KEY(x);                                                     \
        const uint64_t mask = st->cap - 1;                                        \
        uint64_t h = uh_hash(key, st->shift);                                     \
        for (; st->table[h].slot1 != 0; h = (h + 1) & mask) {                     \
            if (st->table[h].key == key) return (int64_t)st->table[h].slot1 - 1;  \
            if (--st->probes < 0) return -KWK_DEFER;                              \
        }                                                                         \
        if (st->used == st->limit) return -KWK_DEFER;                             \
        const int64_t slot = st->used;                                            \
        if (FLOAT && (T)(x & (T)~(T)(SIGN)) > (T)(INF)) {                         \
            if (st->nan_slot >= 0) return -KWK_DEFER;                             \
            st->nan_slot = slot;                                                  \
        } else {                                                                  \
            if (FLOAT) {                                                          \
                const int zero = x == 0 ? 1 : x == (T)(SIGN) ? 2 : 0;             \
                st->zeros |= zero;                                                \
                if (zero && st->zeros == 3) { /* the other zero is entered */    \
                    if (!st->merge_zeros) return -KWK_DEFER;                      \
                    /* the other zero's number; this key is entered with it  \
                     * (a table entry beyond `used`: dropped by a rebuild,   \
                     * entered again here when next met) */                   \
                    const K other = KEY((T)(x ^ (T)(SIGN)));                      \
                    uint64_t g = uh_hash(other, st->shift);                       \
                    while (st->table[g].key != other || st->table[g].slot1 == 0) \
                        g = (g + 1) & mask;                                       \
                    st->table[h].key = key;                                       \
                    st->table[h].slot1 = st->table[g].slot1;                      \
                    return (int64_t)st->table[g].slot1 - 1;                       \
                }                                                                 \
            }                                                                     \
            st->table[h].key = key;                                               \
            st->table[h].slot1 = (K)(slot + 1);                                   \
        }                                                                         \
        st->distinct[slot] = (T)key;                                              \
        if (st->counts) st->counts[slot] = 0;                                     \
        st->used = slot + 1;                                                      \
        if ((uint64_t)st->used * 4 >= st->cap) {                                  \
            const int status = uh_rebuild_##SUF(st, st->cap * 2, st->shift - 1);  \
            if (status != KWK_OK) return status;                                  \
        }                                                                         \
        return slot;                                                              \
    }                                                                             \
                                                                                  \
    static int uh_build_##SUF(const T *v, int64_t n, int64_t limit, T *distinct,  \
                              int64_t *counts, int64_t *slots, int64_t *u,        \
                              int merge_zeros)                                    \
    {                                                                             \
        /* the table grows with the distinct values, so that few of them stay \
         * in the nearest cache */                                              \
        int bits = 6;                                                             \
        while (bits < UH_FIRST_BITS && ((int64_t)1 << bits) < 4 * limit + 4) ++bits; \
        uh_state_##SUF st = {NULL, 0, 0, 0, 0, merge_zeros, 0, limit, 4 * n + 256, -1, \
                             distinct, counts};                                   \
        int status = uh_rebuild_##SUF(&st, (uint64_t)1 << bits, 64 - bits);       \
        if (status != KWK_OK) return status;                                      \
        int64_t slot = -1; /* the previous element's (-1: look up the next) */    \
        K prev = 0;                                                               \
        for (int64_t i = 0, end = 0, check = UH_CHECKPOINT; i < n; check *= 2) {  \
            /* mostly distinct so far: sorting is cheaper */                      \
            if (st.used * 4 > end * 3) { status = KWK_DEFER; goto done; }         \
            end = check < n ? check : n;                                          \
            const uint64_t far_cap = UH_PREFETCH_BYTES / sizeof(E);               \
            for (; i < end; ++i) {                                                \
                const K key = KEY(v[i]);                                          \
                if (slot < 0 || key != prev) {                                    \
                    if (st.cap >= far_cap && i + UH_PREFETCH_AHEAD < n)          \
                        UH_PREFETCH(&st.table[uh_hash(KEY(v[i + UH_PREFETCH_AHEAD]), st.shift)]); \
                    const E e = st.table[uh_hash(key, st.shift)];                 \
                    if (e.key == key && e.slot1 != 0) {                           \
                        slot = (int64_t)e.slot1 - 1;                              \
                    } else {                                                      \
                        slot = uh_slow_##SUF(&st, v[i]);                          \
                        if (slot < 0) {                                           \
                            status = slot == -KWK_DEFER ? KWK_DEFER : (int)slot;  \
                            goto done;                                            \
                        }                                                         \
                    }                                                             \
                    prev = key;                                                   \
                }                                                                 \
                if (counts) ++counts[slot];                                       \
                if (slots) slots[i] = slot;                                       \
                /* after a NaN, look the next element up (a NaN again: defer) */  \
                if (FLOAT && slot == st.nan_slot) slot = -1;                      \
            }                                                                     \
        }                                                                         \
        *u = st.used;                                                             \
    done:                                                                         \
        kwk_ws_give(st.table, st.table_bytes);                                    \
        return status;                                                            \
    }

/* the first table's size (bits), and the first count of elements after
 * which the share of distinct values is checked (then at every doubling) */
#define UH_FIRST_BITS 10
#define UH_CHECKPOINT 4096
/* Tables of UH_PREFETCH_BYTES or more (past the L2 cache) have the entry of
 * the element UH_PREFETCH_AHEAD places on prefetched whenever an element is
 * looked up, so that lookups of many distinct values overlap their cache
 * misses instead of waiting on each in turn (torchrec_mch_unique_history,
 * 262144 62-bit ids, 65339 distinct, native, two runs: 4.7-5.3 -> 3.4-3.6
 * ms; 6, 20 or 32 places ahead measured alike within the noise). */
#define UH_PREFETCH_BYTES (256u << 10)
#define UH_PREFETCH_AHEAD 12
#if defined(__GNUC__)
#define UH_PREFETCH(p) __builtin_prefetch(p)
#else
#define UH_PREFETCH(p) ((void)(p))
#endif

UH_DEFINE(uint8_t, bool, uint32_t, uh_entry32, UH_TRUTH, 0, 0, 0)
UH_DEFINE(uint8_t, u8, uint32_t, uh_entry32, UH_SAME, 0, 0, 0)
UH_DEFINE(uint16_t, u16, uint32_t, uh_entry32, UH_SAME, 0, 0, 0)
UH_DEFINE(uint32_t, u32, uint32_t, uh_entry32, UH_SAME, 0, 0, 0)
UH_DEFINE(uint64_t, u64, uint64_t, uh_entry64, UH_SAME, 0, 0, 0)
UH_DEFINE(uint16_t, f16, uint32_t, uh_entry32, UH_SAME, 1, 0x8000u, 0x7C00u)
UH_DEFINE(uint16_t, bf16, uint32_t, uh_entry32, UH_SAME, 1, 0x8000u, 0x7F80u)
UH_DEFINE(uint32_t, f32, uint32_t, uh_entry32, UH_SAME, 1, 0x80000000u, 0x7F800000u)
UH_DEFINE(uint64_t, f64, uint64_t, uh_entry64, UH_SAME, 1, 0x8000000000000000ull,
          0x7FF0000000000000ull)
#undef UH_DEFINE
#undef UH_SAME
#undef UH_TRUTH

/* n >= 1 elements, 1 <= limit <= min(n, 2^30) (the caller's checks). */
static int impl_unique_hash(int dtype, const void *values, int64_t n, int64_t limit,
                            void *distinct, int64_t *counts, int64_t *slots, int64_t *u,
                            int merge_zeros)
{
    switch (dtype) {
    case KWK_BOOL: return uh_build_bool(values, n, limit, distinct, counts, slots, u, 0);
    case KWK_FLOAT16: return uh_build_f16(values, n, limit, distinct, counts, slots, u, merge_zeros);
    case KWK_BFLOAT16: return uh_build_bf16(values, n, limit, distinct, counts, slots, u, merge_zeros);
    case KWK_FLOAT32: return uh_build_f32(values, n, limit, distinct, counts, slots, u, merge_zeros);
    case KWK_FLOAT64: return uh_build_f64(values, n, limit, distinct, counts, slots, u, merge_zeros);
    default: break;
    }
    switch (KWK_DTYPES[dtype].elem_size) {
    case 1: return uh_build_u8(values, n, limit, distinct, counts, slots, u, 0);
    case 2: return uh_build_u16(values, n, limit, distinct, counts, slots, u, 0);
    case 4: return uh_build_u32(values, n, limit, distinct, counts, slots, u, 0);
    default: return uh_build_u64(values, n, limit, distinct, counts, slots, u, 0);
    }
}

/* slots[i] = rank[slots[i]], every slot checked to lie in [0, u) first (in
 * blocks: a branch per element cost more); KWK_E_ARG, nothing written past
 * the block, for one that does not. */
static int impl_unique_remap(int64_t *slots, int64_t n, const int64_t *rank, int64_t u)
{
    for (int64_t i = 0; i < n; i += 4096) {
        const int64_t e = n - i < 4096 ? n - i : 4096;
        int bad = 0;
        for (int64_t j = 0; j < e; ++j) bad |= (uint64_t)slots[i + j] >= (uint64_t)u;
        if (bad) return KWK_E_ARG;
        for (int64_t j = 0; j < e; ++j) slots[i + j] = rank[slots[i + j]];
    }
    return KWK_OK;
}

#endif
