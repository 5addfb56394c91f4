/* test_emu_words.c - the word emulations of std::sort (wemu_std_sort),
 * std::nth_element (wemu_nth_element) and std::partial_sort
 * (wemu_partial_sort: topk's heap select) must make exactly the moves of
 * the record emulations (emu_std_sort, emu_nth_element, emu_partial_sort):
 * every slot ends up holding the same index.  Compiled plainly here (the portable code);
 * test_emu_words_avx2.c and _avx512.c compile it for those targets' paths.
 * gcc -O2 -std=c11 -Inative/include -o /tmp/test_emu native/tests/test_emu_words.c && /tmp/test_emu */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../src/torch_order.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static int cmp_u64(const void *a, const void *b)
{
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}
static uint64_t rnd(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }

int main(int argc, char **argv)
{
#if defined(EMU_TEST_CPU)
    /* a variant compiled for a SIMD target (test_emu_words_avx2.c, _avx512.c) */
    if (!__builtin_cpu_supports(EMU_TEST_CPU)) {
        printf("emu words: skipped, no %s\n", EMU_TEST_CPU);
        return 0;
    }
#endif
    long trials = argc > 1 ? atol(argv[1]) : 20000;
    enum { MAXN = 5000 };
    static kwk_kv kv[MAXN];
    static kwk_kv kv2[MAXN];
    static uint64_t w[MAXN], w2[MAXN], sorted[MAXN], dups[MAXN];
    long bad = 0, bad_nth = 0, bad_heap = 0;
    /* the short-range sorts' gate: fresh for most calls (so they are
     * tried), one kept across trials for every fifth (closed by the
     * tie-heavy kinds, as a long call's gate would be) */
    wemu_gate kept = {0, 0};
    for (long t = 0; t < trials; ++t) {
        wemu_gate fresh = {0, 0};
        wemu_gate *g = t % 5 == 0 ? &kept : &fresh;
        int64_t n = (int64_t)(rnd() % (t % 10 == 0 ? MAXN : 600));
        int kind = (int)(rnd() % 10);
        uint64_t distinct = 1 + rnd() % (kind < 4 ? 3 : n + 1);
        for (int64_t i = 0; i < n; ++i) {
            uint64_t k;
            switch (kind) {
            case 0: k = rnd() % distinct; break;
            case 1: k = i / 7; break;                 /* sorted runs */
            case 2: k = (n - i) / 5; break;           /* reversed runs */
            case 3: k = i < n / 2 ? i : n - i; break; /* organ pipe */
            case 4: k = 0; break;
            case 5: k = (i * 7919) % (distinct ? distinct : 1); break;
            case 6: k = (i & 1) ? rnd() % 4 : (uint64_t)(1000 - i % 3); break;
            case 7: /* sparse ties: unique keys, a few repeated */
                k = (i > 0 && rnd() % 50 == 0) ? kv[rnd() % (uint64_t)i].key : rnd() >> 24;
                break;
            case 8: /* one dominant key, a few others (masked logits, votes) */
                k = rnd() % (1 + rnd() % 1024) == 0 ? rnd() % 1000 : 500;
                break;
            default: k = rnd() % (n + 1); break;
            }
            kv[i].key = k;
            kv[i].idx = i;
        }
        int ibits = 0;
        while (ibits < 64 && n > 1 && ((uint64_t)(n - 1) >> ibits) != 0) ++ibits;
        for (int64_t i = 0; i < n; ++i) w[i] = kv[i].key << ibits | (uint64_t)i;
        memcpy(kv2, kv, (size_t)n * sizeof(kwk_kv));
        memcpy(w2, w, (size_t)n * sizeof(uint64_t));
        if (t % 3 == 0 && n > 0) {
            /* a small depth limit exercises the heap sort fallback */
            int64_t depth = (int64_t)(rnd() % 4);
            uint64_t m = ibits ? (((uint64_t)1 << ibits) - 1) : 0;
            emu_introsort_loop(kv, kv + n, depth);
            emu_final_insertion_sort(kv, n);
            wemu_introsort_loop(w, w + n, depth, ibits, m, NULL, 0, 0, g);
        } else {
            emu_std_sort(kv, n);
            /* half the time the variant given the stable sort, which copies
             * ranges free of tied keys from it */
            if (t % 2 == 0 && n > 0) {
                for (int64_t i = 0; i < n; ++i) sorted[i] = w[i];
                qsort(sorted, (size_t)n, sizeof(uint64_t), cmp_u64);
                wemu_std_sort_sorted_with(w, n, ibits, sorted, dups, wemu_introsort_loop, g);
            } else {
                wemu_std_sort_with(w, n, ibits, wemu_introsort_loop, g);
            }
        }
        for (int64_t i = 0; i < n; ++i) {
            uint64_t m = ibits ? (((uint64_t)1 << ibits) - 1) : 0;
            if ((int64_t)(w[i] & m) != kv[i].idx) {
                if (bad++ < 5) printf("mismatch trial %ld n %lld kind %d at %lld\n", t, (long long)n, kind, (long long)i);
                break;
            }
        }
        if (n > 0) {
            /* nth_element at a random rank (often near the ends, where
             * topk's k lies), sometimes with a tiny depth limit to reach the
             * heap-select fallback */
            const int64_t nth = (int64_t)(rnd() % 3 == 0 ? rnd() % (n < 8 ? n : 8) : rnd() % n);
            const uint64_t m = ibits ? (((uint64_t)1 << ibits) - 1) : 0;
            if (t % 4 == 1) {
                const int64_t depth = (int64_t)(rnd() % 4);
                /* the record version has no depth argument: run its loop by
                 * hand with the same limit */
                kwk_kv *lo = kv2, *hi = kv2 + n, *target = kv2 + nth;
                int64_t d = depth;
                int done = 0;
                while (hi - lo > 3) {
                    if (d == 0) {
                        emu_heap_select(lo, (target - lo) + 1, hi - lo);
                        kv_swap(lo, target);
                        done = 1;
                        break;
                    }
                    --d;
                    kwk_kv *cut = emu_unguarded_partition_pivot(lo, hi);
                    if (cut <= target) lo = cut;
                    else hi = cut;
                }
                if (!done) emu_insertion_sort(lo, hi - lo);
                wemu_introselect(w2, w2 + nth, w2 + n, depth, ibits, m);
            } else {
                emu_nth_element(kv2, nth, n);
                wemu_nth_element(w2, nth, n, ibits);
            }
            for (int64_t i = 0; i < n; ++i) {
                if ((int64_t)(w2[i] & m) != kv2[i].idx) {
                    if (bad_nth++ < 5)
                        printf("nth mismatch trial %ld n %lld nth %lld kind %d at %lld\n", t,
                               (long long)n, (long long)nth, kind, (long long)i);
                    break;
                }
            }
        }
    }
    /* partial_sort: heaps of every size from 1 to the row (shallow and
     * deep, even and odd lengths: the lone last child), over the same key
     * kinds as above; tie-heavy keys make the heap's layout show */
    for (long t = 0; t < trials / 4; ++t) {
        const int64_t n = 1 + (int64_t)(rnd() % (t % 8 == 0 ? MAXN : 400));
        const uint64_t kmax = rnd() % 3 == 0 ? (uint64_t)n : (uint64_t)(n < 64 ? n : 64);
        const int64_t k = 1 + (int64_t)(rnd() % kmax);
        const uint64_t distinct = 1 + rnd() % (t % 2 ? 4 : (uint64_t)n + 1);
        int ibits = 0;
        while (ibits < 64 && n > 1 && ((uint64_t)(n - 1) >> ibits) != 0) ++ibits;
        for (int64_t i = 0; i < n; ++i) {
            kv[i].key = t % 5 == 0 ? (uint64_t)(n - i) / 3 : rnd() % distinct;
            kv[i].idx = i;
            w[i] = kv[i].key << ibits | (uint64_t)i;
        }
        emu_partial_sort(kv, k, n);
        wemu_partial_sort(w, k, n, ibits);
        const uint64_t m = ibits ? (((uint64_t)1 << ibits) - 1) : 0;
        for (int64_t i = 0; i < n; ++i) {
            if ((int64_t)(w[i] & m) != kv[i].idx) {
                if (bad_heap++ < 5)
                    printf("partial_sort mismatch trial %ld n %lld k %lld at %lld\n", t,
                           (long long)n, (long long)k, (long long)i);
                break;
            }
        }
    }
    printf("emu words: %ld trials, bad %ld (sort) %ld (nth_element) %ld (partial_sort)\n", trials,
           bad, bad_nth, bad_heap);
    return bad != 0 || bad_nth != 0 || bad_heap != 0;
}
