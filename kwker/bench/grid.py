"""The synthetic grid: each op over dtypes and row lengths, against torch and
numpy in the same run (the real-input corpus is `python -m kwker bench`).

    python -m kwker bench --grid [--quick] [--filter SUBSTR] [--threads N]

Rows are (op, dtype, rows x length); columns: torch, numpy's nearest
equivalent, Kwker (torch's function with Kwker installed, i.e. what a user
gets), the speed-ups over torch and over numpy, Kwker's ns per element and,
for rows of >= 1M, the radix bound (ns/element an LSD radix sort of key +
int64 index needs just to move its data at this machine's copy bandwidth).
Every Kwker result is first checked to be bit-identical to torch's.
"""
import argparse
import statistics
import zlib
from dataclasses import dataclass
from typing import Callable, List, Optional

import numpy as np
import torch

from kwker.bench import bitwise, machine, timing
from kwker.bench.corpus import variant_count
from kwker.bench.kwker_switch import KwkerSwitch
from kwker.bench.numpy_ops import top_k_along_last


@dataclass(frozen=True)
class Case:
    op: str          # sort | argsort | sort_values | topk | kthvalue | median
    dtype: str       # key of VALUES
    rows: int
    length: int
    k: int = 0       # topk / kthvalue

    @property
    def label(self) -> str:
        k = f" k={self.k}" if self.k else ""
        return f"{self.op:11s} {self.dtype:9s} {self.rows}x{self.length}{k}"


def _floats(dtype):
    return lambda shape, g: torch.randn(shape, generator=g).to(dtype)


# value generators: name -> (shape, generator) -> tensor
VALUES = {
    "float32": _floats(torch.float32),
    "float64": lambda shape, g: torch.randn(shape, generator=g, dtype=torch.float64),
    "bfloat16": _floats(torch.bfloat16),
    "float16": _floats(torch.float16),
    # token ids, positions: int64 whose range fits in 32 bits
    "int64/32b": lambda shape, g: torch.randint(0, 1 << 31, shape, generator=g),
    "int64": lambda shape, g: torch.randint(-(1 << 62), 1 << 62, shape, generator=g),
    "int32": lambda shape, g: torch.randint(-(1 << 31), (1 << 31) - 1, shape, generator=g,
                                            dtype=torch.int32),
    "uint8": lambda shape, g: torch.randint(0, 256, shape, generator=g, dtype=torch.uint8),
}

# (rows, length): many short rows (MoE, batches) to single long rows
SHAPES = [(4096, 8), (4096, 64), (64, 1000), (64, 4096), (4, 65536), (1, 1 << 20)]
QUICK_SHAPES = [(4096, 8), (64, 1000), (1, 1 << 20)]
LONG_SHAPE = (1, 1 << 24)
SORT_DTYPES = ["float32", "bfloat16", "float16", "float64", "int64/32b", "int64", "int32",
               "uint8"]
SELECT_DTYPES = ["float32", "bfloat16", "float64", "int64"]


def cases(quick: bool) -> List[Case]:
    shapes = QUICK_SHAPES if quick else SHAPES
    out = []
    for op in ("sort", "argsort", "sort_values"):
        dtypes = ["float32", "bfloat16", "int64"] if quick else SORT_DTYPES
        out += [Case(op, d, r, n) for d in dtypes for r, n in shapes]
        if not quick and op != "argsort":
            out.append(Case(op, "float32", *LONG_SHAPE))
    for d in (["float32"] if quick else SELECT_DTYPES):
        for r, n in shapes:
            for k in sorted({1, min(8, n), min(100, n)}):
                out.append(Case("topk", d, r, n, k))
            out.append(Case("median", d, r, n))
            out.append(Case("kthvalue", d, r, n, max(1, n // 10)))
    return out


def torch_call(case: Case, x: torch.Tensor) -> Callable[[], object]:
    """The call as user code writes it (torch.<op>: patched while Kwker is
    installed; the functions are looked up at call time)."""
    op = case.op
    if op == "sort":
        return lambda: torch.sort(x, -1)
    if op == "argsort":
        return lambda: torch.argsort(x, stable=True, dim=-1)
    if op == "sort_values":
        # torch's values-only sort: msort sorts along dim 0 (Kwker: no index work)
        xt = x.t()
        return lambda: torch.msort(xt)
    if op == "topk":
        return lambda: torch.topk(x, case.k, -1)
    if op == "median":
        return lambda: torch.median(x, -1)
    if op == "kthvalue":
        return lambda: torch.kthvalue(x, case.k, -1)
    raise ValueError(op)


def numpy_call(case: Case, x: torch.Tensor) -> Optional[Callable[[], object]]:
    """numpy's nearest equivalent, or None (no numpy dtype: bfloat16)."""
    if x.dtype is torch.bfloat16:
        return None
    a = x.numpy()
    op = case.op
    if op == "sort":
        return lambda: np.argsort(a, axis=-1)  # numpy's indices sort (quicksort family)
    if op == "argsort":
        return lambda: np.argsort(a, axis=-1, kind="stable")
    if op == "sort_values":
        return lambda: np.sort(a, axis=-1)
    if op == "topk":
        return lambda: top_k_along_last(a, case.k, True, True)
    if op == "median":
        return lambda: np.median(a, axis=-1)
    if op == "kthvalue":
        return lambda: np.partition(a, case.k - 1, axis=-1)[..., case.k - 1]
    return None


NUMPY_NOTE = ("numpy: sort -> np.argsort (default kind), argsort -> np.argsort(kind='stable'), "
              "sort_values -> np.sort, topk -> np.argpartition + gather + sort of the k, "
              "median -> np.median, kthvalue -> np.partition; no bfloat16 in numpy")


@dataclass
class Row:
    case: Case
    torch_s: float
    kwker_s: float
    numpy_s: Optional[float]
    identical: bool

    @property
    def ns_per_el(self) -> float:
        return self.kwker_s * 1e9 / (self.case.rows * self.case.length)


def measure(case: Case, switch: KwkerSwitch, plan: timing.TimingPlan, threads: int) -> Row:
    """Every variant checked, then the calls timed cycling through the variants
    (corpus.make_variants says why)."""
    g = torch.Generator().manual_seed(zlib.crc32(case.label.encode()))  # the same inputs every run
    xs = [VALUES[case.dtype]((case.rows, case.length), g)
          for _ in range(variant_count(case.rows * case.length))]
    calls = [torch_call(case, x) for x in xs]
    identical = True
    for call in calls:
        expected = call()
        with switch.installed():
            got = call()
        identical = identical and bitwise.difference(expected, got) is None
    cycle = timing.Cycle(calls)
    np_calls = [numpy_call(case, x) for x in xs]
    torch_stats, kwker_stats, numpy_stats = timing.time_interleaved(
        cycle, cycle, switch.installed, plan, threads,
        numpy_call=timing.Cycle(np_calls) if np_calls[0] else None)
    numpy_s = numpy_stats.median_s if numpy_stats is not None else None
    return Row(case, torch_stats.median_s, kwker_stats.median_s, numpy_s, identical)


def _time(s: Optional[float]) -> str:
    if s is None:
        return "-"
    if s >= 1:
        return f"{s:.2f}s"
    if s >= 1e-3:
        return f"{s * 1e3:.3g}ms"
    return f"{s * 1e6:.3g}us"


def print_table(rows: List[Row], bandwidth: float) -> None:
    print(f"{'op':11s} {'dtype':9s} {'shape':12s} {'k':>4s} {'torch':>9s} {'numpy':>9s} "
          f"{'kwker':>9s} {'vs torch':>8s} {'vs numpy':>8s} {'ns/el':>6s} {'radix':>6s}  same")
    for r in rows:
        c = r.case
        vs_np = f"{r.numpy_s / r.kwker_s:7.2f}x" if r.numpy_s else "       -"
        bound = (f"{machine.radix_bound_ns(r_dtype(c), bandwidth):6.2f}"
                 if c.length >= 1 << 20 and c.op in ("sort", "argsort", "sort_values")
                 else "     -")
        print(f"{c.op:11s} {c.dtype:9s} {c.rows}x{c.length:<{11 - len(str(c.rows))}d} "
              f"{c.k or '':>4} {_time(r.torch_s):>9s} {_time(r.numpy_s):>9s} "
              f"{_time(r.kwker_s):>9s} {r.torch_s / r.kwker_s:7.2f}x {vs_np} "
              f"{r.ns_per_el:6.2f} {bound}  {'yes' if r.identical else 'NO'}")


def r_dtype(case: Case) -> torch.dtype:
    return VALUES[case.dtype]((1,), torch.Generator()).dtype


def summarize(rows: List[Row]) -> None:
    by_op = {}
    for r in rows:
        by_op.setdefault(r.case.op, []).append(r)
    print("\nmedian speed-up per op (vs torch / vs numpy where numpy has the dtype):")
    for op, rs in by_op.items():
        vt = statistics.median(r.torch_s / r.kwker_s for r in rs)
        np_rs = [r.numpy_s / r.kwker_s for r in rs if r.numpy_s]
        vn = f"{statistics.median(np_rs):.2f}x" if np_rs else "-"
        slower = sum(r.torch_s < r.kwker_s for r in rs)
        print(f"  {op:11s} {vt:6.2f}x / {vn:>7s}   ({len(rs)} cases, {slower} slower than torch)")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m kwker bench --grid", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--grid", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--quick", action="store_true", help="fewer dtypes and shapes")
    p.add_argument("--filter", default="", help="only cases whose label contains SUBSTR")
    p.add_argument("--threads", type=int, default=1)
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    torch.set_num_threads(args.threads)
    switch = KwkerSwitch()
    plan = timing.QUICK_PLAN if args.quick else timing.FULL_PLAN
    bandwidth = machine.copy_bandwidth(plan.bandwidth_repeats)
    print(f"torch {torch.__version__} | numpy {np.__version__} | threads {args.threads} | "
          f"copy bandwidth {bandwidth / 1e9:.1f} GB/s | kwker {switch.info().get('target')}")
    rows = []
    for case in cases(args.quick):
        if args.filter and args.filter not in case.label:
            continue
        rows.append(measure(case, switch, plan, args.threads))
    print_table(rows, bandwidth)
    print(NUMPY_NOTE)
    summarize(rows)
    return 0 if all(r.identical for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
