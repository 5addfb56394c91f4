"""Measure where Kwker's fast path starts beating torch on small inputs.

    python -m kwker crossover [--threads N]

For each op and input size it times torch's own function against the same
call while Kwker is installed with the size rules switched off, and
prints the smallest element count from which Kwker is at least as fast at
every larger size measured.  kwker.support.MIN_FAST_NUMEL holds the values
chosen from this table (1 row, and rows of 8, float32, one thread).
"""
import argparse
import statistics
import time

import torch

import kwker
from kwker import patching, support

SIZES = (8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
CALLS = {
    "sort": lambda f, x: f(x),
    "argsort": lambda f, x: f(x),
    "msort": lambda f, x: f(x.reshape(-1)),
    "topk": lambda f, x: f(x, min(2, x.shape[-1])),
    "median": lambda f, x: f(x, -1),
    "nanmedian": lambda f, x: f(x, -1),
}


def _per_call_us(fn, repeats=7, min_time=0.02):
    """Median over repeats of the mean CPU time per call (process time is
    less disturbed by other processes on a shared machine)."""
    number = 1
    while True:
        t = time.process_time()
        for _ in range(number):
            fn()
        if time.process_time() - t > min_time:
            break
        number *= 2
    samples = []
    for _ in range(repeats):
        t = time.process_time()
        for _ in range(number):
            fn()
        samples.append((time.process_time() - t) / number * 1e6)
    return statistics.median(samples)


def _per_input_us(call, xs, repeats, min_time):
    """_per_call_us of call(x) for x cycling through xs."""
    def every_input():
        for x in xs:
            call(x)
    return _per_call_us(every_input, repeats, min_time) / len(xs)


def measure(ops=tuple(CALLS), sizes=SIZES, rows=(None, 8), repeats=7, min_time=0.02):
    """{op: [(numel, row_len, torch_us, kwker_us), ...]}: torch's function
    against the same call with Kwker installed with the size rules off
    (use_fast=True), for rows of the whole size (None) or of a fixed length.
    Each timing cycles through fresh random inputs (as many as
    kwker.bench.corpus.variant_count gives the size): one input repeated is
    learnt by branch predictors, which made torch's sorts look up to 4x
    faster on small inputs than on new ones."""
    from kwker.bench.corpus import variant_count
    originals = {op: patching.original(op) for op in ops}
    results = {op: [] for op in ops}
    with kwker.installed(list(ops), use_fast=True, strict=False, verify=False, timing=False):
        for op in ops:
            patched = getattr(torch, op)
            for numel in sizes:
                for row in sorted({numel if r is None else min(r, numel) for r in rows}):
                    xs = [torch.randn(numel // row, row) for _ in range(variant_count(numel))]
                    t_torch = _per_input_us(lambda x: CALLS[op](originals[op], x), xs, repeats,
                                            min_time)
                    t_kwker = _per_input_us(lambda x: CALLS[op](patched, x), xs, repeats, min_time)
                    results[op].append((numel, row, t_torch, t_kwker))
    return results


def crossover(rows):
    """Smallest numel from which Kwker is at least as fast at every larger
    numel measured (None if never)."""
    by_numel = {}
    for numel, _, t_torch, t_kwker in rows:
        by_numel.setdefault(numel, []).append(t_kwker <= t_torch)
    best = None
    for numel in sorted(by_numel, reverse=True):
        if not all(by_numel[numel]):
            break
        best = numel
    return best


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m kwker crossover", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    results = measure()
    for op, rows in results.items():
        print(f"\n{op}: crossover numel = {crossover(rows)} "
              f"(current MIN_FAST_NUMEL {support.MIN_FAST_NUMEL[op]})")
        print(f"  {'numel':>6} {'row':>5} {'torch us':>9} {'kwker us':>9} {'ratio':>6}")
        for numel, row, t_torch, t_kwker in rows:
            print(f"  {numel:>6} {row:>5} {t_torch:>9.2f} {t_kwker:>9.2f} {t_torch / t_kwker:>6.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
