"""Same-run speed-ups over torch for many short rows (the MoE / batch case):
torch.sort and torch.topk over 4096 float32 rows of n elements, one thread,
Kwker installed (size rules as shipped) against torch's own op.

    PYTHONPATH=$PWD python native/bench/sweep_short_rows.py [--rows 4096] [--reps 15]

Each cell: median over `reps` rounds of the best of 5 calls, torch and Kwker
alternating; results checked bit for bit first.  Inputs are randn (tie-free
in practice: the eight-rows kernel's best case; tied rows are redone)."""
import argparse
import time

import torch

import kwker


def best_of(fn, calls=5):
    best = float("inf")
    for _ in range(calls):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def speedup(fn, reps):
    """(torch us, kwker us): medians of alternating rounds."""
    t_torch, t_kwker = [], []
    for _ in range(reps):
        t_torch.append(best_of(fn))
        with kwker.installed():
            t_kwker.append(best_of(fn))
    t_torch.sort()
    t_kwker.sort()
    return t_torch[reps // 2] * 1e6, t_kwker[reps // 2] * 1e6


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, default=4096)
    p.add_argument("--reps", type=int, default=15)
    a = p.parse_args()
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(0)
    print(f"{a.rows} float32 rows of n; torch us / kwker us = speed-up")
    for n in (2, 4, 7, 8, 16, 32, 64, 128):
        x = torch.randn(a.rows, n, generator=gen)
        cells = []
        calls = []
        if n <= 16:
            calls.append(("sort", lambda: torch.sort(x)))
        for k in (1, 2, 4, 8):
            if k <= n:
                calls.append((f"topk k={k}", lambda k=k: torch.topk(x, k)))
        for name, fn in calls:
            ref = fn()
            with kwker.installed():
                got = fn()
            assert all(torch.equal(r, g) for r, g in zip(ref, got)), (n, name)
            tt, tk = speedup(fn, a.reps)
            cells.append(f"{name}: {tt:7.1f}/{tk:6.1f} = {tt / tk:5.2f}x")
        print(f"n={n:3d}  " + "   ".join(cells), flush=True)


if __name__ == "__main__":
    main()
