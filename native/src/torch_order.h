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

#include <stdint.h>

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
#endif
