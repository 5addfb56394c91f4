/*
 * net_pairs.h - the comparators of the sorting network row_network.h runs:
 * Batcher's odd-even merge sort for the next power of two p >= n, with every
 * comparator that touches a position >= n dropped (row_network.h says why
 * that sorts).  On its own so that dispatch.c, which caches them per
 * thread (kwk_net_take), needs nothing else.
 */
#ifndef KWK_NET_PAIRS_H
#define KWK_NET_PAIRS_H

#include <stdint.h>

enum {
    KWK_NET_MAX = 32,        /* longest row sorted by the network */
    KWK_NET_MAX_PAIRS = 191, /* comparators for p = 32 */
};

/* One comparator: positions [0] < [1]. */
typedef uint16_t kwk_net_pair[2];

/* The comparators for rows of n <= 65536 keys, in order; returns how many
 * (pairs[c][0] < pairs[c][1] < n).  pairs has room for those of the next
 * power of two 2^k: (k^2 - k + 4) 2^(k-2) - 1 (191 for 32, 3839 for 256). */
static inline int kwk_net_pairs(int n, kwk_net_pair *pairs)
{
    int c = 0;
    for (int p = 1; p < n; p += p)
        for (int k = p; k >= 1; k /= 2)
            for (int j = k % p; j <= n - 1 - k; j += 2 * k)
                for (int i = 0; i <= k - 1 && i <= n - j - k - 1; ++i)
                    if ((i + j) / (2 * p) == (i + j + k) / (2 * p)) {
                        pairs[c][0] = (uint16_t)(i + j);
                        pairs[c][1] = (uint16_t)(i + j + k);
                        ++c;
                    }
    return c;
}

#endif
