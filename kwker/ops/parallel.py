"""Rows on several threads: torch's intra-op thread count, honoured.

The native calls release the GIL (cffi's API mode does so around every C
call), so a call over many rows is split into blocks of rows, one per
thread: the calling thread runs the first block and a small pool of Python
threads the others.  Only calls with enough work are split: handing a block
to a pool thread costs tens of microseconds.

A sort of a single long row is split inside the native call instead
(kwker.h kwk_set_row_threads), whose helper threads end with the call.

Fork safety: a forked child starts with a fresh (empty) pool, created on
first use; it never touches the parent's threads or their locks.  Inside
DataLoader workers torch.get_num_threads() is 1, so nothing is split there.
"""
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Optional

import torch

from kwker.ops._call import lib

_get_num_threads = torch.get_num_threads
_set_row_threads = lib.kwk_set_row_threads if lib is not None else None

# A call is split only when each thread gets at least this much work, in
# units of one element of a selection (topk reads ~1 ns an element; sorting
# costs ~10x more per element): below it the hand-off to a pool thread (tens
# of microseconds on a busy machine) costs more than the second core saves.
MIN_WORK_PER_THREAD = 1 << 18
WEIGHT = {"sort": 8, "select": 1}
# Calls with fewer elements are never split (the ops test this before
# building a split, keeping small calls as cheap as they were).
SPLIT_MIN = 2 * MIN_WORK_PER_THREAD // max(WEIGHT.values())

_pool: Optional[ThreadPoolExecutor] = None
_pool_size = 0
_pool_lock = threading.Lock()


def _reset_after_fork() -> None:
    global _pool, _pool_size, _pool_lock
    _pool, _pool_size = None, 0
    _pool_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


def _executor(workers: int) -> ThreadPoolExecutor:
    global _pool, _pool_size
    pool = _pool
    if pool is not None and _pool_size >= workers:
        return pool
    with _pool_lock:
        if _pool is None or _pool_size < workers:
            old = _pool
            _pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="kwker")
            _pool_size = workers
            if old is not None:
                old.shutdown(wait=False)
        return _pool


def threads_for(numel: int, rows: int, kind: str = "select") -> int:
    """How many threads a call over `rows` rows of `numel` elements in all
    should use: torch's setting, fewer when there is too little work."""
    if rows < 2 or numel < SPLIT_MIN:
        return 1
    n = _get_num_threads()
    if n <= 1:
        return 1
    return max(1, min(n, rows, numel * WEIGHT[kind] // MIN_WORK_PER_THREAD))


# A single row of a sort is split inside the native call (kwker.h
# kwk_set_row_threads: its radix pass, bucket sorts, loads and writes in
# parallel slices, the emulation of torch's order in independent ranges)
# from this many elements: each split starts threads six
# times, ~0.3 ms in all, against a sort of ~4 ms at 2^18 float32.
ROW_SPLIT_MIN = 1 << 18
ROW_THREADS_MAX = lib.KWK_MAX_ROW_THREADS if lib is not None else 1


def _run_one_row(call: Callable[[int, int, int, int], int], threads: int) -> int:
    """call(0, 1, 0, 1) with the native library allowed `threads` threads
    for its one row (restored afterwards: the setting is per thread)."""
    _set_row_threads(min(threads, ROW_THREADS_MAX))
    try:
        return call(0, 1, 0, 1)
    finally:
        _set_row_threads(1)


def run_rows(call: Callable[[int, int, int, int], int], outer: int, inner: int,
             numel: int, kind: str = "select") -> int:
    """call(o0, o1, i0, i1) -> native status, over the rows (o, i) with
    o0 <= o < o1 and i0 <= i < i1; the whole range at once or split over
    threads (a sort of one long row: inside the native call).  Returns the
    first non-zero status (0 when every block ran)."""
    threads = threads_for(numel, outer * inner, kind)
    if threads == 1:
        if (outer * inner == 1 and kind == "sort" and numel >= ROW_SPLIT_MIN
                and _set_row_threads is not None):
            n = _get_num_threads()
            if n > 1:
                return _run_one_row(call, n)
        return call(0, outer, 0, inner)
    if outer >= threads:
        cuts = [outer * t // threads for t in range(threads + 1)]
        blocks = [(cuts[t], cuts[t + 1], 0, inner) for t in range(threads)]
    else:  # few outer rows: split the inner dimension (rows along a leading dim)
        cuts = [inner * t // threads for t in range(threads + 1)]
        blocks = [(0, outer, cuts[t], cuts[t + 1]) for t in range(threads)]
    pool = _executor(threads - 1)
    futures = [pool.submit(call, *block) for block in blocks[1:]]
    statuses = [call(*blocks[0])] + [f.result() for f in futures]
    for status in statuses:
        if status:
            return status
    return 0
