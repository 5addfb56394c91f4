"""Per-call cost of small and mid-size calls: torch, installed with the
size rules (auto), and installed with the fast path forced (use_fast=True).
Run it with PYTHONPATH pointing at another checkout to compare versions."""
import sys
import timeit

import torch

import kwker

torch.set_num_threads(1)
g = torch.Generator().manual_seed(0)
CASES = {
    "sort64 int64": (lambda: torch.sort, (torch.randint(0, 100, (64,), generator=g),), {}),
    "median20": (lambda: torch.median, (torch.randn(20, generator=g),), {}),
    "unique112": (lambda: torch.unique, (torch.randint(0, 50, (112,), generator=g),),
                  dict(return_counts=True)),
    "kthvalue512": (lambda: torch.kthvalue, (torch.randn(512, generator=g), 5), {}),
    "argsort1000 desc": (lambda: torch.argsort, (torch.randn(1000, generator=g),),
                         dict(descending=True)),
    "argsort1024 i64": (lambda: torch.argsort, (torch.randperm(1024, generator=g),), {}),
    "x.sort64 method": (lambda: torch.Tensor.sort, (torch.randint(0, 100, (64,), generator=g),),
                        {}),
}
MID = {
    "sort 4096": (lambda: torch.sort, (torch.randn(4096, generator=g),), {}),
    "argsort 64x128": (lambda: torch.argsort, (torch.randn(64, 128, generator=g),), {}),
    "msort 4096x4": (lambda: torch.msort, (torch.randn(4096, 4, generator=g),), {}),
    "topk 4096x8 k2": (lambda: torch.topk, (torch.randn(4096, 8, generator=g), 2), {}),
    "kthvalue 64x256": (lambda: torch.kthvalue, (torch.randn(64, 256, generator=g), 9), {}),
    "median 65536": (lambda: torch.median, (torch.randn(65536, generator=g),), {}),
    "nanmedian 64x128 d1": (lambda: torch.nanmedian, (torch.randn(64, 128, generator=g), 1), {}),
    "quantile 4096": (lambda: torch.quantile, (torch.randn(4096, generator=g), 0.3), {}),
    "nanquantile 64x64 d1": (lambda: torch.nanquantile, (torch.randn(64, 64, generator=g), 0.7),
                             dict(dim=1)),
    "unique 10000": (lambda: torch.unique, (torch.randint(0, 3000, (10000,), generator=g),), {}),
}


SETTINGS = (None, {}, {"use_fast": True})  # torch, auto, forced


def measure(get, args, kw, number, rounds):
    """Min over rounds, the three settings taking turns within each round
    (the machine is shared and noisy: interleaving spreads the noise)."""
    best = [float("inf")] * len(SETTINGS)
    for _ in range(rounds):
        for i, settings in enumerate(SETTINGS):
            if settings is not None:
                kwker.install(**settings)
            fn = get()
            t = timeit.timeit(lambda: fn(*args, **kw), number=number) / number * 1e6
            kwker.uninstall()
            best[i] = min(best[i], t)
    return best


def main():
    cases = dict(CASES)
    if "--mid" in sys.argv:
        cases.update(MID)
    for name, (get, args, kw) in cases.items():
        number = 400 if args[0].numel() < 5000 else 40
        t = measure(get, args, kw, number, rounds=int(dict(
            a.split("=") for a in sys.argv[1:] if "=" in a).get("rounds", 40)))
        print(f"{name:22s} torch {t[0]:7.2f}  auto {t[1]:7.2f}  forced {t[2]:7.2f} us",
              flush=True)


if __name__ == "__main__":
    main()
