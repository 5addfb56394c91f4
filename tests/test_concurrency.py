"""Threads: every patched op called from 8 Python threads at once, on inputs
shared by all threads and on inputs of each thread's own, gives torch's
results; the native calls release the GIL (another thread runs while one
sorts); install()/uninstall() racing with calls of every op never gives a
wrong result or an exception.

(test_patching.py has the first, smaller versions for sort/topk/median.)
"""
import threading
import time

import torch

import kwker
from kwker import _native
from kwker.ops import sorting
from kwker_testing import ORIG, ORIG_METHOD, assert_same, fast_count, make_values

THREADS = 8

# (op, args) for every op with a kernel; results depend on ties, NaN and
# -0.0, so the inputs below have all of them
CALLS = [
    ("sort", (1,)), ("sort", (0, True)), ("argsort", (1,)), ("msort", ()),
    ("topk", (5,)), ("topk", (9, 0, False)), ("kthvalue", (7, 1)), ("median", (1,)),
    ("median", ()), ("nanmedian", (0,)), ("nanmedian", ()),
]


def _inputs(gen, n):
    kinds = ("ties", "nan", "bf16ties", "random")
    return [make_values(kinds[j % len(kinds)], (24, 160), torch.float32, gen) for j in range(n)]


def _references(xs):
    return [[ORIG[op](x, *args) for op, args in CALLS] for x in xs]


def _run_threads(work):
    errors = []
    barrier = threading.Barrier(THREADS)

    def body(t):
        try:
            barrier.wait()
            work(t)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(t,)) for t in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors[0]


def test_every_op_from_8_threads_shared_and_separate_inputs(kw, gen):
    shared = _inputs(gen, 4)
    own = _inputs(gen, THREADS)  # one per thread
    shared_refs, own_refs = _references(shared), _references(own)
    reps = 6

    def work(t):
        for rep in range(reps):
            for j, (x, refs) in enumerate(((shared[(t + rep) % 4], shared_refs[(t + rep) % 4]),
                                           (own[t], own_refs[t]))):
                for (op, args), ref in zip(CALLS, refs):
                    if (rep + j) % 2:
                        got = getattr(x, op)(*args) if op != "msort" else x.msort()
                    else:
                        got = getattr(torch, op)(x, *args)
                    assert_same(ref, got, f"thread {t} {op}{args}")

    _run_threads(work)
    # every op ran on the fast path (counters are approximate under races)
    for op in ("sort", "argsort", "msort", "topk", "kthvalue", "median", "nanmedian"):
        assert fast_count(op) > 0, op
    # inputs untouched
    for x, refs in zip(shared + own, shared_refs + own_refs):
        assert_same(refs[0], ORIG["sort"](x, 1))


def _longest_pause(call):
    """Run call() in a thread while this one ticks: (the longest gap between
    this thread's ticks during the call, the call's duration, its result)."""
    span = {}
    ticks = []

    def runner():
        span["start"] = time.perf_counter()
        span["result"] = call()
        span["end"] = time.perf_counter()

    th = threading.Thread(target=runner)
    th.start()
    while th.is_alive():
        ticks.append(time.perf_counter())
    th.join()
    start, end = span["start"], span["end"]
    stamps = [start] + [t for t in ticks if start <= t <= end] + [end]
    return max(b - a for a, b in zip(stamps, stamps[1:])), end - start, span["result"]


def test_the_gil_probe_sees_a_call_that_holds_the_gil():
    """Control: list.sort holds the GIL throughout (float compares never go
    back to the interpreter loop), and the probe shows the other thread
    stalled for most of it, so the probe can tell."""
    data = torch.randn(1 << 20, generator=torch.Generator().manual_seed(2)).tolist()
    pause, duration, _ = _longest_pause(lambda: sorted(data))
    assert duration > 0.05
    assert pause > 0.5 * duration, (pause, duration)


def test_native_sort_releases_the_gil():
    """While one thread is inside a long native sort, another keeps running
    Python code: cffi's API mode releases the GIL around the call.  The
    ticking thread's longest pause is a small part of the call."""
    x = torch.randn(1 << 21, generator=torch.Generator().manual_seed(0))
    sorting.sort(x[:1024], 0, False, _native.ORDER_TORCH)  # warm up
    pause, duration, (values, _) = _longest_pause(
        lambda: sorting.sort(x, 0, False, _native.ORDER_TORCH))
    assert torch.equal(values, ORIG["sort"](x).values)
    assert duration > 0.02, f"the sort took {duration:.3f}s: too short to tell"
    assert pause < 0.5 * duration, \
        f"the other thread paused {pause:.3f}s of a {duration:.3f}s native call"


def test_patched_call_releases_the_gil(kw):
    """The same through the patched torch.sort (fast path): Kwker's Python
    layer around the native call is short next to the call itself."""
    x = torch.randn(1 << 21, generator=torch.Generator().manual_seed(1))
    ref = ORIG["sort"](x)
    pause, duration, got = _longest_pause(lambda: torch.sort(x))
    assert_same(ref, got)
    assert fast_count("sort") == 1
    assert pause < 0.5 * duration, (pause, duration)


def test_install_uninstall_racing_with_every_op(gen):
    """install()/uninstall()/installed() in a loop while 4 threads call every
    op (functions and methods): each call is served by torch or by Kwker,
    and both give torch's result; no call raises."""
    xs = _inputs(gen, 2)
    refs = _references(xs)
    stop = threading.Event()
    errors = []
    calls = [0] * 4

    def caller(t):
        try:
            x, rs = xs[t % 2], refs[t % 2]
            while not stop.is_set():
                for (op, args), ref in zip(CALLS, rs):
                    if t >= 2 and op != "msort":
                        got = getattr(x, op)(*args)
                    else:
                        got = getattr(torch, op)(x, *args)
                    assert_same(ref, got, f"{op}{args}")
                calls[t] += 1
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)
            stop.set()

    threads = [threading.Thread(target=caller, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    try:
        deadline = time.monotonic() + 1.5
        cycles = 0
        while time.monotonic() < deadline and not stop.is_set():
            kwker.install()
            time.sleep(0.001)
            with kwker.installed(ops=["topk", "median", "kthvalue"]):
                time.sleep(0.001)
            kwker.uninstall()
            kwker.install(ops=["sort", "msort", "nanmedian"])
            kwker.uninstall()
            cycles += 1
    finally:
        stop.set()
        for th in threads:
            th.join()
        kwker.uninstall()
    assert not errors, errors[0]
    assert cycles > 10 and all(c > 0 for c in calls), (cycles, calls)
    assert torch.sort is ORIG["sort"] and torch.Tensor.median is ORIG_METHOD["median"]


def test_workspace_cache_per_thread():
    """Each thread keeps its own workspace blocks between calls (kwker.h
    kwk_release_workspace): calls of different lengths in turn, on threads
    that then exit (their blocks freed by the key's destructor), and after
    kwker.release_workspace(), all give torch's results."""
    gen = torch.Generator().manual_seed(5)
    # rows whose workspaces (16 bytes an element) are cached (< 4 MiB),
    # bigger ones first so that later calls reuse bigger blocks
    xs = [torch.randn(1, n, generator=gen) for n in (200000, 3000, 70000, 257)]
    refs = [tuple(ORIG["sort"](x, dim=1, stable=True)) for x in xs]

    def work(t):
        for round_ in range(3):
            for x, ref in zip(xs[t % 2:] + xs[:t % 2], refs[t % 2:] + refs[:t % 2]):
                assert_same(sorting.sort(x, 1, False, _native.ORDER_STABLE), ref)
            if round_ == 1:
                kwker.release_workspace()

    _run_threads(work)
    kwker.release_workspace()
    kwker.release_workspace()  # nothing kept: a no-op
    assert_same(sorting.sort(xs[0], 1, False, _native.ORDER_STABLE), refs[0])
