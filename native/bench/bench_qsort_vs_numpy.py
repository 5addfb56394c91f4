"""ns/element (thread CPU time, one thread, min of repeats, one process) of
float32 sorts of one row of randn values: kwker's native sort on the avx2
and avx512 targets, torch and numpy, with indices (kwker ORDER_TORCH as
torch.sort gives, and ORDER_STABLE; torch.sort; np.argsort) and values only
(kwker msort; torch.msort; np.sort).

    PYTHONPATH=. python native/bench/bench_qsort_vs_numpy.py [max_n] [--no-torch]
"""
import sys
import time

import numpy as np
import torch

from kwker import _native
from kwker._native import ORDER_STABLE, ORDER_TORCH
from kwker.ops import sorting

torch.set_num_threads(1)
MAX_N = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 16_000_000
NO_TORCH = "--no-torch" in sys.argv
SIZES = [1000, 2000, 4000, 10_000, 30_000, 100_000, 300_000, 1_000_000, 4_000_000, 16_000_000]


def best(fn, n, budget=0.4):
    t, spent, reps = 1e9, 0.0, 0
    while reps < 3 or (spent < budget and reps < 200):
        s = time.thread_time()
        fn()
        d = time.thread_time() - s
        t, spent, reps = min(t, d), spent + d, reps + 1
        if n >= 4_000_000 and reps >= 2:
            break
    return t * 1e9 / n


def kw(target, x, order, values_only):
    _native.set_target(target)
    if values_only:
        return lambda: sorting.sort(x, 0, False, order, want_indices=False)
    return lambda: sorting.sort(x, 0, False, order)


cols = ["idx torch-order avx2", "idx torch-order avx512", "idx stable avx2", "idx stable avx512",
        "torch.sort", "np.argsort", "values avx2", "values avx512", "torch.msort", "np.sort"]
print("n".rjust(9) + "".join(c.rjust(len(c) + 2) for c in cols) + "   (ns/element)")
gen = torch.Generator().manual_seed(0)
for n in SIZES:
    if n > MAX_N:
        break
    x = torch.randn(n, generator=gen)
    a = x.numpy()
    row = []
    for order in (ORDER_TORCH, ORDER_STABLE):
        for target in ("avx2", "avx512"):
            _native.set_target(target)
            row.append(best(kw(target, x, order, False), n))
    row.append(float("nan") if NO_TORCH or n > 4_000_000 else best(lambda: torch.sort(x), n))
    row.append(best(lambda: np.argsort(a), n))
    for target in ("avx2", "avx512"):
        _native.set_target(target)
        row.append(best(kw(target, x, ORDER_TORCH, True), n))
    row.append(float("nan") if NO_TORCH or n > 4_000_000 else best(lambda: torch.msort(x), n))
    row.append(best(lambda: np.sort(a), n))
    # the avx512 results equal the avx2 ones and torch's
    _native.set_target("avx512")
    v5, i5 = sorting.sort(x, 0, False, ORDER_TORCH)
    _native.set_target("avx2")
    v2, i2 = sorting.sort(x, 0, False, ORDER_TORCH)
    ok = torch.equal(i5, i2) and torch.equal(v5, v2)
    ok = ok and torch.equal(sorting.sort(x, 0, False, ORDER_TORCH, want_indices=False)[0], v2)
    _native.set_target("avx512")
    ok = ok and torch.equal(sorting.sort(x, 0, False, ORDER_TORCH, want_indices=False)[0], v2)
    print(str(n).rjust(9) + "".join(f"{v:.2f}".rjust(len(c) + 2) for v, c in zip(row, cols))
          + ("" if ok else "   MISMATCH"), flush=True)
_native.set_target("auto")
