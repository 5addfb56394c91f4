/*
 * row_io.h - what every kernel does around its algorithm: a per-call
 * workspace, loading a row's keys (as packed words or records), and writing
 * output values (original bits) and indices.  Part of the per-target
 * kernels (included by kernels_impl.h); everything is static.
 */
#ifndef KWK_ROW_IO_H
#define KWK_ROW_IO_H

#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif
#include "kernels.h"
#include "keys.h"
#include "torch_order.h"
#include "order_words.h"

/* Workspace for one call, sized for its longest row. */
typedef struct {
    uint64_t *words; /* keys, then packed words */
    uint64_t *tmp;   /* radix scratch */
    kwk_kv *kv;      /* records for wide keys and for torch-order emulation */
    kwk_kv *kv_tmp;
    size_t cap[4];   /* each block's size (workspace_alloc), in that order */
    wemu_gate gate;  /* the torch-order emulation's short-range sorts (torch_order.h) */
} workspace;

/* Workspace buffers of KWK_HUGE_MIN_BYTES or more are asked to be backed
 * by 2 MiB pages (Linux transparent huge pages, madvise mode being the
 * common default): a radix sort's scatter over a million-word row then
 * misses the TLB far less, and the fresh buffer costs one page fault per
 * 2 MiB instead of 512.  Measured (kwk_sort of one randn float32 row, avx2
 * target, AMD Zen 3, three runs each): 1M stable 23.7-24.7 -> 12.6-15.7
 * ns/el; 4M torch order 30.3-34.9 -> 25.6-26.3.  The buffer is rounded up
 * to whole huge pages (at most 2 MiB more each); freed with free(). */
enum { KWK_HUGE_MIN_BYTES = 4 << 20, KWK_HUGE_PAGE = 2 << 20 };

/* Smaller blocks come from the calling thread's cache (kwk_ws_take); *cap
 * is the block's size, KWK_WS_CACHE_MAX or more for a huge-page one. */
static void *workspace_alloc(size_t bytes, size_t *cap)
{
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    _Static_assert((int)KWK_HUGE_MIN_BYTES <= (int)KWK_WS_CACHE_MAX, "huge-page blocks are never cached");
    if (bytes >= (size_t)KWK_HUGE_MIN_BYTES) {
        const size_t rounded = (bytes + KWK_HUGE_PAGE - 1) / KWK_HUGE_PAGE * KWK_HUGE_PAGE;
        void *p = aligned_alloc(KWK_HUGE_PAGE, rounded);
        if (p) (void)madvise(p, rounded, MADV_HUGEPAGE); /* a hint: ignored where unsupported */
        *cap = rounded;
        return p;
    }
#endif
    return kwk_ws_take(bytes, cap);
}

static int workspace_init(workspace *ws, int64_t len)
{
    size_t n = (size_t)(len > 0 ? len : 1);
    memset(ws, 0, sizeof *ws);
    ws->words = (uint64_t *)workspace_alloc(n * sizeof(uint64_t), &ws->cap[0]);
    ws->tmp = (uint64_t *)workspace_alloc(n * sizeof(uint64_t), &ws->cap[1]);
    if (!ws->words || !ws->tmp) return KWK_E_NOMEM;
    return KWK_OK;
}

static int workspace_kv(workspace *ws, int64_t len)
{
    size_t n = (size_t)(len > 0 ? len : 1);
    if (!ws->kv) ws->kv = (kwk_kv *)workspace_alloc(n * sizeof(kwk_kv), &ws->cap[2]);
    if (!ws->kv_tmp) ws->kv_tmp = (kwk_kv *)workspace_alloc(n * sizeof(kwk_kv), &ws->cap[3]);
    return (ws->kv && ws->kv_tmp) ? KWK_OK : KWK_E_NOMEM;
}

static void workspace_free(workspace *ws)
{
    kwk_ws_give(ws->words, ws->cap[0]);
    kwk_ws_give(ws->tmp, ws->cap[1]);
    kwk_ws_give(ws->kv, ws->cap[2]);
    kwk_ws_give(ws->kv_tmp, ws->cap[3]);
}

/* A row's keys, packed: either words (packed != 0) or records in ws->kv. */
typedef struct {
    int packed;
    int ibits;
    uint64_t min_key;
    uint64_t max_key;
    uint64_t idx_mask;
} row_keys;

/* Gather a row's keys and pack them as words when they fit, else records. */
static int load_row(workspace *ws, int dtype, const char *row, int64_t len,
                    int64_t step, uint64_t flip, row_keys *rk)
{
    uint64_t lo, hi;
    kwk_gather_keys(dtype, row, len, step, flip, ws->words, &lo, &hi);
    const int ibits = len > 1 ? kwk_bits_for((uint64_t)(len - 1)) : 0;
    const int rbits = len > 0 ? kwk_bits_for(hi - lo) : 0;
    rk->ibits = ibits;
    rk->min_key = len > 0 ? lo : 0;
    rk->max_key = hi;
    rk->idx_mask = kwk_width_mask(ibits);
    if (rbits + ibits <= 64) {
        uint64_t *w = ws->words;
        rk->packed = 1;
        if (ibits == 0) {
            for (int64_t j = 0; j < len; ++j) w[j] -= lo;
        } else {
            for (int64_t j = 0; j < len; ++j) w[j] = ((w[j] - lo) << ibits) | (uint64_t)j;
        }
        return rbits;
    }
    if (workspace_kv(ws, len) != KWK_OK) return -1;
    rk->packed = 0;
    for (int64_t j = 0; j < len; ++j) {
        ws->kv[j].key = ws->words[j];
        ws->kv[j].idx = j;
    }
    return rbits;
}

static inline int64_t word_index(const row_keys *rk, uint64_t w) { return (int64_t)(w & rk->idx_mask); }
static inline uint64_t word_key(const row_keys *rk, uint64_t w) { return rk->ibits >= 64 ? 0 : (w >> rk->ibits); }

/* Rebuild the row's records in index order (for the emulation) from the
 * words, whatever order they are in now. */
static int records_from_words(workspace *ws, const row_keys *rk, int64_t len)
{
    if (workspace_kv(ws, len) != KWK_OK) return KWK_E_NOMEM;
    for (int64_t j = 0; j < len; ++j) {
        uint64_t w = ws->words[j];
        int64_t i = word_index(rk, w);
        ws->kv[i].key = word_key(rk, w);
        ws->kv[i].idx = i;
    }
    return KWK_OK;
}

static void records_reset_order(kwk_kv *kv, int64_t len)
{
    /* put records back in index order (their idx field is a permutation) */
    for (int64_t j = 0; j < len; ++j) {
        while (kv[j].idx != j) {
            kwk_kv t = kv[kv[j].idx];
            kv[kv[j].idx] = kv[j];
            kv[j] = t;
        }
    }
}

static void store_bits(void *dst, uint64_t bits, int size)
{
    if (size == 2) { uint16_t v = (uint16_t)bits; memcpy(dst, &v, 2); }
    else if (size == 4) { uint32_t v = (uint32_t)bits; memcpy(dst, &v, 4); }
    else memcpy(dst, &bits, 8);
}

/* Output writers: element j of the output row takes source element idx. */
typedef struct {
    const char *row;   /* source row */
    int64_t step;      /* source bytes between elements */
    char *vals;        /* output values row or NULL */
    int64_t *inds;     /* output indices row or NULL */
    int64_t dsl;       /* output stride in elements */
    int es;            /* element size */
    int canon_nan_bf16; /* write NaN as 0x7FC0 (torch's bf16 round trip) */
} out_row;

static inline void emit(const out_row *o, int64_t j, int64_t idx)
{
    if (o->vals) {
        char *d = o->vals + j * o->dsl * o->es;
        kwk_copy_elem(d, o->row + idx * o->step, o->es);
        if (o->canon_nan_bf16) {
            uint16_t b;
            memcpy(&b, d, 2);
            if ((b & 0x7FFFu) > 0x7F80u) { b = 0x7FC0u; memcpy(d, &b, 2); }
        }
    }
    if (o->inds) o->inds[j * o->dsl] = idx;
}

static int has_adjacent_tie_words(const row_keys *rk, const uint64_t *w, int64_t n)
{
    for (int64_t j = 1; j < n; ++j)
        if (word_key(rk, w[j]) == word_key(rk, w[j - 1])) return 1;
    return 0;
}

static int has_adjacent_tie_kv(const kwk_kv *kv, int64_t n)
{
    for (int64_t j = 1; j < n; ++j)
        if (kv[j].key == kv[j - 1].key) return 1;
    return 0;
}

#endif
