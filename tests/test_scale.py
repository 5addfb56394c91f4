"""Scale and memory: 0-dim, empty, expanded (stride-0) and storage-offset
inputs for every op; no memory growth across 10^5 calls of each op; a failed
native workspace allocation raises torch's exception type (RuntimeError, and
also a MemoryError) instead of crashing; and, opt-in with KWKER_HUGE=1, rows
and offsets beyond 2^31 elements.

The huge tests need about 8 GiB and several minutes each; every one runs in
a subprocess of its own and prints its time and peak RSS (pytest -s shows
them).
"""
import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from kwker_testing import ORIG, compare, make_values

HUGE = os.environ.get("KWKER_HUGE") == "1"
huge = pytest.mark.skipif(not HUGE, reason="set KWKER_HUGE=1: rows of over 2^31 elements "
                          "(about 8 GiB and minutes per test)")


def _run_script(body, timeout=600, env=None):
    """Run `body` in a fresh Python with Kwker importable; it reports by
    printing one JSON object as its last line, which is returned."""
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(body)], capture_output=True,
                          text=True, timeout=timeout, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ------------------------------------------------------ shapes and layouts

def test_kthvalue_zero_dim_and_empty(kw):
    s = torch.tensor(2.5)
    compare("kthvalue", s, 1, fast="dim")
    compare("kthvalue", s, 1, 0, True, fast="dim")
    compare("kthvalue", s, 2, fast="dim")  # out of range: torch's error
    for shape in [(0,), (3, 0), (0, 4), (2, 0, 3)]:
        e = torch.empty(shape)
        for dim in range(-len(shape), len(shape)):
            compare("kthvalue", e, 1, dim, fast="dim" if e.shape[dim] == 0 else "nonempty")


def test_large_outputs_advised_and_exact(kw, gen):
    """Outputs of 4 MiB and more get huge-page advice before the kernel
    writes them (kwker.ops._call.advise_fresh): the results stay torch's,
    bit for bit, for each op that advises (sort of many short rows, topk
    with a large k, unique's inverse, median_pool2d), and the advice itself
    is asked for on Linux and changes no byte."""
    from kwker import _native
    from kwker.ops._call import HUGE_OUTPUT_BYTES, advise_fresh
    x = make_values("ties", (150_000, 7), torch.float32, gen)  # 8.4 MB of int64 indices
    compare("sort", x, -1)
    compare("sort", x, 0, True)
    compare("argsort", x, dim=-1, descending=True, stable=True)
    compare("topk", make_values("ties", (700, 1000), torch.float32, gen), 900)
    compare("unique", make_values("ties", (600_000,), torch.int64, gen), return_inverse=True)
    t = torch.arange(HUGE_OUTPUT_BYTES // 4 + 1_000_000, dtype=torch.int32)
    before = t.clone()
    got = _native.lib.kwk_advise_fresh_output_addr(t.data_ptr(), t.numel() * 4)
    if sys.platform.startswith("linux"):
        assert got >= 2 << 20
    assert got <= t.numel() * 4 and torch.equal(t, before)
    assert _native.lib.kwk_advise_fresh_output_addr(t.data_ptr(), HUGE_OUTPUT_BYTES - 1) == 0
    advise_fresh(t, None)  # None entries skipped
    assert torch.equal(t, before)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int16], ids=str)
def test_expanded_inputs_every_op(kw, gen, dtype):
    """Stride-0 dims along and across the op's dim (median's own stride-0
    case, where torch is wrong, is test_exactness.test_median_expanded)."""
    col = make_values("ties", (6, 1), dtype, gen)
    row = make_values("ties", (1, 9), dtype, gen)
    for x in (col.expand(6, 9), row.expand(6, 9)):
        for dim in (0, 1):
            compare("sort", x, dim)
            compare("argsort", x, dim, True)
            compare("topk", x, 3, dim)
            compare("topk", x, 2, dim, False, False)
            compare("kthvalue", x, 2, dim)
            if x.stride(dim) != 0:
                compare("median", x, dim)
                compare("nanmedian", x, dim, True)
        compare("msort", x)
        compare("median", x)


def test_storage_offsets_every_op(kw, gen):
    """Views that start inside their storage (narrow, select, as_strided
    with an offset), for every op."""
    buf = make_values("nan", (5000,), torch.float32, gen)
    views = [buf[7:7 + 40 * 30].view(40, 30), buf.as_strided((20, 25), (1, 21), 333),
             buf.view(50, 100)[3], buf.view(50, 100)[:, 17]]
    for x in views:
        assert x.storage_offset() > 0
        for dim in range(x.ndim):
            compare("sort", x, dim)
            compare("argsort", x, dim)
            compare("topk", x, 4, dim)
            compare("kthvalue", x, 3, dim)
            compare("median", x, dim)
            compare("nanmedian", x, dim)
        compare("msort", x)
        compare("median", x)
        compare("nanmedian", x)


# ----------------------------------------------------------------- memory

_LEAK_SCRIPT = """
    import json, os, torch, kwker
    from kwker import support
    # the kernels at every size (as tests/conftest.py does)
    for op in list(support.SIZE_RULES):
        support.SIZE_RULES[op] = support.SizeRule(0)
        support.MIN_FAST_NUMEL[op] = 0
    assert kwker.install()
    page = os.sysconf("SC_PAGE_SIZE")

    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * page

    g = torch.Generator().manual_seed(0)
    # ties, NaN and -0.0: the torch-order emulation paths allocate too
    x = (torch.randint(-3, 4, (4, 48), generator=g).float() / 2)
    x[0, ::5] = float("nan")
    x[1, ::7] = -0.0
    calls = {
        "sort": lambda: torch.sort(x, 1), "argsort": lambda: torch.argsort(x, 0, True),
        "msort": lambda: torch.msort(x), "topk": lambda: torch.topk(x, 5),
        "kthvalue": lambda: torch.kthvalue(x, 9), "median": lambda: torch.median(x, 1),
        "median_all": lambda: torch.median(x), "nanmedian": lambda: torch.nanmedian(x, 0),
        "control_leaking": lambda: kept.append(bytearray(100)) or torch.sort(x, 1),
    }
    kept = []
    n = int(os.environ["KWKER_LEAK_CALLS"])
    report = {}
    for name, call in calls.items():
        for _ in range(n // 10):  # warm up: allocator pools, caches
            call()
        kwker.reset_stats()
        before = rss()
        for _ in range(n):
            call()
        report[name] = rss() - before
        op = {"median_all": "median", "control_leaking": "sort"}.get(name, name)
        assert kwker.stats()[op]["fast"] == n, kwker.stats()
    print(json.dumps(report))
"""

# Calls per op: 10^4 in the default suite (a few seconds); the
# reliability job runs KWKER_LEAK_CALLS=100000 (README "Reliability jobs").
LEAK_CALLS = int(os.environ.get("KWKER_LEAK_CALLS", "10000"))
# RSS moves in pages and glibc's arenas may settle a little after warm-up; a
# leak of 32 bytes a call would show as 320 KB over 10^4 calls
LEAK_BOUND = 256 << 10


def test_no_memory_growth_over_many_calls():
    env = dict(os.environ, KWKER_LEAK_CALLS=str(LEAK_CALLS))
    env.pop("KWKER_INSTALL", None)
    growth = _run_script(_LEAK_SCRIPT, timeout=900, env=env)
    print(f"\nRSS growth over {LEAK_CALLS} calls (bytes): {growth}")
    # the probe sees a leak: the control keeps 100 bytes a call
    assert growth.pop("control_leaking") > LEAK_BOUND
    assert set(growth) == {"sort", "argsort", "msort", "topk", "kthvalue", "median",
                           "median_all", "nanmedian"}
    for name, grew in growth.items():
        assert grew < LEAK_BOUND, f"{name}: RSS grew {grew} bytes over {LEAK_CALLS} calls"


_NOMEM_SCRIPT = """
    import json, os, resource, torch, kwker
    assert kwker.install()
    x = torch.randint(-100, 100, (1 << 24,), dtype=torch.int16)
    ref = torch.sort(x[:1000])  # warm up everything before the limit
    # room for the outputs torch allocates (values 32 MiB, indices 128 MiB)
    # and a margin, not for the native workspace (16 bytes an element: 256 MiB)
    page = os.sysconf("SC_PAGE_SIZE")
    with open("/proc/self/statm") as f:
        vm = int(f.read().split()[0]) * page
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (vm + (260 << 20), hard))
    outcome = {}
    kwker.reset_stats()
    try:
        torch.sort(x)
        outcome["kwker"] = None
    except Exception as exc:
        outcome["kwker"] = [type(exc).__name__, isinstance(exc, RuntimeError),
                            isinstance(exc, MemoryError), str(exc)]
    outcome["kwker_fast"] = kwker.stats().get("sort", {}).get("fast", 0)
    kwker.uninstall()
    try:
        torch.sort(x)
        outcome["torch"] = None
    except Exception as exc:
        outcome["torch"] = [type(exc).__name__, isinstance(exc, RuntimeError), str(exc)]
    # the process is still sound: lift the limit and sort again
    resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    want = torch.sort(x)  # torch's own (not installed here)
    kwker.install()
    got = torch.sort(x)
    outcome["after"] = bool(torch.equal(got.values, want.values)
                            and torch.equal(got.indices, want.indices))
    print(json.dumps(outcome))
"""


def test_workspace_allocation_failure_raises_like_torch():
    """Under an address-space limit that leaves room for the outputs but not
    for the native workspace, the fast path raises (no crash) an exception
    of the type torch raises when its allocator fails (RuntimeError), which
    is also a MemoryError; torch itself fails the same call with its
    RuntimeError; lifting the limit, the next call succeeds."""
    env = dict(os.environ)
    env.pop("KWKER_INSTALL", None)
    out = _run_script(_NOMEM_SCRIPT, timeout=300, env=env)
    assert out["kwker_fast"] == 1, out
    name, is_runtime, is_memory, message = out["kwker"]
    assert name == "NativeMemoryError" and is_runtime and is_memory, out
    assert "can't allocate memory" in message and "kwker sort" in message, message
    assert out["torch"] is not None and out["torch"][1], out  # torch: RuntimeError
    assert "can't allocate memory" in out["torch"][2], out
    assert out["after"], out


# ------------------------------------------------------------------- huge

def _huge_report(name, out):
    print(f"\n{name}: {json.dumps(out)}")


_TOPK_HUGE = """
    import json, resource, time, torch, kwker
    n = (1 << 31) + (1 << 20) + 3  # one row past 2^31: index arithmetic in 64 bits
    g = torch.Generator().manual_seed(0)
    x = torch.empty(n, dtype=torch.int8)
    step = 1 << 26
    for s in range(0, n, step):  # values in [-100, 99], made in slices
        e = min(n, s + step)
        x[s:e] = torch.randint(-100, 100, (e - s,), generator=g, dtype=torch.int8)
    # unique extremes past 2^31: the top and bottom 20 are determined
    where = torch.randint(1 << 31, n, (40,), generator=g).unique()[:40]
    assert len(where) >= 40
    x[where[:20]] = torch.arange(101, 121, dtype=torch.int8)
    x[where[20:40]] = torch.arange(-121, -101, dtype=torch.int8)
    where_low = torch.randint(0, 1 << 20, (1,), generator=g)
    x[where_low] = 127  # and the largest one near the start
    out = {}
    assert kwker.install()
    for largest in (True, False):
        kwker.reset_stats()
        t0 = time.perf_counter()
        got = torch.topk(x, 16, largest=largest)
        out[f"kwker_s_{largest}"] = round(time.perf_counter() - t0, 2)
        assert kwker.stats()["topk"]["fast"] == 1
        kwker.uninstall()
        # torch's topk would need 16 bytes an element (32 GiB): a chunked
        # reference, exact here because the top 16 are unique
        t0 = time.perf_counter()
        cand_v, cand_i = [], []
        for s in range(0, n, step):
            r = torch.topk(x[s:s + step], 16, largest=largest)
            cand_v.append(r.values)
            cand_i.append(r.indices + s)
        v, i = torch.cat(cand_v), torch.cat(cand_i)
        best = torch.topk(v.float(), 16, largest=largest)  # float: unique values, exact
        ref_v, ref_i = v[best.indices], i[best.indices]
        out[f"torch_chunked_s_{largest}"] = round(time.perf_counter() - t0, 2)
        assert torch.equal(got.values, ref_v), (got.values, ref_v)
        assert torch.equal(got.indices, ref_i), (got.indices, ref_i)
        assert int(got.indices.max()) > (1 << 31)
        kwker.install()
    out["peak_rss_gib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2)
    print(json.dumps(out))
"""


@huge
def test_huge_topk_row_past_2_31():
    out = _run_script(_TOPK_HUGE, timeout=1800)
    _huge_report("topk over 2^31+2^20+3 int8", out)


_MEDIAN_ALL_HUGE = """
    import json, resource, time, torch, kwker
    n = (1 << 31) + 5
    g = torch.Generator().manual_seed(1)
    x = torch.empty(n, dtype=torch.int8)
    step = 1 << 26
    for s in range(0, n, step):  # skewed: the median is not the middle value
        e = min(n, s + step)
        x[s:e] = (torch.randint(0, 120, (e - s,), generator=g) - 
                  torch.randint(0, 60, (e - s,), generator=g)).to(torch.int8)
    out = {}
    assert kwker.install()
    for op in ("median", "nanmedian"):
        kwker.reset_stats()
        t0 = time.perf_counter()
        got = getattr(torch, op)(x)
        out[f"kwker_{op}_s"] = round(time.perf_counter() - t0, 2)
        assert kwker.stats()[op]["fast"] == 1
    kwker.uninstall()
    t0 = time.perf_counter()
    ref = torch.median(x)  # torch copies x (2 GiB) and runs nth_element
    out["torch_median_s"] = round(time.perf_counter() - t0, 2)
    # an independent check of the value: the counts below and up to it
    counts = torch.zeros(256, dtype=torch.int64)
    for s in range(0, n, step):
        counts += torch.bincount(x[s:s + step].to(torch.int64) + 128, minlength=256)
    rank = (n - 1) // 2
    cum = counts.cumsum(0)
    want = int((cum > rank).nonzero()[0]) - 128
    assert int(ref) == want and int(got) == want, (int(ref), int(got), want)
    out["peak_rss_gib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2)
    print(json.dumps(out))
"""


@huge
def test_huge_median_all_past_2_31():
    out = _run_script(_MEDIAN_ALL_HUGE, timeout=1800)
    _huge_report("median()/nanmedian() over 2^31+5 int8", out)


_ROWS_HUGE = """
    import json, resource, time, torch, kwker
    from kwker import support
    rows, length = (1 << 25) + 8, 64  # 2^31 + 512 elements: row offsets past 2^31
    g = torch.Generator().manual_seed(2)
    x = torch.empty(rows, length, dtype=torch.int8)
    step = 1 << 20
    for s in range(0, rows, step):
        x[s:s + step] = torch.randint(-20, 20, (min(step, rows - s), length), generator=g,
                                      dtype=torch.int8)
    out = {}
    calls = [("kthvalue", (x, 10, 1)), ("median", (x, 1)), ("nanmedian", (x, 1)),
             ("topk", (x, 3, 1)),
             # the same rows read as columns: x.t() reduced along dim 0, each
             # column's elements (rows + 8) * 63 elements apart at the end
             ("kthvalue", (x.t(), 33, 0)), ("median", (x.t(), 0))]
    for op, args in calls:
        assert kwker.install()
        kwker.reset_stats()
        t0 = time.perf_counter()
        got = getattr(torch, op)(*args)
        name = f"{op}{'_t' if args[0].stride(0) == 1 else ''}"
        out[f"kwker_{name}_s"] = round(time.perf_counter() - t0, 2)
        assert kwker.stats()[op]["fast"] == 1, (op, kwker.stats())
        kwker.uninstall()
        # torch on slices of rows (rows are independent; whole, torch's
        # kthvalue/median would allocate int64 indices for every element)
        t0 = time.perf_counter()
        src, rest = args[0], args[1:]
        other = 1 - rest[-1]  # the dim that is not reduced: outputs run along it
        for s in range(0, src.shape[other], step):
            m = min(step, src.shape[other] - s)
            ref = getattr(torch, op)(src.narrow(other, s, m), *rest)
            for r, gt in zip(ref, got):
                assert torch.equal(r, gt[s:s + m]), (op, s)
        out[f"torch_chunked_{name}_s"] = round(time.perf_counter() - t0, 2)
    out["peak_rss_gib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2)
    print(json.dumps(out))
"""


@huge
def test_huge_rows_offsets_past_2_31():
    """2^25 rows of 64 int8 (2^31 + 512 elements): every op's per-row
    offsets pass 2^31, along rows and along columns (strided reads)."""
    out = _run_script(_ROWS_HUGE, timeout=3000)
    _huge_report("rows of 64 over 2^31+512 int8", out)
