"""python -m kwker calibrate: measure this machine's crossover sizes and save
them for install(use_fast="auto") (see kwker.thresholds).

For each op it times torch against Kwker (size rules off) on one row of
each size, float32, one thread, and takes the smallest size from which
Kwker is at least as fast at every larger size measured.  An op where
Kwker never catches up within the sizes gets twice the largest size.
kthvalue keeps its shipped rule (its limit is the row length, not the size).
"""
import argparse

import torch

from kwker import crossover, support, thresholds

SIZES = tuple(2 ** k for k in range(6, 16))  # 64 .. 32768


def calibrate(ops=tuple(crossover.CALLS), sizes=SIZES, repeats=7, min_time=0.02):
    """(min_numel per op, the measurements)."""
    results = crossover.measure(ops, sizes, rows=(None,), repeats=repeats, min_time=min_time)
    chosen = {}
    for op, rows in results.items():
        found = crossover.crossover(rows)
        chosen[op] = 2 * max(sizes) if found is None else found
    return chosen, results


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kwker calibrate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ops", default=",".join(crossover.CALLS),
                        help="comma-separated ops (default: %(default)s)")
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)),
                        help="comma-separated element counts")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--min-time", type=float, default=0.02,
                        help="seconds per timing sample (default: %(default)s)")
    parser.add_argument("--dry-run", action="store_true", help="measure and print; save nothing")
    args = parser.parse_args(argv)
    ops = [op.strip() for op in args.ops.split(",") if op.strip()]
    unknown = [op for op in ops if op not in crossover.CALLS]
    if unknown:
        parser.error(f"cannot calibrate {unknown}; choose from {list(crossover.CALLS)}")
    sizes = tuple(sorted(int(n) for n in args.sizes.split(",")))
    torch.set_num_threads(1)
    chosen, results = calibrate(ops, sizes, args.repeats, args.min_time)
    for op, n in chosen.items():
        print(f"{op:<10} min_numel {n:>6}  (shipped {support.DEFAULT_SIZE_RULES[op].min_numel})")
    if args.dry_run:
        return 0
    details = {"sizes": list(sizes), "threads": 1,
               "us": {op: [list(r) for r in rows] for op, rows in results.items()}}
    print(f"saved {thresholds.save(chosen, details)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
