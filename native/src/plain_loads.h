/*
 * plain_loads.h - a row's part of a vector, read by a plain load.
 *
 * Kernels over short rows read each row with a masked load (the lanes past
 * the row zeroed, nothing past it read), and scans of long rows their last
 * block, with the mask (all ones before it) computed in the loop, so every
 * block's load was a masked one.  On memory not yet in cache, a
 * masked load is slow: on AMD Zen 5, streaming 64 MB, 5.5-6.3 ns a 64-byte
 * vector masked (AVX-512 or vpmaskmovd, any mask, all lanes included)
 * against 2.5-3.1 plain; no difference on data in L2.  So where the whole
 * vector lies inside the caller's buffer (before `end`: the end of the
 * call's last row, the rows in between being the same tensor's memory),
 * these read it whole and zero the lanes outside the mask in a register;
 * only a load that would pass `end` stays masked.  The empty asm keeps GCC
 * from folding the register mask back into the load (it does: a masked
 * load is one instruction).  Same result as _mm512_maskz_loadu_* in every
 * lane.
 */
#ifndef KWK_PLAIN_LOADS_H
#define KWK_PLAIN_LOADS_H

#include <stdint.h>

/* The bound a short-row kernel passes for an input of `bytes` from src:
 * its end, or, for an input under KWK_PLAIN_LOADS_MIN_BYTES, src itself,
 * so that every load stays masked (a scan of a long row passes the row's
 * end: its whole blocks read the same bytes either way).  Such an input is likely in cache, where the plain loads
 * measured slower (a whole vector crosses more cache lines than a row's
 * lanes: float32 medians of 4096 rows of 9 / 25 1.12-1.18x, int64 sorts of
 * 4096 rows of 4 1.10-1.19x the masked loads' time). */
enum { KWK_PLAIN_LOADS_MIN_BYTES = 1 << 20 };

static inline const void *kwk_plain_end(const void *src, int64_t bytes)
{
    return bytes >= KWK_PLAIN_LOADS_MIN_BYTES ? (const void *)((const char *)src + bytes) : src;
}

#if defined(__AVX512F__)
#include <immintrin.h>

static inline __attribute__((always_inline)) __m512i kwk_loadz_epi32(__mmask16 m, const void *p,
                                                                     const void *end)
{
    if ((const char *)end - (const char *)p >= 64) {
        __m512i v = _mm512_loadu_si512(p);
        __asm__("" : "+v"(v));
        return _mm512_maskz_mov_epi32(m, v);
    }
    return _mm512_maskz_loadu_epi32(m, p);
}

static inline __attribute__((always_inline)) __m512i kwk_loadz_epi64(__mmask8 m, const void *p,
                                                                     const void *end)
{
    if ((const char *)end - (const char *)p >= 64) {
        __m512i v = _mm512_loadu_si512(p);
        __asm__("" : "+v"(v));
        return _mm512_maskz_mov_epi64(m, v);
    }
    return _mm512_maskz_loadu_epi64(m, p);
}
#endif

#endif
