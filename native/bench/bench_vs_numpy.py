"""ns/element of kwker's stable sort against torch.sort(stable=True),
np.argsort and np.sort on the same data, same run, one thread, min of
repeats (wall time).  Each case holds about 1M elements (rows = 1M / n).

    PYTHONPATH=. python native/bench/bench_vs_numpy.py [filter]

idx: values + int64 indices (torch.sort; numpy: np.argsort, which gives
indices only).  val: values only (kwker msort path; numpy: np.sort; torch:
torch.sort's values, it has no values-only kernel).  numpy has no bfloat16:
its column for bf16 is the float32 figure on the same values (the issue's
bar: 16-bit floats at least as fast per element as float32).
"""
import sys
import time

import numpy as np
import torch

from kwker._native import ORDER_STABLE
from kwker.ops import sorting

torch.set_num_threads(1)
torch.manual_seed(0)
FILTER = sys.argv[1] if len(sys.argv) > 1 else ""
TOTAL = 1_000_000


def data(kind, rows, n):
    if kind == "f32":
        return (torch.rand(rows, n, dtype=torch.float64) - 0.5).float()
    if kind == "bf16":
        return (torch.rand(rows, n) * 8 - 4).bfloat16()
    if kind == "f64":
        return torch.rand(rows, n, dtype=torch.float64) - 0.5
    if kind == "i64small":  # token ids: range fits 32 bits
        return torch.randint(0, 50257, (rows, n), dtype=torch.int64)
    if kind == "i64full":
        return torch.randint(-2**63, 2**63 - 1, (rows, n), dtype=torch.int64)
    if kind == "u8":
        return torch.randint(0, 256, (rows, n), dtype=torch.uint8)
    raise ValueError(kind)


def best(fn, reps):
    t = 1e9
    for _ in range(reps):
        s = time.perf_counter()
        fn()
        t = min(t, time.perf_counter() - s)
    return t


def main():
    print(f"{'case':<20} | {'idx: torch':>10} {'numpy':>7} {'kwker':>7} {'xtorch':>7} {'xnumpy':>7} "
          f"| {'val: numpy':>10} {'kwker':>7} {'xnumpy':>7}   (ns/elem; x = speed-up)")
    for kind in ("f32", "bf16", "f64", "i64small", "i64full", "u8"):
        for n in (8, 64, 1000, 4096, 1_000_000):
            rows = max(1, TOTAL // n)
            name = f"{kind} {rows}x{n}"
            if FILTER not in name:
                continue
            x = data(kind, rows, n)
            xn = (x.float() if kind == "bf16" else x).numpy()
            reps = 5
            e = 1e9 / (rows * n)
            tt = best(lambda: torch.sort(x, dim=-1, stable=True), 3) * e
            tn = best(lambda: np.argsort(xn, axis=-1), reps) * e
            tk = best(lambda: sorting.sort(x, 1, False, ORDER_STABLE), reps) * e
            vn = best(lambda: np.sort(xn, axis=-1), reps) * e
            vk = best(lambda: sorting.sort(x, 1, False, ORDER_STABLE, want_indices=False), reps) * e
            v, i = torch.sort(x, dim=-1, stable=True)
            v2, i2 = sorting.sort(x, 1, False, ORDER_STABLE)
            v3, _ = sorting.sort(x, 1, False, ORDER_STABLE, want_indices=False)
            ok = torch.equal(i, i2) and torch.equal(v, v2) and torch.equal(v, v3)
            print(f"{name:<20} | {tt:10.2f} {tn:7.2f} {tk:7.2f} {tt / tk:6.1f}x {tn / tk:6.2f}x "
                  f"| {vn:10.2f} {vk:7.2f} {vn / vk:6.2f}x{'' if ok else '  MISMATCH'}", flush=True)


if __name__ == "__main__":
    main()
