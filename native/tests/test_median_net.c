/* test_median_net.c - the median selection networks of median_pool2d's
 * windows other than 3x3 (mp_median_network): well formed for every window
 * size 1..MP_NET_MAX, and selecting the lower median (wire (n - 1) / 2) of
 * every zero-one input up to n = 25 (5x5; by the zero-one principle then of
 * every input), evaluated 64 inputs a word (min = and, max = or); beyond,
 * random inputs with ties against a sorted copy.
 * gcc -O2 -std=c11 -Inative/include -o /tmp/t native/tests/test_median_net.c && /tmp/t */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kwker.h"
#include "../src/median_pool_kernels.h"

enum { EXHAUSTIVE_MAX = 25 };

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }
static int cmp_u32(const void *a, const void *b)
{
    const uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Every zero-one input of n wires: 0 when the network selects its median. */
static long check_zero_one(const mp_net *net)
{
    const int n = net->n;
    const size_t words = n >= 6 ? (size_t)1 << (n - 6) : 1;
    uint64_t *wire = malloc(words * (size_t)n * sizeof *wire);
    if (!wire) { fprintf(stderr, "no memory\n"); exit(2); }
    static const uint64_t low[6] = {0xAAAAAAAAAAAAAAAAull, 0xCCCCCCCCCCCCCCCCull, 0xF0F0F0F0F0F0F0F0ull,
                                    0xFF00FF00FF00FF00ull, 0xFFFF0000FFFF0000ull, 0xFFFFFFFF00000000ull};
    for (int w = 0; w < n; w++) /* bit t of word b is wire w's bit of input 64 b + t */
        for (size_t b = 0; b < words; b++)
            wire[w * words + b] = w < 6 ? low[w] : (((b << 6) >> w) & 1) ? ~0ull : 0;
    for (int q = 0; q < net->count; q++) {
        uint64_t *x = wire + net->i[q] * words, *y = wire + net->j[q] * words;
        for (size_t b = 0; b < words; b++) {
            const uint64_t lo = x[b] & y[b], hi = x[b] | y[b];
            x[b] = lo;
            y[b] = hi;
        }
    }
    long bad = 0;
    const uint64_t inputs = (uint64_t)1 << n;
    const uint64_t *med = wire + net->rank * words;
    for (uint64_t x = 0; x < inputs; x++) {
        /* sorted ascending, slot rank holds 1 when at most rank zeros */
        const int want = __builtin_popcountll(x) >= n - net->rank;
        bad += ((med[x >> 6] >> (x & 63)) & 1) != (uint64_t)want;
    }
    free(wire);
    return bad;
}

/* Random inputs with ties (values 0..span-1): the network's median wire
 * against a sorted copy's. */
static long check_random(const mp_net *net, int trials)
{
    uint32_t v[MP_NET_MAX], sorted[MP_NET_MAX];
    long bad = 0;
    for (int t = 0; t < trials; t++) {
        const uint32_t span = 1 + (uint32_t)(rnd() % (t % 2 ? 4 : 1000));
        for (int k = 0; k < net->n; k++) sorted[k] = v[k] = (uint32_t)(rnd() % span);
        for (int q = 0; q < net->count; q++) {
            const uint32_t a = v[net->i[q]], b = v[net->j[q]];
            v[net->i[q]] = a < b ? a : b;
            v[net->j[q]] = a < b ? b : a;
        }
        qsort(sorted, (size_t)net->n, sizeof sorted[0], cmp_u32);
        bad += v[net->rank] != sorted[net->rank];
    }
    return bad;
}

int main(void)
{
    long bad = 0;
    static mp_net net;
    for (int n = 1; n <= MP_NET_MAX; n++) {
        mp_median_network(n, &net);
        int formed = net.n == n && net.rank == (n - 1) / 2 && net.count <= MP_NET_OPS_MAX;
        for (int q = 0; q < net.count; q++) formed &= net.i[q] < net.j[q] && net.j[q] < n;
        const long wrong = n <= EXHAUSTIVE_MAX ? check_zero_one(&net) : check_random(&net, 3000);
        if (!formed || wrong) {
            printf("n=%d: %s, %ld wrong medians\n", n, formed ? "formed" : "malformed", wrong);
            bad++;
        }
    }
    /* the 5x5 network written out for the AVX2 kernel (MP_NET25) is this one */
    mp_median_network(25, &net);
    static const uint8_t listed[][2] = {
#define LISTED(i, j) {i, j},
        MP_NET25(LISTED)
#undef LISTED
    };
    int same = (int)(sizeof listed / sizeof listed[0]) == net.count;
    for (int q = 0; same && q < net.count; q++) same = listed[q][0] == net.i[q] && listed[q][1] == net.j[q];
    if (!same) {
        printf("MP_NET25 is not mp_median_network(25)\n");
        bad++;
    }
    printf("%s (5x5: %d comparators)\n", bad ? "FAILED" : "ok", net.count);
    return bad != 0;
}
