"""Rows split over threads (kwker.ops.parallel): every op gives torch's
exact result whether the outer or the inner dimension is split, torch's
thread setting is honoured, and a forked child gets a working pool."""
import os
import sys

import pytest
import torch

from kwker.ops import parallel
from kwker_testing import compare, make_values


@pytest.fixture
def split_everything(monkeypatch):
    """Split any call with two or more rows, on three threads."""
    monkeypatch.setattr(parallel, "MIN_WORK_PER_THREAD", 1)
    monkeypatch.setattr(parallel, "SPLIT_MIN", 2)
    before = torch.get_num_threads()
    torch.set_num_threads(3)
    yield
    torch.set_num_threads(before)


def _calls(x, dim):
    q = torch.tensor([0.1, 0.5, 0.9], dtype=x.dtype) if x.dtype in (torch.float32, torch.float64) \
        else None
    calls = [("sort", (dim,), {}), ("sort", (), {"dim": dim, "descending": True, "stable": True}),
             ("argsort", (dim,), {}), ("topk", (3, dim), {}), ("topk", (2, dim, False), {}),
             ("kthvalue", (2, dim), {}), ("median", (dim,), {}), ("nanmedian", (dim,), {})]
    if q is not None:
        calls += [("quantile", (q, dim), {}), ("nanquantile", (0.3, dim), {})]
    return calls


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bfloat16], ids=str)
def test_split_rows_exact(kw, gen, split_everything, dtype):
    # (shape, dim): many outer rows; one outer row (the inner dim is split);
    # fewer outer rows than threads; a middle dim
    for shape, dim in [((7, 50), -1), ((50, 7), 0), ((2, 30, 5), 1), ((4, 6, 9), 1),
                       ((1, 40, 13), 1)]:
        for kind in ("random", "ties", "nan"):
            x = make_values(kind, shape, dtype, gen)
            for op, args, kwargs in _calls(x, dim):
                parallel._reset_after_fork()
                # quantile defers rows of mixed NaN payloads to torch
                fast = None if (kind == "nan" and "quantile" in op) else True
                compare(op, x, *args, fast=fast, **kwargs)
                assert parallel._pool is not None, (op, shape)  # the call was split


def test_one_thread_is_never_split(kw, gen, monkeypatch):
    monkeypatch.setattr(parallel, "MIN_WORK_PER_THREAD", 1)
    monkeypatch.setattr(parallel, "SPLIT_MIN", 2)
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        parallel._reset_after_fork()
        compare("sort", make_values("random", (64, 64), torch.float32, gen))
        assert parallel._pool is None
    finally:
        torch.set_num_threads(before)


def test_threads_for_respects_work_and_setting(monkeypatch):
    monkeypatch.setattr(parallel, "_get_num_threads", lambda: 4)
    per = parallel.MIN_WORK_PER_THREAD
    assert parallel.threads_for(per, 100) == 1          # too little work
    assert parallel.threads_for(100 * per, 1) == 1      # one row
    assert parallel.threads_for(100 * per, 3) == 3      # at most one thread a row
    assert parallel.threads_for(3 * per, 100) == 3      # at least `per` work a thread
    assert parallel.threads_for(100 * per, 100) == 4    # torch's setting
    sort_per = per // parallel.WEIGHT["sort"]
    assert parallel.threads_for(3 * sort_per, 100, "sort") == 3  # sorting weighs more
    monkeypatch.setattr(parallel, "_get_num_threads", lambda: 1)
    assert parallel.threads_for(100 * per, 100) == 1


def _run_in_forked_child(check):
    """Run check() in a forked child; its failure is the child's exit code."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            check()
            code = 0
        finally:
            sys.stdout.flush()
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_fork_after_split_calls(kw, gen, split_everything):
    """The parent's pool threads do not exist in a forked child: the child
    starts a fresh pool and its split calls still give torch's result."""
    x = make_values("random", (16, 300), torch.float32, gen)
    compare("sort", x)
    assert parallel._pool is not None

    def child():
        assert parallel._pool is None
        compare("sort", x)
        compare("topk", x, 5)
        assert parallel._pool is not None
    _run_in_forked_child(child)


def _row_splits():
    from kwker.ops._call import lib
    return lib.kwk_counter(3)  # KWK_COUNT_ROW_SPLITS


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.float64], ids=str)
def test_long_row_split_inside_native_call(kw, gen, dtype):
    """One long row with torch's thread count above 1 is sorted on several
    threads inside the native call (its loads, radix pass, buckets and
    writes) and gives torch's exact result, ties in torch's order included;
    with one thread nothing is split."""
    n = parallel.ROW_SPLIT_MIN + 12345
    before = torch.get_num_threads()
    try:
        for threads in (3, 1):
            torch.set_num_threads(threads)
            for kind in ("random", "ties", "nan" if dtype.is_floating_point else "sorted"):
                x = make_values(kind, (n,), dtype, gen)
                start = _row_splits()
                compare("sort", x, stable=True)
                compare("argsort", x, descending=True)
                compare("sort", x)  # torch's tie order (the emulation's writes split)
                before_msort = _row_splits()
                compare("msort", x)
                if threads > 1 and kind == "random":
                    # the values-only sort too: its quicksort cut into ranges
                    # by sampled pivots, the ranges sorted side by side
                    assert _row_splits() > before_msort
                if threads == 1:
                    assert _row_splits() == start
                elif kind == "random":
                    assert _row_splits() > start
    finally:
        torch.set_num_threads(before)


def test_long_unique_sorts_on_threads(kw, gen):
    """unique's sort of the values of a long input (many distinct floats:
    no hash or bitmap pass) splits as msort's does, torch's exact result."""
    x = make_values("random", (parallel.ROW_SPLIT_MIN + 999,), torch.float32, gen)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(3)
        start = _row_splits()
        compare("unique", x)
        assert _row_splits() > start
    finally:
        torch.set_num_threads(before)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_fork_after_long_row_split(kw, gen):
    """Split rows leave no threads behind: a forked child splits its own.
    (torch's own ops stay on one thread around the fork: libgomp's pool is
    not fork-safe, a child using it after the parent did can hang.)"""
    import numpy as np
    before = torch.get_num_threads()
    x = make_values("random", (parallel.ROW_SPLIT_MIN,), torch.float32, gen)
    torch.set_num_threads(1)
    from kwker import patching
    expect = patching.original("sort")(x, stable=True)
    expect = (expect[0].numpy().copy(), expect[1].numpy().copy())
    torch.set_num_threads(2)
    try:
        torch.sort(x, stable=True)  # Kwker's: split, no OpenMP

        def child():
            start = _row_splits()
            v, i = torch.sort(x, stable=True)
            assert _row_splits() > start
            assert np.array_equal(v.numpy(), expect[0]) and np.array_equal(i.numpy(), expect[1])
        _run_in_forked_child(child)
    finally:
        torch.set_num_threads(before)
