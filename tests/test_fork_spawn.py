"""Processes: Kwker installed in a parent keeps giving torch's results in
children made by os.fork and by DataLoader workers (fork), including after
torch's intra-op thread pool ran in the parent; a spawned child (a DataLoader
worker under spawn) gets Kwker from the KWKER_INSTALL start-up hook and gives
torch's results too.

Kwker's native calls run on the calling thread, and the Python pool that
splits large calls (kwker.ops.parallel) starts afresh in a forked child
(tests/test_parallel.py), so the pool that must survive fork is torch's.  torch's CPU
build uses GNU OpenMP, whose pool does not survive fork: a child's next
parallel region waits forever for the parent's threads.  DataLoader workers
avoid it by running torch.set_num_threads(1); the os.fork children below do
the same, except the one that shows Kwker's calls need no pool at all.
"""
import os
import signal
import sys
import time
import traceback

import pytest
import torch
from torch.utils.data import DataLoader

import kwker
from kwker_testing import ORIG, assert_same
from process_workers import CALLS, OpsDataset, collate_one, fast_calls, make_input, patched_results

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")


def _torch_results(x):
    return [ORIG[op](x, *args) for op, args in CALLS]


def _in_forked_child(check, one_thread=True, timeout=60.0):
    """Run check() in a child made by os.fork; its exit status says whether
    it passed (its traceback goes to stderr).  A child still running after
    `timeout` seconds is killed and reported as hung."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: never return into pytest
        code = 1
        try:
            if one_thread:
                torch.set_num_threads(1)  # as DataLoader workers do
            check()
            code = 0
        except BaseException:  # noqa: BLE001
            traceback.print_exc()
        finally:
            os._exit(code)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.02)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    raise AssertionError(f"the forked child hung for {timeout}s")


def _raw(results):
    """Results as bytes through numpy (no torch kernel runs: the comparison
    works even where torch's own pool is unusable)."""
    out = []
    for r in results:
        for t in (r if isinstance(r, tuple) else (r,)):
            out.append((t.dtype, tuple(t.shape), t.numpy().tobytes()))
    return out


def test_os_fork_after_install(kw):
    xs = [make_input(s) for s in range(3)]
    refs = [_torch_results(x) for x in xs]
    for x, ref in zip(xs, refs):  # the parent used the library before forking
        assert_same(ref, patched_results(x))

    def child():
        assert kwker.is_installed()
        kwker.reset_stats()
        for x, ref in zip(xs, refs):
            assert_same(ref, patched_results(x))
        assert fast_calls() == len(xs) * len(CALLS), kwker.stats()

    assert _in_forked_child(child) == 0


def test_fork_after_torch_thread_pool_ran(kw):
    """torch's intra-op pool runs in the parent (2 threads, a parallel sort),
    then the process forks.  Kwker's calls in the child run on the calling
    thread: exact, and they need no pool (the child keeps 2 threads and
    compares without torch kernels).  A child that sets 1 thread, as
    DataLoader workers do, can use torch's own ops as well."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        big = torch.randn(64, 4096, generator=torch.Generator().manual_seed(5))
        ORIG["sort"](big, 1)  # runs on torch's pool
        ref_big = _torch_results(big)
        assert_same(ref_big, patched_results(big))
        want = _raw(ref_big)

        def kwker_only():
            assert _raw(patched_results(big)) == want

        def with_torch():
            assert_same(ref_big, patched_results(big))
            assert_same(ref_big, _torch_results(big))

        assert _in_forked_child(kwker_only, one_thread=False) == 0
        assert _in_forked_child(with_torch) == 0
    finally:
        torch.set_num_threads(before)


def _check_loader_items(loader):
    pids = set()
    for i, item in enumerate(loader):
        assert item["installed"], "Kwker is not installed in the worker"
        assert item["fast"] == len(CALLS), item["fast"]
        assert_same(_torch_results(make_input(i)), item["results"], f"item {i}")
        pids.add(item["pid"])
    assert os.getpid() not in pids and len(pids) >= 1, pids


def test_dataloader_fork_workers(kw):
    """Forked workers inherit the installed patches (and run with one torch
    thread, as DataLoader sets)."""
    loader = DataLoader(OpsDataset(), batch_size=1, num_workers=2,
                        multiprocessing_context="fork", collate_fn=collate_one)
    _check_loader_items(loader)


def test_dataloader_spawn_worker_with_startup_hook(monkeypatch):
    """A spawned worker starts a new interpreter: KWKER_INSTALL=1, inherited
    from the parent's environment, activates the start-up hook there, which
    installs Kwker once torch is imported.  (One worker: each spawn costs a
    torch import.)"""
    monkeypatch.setenv("KWKER_INSTALL", "1")
    loader = DataLoader(OpsDataset(), batch_size=1, num_workers=1,
                        multiprocessing_context="spawn", collate_fn=collate_one)
    _check_loader_items(loader)
