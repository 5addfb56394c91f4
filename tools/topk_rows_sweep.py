"""topk over many short rows under install()'s defaults against torch:

    python tools/topk_rows_sweep.py [--all]

dtypes int64 / float64 / bfloat16 / float32 / int32, shapes 4096x8,
4096x16, 1024x64, rows sorted, reversed, of values 0..15 ("small") or 0..3
("tiny"), bf16-rounded normals, random; k 1, 2, 4; sorted True and False:
540 calls, each cycling through 4 inputs of its kind (one repeated input is
learnt by the branch predictors), min of 5, one thread.  Prints the calls
below 1x (--all: every call), then how many fall in each band.  The sweep
behind topk's probe of short rows (select_kernels.h tk_probe_prefers_torch,
reason torch_rows) and its README figures."""
import sys
import time

import torch

import kwker

torch.set_num_threads(1)
KINDS = ("sorted", "rev", "small", "tiny", "bf16", "rand")
DTYPES = (torch.int64, torch.float64, torch.bfloat16, torch.float32, torch.int32)
SHAPES = ((4096, 8), (4096, 16), (1024, 64))


def make(kind, dtype, rows, cols, seed):
    g = torch.Generator().manual_seed(seed)
    if kind == "sorted":
        x = torch.randn(rows, cols, generator=g).sort(-1).values
    elif kind == "rev":
        x = torch.randn(rows, cols, generator=g).sort(-1, descending=True).values
    elif kind == "small":
        x = torch.randint(0, 16, (rows, cols), generator=g).float()
    elif kind == "tiny":
        x = torch.randint(0, 4, (rows, cols), generator=g).float()
    elif kind == "bf16":
        x = torch.randn(rows, cols, generator=g).bfloat16().float()
    else:
        x = torch.randn(rows, cols, generator=g) * 100
    return x.to(dtype)


def best_us(f, xs, repeats=5):
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        for x in xs:
            f(x)
        best = min(best, time.perf_counter() - t)
    return best / len(xs) * 1e6


def main():
    show_all = "--all" in sys.argv[1:]
    ratios = []
    for dtype in DTYPES:
        for rows, cols in SHAPES:
            for kind in KINDS:
                xs = [make(kind, dtype, rows, cols, s) for s in range(4)]
                for k in (1, 2, 4):
                    for sorted_ in (True, False):
                        def call(x):
                            return torch.topk(x, k, sorted=sorted_)
                        t = best_us(call, xs)
                        with kwker.installed():
                            q = best_us(call, xs)
                        ratio = t / q
                        ratios.append(ratio)
                        if show_all or ratio < 1.0:
                            print(f"{str(dtype)[6:]:9s} {rows}x{cols:<3d} {kind:6s} k={k} "
                                  f"sorted={sorted_!s:5s} torch {t:8.1f} us kwker {q:8.1f} us "
                                  f"{ratio:5.2f}x", flush=True)
    bands = ((0.5, "<0.5x"), (0.7, "0.5-0.7x"), (0.9, "0.7-0.9x"), (1.0, "0.9-1.0x"),
             (float("inf"), ">=1x"))
    counts = [sum(1 for r in ratios if lo <= r < hi)
              for lo, hi in zip((0.0,) + tuple(b for b, _ in bands[:-1]), (b for b, _ in bands))]
    print(f"{len(ratios)} calls: " + ", ".join(f"{name} {c}" for (_, name), c in zip(bands, counts)))


if __name__ == "__main__":
    main()
