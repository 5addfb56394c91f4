"""ns/element of torch.sort and kwker's native sort on the same tensors, one
thread, min of several runs (thread CPU time is not used: torch's own work
is all on this thread with set_num_threads(1)).

    PYTHONPATH=. python native/bench/bench_vs_torch.py [filter]
"""
import sys
import time

import torch

from kwker._native import ORDER_STABLE, ORDER_TORCH
from kwker.ops import sorting

torch.set_num_threads(1)
torch.manual_seed(0)
FILTER = sys.argv[1] if len(sys.argv) > 1 else ""


def data(kind, rows, n):
    if kind == "f32":   # like native/bench/bench_sort.c: uniform in [-0.5, 0.5)
        return (torch.rand(rows, n, dtype=torch.float64) - 0.5).float()
    if kind == "bf16r":  # logits rounded to bfloat16, held as float32
        return (torch.randn(rows, n) * 2.5).bfloat16().float()
    if kind == "bf16":
        return (torch.randn(rows, n) * 2.5).bfloat16()
    if kind == "f64":
        return torch.randn(rows, n, dtype=torch.float64)
    if kind == "i64":
        return torch.randint(-2**63, 2**63 - 1, (rows, n), dtype=torch.int64)
    raise ValueError(kind)


CASES = [
    ("f32 1x1M", "f32", 1, 1000000), ("f32 64x1000", "f32", 64, 1000),
    ("f32 4096x256", "f32", 4096, 256), ("bf16r 8x128256", "bf16r", 8, 128256),
    ("bf16r 4096x256", "bf16r", 4096, 256), ("bf16 8x128256", "bf16", 8, 128256),
    ("f64 64x1000", "f64", 64, 1000), ("i64 64x1000", "i64", 64, 1000),
    ("f32 4096x8", "f32", 4096, 8), ("f32 4096x16", "f32", 4096, 16),
    ("f32 4096x32", "f32", 4096, 32), ("f32 4096x64", "f32", 4096, 64),
]


def best(fn, reps):
    t = 1e9
    for _ in range(reps):
        s = time.perf_counter()
        fn()
        t = min(t, time.perf_counter() - s)
    return t


print(f"{'case':<18} {'order':<7} {'torch':>8} {'kwker':>8} {'speedup':>8}   (ns/elem)")
for name, kind, rows, n in CASES:
    if FILTER not in name:
        continue
    x = data(kind, rows, n)
    reps = 3 if rows * n >= 500000 else 7
    for stable, order in ((False, ORDER_TORCH), (True, ORDER_STABLE)):
        tt = best(lambda: torch.sort(x, dim=-1, stable=stable), reps)
        tk = best(lambda: sorting.sort(x, 1, False, order), reps)
        v, i = torch.sort(x, dim=-1, stable=stable)
        v2, i2 = sorting.sort(x, 1, False, order)
        ok = torch.equal(i, i2)
        e = 1e9 / (rows * n)
        print(f"{name:<18} {'torch' if order == ORDER_TORCH else 'stable':<7} {tt * e:8.1f} {tk * e:8.1f} "
              f"{tt / tk:7.1f}x{'' if ok else '  MISMATCH'}")
