"""One thread against two (torch.set_num_threads) on calls that Kwker
splits over threads: batched rows (blocks of rows per thread) and single
long rows (split inside the native call, kwker.h kwk_set_row_threads),
values-only sorts (msort) of every 4-byte and 8-byte dtype and unique's
sort of many distinct values included.  Each
result is checked against torch's first; times are the min of `rounds`
rounds of 3 calls, the two settings alternating round by round.

    python tools/two_threads.py [rounds=7]
"""
import sys
import timeit

import torch

import kwker
from kwker import _native

N = 1 << 22  # one long row: 4M elements


def _cases():
    g = torch.Generator().manual_seed(0)
    batch = torch.randn(4096, 1000, generator=g)
    row = torch.randn(N, generator=g)
    yield "sort 4096x1000 float32", lambda: torch.sort(batch)
    yield "argsort stable 4096x1000 float32", lambda: torch.argsort(batch, stable=True)
    yield "sort 1x4M float32", lambda: torch.sort(row)
    for dtype, scale in ((torch.float32, 1.0), (torch.int32, 1e6), (torch.float64, 1.0),
                         (torch.int64, 1e6), (torch.int64, 1e15)):
        x = (torch.randn(N, generator=g, dtype=torch.float64) * scale).to(dtype)
        span = " (within 32 bits)" if scale == 1e6 and dtype is torch.int64 else \
            " (full range)" if dtype is torch.int64 else ""
        yield f"msort 1x4M {str(dtype)[6:]}{span}", (lambda x=x: torch.msort(x))
        if dtype is torch.float32 or scale == 1e15:
            # many distinct values: no hash or bitmap pass, the values sorted
            yield f"unique 1x4M {str(dtype)[6:]}{span}", (lambda x=x: torch.unique(x))


def main():
    rounds = 7
    for a in sys.argv[1:]:
        if a.startswith("rounds="):
            rounds = int(a.split("=")[1])
    before = torch.get_num_threads()
    print(f"torch {torch.__version__} | kwker target {_native.target()} | min of {rounds} rounds "
          "of 3 calls, one and two threads alternating")
    for name, call in _cases():
        torch.set_num_threads(1)
        expected = call()
        kwker.install()
        try:
            best = [float("inf"), float("inf")]
            for threads in (1, 2):
                torch.set_num_threads(threads)
                got = call()
                for e, o in zip(expected if isinstance(expected, tuple) else (expected,),
                                got if isinstance(got, tuple) else (got,)):
                    assert torch.equal(e, o), (name, threads)
            for _ in range(rounds):
                for i, threads in enumerate((1, 2)):
                    torch.set_num_threads(threads)
                    best[i] = min(best[i], timeit.timeit(call, number=3) / 3 * 1e3)
        finally:
            kwker.uninstall()
            torch.set_num_threads(before)
        print(f"{name:42s} 1 thread {best[0]:8.2f} ms   2 threads {best[1]:8.2f} ms   "
              f"{best[0] / best[1]:5.2f}x")


if __name__ == "__main__":
    main()
