"""Torch against the forced fast path (use_fast=True) around the size
rules' switch points, interleaved in one process (min over rounds):

    python tools/rule_sweep.py OP [OP ...] [rounds=N]

prints torch/forced per case (> 1: the fast path is faster).  Each case
cycles through fresh inputs of its kind (kwker.bench.corpus.variant_count
of them): a repeated input is learnt by branch predictors."""
import sys
import timeit

import torch

import kwker
from kwker.bench.corpus import variant_count

torch.set_num_threads(1)
g = torch.Generator().manual_seed(1)


def _inputs(kind, shape, dtype):
    n = 1
    for s in shape:
        n *= s
    return [_input(kind, shape, dtype) for _ in range(variant_count(n))]


def _input(kind, shape, dtype):
    n = 1
    for s in shape:
        n *= s
    if kind == "random":
        x = torch.randn(n, generator=g) * 1000
    elif kind == "sorted":
        x = torch.sort(torch.randn(n, generator=g) * 1000).values
    elif kind == "ties":
        x = torch.randint(0, 16, (n,), generator=g).float()
    return x.to(dtype).reshape(shape)


def _cases(op):
    kinds = ("random", "sorted", "ties")
    dtypes = (torch.float32, torch.int64, torch.float64, torch.int32)
    if op in ("sort", "argsort", "msort"):
        shapes = [(128,), (256,), (512,), (768,), (1024,), (1536,), (32, 32), (8, 128), (16, 96),
                  (48, 32), (24, 64), (4, 64), (8, 64), (2, 256)]
        call = {"sort": lambda x: torch.sort(x), "argsort": lambda x: torch.argsort(x),
                "msort": lambda x: torch.msort(x.t())}[op]
        for shape in shapes:
            for dtype in dtypes:
                for kind in kinds:
                    yield f"{op} {shape} {str(dtype)[6:]} {kind}", _inputs(kind, shape, dtype), call
        for dtype in dtypes:
            yield f"argsort desc (1000,) {str(dtype)[6:]}", _inputs("random", (1000,), dtype), \
                lambda x: torch.argsort(x, descending=True)
    elif op == "topk":
        for shape in [(1024,), (2048,), (4096,), (256, 4), (512, 4), (1024, 4), (128, 8), (256, 8),
                      (512, 8), (64, 32), (128, 32), (16, 128), (32, 128)]:
            for dtype in (torch.float32, torch.int64):
                for kind in kinds:
                    yield f"topk {shape} {str(dtype)[6:]} {kind}", _inputs(kind, shape, dtype), \
                        lambda x: torch.topk(x, 2)
    elif op == "median":
        for shape in [(512,), (1024,), (2048,), (3072,), (32, 24), (64, 24), (128, 24), (16, 48),
                      (32, 48), (64, 48), (8, 96), (16, 96), (32, 96)]:
            for dtype in (torch.float32, torch.int64):
                for kind in kinds:
                    yield f"median {shape} {str(dtype)[6:]} {kind}", _inputs(kind, shape, dtype), \
                        (lambda x: torch.median(x)) if len(shape) == 1 else \
                        (lambda x: torch.median(x, -1))
    elif op == "unique":
        for n in (256, 512, 1024, 1400, 1800):
            for dtype in (torch.float32, torch.int64):
                for kind in kinds:
                    yield f"unique ({n},) {str(dtype)[6:]} {kind}", _inputs(kind, (n,), dtype), \
                        lambda x: torch.unique(x)
    elif op == "kthvalue":
        for shape in [(128,), (256,), (512,), (768,), (1024,), (2048,), (128, 8), (256, 8), (512, 8),
                      (1024, 8), (64, 24), (128, 24), (32, 64), (64, 64), (16, 127), (32, 127)]:
            for dtype in (torch.float32, torch.int64):
                for kind in kinds:
                    yield f"kthvalue {shape} {str(dtype)[6:]} {kind}", _inputs(kind, shape, dtype), \
                        lambda x: torch.kthvalue(x, max(1, x.shape[-1] // 4))


def main():
    rounds = 9
    ops = []
    for a in sys.argv[1:]:
        if a.startswith("rounds="):
            rounds = int(a.split("=")[1])
        else:
            ops.append(a)
    for op in ops:
        for name, x, call in _cases(op):
            best = [float("inf"), float("inf")]
            xs = x
            number = max(1, 200 // len(xs))
            for _ in range(rounds):
                for i, settings in enumerate((None, {"use_fast": True})):
                    if settings is not None:
                        kwker.install(**settings)
                    t = timeit.timeit(lambda: [call(v) for v in xs], number=number) / number / len(xs) * 1e6
                    kwker.uninstall()
                    best[i] = min(best[i], t)
            print(f"{name:40s} torch {best[0]:8.2f}  forced {best[1]:8.2f}  "
                  f"ratio {best[0] / best[1]:5.2f}", flush=True)


if __name__ == "__main__":
    main()
