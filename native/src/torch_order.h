/*
 * torch_order.h - the order torch 2.13's CPU kernels give equal elements.
 *
 * torch sorts (value, index) pairs with libstdc++'s std::sort (introsort),
 * and selects with std::partial_sort (heap select) and std::nth_element
 * (introselect), comparing values only.  Where values tie, the output order
 * is whatever those algorithms' moves produce; nothing documents it, yet an
 * A/B run must give the same indices.  The functions below are a
 * re-implementation of those algorithms' published behaviour (same pivot
 * choice, partition loop, thresholds, heap layout and depth limit), applied
 * to (key, index) records compared by key alone, so they make the same moves
 * and leave equal keys in the same order.  They run only on rows whose
 * selection has ties; tie-free rows take the fast kernels, whose answer is
 * then the only correct one.
 */
#ifndef KWK_TORCH_ORDER_H
#define KWK_TORCH_ORDER_H

#include "compress_lut.h"
#include "simd_qsort.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint64_t key;
    int64_t idx;
} kwk_kv;

#define KV_LESS(a, b) ((a).key < (b).key)

/* libstdc++'s _S_threshold: below it introsort leaves the range to the final
 * insertion sort. */
enum { KWK_STD_SORT_THRESHOLD = 16 };

static inline void kv_swap(kwk_kv *a, kwk_kv *b)
{
    kwk_kv t = *a;
    *a = *b;
    *b = t;
}

static inline int64_t floor_log2(int64_t n)
{
    int64_t r = 0;
    while (n > 1) { n >>= 1; ++r; }
    return r;
}

/* --- heap operations (max-heap under KV_LESS) --- */
static void emu_push_heap(kwk_kv *first, int64_t hole, int64_t top, kwk_kv value)
{
    int64_t parent = (hole - 1) / 2;
    while (hole > top && KV_LESS(first[parent], value)) {
        first[hole] = first[parent];
        hole = parent;
        parent = (hole - 1) / 2;
    }
    first[hole] = value;
}

static void emu_adjust_heap(kwk_kv *first, int64_t hole, int64_t len, kwk_kv value)
{
    const int64_t top = hole;
    int64_t child = hole;
    while (child < (len - 1) / 2) {
        child = 2 * (child + 1);
        if (KV_LESS(first[child], first[child - 1])) --child;
        first[hole] = first[child];
        hole = child;
    }
    if ((len & 1) == 0 && child == (len - 2) / 2) {
        child = 2 * (child + 1);
        first[hole] = first[child - 1];
        hole = child - 1;
    }
    emu_push_heap(first, hole, top, value);
}

static void emu_make_heap(kwk_kv *first, int64_t len)
{
    if (len < 2) return;
    for (int64_t parent = (len - 2) / 2;; --parent) {
        emu_adjust_heap(first, parent, len, first[parent]);
        if (parent == 0) return;
    }
}

/* Move *first to *result's slot and re-heap [first, first+len). */
static inline void emu_pop_heap(kwk_kv *first, int64_t len, kwk_kv *result)
{
    kwk_kv value = *result;
    *result = *first;
    emu_adjust_heap(first, 0, len, value);
}

static void emu_heap_select(kwk_kv *first, int64_t middle, int64_t last)
{
    emu_make_heap(first, middle);
    for (int64_t i = middle; i < last; ++i)
        if (KV_LESS(first[i], first[0])) emu_pop_heap(first, middle, first + i);
}

static void emu_sort_heap(kwk_kv *first, int64_t len)
{
    while (len > 1) {
        --len;
        emu_pop_heap(first, len, first + len);
    }
}

/* std::partial_sort(first, first + middle, first + last) */
static void emu_partial_sort(kwk_kv *first, int64_t middle, int64_t last)
{
    emu_heap_select(first, middle, last);
    emu_sort_heap(first, middle);
}

/* --- insertion sorts --- */
static void emu_unguarded_linear_insert(kwk_kv *last)
{
    kwk_kv value = *last;
    kwk_kv *next = last - 1;
    while (KV_LESS(value, *next)) {
        *last = *next;
        last = next;
        --next;
    }
    *last = value;
}

static void emu_insertion_sort(kwk_kv *first, int64_t n)
{
    if (n <= 1) return;
    for (int64_t i = 1; i < n; ++i) {
        if (KV_LESS(first[i], first[0])) {
            kwk_kv value = first[i];
            memmove(first + 1, first, (size_t)i * sizeof(kwk_kv));
            first[0] = value;
        } else {
            emu_unguarded_linear_insert(first + i);
        }
    }
}

static void emu_final_insertion_sort(kwk_kv *first, int64_t n)
{
    if (n > KWK_STD_SORT_THRESHOLD) {
        emu_insertion_sort(first, KWK_STD_SORT_THRESHOLD);
        for (int64_t i = KWK_STD_SORT_THRESHOLD; i < n; ++i)
            emu_unguarded_linear_insert(first + i);
    } else {
        emu_insertion_sort(first, n);
    }
}

/* --- partitioning --- */
static void emu_move_median_to_first(kwk_kv *result, kwk_kv *a, kwk_kv *b, kwk_kv *c)
{
    if (KV_LESS(*a, *b)) {
        if (KV_LESS(*b, *c)) kv_swap(result, b);
        else if (KV_LESS(*a, *c)) kv_swap(result, c);
        else kv_swap(result, a);
    } else if (KV_LESS(*a, *c)) {
        kv_swap(result, a);
    } else if (KV_LESS(*b, *c)) {
        kv_swap(result, c);
    } else {
        kv_swap(result, b);
    }
}

static kwk_kv *emu_unguarded_partition(kwk_kv *first, kwk_kv *last, const kwk_kv *pivot)
{
    for (;;) {
        while (KV_LESS(*first, *pivot)) ++first;
        --last;
        while (KV_LESS(*pivot, *last)) --last;
        if (!(first < last)) return first;
        kv_swap(first, last);
        ++first;
    }
}

static kwk_kv *emu_unguarded_partition_pivot(kwk_kv *first, kwk_kv *last)
{
    kwk_kv *mid = first + (last - first) / 2;
    emu_move_median_to_first(first, first + 1, mid, last - 1);
    return emu_unguarded_partition(first + 1, last, first);
}

static void emu_introsort_loop(kwk_kv *first, kwk_kv *last, int64_t depth_limit)
{
    while (last - first > KWK_STD_SORT_THRESHOLD) {
        if (depth_limit == 0) {
            emu_partial_sort(first, last - first, last - first);
            return;
        }
        --depth_limit;
        kwk_kv *cut = emu_unguarded_partition_pivot(first, last);
        emu_introsort_loop(cut, last, depth_limit);
        last = cut;
    }
}

/* std::sort(first, first + n) */
static void emu_std_sort(kwk_kv *first, int64_t n)
{
    if (n <= 0) return;
    emu_introsort_loop(first, first + n, floor_log2(n) * 2);
    emu_final_insertion_sort(first, n);
}

/* std::nth_element(first, first + nth, first + n) */
static void emu_nth_element(kwk_kv *first, int64_t nth, int64_t n)
{
    if (n <= 0 || nth >= n) return;
    kwk_kv *lo = first, *hi = first + n, *target = first + nth;
    int64_t depth_limit = floor_log2(n) * 2;
    while (hi - lo > 3) {
        if (depth_limit == 0) {
            emu_heap_select(lo, (target - lo) + 1, hi - lo);
            kv_swap(lo, target);
            return;
        }
        --depth_limit;
        kwk_kv *cut = emu_unguarded_partition_pivot(lo, hi);
        if (cut <= target) lo = cut;
        else hi = cut;
    }
    emu_insertion_sort(lo, hi - lo);
}

#undef KV_LESS

/* ------------------------------------------------------------------------
 * The same std::sort emulation on packed words: w = key << ibits | index,
 * compared by key alone (w >> ibits).  Half the bytes of a record, and a
 * key comparison against a fixed word becomes a plain unsigned comparison
 * against a threshold: key(w) < key(p) <=> w < (p & ~m), key(w) > key(p)
 * <=> w > (p | m), m being the index mask.  Moves and their order are
 * exactly those of the record version above (so of libstdc++).
 * ---------------------------------------------------------------------- */

#define WKEY_LESS(a, b, s) (((a) >> (s)) < ((b) >> (s)))

static inline void w_swap(uint64_t *a, uint64_t *b)
{
    uint64_t t = *a;
    *a = *b;
    *b = t;
}

static void wemu_push_heap(uint64_t *first, int64_t hole, int64_t top, uint64_t value, int s)
{
    int64_t parent = (hole - 1) / 2;
    while (hole > top && WKEY_LESS(first[parent], value, s)) {
        first[hole] = first[parent];
        hole = parent;
        parent = (hole - 1) / 2;
    }
    first[hole] = value;
}

/* __adjust_heap: the hole sinks along the path of larger children (the
 * right one on equal keys) to a leaf, each child moving up a level, then
 * __push_heap lifts `value` from there.  The descent is a chain of
 * dependent loads: where two levels below the hole are full it takes them
 * at once, loading the two children and the four grandchildren together
 * and making the three comparisons side by side; the second choice is the
 * grandchild pair's own, picked by the first without a branch (a coin flip
 * on random keys).  Heaps beyond L1 prefetch the two levels after.  A/B
 * (avx512): torch-order top-k with ties 1.04-1.12x (a heap of 23592 the
 * most).  Tried and dropped: the path recorded and value placed by
 * branch-free stores (0.81-0.93x: more work than the lift it replaced,
 * which mostly stops at once).  (Used by make_heap and sort_heap; the heap
 * select's insertions take the pipe below.  sort_heap's pops through the
 * pipe, each started once no descent in flight could reach the last slot
 * it takes, measured 0.95x on the top-23592: not kept.) */
static void wemu_adjust_heap(uint64_t *first, int64_t hole, int64_t len, uint64_t value, int s)
{
    const int64_t top = hole;
    const int64_t inner = (len - 1) / 2; /* the slots below it have two children */
    const int far = len > 1024;
    while (2 * hole + 2 < inner) { /* this level and the next are full */
        if (far && 16 * hole + 30 < len) {
            __builtin_prefetch(first + 8 * hole + 7);
            __builtin_prefetch(first + 8 * hole + 14);
            __builtin_prefetch(first + 16 * hole + 15);
            __builtin_prefetch(first + 16 * hole + 22);
            __builtin_prefetch(first + 16 * hole + 30);
        }
        const int64_t c = 2 * hole + 1; /* the left child; its children at 2c + 1 */
        const uint64_t right = (uint64_t)!WKEY_LESS(first[c + 1], first[c], s);
        const uint64_t right_l = (uint64_t)!WKEY_LESS(first[2 * c + 2], first[2 * c + 1], s);
        const uint64_t right_r = (uint64_t)!WKEY_LESS(first[2 * c + 4], first[2 * c + 3], s);
        const uint64_t right2 = right_l ^ ((right_l ^ right_r) & ((uint64_t)0 - right));
        const int64_t c1 = c + (int64_t)right;
        const int64_t c2 = 2 * c1 + 1 + (int64_t)right2;
        first[hole] = first[c1];
        first[c1] = first[c2];
        hole = c2;
    }
    int64_t child = hole;
    while (child < inner) {
        child = 2 * (child + 1);
        child -= (int64_t)WKEY_LESS(first[child], first[child - 1], s);
        first[hole] = first[child];
        hole = child;
    }
    if ((len & 1) == 0 && child == (len - 2) / 2) { /* a last lone left child */
        child = 2 * (child + 1);
        first[hole] = first[child - 1];
        hole = child - 1;
    }
    wemu_push_heap(first, hole, top, value, s);
}

/* std::make_heap(first, first + len) on words */
static void wemu_make_heap(uint64_t *first, int64_t len, int s)
{
    if (len < 2) return;
    for (int64_t parent = (len - 2) / 2;; --parent) {
        wemu_adjust_heap(first, parent, len, first[parent], s);
        if (parent == 0) break;
    }
}

/* std::sort_heap(first, first + len) on words */
static void wemu_sort_heap(uint64_t *first, int64_t len, int s)
{
    while (len > 1) {
        --len;
        const uint64_t value = first[len];
        first[len] = first[0];
        wemu_adjust_heap(first, 0, len, value, s);
    }
}

/* std::partial_sort(first, first + len, first + len): heap sort */
static void wemu_heap_sort(uint64_t *first, int64_t len, int s)
{
    wemu_make_heap(first, len, s);
    wemu_sort_heap(first, len, s);
}

/* __move_median_to_first, its three comparisons made unconditionally
 * (they are pure) so the choice is data flow, not branches. */
static inline void wemu_move_median_to_first(uint64_t *result, uint64_t *a, uint64_t *b, uint64_t *c, int s)
{
    const uint64_t ka = *a >> s, kb = *b >> s, kc = *c >> s;
    const int ab = ka < kb, bc = kb < kc, ac = ka < kc;
    uint64_t *if_ab = bc ? b : (ac ? c : a);
    uint64_t *if_not_ab = ac ? a : (bc ? c : b);
    w_swap(result, ab ? if_ab : if_not_ab);
}

enum { WEMU_BLOCK = 128 };

#if defined(__AVX2__)
#include <immintrin.h>
#endif

/* Candidate lists, as byte offsets (n <= 2 * WEMU_BLOCK; out has n + 8
 * bytes).  list_up: offsets i < n with f[i] >= plo, ascending.  list_down:
 * offsets i < n with l[-1 - i] <= phi, ascending (slots descending).
 * AVX2: four words per compare (signed compare of sign-flipped words), the
 * lanes of the 8- or 4-bit mask written from a table, the count advanced by its
 * popcount; the remainder is done one by one. */
#if defined(__AVX2__)
static const uint32_t WEMU_LANES_UP[16] = {
    0x00000000, 0x00000000, 0x00000001, 0x00000100, 0x00000002, 0x00000200,
    0x00000201, 0x00020100, 0x00000003, 0x00000300, 0x00000301, 0x00030100,
    0x00000302, 0x00030200, 0x00030201, 0x03020100};
/* mask bit b (lane b = slot l-4-i+b) is offset i+3-b, listed by ascending
 * offset, i.e. descending lane */
static const uint32_t WEMU_LANES_DOWN[16] = {
    0x00000000, 0x00000003, 0x00000002, 0x00000302, 0x00000001, 0x00000301,
    0x00000201, 0x00030201, 0x00000000, 0x00000300, 0x00000200, 0x00030200,
    0x00000100, 0x00030100, 0x00020100, 0x03020100};
/* 8-lane versions for the block loop: bit b of the mask -> byte offset b
 * (UP) or 7 - b listed by descending b (DOWN); generated. */
/* UP is compress_lut.h's table (bit b set -> byte offset b, ascending) */
#define WEMU_LANES8_UP KWK_COMPRESS_LUT
static const uint64_t WEMU_LANES8_DOWN[256] = {
    0x0000000000000000ull, 0x0000000000000007ull, 0x0000000000000006ull, 0x0000000000000706ull,
    0x0000000000000005ull, 0x0000000000000705ull, 0x0000000000000605ull, 0x0000000000070605ull,
    0x0000000000000004ull, 0x0000000000000704ull, 0x0000000000000604ull, 0x0000000000070604ull,
    0x0000000000000504ull, 0x0000000000070504ull, 0x0000000000060504ull, 0x0000000007060504ull,
    0x0000000000000003ull, 0x0000000000000703ull, 0x0000000000000603ull, 0x0000000000070603ull,
    0x0000000000000503ull, 0x0000000000070503ull, 0x0000000000060503ull, 0x0000000007060503ull,
    0x0000000000000403ull, 0x0000000000070403ull, 0x0000000000060403ull, 0x0000000007060403ull,
    0x0000000000050403ull, 0x0000000007050403ull, 0x0000000006050403ull, 0x0000000706050403ull,
    0x0000000000000002ull, 0x0000000000000702ull, 0x0000000000000602ull, 0x0000000000070602ull,
    0x0000000000000502ull, 0x0000000000070502ull, 0x0000000000060502ull, 0x0000000007060502ull,
    0x0000000000000402ull, 0x0000000000070402ull, 0x0000000000060402ull, 0x0000000007060402ull,
    0x0000000000050402ull, 0x0000000007050402ull, 0x0000000006050402ull, 0x0000000706050402ull,
    0x0000000000000302ull, 0x0000000000070302ull, 0x0000000000060302ull, 0x0000000007060302ull,
    0x0000000000050302ull, 0x0000000007050302ull, 0x0000000006050302ull, 0x0000000706050302ull,
    0x0000000000040302ull, 0x0000000007040302ull, 0x0000000006040302ull, 0x0000000706040302ull,
    0x0000000005040302ull, 0x0000000705040302ull, 0x0000000605040302ull, 0x0000070605040302ull,
    0x0000000000000001ull, 0x0000000000000701ull, 0x0000000000000601ull, 0x0000000000070601ull,
    0x0000000000000501ull, 0x0000000000070501ull, 0x0000000000060501ull, 0x0000000007060501ull,
    0x0000000000000401ull, 0x0000000000070401ull, 0x0000000000060401ull, 0x0000000007060401ull,
    0x0000000000050401ull, 0x0000000007050401ull, 0x0000000006050401ull, 0x0000000706050401ull,
    0x0000000000000301ull, 0x0000000000070301ull, 0x0000000000060301ull, 0x0000000007060301ull,
    0x0000000000050301ull, 0x0000000007050301ull, 0x0000000006050301ull, 0x0000000706050301ull,
    0x0000000000040301ull, 0x0000000007040301ull, 0x0000000006040301ull, 0x0000000706040301ull,
    0x0000000005040301ull, 0x0000000705040301ull, 0x0000000605040301ull, 0x0000070605040301ull,
    0x0000000000000201ull, 0x0000000000070201ull, 0x0000000000060201ull, 0x0000000007060201ull,
    0x0000000000050201ull, 0x0000000007050201ull, 0x0000000006050201ull, 0x0000000706050201ull,
    0x0000000000040201ull, 0x0000000007040201ull, 0x0000000006040201ull, 0x0000000706040201ull,
    0x0000000005040201ull, 0x0000000705040201ull, 0x0000000605040201ull, 0x0000070605040201ull,
    0x0000000000030201ull, 0x0000000007030201ull, 0x0000000006030201ull, 0x0000000706030201ull,
    0x0000000005030201ull, 0x0000000705030201ull, 0x0000000605030201ull, 0x0000070605030201ull,
    0x0000000004030201ull, 0x0000000704030201ull, 0x0000000604030201ull, 0x0000070604030201ull,
    0x0000000504030201ull, 0x0000070504030201ull, 0x0000060504030201ull, 0x0007060504030201ull,
    0x0000000000000000ull, 0x0000000000000700ull, 0x0000000000000600ull, 0x0000000000070600ull,
    0x0000000000000500ull, 0x0000000000070500ull, 0x0000000000060500ull, 0x0000000007060500ull,
    0x0000000000000400ull, 0x0000000000070400ull, 0x0000000000060400ull, 0x0000000007060400ull,
    0x0000000000050400ull, 0x0000000007050400ull, 0x0000000006050400ull, 0x0000000706050400ull,
    0x0000000000000300ull, 0x0000000000070300ull, 0x0000000000060300ull, 0x0000000007060300ull,
    0x0000000000050300ull, 0x0000000007050300ull, 0x0000000006050300ull, 0x0000000706050300ull,
    0x0000000000040300ull, 0x0000000007040300ull, 0x0000000006040300ull, 0x0000000706040300ull,
    0x0000000005040300ull, 0x0000000705040300ull, 0x0000000605040300ull, 0x0000070605040300ull,
    0x0000000000000200ull, 0x0000000000070200ull, 0x0000000000060200ull, 0x0000000007060200ull,
    0x0000000000050200ull, 0x0000000007050200ull, 0x0000000006050200ull, 0x0000000706050200ull,
    0x0000000000040200ull, 0x0000000007040200ull, 0x0000000006040200ull, 0x0000000706040200ull,
    0x0000000005040200ull, 0x0000000705040200ull, 0x0000000605040200ull, 0x0000070605040200ull,
    0x0000000000030200ull, 0x0000000007030200ull, 0x0000000006030200ull, 0x0000000706030200ull,
    0x0000000005030200ull, 0x0000000705030200ull, 0x0000000605030200ull, 0x0000070605030200ull,
    0x0000000004030200ull, 0x0000000704030200ull, 0x0000000604030200ull, 0x0000070604030200ull,
    0x0000000504030200ull, 0x0000070504030200ull, 0x0000060504030200ull, 0x0007060504030200ull,
    0x0000000000000100ull, 0x0000000000070100ull, 0x0000000000060100ull, 0x0000000007060100ull,
    0x0000000000050100ull, 0x0000000007050100ull, 0x0000000006050100ull, 0x0000000706050100ull,
    0x0000000000040100ull, 0x0000000007040100ull, 0x0000000006040100ull, 0x0000000706040100ull,
    0x0000000005040100ull, 0x0000000705040100ull, 0x0000000605040100ull, 0x0000070605040100ull,
    0x0000000000030100ull, 0x0000000007030100ull, 0x0000000006030100ull, 0x0000000706030100ull,
    0x0000000005030100ull, 0x0000000705030100ull, 0x0000000605030100ull, 0x0000070605030100ull,
    0x0000000004030100ull, 0x0000000704030100ull, 0x0000000604030100ull, 0x0000070604030100ull,
    0x0000000504030100ull, 0x0000070504030100ull, 0x0000060504030100ull, 0x0007060504030100ull,
    0x0000000000020100ull, 0x0000000007020100ull, 0x0000000006020100ull, 0x0000000706020100ull,
    0x0000000005020100ull, 0x0000000705020100ull, 0x0000000605020100ull, 0x0000070605020100ull,
    0x0000000004020100ull, 0x0000000704020100ull, 0x0000000604020100ull, 0x0000070604020100ull,
    0x0000000504020100ull, 0x0000070504020100ull, 0x0000060504020100ull, 0x0007060504020100ull,
    0x0000000003020100ull, 0x0000000703020100ull, 0x0000000603020100ull, 0x0000070603020100ull,
    0x0000000503020100ull, 0x0000070503020100ull, 0x0000060503020100ull, 0x0007060503020100ull,
    0x0000000403020100ull, 0x0000070403020100ull, 0x0000060403020100ull, 0x0007060403020100ull,
    0x0000050403020100ull, 0x0007050403020100ull, 0x0006050403020100ull, 0x0706050403020100ull,
};
#endif

static inline int wemu_list_up(const uint64_t *f, int n, uint64_t plo, uint8_t *out)
{
    int c = 0, i = 0;
#if defined(__AVX512F__)
    /* eight words a compare, straight into a mask */
    const __m512i p8 = _mm512_set1_epi64((long long)plo);
    for (; i + 8 <= n; i += 8) {
        const unsigned mk = _mm512_cmpge_epu64_mask(_mm512_loadu_si512((const void *)(f + i)), p8);
        const uint64_t lanes = WEMU_LANES8_UP[mk] + (uint64_t)i * 0x0101010101010101ull;
        memcpy(out + c, &lanes, 8);
        c += __builtin_popcount(mk);
    }
#endif
#if defined(__AVX2__)
    const __m256i sign = _mm256_set1_epi64x((long long)0x8000000000000000ull);
    const __m256i p = _mm256_set1_epi64x((long long)(plo ^ 0x8000000000000000ull));
    for (; i + 8 <= n; i += 8) {
        const __m256i v0 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(f + i)), sign);
        const __m256i v1 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(f + i + 4)), sign);
        const unsigned mk = ~(unsigned)(_mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpgt_epi64(p, v0))) |
                                        _mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpgt_epi64(p, v1))) << 4) & 255u;
        const uint64_t lanes = WEMU_LANES8_UP[mk] + (uint64_t)i * 0x0101010101010101ull;
        memcpy(out + c, &lanes, 8);
        c += __builtin_popcount(mk);
    }
    for (; i + 4 <= n; i += 4) {
        __m256i v = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(f + i)), sign);
        int lt = _mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpgt_epi64(p, v)));
        int mk = ~lt & 15;
        uint32_t lanes = WEMU_LANES_UP[mk] + (uint32_t)i * 0x01010101u;
        memcpy(out + c, &lanes, 4);
        c += __builtin_popcount((unsigned)mk);
    }
#endif
    for (; i < n; ++i) {
        out[c] = (uint8_t)i;
        c += f[i] >= plo;
    }
    return c;
}

static inline int wemu_list_down(const uint64_t *l, int n, uint64_t phi, uint8_t *out)
{
    int c = 0, i = 0;
#if defined(__AVX512F__)
    const __m512i p8 = _mm512_set1_epi64((long long)phi);
    for (; i + 8 <= n; i += 8) {
        const unsigned mk = _mm512_cmple_epu64_mask(_mm512_loadu_si512((const void *)(l - 8 - i)), p8);
        const uint64_t lanes = WEMU_LANES8_DOWN[mk] + (uint64_t)i * 0x0101010101010101ull;
        memcpy(out + c, &lanes, 8);
        c += __builtin_popcount(mk);
    }
#endif
#if defined(__AVX2__)
    const __m256i sign = _mm256_set1_epi64x((long long)0x8000000000000000ull);
    const __m256i p = _mm256_set1_epi64x((long long)(phi ^ 0x8000000000000000ull));
    for (; i + 8 <= n; i += 8) {
        const __m256i v0 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(l - 8 - i)), sign);
        const __m256i v1 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(l - 4 - i)), sign);
        const unsigned mk = ~(unsigned)(_mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpgt_epi64(v0, p))) |
                                        _mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpgt_epi64(v1, p))) << 4) & 255u;
        const uint64_t lanes = WEMU_LANES8_DOWN[mk] + (uint64_t)i * 0x0101010101010101ull;
        memcpy(out + c, &lanes, 8);
        c += __builtin_popcount(mk);
    }
    for (; i + 4 <= n; i += 4) {
        __m256i v = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(l - 4 - i)), sign);
        int gt = _mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpgt_epi64(v, p)));
        int mk = ~gt & 15;
        uint32_t lanes = WEMU_LANES_DOWN[mk] + (uint32_t)i * 0x01010101u;
        memcpy(out + c, &lanes, 4);
        c += __builtin_popcount((unsigned)mk);
    }
#endif
    for (; i < n; ++i) {
        out[c] = (uint8_t)i;
        c += l[-1 - i] <= phi;
    }
    return c;
}

/* Swap f[t] with l[-1 - t] for t < n (the two ranges disjoint). */
static inline void wemu_swap_mirrored(uint64_t *f, uint64_t *l, int n)
{
    int t = 0;
#if defined(__AVX2__)
    for (; t + 4 <= n; t += 4) {
        const __m256i x = _mm256_loadu_si256((const __m256i *)(f + t));
        const __m256i y = _mm256_loadu_si256((const __m256i *)(l - 4 - t));
        _mm256_storeu_si256((__m256i *)(f + t), _mm256_permute4x64_epi64(y, 0x1B));
        _mm256_storeu_si256((__m256i *)(l - 4 - t), _mm256_permute4x64_epi64(x, 0x1B));
    }
#endif
    for (; t < n; ++t) w_swap(f + t, l - 1 - t);
}

#if defined(__AVX512F__)
/* The last n <= 64 slots of wemu_unguarded_partition, in registers.  With
 * A (B) the slots whose key is >= (<=) the pivot's, L_t the t-th lowest
 * slot of A and R_t the t-th highest of B, the loop swaps L_t with R_t for
 * t = 1..T (below).  Every L_t (t <= T) lies below every R_t (L_T < R_T),
 * so on the 2T slots S they occupy, in ascending order, the swaps pair the
 * first with the last, the second with the second last, ...: they reverse
 * the subsequence of words on S.  That is one compress of S's words and
 * one expand of them read backwards, instead of lists of offsets and T
 * dependent swaps.  Measured (native, std::nth_element of rows of 128
 * words with ties, ns a row): 470 -> 390.  A version for up to 256 slots
 * (masks of 4 words) measured slower than the lists it replaced. */
static inline int wemu_nth_bit_up(uint64_t a, int t) /* t-th lowest set bit, t >= 1 */
{
    return (int)__builtin_ctzll(_pdep_u64((uint64_t)1 << (t - 1), a));
}

static inline int wemu_nth_bit_down(uint64_t b, int nb, int t) /* t-th highest of nb set bits */
{
    return 63 - (int)__builtin_clzll(_pdep_u64((uint64_t)1 << (nb - t), b));
}

static uint64_t *wemu_tail_partition512(uint64_t *f, int n, uint64_t plo, uint64_t phi, int *met)
{
    const __m512i lo = _mm512_set1_epi64((long long)plo), hi = _mm512_set1_epi64((long long)phi);
    const int nv = (n + 7) / 8;
    __m512i w[8];
    uint64_t A = 0, B = 0;
    for (int v = 0; v < nv; ++v) {
        const __mmask8 valid = (__mmask8)_bzhi_u32(0xFFu, (unsigned)(n - 8 * v)); /* n - 8v <= 64 */
        w[v] = _mm512_maskz_loadu_epi64(valid, f + 8 * v);
        A |= (uint64_t)_mm512_mask_cmpge_epu64_mask(valid, w[v], lo) << (8 * v);
        B |= (uint64_t)_mm512_mask_cmple_epu64_mask(valid, w[v], hi) << (8 * v);
    }
    const int na = __builtin_popcountll(A), nb = __builtin_popcountll(B);
    /* T = max over x of min(a(x), b(x)), a(x) = #A below x, b(x) = #B at or
     * above x (t <= both means L_t < x <= R_t; x = L_T + 1 attains T).  a
     * rises and b falls with x, so with x* the last x where a(x) <= b(x):
     * T = max(a(x*), b(x* + 1)).  x* by a branch-free binary search. */
    int x = 0;
    for (int step = 64; step; step >>= 1) {
        const int y = x + step;
        const int ok = y <= n && __builtin_popcountll(_bzhi_u64(A, (unsigned)y)) <=
                                     __builtin_popcountll(y < 64 ? B >> y : 0);
        x = ok ? y : x;
    }
    const int ax = __builtin_popcountll(_bzhi_u64(A, (unsigned)x));
    const int bx1 = x < n ? __builtin_popcountll(x + 1 < 64 ? B >> (x + 1) : 0) : 0;
    const int T = ax > bx1 ? ax : bx1;
    int cut = T < na ? wemu_nth_bit_up(A, T + 1) : n;
    if (T > 0 && wemu_nth_bit_down(B, nb, T) < cut) cut = wemu_nth_bit_down(B, nb, T);
    *met = T < na && T < nb && wemu_nth_bit_up(A, T + 1) == wemu_nth_bit_down(B, nb, T + 1);
    if (T == 0) return f + cut;
    const uint64_t S = _pdep_u64(_bzhi_u64(~(uint64_t)0, (unsigned)T), A) |
                       (B & ~_pdep_u64(_bzhi_u64(~(uint64_t)0, (unsigned)(nb - T)), B));
    uint64_t qbuf[8 + 64 + 8];
    uint64_t *const q = qbuf + 8; /* reads run up to 7 words before q, stores 7 past 64 */
    _mm512_storeu_si512((void *)qbuf, _mm512_setzero_si512());
    int pos = 0;
    for (int v = 0; v < nv; ++v) {
        const __mmask8 sv = (__mmask8)(S >> (8 * v));
        _mm512_storeu_si512((void *)(q + pos), _mm512_maskz_compress_epi64(sv, w[v]));
        pos += __builtin_popcount(sv);
    }
    const int total = pos;
    const __m512i rev = _mm512_set_epi64(0, 1, 2, 3, 4, 5, 6, 7);
    pos = 0;
    for (int v = 0; v < nv; ++v) {
        const __mmask8 sv = (__mmask8)(S >> (8 * v));
        if (!sv) continue;
        /* lane i: q[total - 1 - pos - i] */
        const __m512i r = _mm512_permutexvar_epi64(rev, _mm512_loadu_si512((const void *)(q + total - pos - 8)));
        _mm512_mask_storeu_epi64(f + 8 * v, sv, _mm512_maskz_expand_epi64(sv, r));
        pos += __builtin_popcount(sv);
    }
    return f + cut;
}
#endif

/* Blocks with one gap.  Where the two blocks' slots are all candidates but
 * one (a range dominated by the pivot's key: masked logits, sparse votes,
 * padding), the swaps (L_t, R_t) are two mirrored exchanges, before and
 * after the gap, instead of a swap per candidate.  The gap's offset g (from
 * f on the left, from l - 1 on the right) is what the 127 listed offsets
 * of that side miss: 0 + 1 + ... + 127 less their sum.  Measured (avx512,
 * A/B): top-p sort of 4x32000 logits of which 50 are finite 1.06-1.1x;
 * the same run by run for up to 2-3 gaps cost 4% on rows of 1000 with a
 * dozen non-zeros among zeros (short runs). */
static void wemu_swap_one_gap(uint64_t *f, uint64_t *l, const uint8_t *list, int left_gap)
{
    int sum = 0;
    for (int t = 0; t < WEMU_BLOCK - 1; ++t) sum += list[t];
    const int g = WEMU_BLOCK * (WEMU_BLOCK - 1) / 2 - sum;
    wemu_swap_mirrored(f, l, g); /* f[u] <-> l[-1 - u], u < g */
    if (left_gap) wemu_swap_mirrored(f + g + 1, l - g, WEMU_BLOCK - 1 - g);
    else wemu_swap_mirrored(f + g, l - g - 1, WEMU_BLOCK - 1 - g);
}

/* Ranges of at most WEMU_SMALL words are partitioned with their
 * candidates as bits of one mask each (wemu_partition_small). */
enum { WEMU_SMALL = 64 };

/* The words of w[0..n) (n <= WEMU_SMALL) whose key is >= (*ge) and <=
 * (*le) the pivot's, as bits of their positions; nothing past w + n read. */
static inline void wemu_small_masks(const uint64_t *w, int n, uint64_t plo, uint64_t phi,
                                    uint64_t *ge, uint64_t *le)
{
    uint64_t a = 0, b = 0;
    int p = 0;
#if defined(__AVX512F__)
    const __m512i pl = _mm512_set1_epi64((long long)plo), ph = _mm512_set1_epi64((long long)phi);
    for (; p < n; p += 8) {
        const __mmask8 valid = (__mmask8)(n - p >= 8 ? 0xFFu : (1u << (n - p)) - 1);
        const __m512i v = _mm512_maskz_loadu_epi64(valid, w + p); /* masked lanes: not read */
        a |= (uint64_t)_mm512_mask_cmpge_epu64_mask(valid, v, pl) << p;
        b |= (uint64_t)_mm512_mask_cmple_epu64_mask(valid, v, ph) << p;
    }
#elif defined(__AVX2__)
    const __m256i sign = _mm256_set1_epi64x((long long)0x8000000000000000ull);
    const __m256i pl = _mm256_set1_epi64x((long long)(plo ^ 0x8000000000000000ull));
    const __m256i ph = _mm256_set1_epi64x((long long)(phi ^ 0x8000000000000000ull));
    for (; p + 4 <= n; p += 4) {
        const __m256i v = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(w + p)), sign);
        const unsigned lt = (unsigned)_mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpgt_epi64(pl, v)));
        const unsigned gt = (unsigned)_mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpgt_epi64(v, ph)));
        a |= (uint64_t)(~lt & 15u) << p;
        b |= (uint64_t)(~gt & 15u) << p;
    }
#endif
    for (; p < n; ++p) {
        a |= (uint64_t)(w[p] >= plo) << p;
        b |= (uint64_t)(w[p] <= phi) << p;
    }
    *ge = a;
    *le = b;
}

/* wemu_unguarded_partition on a range of at most WEMU_SMALL words
 * [first, last), with the candidates as two masks: the swaps (L_t, R_t)
 * of its comment (below), taken as the lowest left candidate with the
 * highest right one while L_t < R_t, and the same cut and *met.  Every
 * introsort and introselect ends on such ranges, and they are all of
 * torch.topk(sorted=False) over MoE router rows (8..64 experts), where the
 * block machinery's set-up was most of the time (native, nth_element of
 * rows of 8 / 16 / 64 / 128 / 256, ns a row: avx512 88 / 166 / 294 / 405
 * / 612 -> 34 / 88 / 191 / 302 / 480, avx2 72 / 134 / 258 / 371 / 556 ->
 * 34 / 93 / 206 / 318 / 505; the introsort of rows of 54..5000 with ties
 * 1.02-1.14x).  Masks of four words for ranges up to 256 measured slower
 * than the lists above 64; wemu_tail_partition512 for ranges with many
 * keys equal to the pivot's, 0.88-1.0x. */
static uint64_t *wemu_partition_small(uint64_t *first, uint64_t *last, uint64_t pivot, uint64_t m,
                                      int *met)
{
    const int n = (int)(last - first);
    uint64_t a, b;
    wemu_small_masks(first, n, pivot & ~m, pivot | m, &a, &b);
    int t = 0, r = n;
    while (a && b) {
        const int lt = __builtin_ctzll(a), rt = 63 - __builtin_clzll(b);
        if (lt >= rt) break;
        w_swap(first + lt, first + rt);
        a &= a - 1;
        b &= ~((uint64_t)1 << rt);
        r = rt;
        ++t;
    }
    int cut = a ? __builtin_ctzll(a) : n;
    if (t > 0 && r < cut) cut = r;
    *met = a && b && __builtin_ctzll(a) == 63 - __builtin_clzll(b);
    return first + cut;
}

/* __unguarded_partition(first, last, pivot) without its data-dependent
 * branches, giving the same arrangement and the same cut; *met: whether
 * the loop ended with both scans stopped on one slot (a key equal to the
 * pivot's), where a loop that swaps while j >= i (torch's quickselect)
 * goes one step further than libstdc++'s.
 *
 * Why it is the same: let L_1 < L_2 < ... be the positions in [first, last)
 * whose key is >= the pivot's and R_1 > R_2 > ... those whose key is <= it,
 * all taken in the array as it was on entry.  The loop's t-th left stop is
 * L_t and its t-th right stop R_t for as long as L_t < R_t (positions
 * between the two scans are untouched, and a swapped slot always stops the
 * other scan), so it performs exactly the swaps (L_t, R_t) for t = 1..T,
 * T the number of t with L_t < R_t, and returns min(L_{T+1}, R_T) (R_0 =
 * last; a missing L_{T+1} counts as R_T: the left scan then stops at the
 * slot that received a value >= pivot).
 *
 * So: take a block of WEMU_BLOCK slots from each end of the untouched
 * region [f, l), list the candidates of each (branch-free), swap the first
 * k = min(#left, #right) pairs (all valid: the blocks are disjoint), and
 * shrink the region to what is still untouched.  A block whose candidates
 * are used up is passed whole (its other slots would be passed by the scan
 * anyway); otherwise the region restarts just after the last used
 * candidate, whose unused successors are listed again.  When the region is
 * at most two blocks long, list all its candidates and finish with the
 * formula above (slots at or beyond l, and before f, stop the scans as the
 * loop's sentinels would). */
static uint64_t *wemu_unguarded_partition(uint64_t *first, uint64_t *last, uint64_t pivot, uint64_t m,
                                          int *met)
{
    if (last - first <= WEMU_SMALL) return wemu_partition_small(first, last, pivot, m, met);
    const uint64_t plo = pivot & ~m, phi = pivot | m;
    uint64_t *f = first, *l = last;
    uint8_t lb[2 * WEMU_BLOCK + 8], rb[2 * WEMU_BLOCK + 8];
    while (l - f > 2 * WEMU_BLOCK) {
#if defined(__AVX512F__)
        /* eight words a compare, straight into a mask */
        int nl = 0, nr = 0;
        {
            const __m512i pl = _mm512_set1_epi64((long long)plo);
            const __m512i ph = _mm512_set1_epi64((long long)phi);
            for (int i = 0; i < WEMU_BLOCK; i += 8) {
                const __m512i vl = _mm512_loadu_si512((const void *)(f + i));
                const __m512i vr = _mm512_loadu_si512((const void *)(l - 8 - i));
                const unsigned ml = _mm512_cmpge_epu64_mask(vl, pl);
                const unsigned mr = _mm512_cmple_epu64_mask(vr, ph);
                const uint64_t add = (uint64_t)i * 0x0101010101010101ull;
                const uint64_t lanes_l = WEMU_LANES8_UP[ml] + add;
                const uint64_t lanes_r = WEMU_LANES8_DOWN[mr] + add;
                memcpy(lb + nl, &lanes_l, 8);
                memcpy(rb + nr, &lanes_r, 8);
                nl += __builtin_popcount(ml);
                nr += __builtin_popcount(mr);
            }
        }
#elif defined(__AVX2__)
        /* both lists in one loop: two independent chains */
        int nl = 0, nr = 0;
        {
            const __m256i sign = _mm256_set1_epi64x((long long)0x8000000000000000ull);
            const __m256i pl = _mm256_set1_epi64x((long long)(plo ^ 0x8000000000000000ull));
            const __m256i ph = _mm256_set1_epi64x((long long)(phi ^ 0x8000000000000000ull));
            for (int i = 0; i < WEMU_BLOCK; i += 8) {
                const __m256i vl0 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(f + i)), sign);
                const __m256i vl1 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(f + i + 4)), sign);
                const __m256i vr0 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(l - 8 - i)), sign);
                const __m256i vr1 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(l - 4 - i)), sign);
                const unsigned ml = ~(unsigned)(_mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpgt_epi64(pl, vl0))) |
                                               _mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpgt_epi64(pl, vl1))) << 4) & 255u;
                const unsigned mr = ~(unsigned)(_mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpgt_epi64(vr0, ph))) |
                                               _mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpgt_epi64(vr1, ph))) << 4) & 255u;
                const uint64_t add = (uint64_t)i * 0x0101010101010101ull;
                const uint64_t lanes_l = WEMU_LANES8_UP[ml] + add, lanes_r = WEMU_LANES8_DOWN[mr] + add;
                memcpy(lb + nl, &lanes_l, 8);
                memcpy(rb + nr, &lanes_r, 8);
                nl += __builtin_popcount(ml);
                nr += __builtin_popcount(mr);
            }
        }
#else
        const int nl = wemu_list_up(f, WEMU_BLOCK, plo, lb);
        const int nr = wemu_list_down(l, WEMU_BLOCK, phi, rb);
#endif
        const int k = nl < nr ? nl : nr;
        if (k == WEMU_BLOCK) {
            /* every slot of both blocks is a candidate (runs of the
             * pivot's key): the swaps pair slot f + t with l - 1 - t, a
             * mirrored block exchange */
            wemu_swap_mirrored(f, l, WEMU_BLOCK);
            f += WEMU_BLOCK;
            l -= WEMU_BLOCK;
            continue;
        }
        if (nl + nr == 2 * WEMU_BLOCK - 1) wemu_swap_one_gap(f, l, nl < nr ? lb : rb, nl < nr);
        else
            for (int t = 0; t < k; ++t) w_swap(f + lb[t], l - 1 - rb[t]);
        uint64_t *nf = k == nl ? f + WEMU_BLOCK : (k ? f + lb[k - 1] + 1 : f);
        uint64_t *nlast = k == nr ? l - WEMU_BLOCK : (k ? l - 1 - rb[k - 1] : l);
        f = nf;
        l = nlast;
    }
    const int n = (int)(l - f);
#if defined(__AVX512F__)
    if (n <= 64) return wemu_tail_partition512(f, n, plo, phi, met);
#endif
    const int nl = wemu_list_up(f, n, plo, lb);
    const int nr = wemu_list_down(l, n, phi, rb);
    const int k = nl < nr ? nl : nr;
    int t = 0;
    while (t < k && f + lb[t] < l - 1 - rb[t]) {
        w_swap(f + lb[t], l - 1 - rb[t]);
        ++t;
    }
    uint64_t *cut = t < nl ? f + lb[t] : l;
    if (t > 0 && l - 1 - rb[t - 1] < cut) cut = l - 1 - rb[t - 1];
    *met = t < nl && t < nr && f + lb[t] == l - 1 - rb[t];
    return cut;
}

/* A stable sort by key of n <= 16 words: what the final insertion sort does
 * to each leaf the introsort loop leaves (elements never cross leaves: the
 * leaves are partitioned).  Each word's rank among (key, position) words. */
static inline void wemu_leaf_sort(uint64_t *a, int64_t n, uint64_t m)
{
    if (n < 2) return;
#if defined(KWK_HAVE_SIMD_QSORT) && defined(__AVX512F__)
    /* a sorting network over the (key, position) words t in registers, then
     * the words gathered by the positions in t's low bits: about a third
     * of the rank count's instructions for a leaf of 16 (tabnet's rows of
     * 54, torch order: the leaves were a quarter of the time).  Lanes past
     * n hold all ones and sort last; a word whose t is all ones too (the
     * largest key at position m) then ties with them, but every such lane
     * names position (m & 15) = n - 1 (positions < 2^ibits), which is
     * where that word belongs. */
    const __m512i keymask = _mm512_set1_epi64((long long)~m);
    const __m512i pos_mask = _mm512_set1_epi64((long long)(m & 15));
    const __m512i ones = _mm512_set1_epi64(-1);
    const __mmask8 m0 = (__mmask8)_bzhi_u32(0xFFu, (unsigned)n);
    const __m512i w0 = _mm512_maskz_loadu_epi64(m0, a);
    const __m512i p0 = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0);
    __m512i t0 = _mm512_mask_or_epi64(ones, m0, _mm512_and_si512(w0, keymask), p0);
    if (n <= 8) {
        t0 = qs64_sort_vec(t0);
        const __m512i at = _mm512_and_si512(t0, pos_mask);
        _mm512_mask_storeu_epi64(a, m0, _mm512_permutexvar_epi64(at, w0));
        return;
    }
    const __mmask8 m1 = (__mmask8)_bzhi_u32(0xFFu, (unsigned)(n - 8));
    const __m512i w1 = _mm512_maskz_loadu_epi64(m1, a + 8);
    const __m512i p1 = _mm512_set_epi64(15, 14, 13, 12, 11, 10, 9, 8);
    __m512i t1 = _mm512_mask_or_epi64(ones, m1, _mm512_and_si512(w1, keymask), p1);
    t0 = qs64_sort_vec(t0);
    t1 = qs64_rev(qs64_sort_vec(t1));
    const __m512i lo = qs64_merge_vec(_mm512_min_epu64(t0, t1));
    const __m512i hi = qs64_merge_vec(_mm512_max_epu64(t0, t1));
    const __m512i at_lo = _mm512_and_si512(lo, pos_mask), at_hi = _mm512_and_si512(hi, pos_mask);
    _mm512_storeu_si512((void *)a, _mm512_permutex2var_epi64(w0, at_lo, w1));
    _mm512_mask_storeu_epi64(a + 8, m1, _mm512_permutex2var_epi64(w0, at_hi, w1));
#elif defined(__AVX2__)
    /* the ranks from registers: words written one by one and read back as
     * vectors would stall on store forwarding */
    const __m256i sign = _mm256_set1_epi64x((long long)0x8000000000000000ull);
    const __m256i keymask = _mm256_set1_epi64x((long long)~m);
    const __m256i ones = _mm256_set1_epi64x(-1);
    const __m256i len = _mm256_set1_epi64x((long long)n);
    __m256i t[4];
    uint64_t w[16], tk[16];
    for (int q = 0; q < 4; ++q) {
        const __m256i pos = _mm256_setr_epi64x(4 * q, 4 * q + 1, 4 * q + 2, 4 * q + 3);
        const __m256i valid = _mm256_cmpgt_epi64(len, pos);
        const __m256i raw = _mm256_maskload_epi64((const long long *)(a + 4 * q), valid);
        const __m256i key = _mm256_or_si256(_mm256_and_si256(raw, keymask), pos);
        t[q] = _mm256_xor_si256(_mm256_blendv_epi8(ones, key, valid), sign);
        _mm256_storeu_si256((__m256i *)(w + 4 * q), raw);
        _mm256_storeu_si256((__m256i *)(tk + 4 * q), t[q]);
    }
    for (int i = 0; i < n; ++i) {
        const __m256i b = _mm256_set1_epi64x((long long)tk[i]);
        unsigned mk = (unsigned)_mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpgt_epi64(b, t[0])));
        mk |= (unsigned)_mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpgt_epi64(b, t[1]))) << 4;
        mk |= (unsigned)_mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpgt_epi64(b, t[2]))) << 8;
        mk |= (unsigned)_mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpgt_epi64(b, t[3]))) << 12;
        a[__builtin_popcount(mk)] = w[i];
    }
#else
    uint64_t t[16], w[16];
    for (int j = 0; j < 16; ++j) t[j] = ~(uint64_t)0;
    for (int j = 0; j < n; ++j) { /* no memcpy call for a few words */
        w[j] = a[j];
        t[j] = (a[j] & ~m) | (uint64_t)j;
    }
    for (int i = 0; i < n; ++i) {
        int r = 0;
        for (int j = 0; j < 16; ++j) r += t[j] < t[i];
        a[r] = w[i];
    }
#endif
}

/* Whether every word of a[0..n) has the key of the word `p` (its key
 * bits: plo <= w <= phi). */
static int wemu_keys_all_equal(const uint64_t *a, int64_t n, uint64_t plo, uint64_t phi)
{
    int64_t i = 0;
#if defined(__AVX2__)
    const __m256i sign = _mm256_set1_epi64x((long long)0x8000000000000000ull);
    const __m256i lo = _mm256_set1_epi64x((long long)(plo ^ 0x8000000000000000ull));
    const __m256i hi = _mm256_set1_epi64x((long long)(phi ^ 0x8000000000000000ull));
    for (; i + 8 <= n; i += 8) {
        const __m256i v0 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(a + i)), sign);
        const __m256i v1 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(a + i + 4)), sign);
        const __m256i out = _mm256_or_si256(
            _mm256_or_si256(_mm256_cmpgt_epi64(lo, v0), _mm256_cmpgt_epi64(v0, hi)),
            _mm256_or_si256(_mm256_cmpgt_epi64(lo, v1), _mm256_cmpgt_epi64(v1, hi)));
        if (!_mm256_testz_si256(out, out)) return 0;
    }
#endif
    for (; i < n; ++i)
        if (a[i] < plo || a[i] > phi) return 0;
    return 1;
}

/* Reverse a[0..n). */
static void wemu_reverse(uint64_t *a, int64_t n)
{
    int64_t i = 0, j = n; /* swap a[i..] with a[..j) mirrored */
#if defined(__AVX2__)
    for (; j - i >= 8; i += 4, j -= 4) {
        const __m256i x = _mm256_loadu_si256((const __m256i *)(a + i));
        const __m256i y = _mm256_loadu_si256((const __m256i *)(a + j - 4));
        _mm256_storeu_si256((__m256i *)(a + i), _mm256_permute4x64_epi64(y, 0x1B));
        _mm256_storeu_si256((__m256i *)(a + j - 4), _mm256_permute4x64_epi64(x, 0x1B));
    }
#endif
    for (--j; i < j; ++i, --j) w_swap(a + i, a + j);
}

static void wemu_heap_sort(uint64_t *first, int64_t len, int s);

/* The introsort loop on a range whose keys are all equal.  Every
 * comparison is then false, so each step is fixed by the length alone:
 * __move_median_to_first picks the middle slot (a < b, a < c and b < c all
 * false), and the unguarded partition of [first + 1, last) stops both scans
 * at every slot: it swaps slot pairs from the ends inwards until they meet,
 * i.e. reverses the range, and returns its middle, first + 1 + (len - 1) / 2
 * (see wemu_unguarded_partition: L_t and R_t are all the slots).  The final
 * insertion sort moves nothing.  So the moves are those of the loop, done
 * with block reversals instead of compare-and-swap scans
 * (wemu_equal_reversals), or, with a copy of the range to read from,
 * without moving the words at all until the end (wemu_equal_views). */
static void wemu_equal_reversals(uint64_t *first, uint64_t *last, int64_t depth_limit, int s)
{
    while (last - first > KWK_STD_SORT_THRESHOLD) {
        if (depth_limit == 0) {
            wemu_heap_sort(first, last - first, s);
            return;
        }
        --depth_limit;
        const int64_t len = last - first;
        w_swap(first, first + len / 2);
        wemu_reverse(first + 1, len - 1);
        uint64_t *cut = first + 1 + (len - 1) / 2;
        wemu_equal_reversals(cut, last, depth_limit, s);
        last = cut;
    }
}

/* The same loop on views of a copy.  Each range the loop works on is, in
 * the copy, one word (*cell, its slot 0) and a run read with a stride of
 * +1 or -1 (slot j >= 1 at base[dir * (j - 1)]).  A step swaps slot 0 with
 * slot len / 2, a real swap of two words of the copy, and reverses slots
 * 1..len-1, which only turns the run's view around; the right part is
 * again a cell and a run of the same view, the left part keeps the cell.
 * Each leaf (and a range that reaches the depth limit, then heap-sorted
 * there) is written once to its place `out`.  So one copy and one pass of
 * writes instead of a reversal of the whole range per level: about ten
 * levels for the tens of thousands of -inf of a top-p row masked after
 * top-k (avx512: that row's equal-key work 26% -> 10% of its sort's
 * profile, the sort 1.2-1.29x, A/B). */
static void wemu_equal_views(uint64_t *out, int64_t len, uint64_t *cell, uint64_t *base,
                             int64_t dir, int64_t depth_limit, int s)
{
    while (len > KWK_STD_SORT_THRESHOLD && depth_limit > 0) {
        --depth_limit;
        uint64_t *const mid = base + dir * (len / 2 - 1); /* slot len / 2 */
        const uint64_t t = *cell;
        *cell = *mid;
        *mid = t;
        base += dir * (len - 2); /* slots 1..len-1 reversed */
        dir = -dir;
        const int64_t cut = 1 + (len - 1) / 2;
        uint64_t *const rcell = base + dir * (cut - 1); /* slot cut */
        wemu_equal_views(out + cut, len - cut, rcell, rcell + dir, dir, depth_limit, s);
        len = cut;
    }
    out[0] = *cell;
    if (dir > 0) memcpy(out + 1, base, (size_t)(len - 1) * sizeof(uint64_t));
    else
        for (int64_t j = 1; j < len; ++j) out[j] = base[-(j - 1)];
    if (len > KWK_STD_SORT_THRESHOLD) wemu_heap_sort(out, len, s); /* the depth limit reached */
}

/* Views from ranges longer than WEMU_EQUAL_VIEWS_MIN (shorter ones have a
 * level or four of reversals, cheaper than the copy: rows of 54 and 336
 * with ties, 0.95-0.97x with views at every length); copied to the stack up
 * to WEMU_EQUAL_STACK, else to the heap (the reversals if that fails). */
enum { WEMU_EQUAL_VIEWS_MIN = 256, WEMU_EQUAL_STACK = 512 };

static void wemu_equal_introsort(uint64_t *first, uint64_t *last, int64_t depth_limit, int s)
{
    const int64_t len = last - first;
    if (len <= WEMU_EQUAL_VIEWS_MIN) {
        wemu_equal_reversals(first, last, depth_limit, s);
        return;
    }
    uint64_t stack_copy[WEMU_EQUAL_STACK];
    uint64_t *copy = len <= WEMU_EQUAL_STACK ? stack_copy
                                             : (uint64_t *)malloc((size_t)len * sizeof(uint64_t));
    if (!copy) {
        wemu_equal_reversals(first, last, depth_limit, s);
        return;
    }
    memcpy(copy, first, (size_t)len * sizeof(uint64_t));
    wemu_equal_views(first, len, copy, copy + 1, 1, depth_limit, s);
    if (copy != stack_copy) free(copy);
}

/* Sparse ties: a row whose stable sort is known (`sorted`, ties in index
 * order) and whose tied keys are listed (`dups`, ascending, each key that
 * occurs more than once).  Every range the introsort loop works on holds
 * keys between two pivots (the row's extremes at first): the left part of a
 * partition keys <= pivot, the right part keys >= pivot.  A range whose key
 * bounds take in no tied key holds only keys found once in the whole row,
 * so its final order is the sorted one, element for element: it is copied
 * from `sorted` (same positions) instead of emulated.  Rows with a few
 * hundred tied keys among 10^5 stop emulating past the first 8-10 levels. */
typedef struct {
    const uint64_t *sorted; /* the row in sorted order */
    const uint64_t *base;   /* the emulated row's first word (position 0 of sorted) */
    const uint64_t *dups;   /* tied keys, ascending */
    int64_t ndups;
    int local;              /* a short range's own (wemu_local_loop), not the row's */
} wemu_prune;

static int wemu_tied_key_within(const wemu_prune *pr, uint64_t klo, uint64_t khi)
{
    int64_t lo = 0, hi = pr->ndups;
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (pr->dups[mid] < klo) lo = mid + 1;
        else hi = mid;
    }
    return lo < pr->ndups && pr->dups[lo] <= khi;
}

/* Whether [first, last) with keys in [klo, khi] can be copied from the
 * sorted row (and is, if so). */
static int wemu_copy_if_untied(const wemu_prune *pr, uint64_t *first, uint64_t *last, uint64_t klo,
                               uint64_t khi)
{
    if (!pr || wemu_tied_key_within(pr, klo, khi)) return 0;
    memcpy(first, pr->sorted + (first - pr->base), (size_t)(last - first) * sizeof(uint64_t));
    return 1;
}

/* One pass of the introsort loop's body on [first, last) (longer than the
 * threshold): 0 when it finished the range (a range of one key, as
 * wemu_equal_introsort does it: tie-heavy rows, found by the three pivot
 * candidates agreeing, then a scan that stops at the first other key; or
 * the depth limit reached: heap sort); else 1, the pivot moved to *first
 * and the range partitioned at *cut, the depth limit spent. */
static int wemu_introsort_step(uint64_t *first, uint64_t *last, int64_t *depth_limit, int s,
                               uint64_t m, uint64_t **cut)
{
    const uint64_t k = first[1] >> s;
    if (k == first[(last - first) / 2] >> s && k == last[-1] >> s &&
        wemu_keys_all_equal(first, last - first, first[1] & ~m, first[1] | m)) {
        wemu_equal_introsort(first, last, *depth_limit, s);
        return 0;
    }
    if (*depth_limit == 0) {
        wemu_heap_sort(first, last - first, s);
        return 0;
    }
    --*depth_limit;
    uint64_t *mid = first + (last - first) / 2;
    wemu_move_median_to_first(first, first + 1, mid, last - 1, s);
    int met;
    *cut = wemu_unguarded_partition(first + 1, last, *first, m, &met);
    return 1;
}

/* Ranges of at most WEMU_LOCAL_MAX words: past the row's first levels,
 * about 60% of the emulation's time went to ranges of 17..255 words and
 * their leaves (3-8 cycles a word a level there, against 1.7 on long
 * ranges), and most such ranges hold no two equal keys (equal keys stay in
 * one range unless one is the pivot): a range without ties ends up sorted
 * whatever the moves.  So such a range is sorted as it stands (the SIMD
 * quicksort, words ordered by key then index); if no two adjacent keys
 * are equal, that is its final order, else the emulation goes on with
 * this sorted copy as the prune (wemu_prune: sub-ranges free of the
 * range's tied keys are copied from it).  Where nearly every range has
 * ties (keys of a small set, or two of the pivot candidates equal), the
 * sort is wasted: `wemu_gate` counts the tries and stops them once 8 have
 * been made and over 7 in 8 found ties.  A gate lives as long as its
 * caller keeps it: sort_kernels.h keeps one per call and thread
 * (workspace), so rows of 54 with ties in every one (tabnet) try 8 times,
 * not 8 times a row.  Measured (avx512, ns/el, torch order, A/B on the
 * corpus rows): hf_typical 4x50257 16.0 -> 13.1, sparsegpt 524288 18.7
 * -> 14.7, torchmetrics_binary_prc 100000 15.1 -> 11.3, torchrec_auc
 * 262144 16.1 -> 13.5; tie-heavy rows (tabnet, dino_knn, vllm) alike;
 * WEMU_LOCAL_MAX 256 alike.  On the AVX2 target the sort of 128 words
 * (simd_qsort_avx2.h) costs more than it saves (torchrec 16.3 -> 19.1):
 * AVX-512 only. */
enum { WEMU_LOCAL_MAX = 128 };
#if defined(KWK_HAVE_SIMD_QSORT) && defined(__AVX512F__)
#define WEMU_LOCAL_SORTS 1
#else
#define WEMU_LOCAL_SORTS 0
#endif

typedef struct {
    int64_t tries, tied;
} wemu_gate;

static void wemu_introsort_loop(uint64_t *first, uint64_t *last, int64_t depth_limit, int s, uint64_t m,
                                const wemu_prune *pr, uint64_t klo, uint64_t khi, wemu_gate *g);

#if WEMU_LOCAL_SORTS
static int wemu_local_worth(const wemu_gate *g, const uint64_t *first, const uint64_t *last, int s)
{
    /* two of the pivot candidates equal: the range has ties for sure */
    const uint64_t a = first[1] >> s, b = first[(last - first) / 2] >> s, c = last[-1] >> s;
    if (a == b || a == c || b == c) return 0;
    return g->tries < 8 || g->tied * 8 <= g->tries * 7;
}

static void wemu_local_loop(uint64_t *first, uint64_t *last, int64_t depth_limit, int s, uint64_t m,
                            wemu_gate *g)
{
    uint64_t sorted[WEMU_LOCAL_MAX], dups[WEMU_LOCAL_MAX / 2];
    const int64_t n = last - first;
    memcpy(sorted, first, (size_t)n * sizeof(uint64_t));
    simd_qsort_64(sorted, n);
    int64_t nd = 0;
    for (int64_t j = 1; j < n; ++j) {
        const uint64_t k = sorted[j] >> s;
        if (k == sorted[j - 1] >> s && (nd == 0 || dups[nd - 1] != k)) dups[nd++] = k;
    }
    ++g->tries;
    if (nd == 0) {
        memcpy(first, sorted, (size_t)n * sizeof(uint64_t));
        return;
    }
    ++g->tied;
    const wemu_prune local = {sorted, first, dups, nd, 1};
    wemu_introsort_loop(first, last, depth_limit, s, m, &local, sorted[0] >> s, sorted[n - 1] >> s, g);
}
#endif

static void wemu_introsort_loop(uint64_t *first, uint64_t *last, int64_t depth_limit, int s, uint64_t m,
                                const wemu_prune *pr, uint64_t klo, uint64_t khi, wemu_gate *g)
{
    while (last - first > KWK_STD_SORT_THRESHOLD) {
        if (wemu_copy_if_untied(pr, first, last, klo, khi)) return;
#if WEMU_LOCAL_SORTS
        if (last - first <= WEMU_LOCAL_MAX && !(pr && pr->local) && wemu_local_worth(g, first, last, s)) {
            wemu_local_loop(first, last, depth_limit, s, m, g);
            return;
        }
#endif
        uint64_t *cut;
        if (!wemu_introsort_step(first, last, &depth_limit, s, m, &cut)) return;
        const uint64_t pivot_key = *first >> s;
        wemu_introsort_loop(cut, last, depth_limit, s, m, pr, pivot_key, khi, g);
        last = cut;
        khi = pivot_key;
    }
    if (!wemu_copy_if_untied(pr, first, last, klo, khi)) wemu_leaf_sort(first, last - first, m);
}

/* The introsort loop over a whole row: wemu_introsort_loop itself, or a
 * runner that spreads its ranges over threads (sort_kernels.h:
 * wemu_introsort_threads), called with the same arguments. */
typedef void (*wemu_loop_fn)(uint64_t *first, uint64_t *last, int64_t depth_limit, int s,
                             uint64_t m, const wemu_prune *pr, uint64_t klo, uint64_t khi,
                             wemu_gate *g);

/* std::sort(first, first + n) on words whose low `ibits` bits are the
 * index (ibits < 64); loop: wemu_introsort_loop or a runner of it. */
static void wemu_std_sort_with(uint64_t *first, int64_t n, int ibits, wemu_loop_fn loop, wemu_gate *g)
{
    if (n <= 0) return;
    const uint64_t m = ibits >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << ibits) - 1);
    /* the final insertion sort is done leaf by leaf inside the loop */
    loop(first, first + n, floor_log2(n) * 2, ibits, m, NULL, 0, 0, g);
}

static void wemu_std_sort(uint64_t *first, int64_t n, int ibits)
{
    wemu_gate g = {0, 0};
    wemu_std_sort_with(first, n, ibits, wemu_introsort_loop, &g);
}

/* The same, given the row's stable sort `sorted` (n words): tied keys are
 * listed into dups (room for n / 2 words) and ranges free of them copied
 * (wemu_prune). */
static void wemu_std_sort_sorted_with(uint64_t *first, int64_t n, int ibits, const uint64_t *sorted,
                                      uint64_t *dups, wemu_loop_fn loop, wemu_gate *g)
{
    if (n <= 0) return;
    const uint64_t m = ibits >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << ibits) - 1);
    int64_t nd = 0;
    for (int64_t j = 1; j < n; ++j) {
        const uint64_t k = sorted[j] >> ibits;
        if (k == sorted[j - 1] >> ibits && (nd == 0 || dups[nd - 1] != k)) dups[nd++] = k;
    }
    const wemu_prune pr = {sorted, first, dups, nd, 0};
    loop(first, first + n, floor_log2(n) * 2, ibits, m, &pr, sorted[0] >> ibits,
         sorted[n - 1] >> ibits, g);
}

/* The word std::sort(first, first + n) puts first among those whose key
 * is `key` (one of them at least; the array is left part-sorted): the
 * introsort loop followed down the one range that ends up holding it,
 * as nth_element follows a position.  After a partition the left range
 * (keys <= the pivot's, the pivot itself at its head) precedes the right
 * (keys >= the pivot's) in the output, so the first `key` is on the left
 * when key <= pivot (on the right there are none when key < pivot, and
 * the pivot is one when equal) and on the right otherwise; each level
 * costs the loop its depth limit, as on either side of the real
 * recursion.  A leaf's insertion sort is stable and a heap-sorted range
 * is sorted, so the first word of that key in position order is the
 * answer.  About 2n partition steps instead of the whole sort's n log n:
 * torch.unique of -0.0 and +0.0 shows only which zero this is. */
static uint64_t wemu_first_of_key(uint64_t *first, int64_t n, int ibits, uint64_t key)
{
    const int s = ibits;
    const uint64_t m = ibits >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << ibits) - 1);
    uint64_t *last = first + n;
    int64_t depth_limit = floor_log2(n) * 2;
    while (last - first > KWK_STD_SORT_THRESHOLD) {
        uint64_t *cut;
        /* (a range finished whole: one key, or heap-sorted) */
        if (!wemu_introsort_step(first, last, &depth_limit, s, m, &cut)) break;
        const uint64_t pivot_key = *first >> s;
        if (key <= pivot_key) last = cut;
        else first = cut;
    }
    for (uint64_t *p = first; p < last; ++p)
        if ((*p >> s) == key) return *p;
    return *first; /* not reached when a word has the key */
}

/* std::__heap_select(first, first + middle, first + last) on words. */
/* std::__heap_select's insertions, several in flight.  Each insertion
 * (__pop_heap: x replaces the root) is __adjust_heap's descent to a leaf
 * along the larger children (the right one on equal keys), each child
 * moving up a level, then __push_heap lifting x back up.  The path's keys
 * never increase downwards, so the keys x rises past are a suffix of the
 * path: the result is that of a descent that stops at the first child
 * whose key is below x's and puts x in the hole there, leaving every slot
 * below untouched.  Such a descent writes each level once, top down, and
 * never looks back, so the next insertion can follow it a level behind:
 * it only reads slots the one ahead has finished with.  A round moves every
 * insertion in flight down one level, oldest (deepest) first; a new one
 * starts at the root after the last one's first step, when the root (the
 * threshold the next candidate must beat) is final.  Up to one insertion
 * per level is in flight, their loads independent, where one descent at a
 * time was a chain of dependent loads. */
enum { WEMU_PIPE_MAX = 64 }; /* more than a heap's depth */
typedef struct {
    uint64_t *w;
    int64_t inner; /* slots below it have two children */
    int64_t lone;  /* the slot whose only child is the last, or -1 */
    int s, n;      /* key shift; insertions in flight, oldest first */
    int64_t hole[WEMU_PIPE_MAX];
    uint64_t x[WEMU_PIPE_MAX];
} wemu_pipe;

static inline void wemu_pipe_init(wemu_pipe *p, uint64_t *w, int64_t len, int s)
{
    p->w = w;
    p->inner = (len - 1) / 2;
    p->lone = (len & 1) == 0 ? (len - 2) / 2 : -1;
    p->s = s;
    p->n = 0;
}

static inline void wemu_pipe_round(wemu_pipe *p)
{
    uint64_t *w = p->w;
    const int s = p->s;
    int out = 0;
    for (int i = 0; i < p->n; ++i) {
        const int64_t h = p->hole[i];
        const uint64_t x = p->x[i];
        int64_t c = 2 * h + 1;
        if (h < p->inner) c += !WKEY_LESS(w[c + 1], w[c], s);
        else if (h != p->lone) c = h; /* a leaf: x stays */
        const uint64_t v = w[c];
        if (c == h || WKEY_LESS(v, x, s)) {
            w[h] = x;
            continue;
        }
        w[h] = v;
        p->hole[out] = c;
        p->x[out] = x;
        ++out;
    }
    p->n = out;
}

/* x (a key below the root's) replaces the root: __pop_heap's insertion. */
static inline void wemu_pipe_push(wemu_pipe *p, uint64_t x)
{
    p->hole[p->n] = 0;
    p->x[p->n] = x;
    ++p->n;
    wemu_pipe_round(p);
}

static inline void wemu_pipe_drain(wemu_pipe *p)
{
    while (p->n) wemu_pipe_round(p);
}

/* Whether any of the WEMU_SCAN words at w has a key below the key of the
 * word `top` (keys below it are the words below the top's key with its
 * index bits cleared, as unsigned numbers). */
#if defined(__AVX512F__)
enum { WEMU_SCAN = 8 };
static inline int wemu_any_below(const uint64_t *w, uint64_t top, int s)
{
    const __m512i t = _mm512_set1_epi64((long long)((top >> s) << s));
    return _mm512_cmplt_epu64_mask(_mm512_loadu_si512((const void *)w), t) != 0;
}
#elif defined(__AVX2__)
enum { WEMU_SCAN = 8 };
static inline int wemu_any_below(const uint64_t *w, uint64_t top, int s)
{
    const __m256i sign = _mm256_set1_epi64x((long long)0x8000000000000000ull);
    const __m256i t = _mm256_xor_si256(_mm256_set1_epi64x((long long)((top >> s) << s)), sign);
    const __m256i a = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)w), sign);
    const __m256i b = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(w + 4)), sign);
    return !_mm256_testz_si256(_mm256_or_si256(_mm256_cmpgt_epi64(t, a), _mm256_cmpgt_epi64(t, b)),
                               _mm256_set1_epi64x(-1));
}
#else
enum { WEMU_SCAN = 1 };
static inline int wemu_any_below(const uint64_t *w, uint64_t top, int s)
{
    return WKEY_LESS(w[0], top, s);
}
#endif

/* std::__heap_select: the heap of the first `middle` words, then every
 * later word whose key is below the root's replaces the root.  Words are
 * tested WEMU_SCAN at a time first: the root changes only when one enters,
 * so a group with no key below it is passed whole (rows of few distinct
 * values fill the heap with the best keys early: int8 rows of 1000, k = 8,
 * 1.6 us a row one word at a time). */
static void wemu_heap_select(uint64_t *first, int64_t middle, int64_t last, int s)
{
    wemu_make_heap(first, middle, s);
    wemu_pipe p;
    wemu_pipe_init(&p, first, middle, s);
    for (int64_t i = middle; i < last;) {
        const int64_t end = last - i >= WEMU_SCAN ? i + WEMU_SCAN : last;
        if (end - i == WEMU_SCAN && !wemu_any_below(first + i, first[0], s)) {
            i = end;
            continue;
        }
        for (; i < end; ++i) {
            if (WKEY_LESS(first[i], first[0], s)) {
                /* __pop_heap(first, first + middle, first + i) */
                const uint64_t value = first[i];
                first[i] = first[0];
                wemu_pipe_push(&p, value);
            }
        }
    }
    wemu_pipe_drain(&p);
}

/* std::partial_sort(first, first + middle, first + last) on words. */
static void wemu_partial_sort(uint64_t *first, int64_t middle, int64_t last, int ibits)
{
    wemu_heap_select(first, middle, last, ibits);
    wemu_sort_heap(first, middle, ibits);
}

/* std::__introselect on words with an explicit depth limit (the tests give
 * small ones to reach the heap-select fallback): the record version's
 * moves (emu_nth_element), with the block partition above. */
static void wemu_introselect(uint64_t *first, uint64_t *target, uint64_t *last,
                             int64_t depth_limit, int s, uint64_t m)
{
    while (last - first > 3) {
        if (depth_limit == 0) {
            wemu_heap_select(first, (target - first) + 1, last - first, s);
            w_swap(first, target);
            return;
        }
        --depth_limit;
        uint64_t *mid = first + (last - first) / 2;
        wemu_move_median_to_first(first, first + 1, mid, last - 1, s);
        int met;
        uint64_t *cut = wemu_unguarded_partition(first + 1, last, *first, m, &met);
        if (cut <= target) first = cut;
        else last = cut;
    }
    /* __insertion_sort of at most three words: stable by key (a plain
     * insertion here: wemu_leaf_sort's network is built for 16) */
    for (uint64_t *i = first + 1; i < last; ++i) {
        const uint64_t x = *i;
        uint64_t *j = i;
        for (; j > first && WKEY_LESS(x, j[-1], s); --j) *j = j[-1];
        *j = x;
    }
}

/* std::nth_element(first, first + nth, first + n) on words whose low
 * `ibits` bits are the index (ibits < 64). */
static void wemu_nth_element(uint64_t *first, int64_t nth, int64_t n, int ibits)
{
    if (n <= 0 || nth < 0 || nth >= n) return;
    const uint64_t m = (((uint64_t)1 << ibits) - 1);
    wemu_introselect(first, first + nth, first + n, floor_log2(n) * 2, ibits, m);
}

#undef WKEY_LESS

#endif
