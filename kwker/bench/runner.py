"""`python -m kwker bench`: the corpus through torch and through Kwker.

Kwker's path is the very same public torch call made while Kwker is installed;
torch's is that call with Kwker uninstalled (torch's own functions, checked by
identity after every uninstall). Each input is first checked bit for bit.
"""
import argparse
import functools
import json
import sys
from typing import List, Optional

import torch

from . import machine, report
from .bitwise import difference
from .corpus import Entry, build_call, load_catalogue, make_variants, resolve, select
from .kwker_switch import KwkerSwitch, UsageError
from .memory import call_with_peak
from .numpy_ops import numpy_equivalent
from .plot import plot_speedups
from .results import InputResult, regressions, summarize
from .tie_order import reference_call
from .timing import FULL_PLAN, QUICK_PLAN, Cycle, TimingPlan, time_interleaved

RADIX_BOUND_OPS = ("sort", "argsort")
EXIT_MISMATCH = 1
EXIT_USAGE = 2


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not >= 1")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m kwker bench",
        description="Time Kwker against torch (and numpy) on real ML inputs; every input is "
                    "first checked to be bit-identical to torch. Exits 1 on any mismatch.")
    parser.add_argument("--quick", action="store_true",
                        help="a representative subset and fewer repeats (under a minute)")
    parser.add_argument("--threads", type=positive_int, default=1, metavar="N",
                        help="torch threads (default 1)")
    parser.add_argument("--json", metavar="PATH", help="save machine info, per-input results and summary")
    parser.add_argument("--compare", metavar="OLD.json",
                        help="compare speed-ups with an earlier --json run, flagging regressions")
    parser.add_argument("--plot", metavar="PATH.png", help="bar chart of the speed-ups (needs matplotlib)")
    parser.add_argument("--check", action="store_true",
                        help="correctness only: each input (and its variants) once through torch and Kwker, "
                             "no timing")
    parser.add_argument("--filter", metavar="SUBSTR",
                        help="only inputs whose id or op contains SUBSTR (from the whole catalogue)")
    parser.add_argument("--ties", choices=["stable"],
                        help="pass ties=... to kwker.install(); sort, argsort and sorted topk are then "
                             "checked against torch's stable order, other ops against torch's own")
    return parser


class Progress:
    """One updating line on stderr (a line per step when stderr is not a terminal)."""

    def __init__(self, total: int):
        self.total, self.done, self.width = total, 0, 0
        self.live = sys.stderr.isatty()

    def step(self, label: str):
        self.done += 1
        text = f"[{self.done}/{self.total}] {label}"
        if self.live:
            sys.stderr.write("\r" + text.ljust(self.width))
            self.width = len(text)
        else:
            sys.stderr.write(text + "\n")
        sys.stderr.flush()

    def finish(self):
        if self.live:
            sys.stderr.write("\r" + " " * self.width + "\r")
            sys.stderr.flush()


def result_for(entry: Entry, correct: bool, mismatch: Optional[str]) -> InputResult:
    return InputResult(id=entry.id, op=entry.op, section="layers" if entry.is_layer else "ops",
                       shape=entry.shape, dtype=entry.dtype_name, numel=entry.numel,
                       correct=correct, mismatch=mismatch)


def bound_call(fn_name: str, args, kwargs):
    """The call bound to the function torch.<fn_name> is *now* (resolve at bind time)."""
    return functools.partial(resolve(fn_name), *args, **kwargs)


def tensor_bytes(value) -> int:
    """Bytes of the elements of a tensor, or of the tensors in a (nested) tuple."""
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, (tuple, list)):
        return sum(tensor_bytes(v) for v in value)
    return 0


def _peak(call):
    """The resident-set peak of a second call (call_with_peak: cold, outputs included): the
    first call of an input's kind also pays one-time costs (lazy set-up in torch and
    Kwker, ~0.5-1 MiB) that are no part of the op's memory."""
    return call_with_peak(call)[1]


def check_entry(entry: Entry, x: torch.Tensor, switch: KwkerSwitch, peak: bool = True):
    """(result with the bit-identity verdict and, with `peak`, both paths' peak memory,
    torch's call, Kwker's call or None if it raised)."""
    fn_name, args, kwargs = build_call(entry, x)
    torch_call = bound_call(fn_name, args, kwargs)
    reference = reference_call(entry.op, resolve(fn_name), args, kwargs, switch.ties or "torch")
    expected = reference()
    with switch.installed():
        kwker_call = bound_call(fn_name, args, kwargs)
        try:
            actual = kwker_call()
        except Exception as exc:  # report it as this input's failure and go on
            return result_for(entry, False, f"kwker raised {type(exc).__name__}: {exc}"), torch_call, None
        kwker_peak = _peak(kwker_call) if peak else None
    torch_peak = _peak(reference) if peak else None
    mismatch = difference(expected, actual)
    result = result_for(entry, mismatch is None, mismatch)
    result.torch_peak_bytes, result.kwker_peak_bytes = torch_peak, kwker_peak
    if kwker_peak is not None:
        result.input_bytes, result.output_bytes = tensor_bytes(x), tensor_bytes(actual)
    return result, torch_call, kwker_call


def check_variants(entry: Entry, variants: List[torch.Tensor], switch: KwkerSwitch):
    """check_entry over every variant (peak memory from the first): (result, torch's
    calls, Kwker's calls), the calls None where Kwker raised."""
    result, torch_calls, kwker_calls = None, [], []
    for i, x in enumerate(variants):
        checked, torch_call, kwker_call = check_entry(entry, x, switch, peak=i == 0)
        if result is None:
            result = checked
        elif not checked.correct:
            result.correct, result.mismatch = False, f"variant {i} (seed + {i}): {checked.mismatch}"
        if kwker_call is None:
            return result, None, None
        torch_calls.append(torch_call)
        kwker_calls.append(kwker_call)
    result.variants = len(variants)
    return result, torch_calls, kwker_calls


def measure_entry(entry: Entry, switch: KwkerSwitch, plan: TimingPlan, threads: int,
                  bandwidth: float) -> InputResult:
    """The entry's variants checked bit for bit, then torch and Kwker timed cycling
    through them (corpus.make_variants says why)."""
    variants = make_variants(entry)
    result, torch_calls, kwker_calls = check_variants(entry, variants, switch)
    if kwker_calls is None:
        return result
    numpy_calls = [numpy_equivalent(entry.op, entry.args, x) for x in variants]
    torch_stats, kwker_stats, numpy_stats = time_interleaved(
        Cycle(torch_calls), Cycle(kwker_calls), switch.installed, plan, threads,
        numpy_call=Cycle(numpy_calls) if numpy_calls[0] is not None else None)
    result.torch_s, result.torch_noise = torch_stats.median_s, torch_stats.noise
    result.kwker_s, result.kwker_noise = kwker_stats.median_s, kwker_stats.noise
    if numpy_stats is not None:
        result.numpy_s = numpy_stats.median_s
    if entry.op in RADIX_BOUND_OPS and entry.numel >= machine.RADIX_BOUND_MIN_NUMEL:
        result.radix_bound_ns = machine.radix_bound_ns(entry.dtype, bandwidth)
    return result


def run_check(entries: List[Entry], switch: KwkerSwitch) -> List[InputResult]:
    progress, results = Progress(len(entries)), []
    for entry in entries:
        progress.step(f"check {entry.id}")
        results.append(check_variants(entry, make_variants(entry), switch)[0])
    progress.finish()
    print(report.render_check(results))
    return results


def run_benchmark(entries: List[Entry], switch: KwkerSwitch, plan: TimingPlan, threads: int,
                  bandwidth: float) -> List[InputResult]:
    progress, results = Progress(len(entries)), []
    for entry in entries:
        progress.step(f"{entry.id} ({entry.op})")
        results.append(measure_entry(entry, switch, plan, threads, bandwidth))
    progress.finish()
    print(report.render_table(results))
    return results


def load_speedups(path: str) -> dict:
    with open(path) as old:
        return {r["id"]: r.get("speedup") for r in json.load(old)["results"]}


def save_json(path: str, machine_info: dict, args, results: List[InputResult], summary: dict):
    with open(path, "w") as out:
        json.dump({"machine": machine_info, "config": vars(args),
                   "results": [r.to_json() for r in results], "summary": summary}, out, indent=1)


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    if args.check and (args.compare or args.plot):
        print("error: --compare and --plot need timings; drop --check", file=sys.stderr)
        return EXIT_USAGE
    if args.compare:  # before minutes of timing, not after
        try:
            load_speedups(args.compare)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            print(f"error: --compare {args.compare}: {exc}", file=sys.stderr)
            return EXIT_USAGE
    try:
        switch = KwkerSwitch(ties=args.ties)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if not switch.available:
        print(f"kwker not available: timing torch against itself ({switch.unavailable_reason})",
              file=sys.stderr)
    entries = select(load_catalogue(), quick=args.quick, substring=args.filter)
    if not entries:
        print(f"error: no input matches --filter {args.filter!r}", file=sys.stderr)
        return EXIT_USAGE
    torch.set_num_threads(args.threads)
    machine_info = machine.describe(args.threads, switch.info())
    plan = QUICK_PLAN if args.quick else FULL_PLAN
    bandwidth = None if args.check else machine.copy_bandwidth(plan.bandwidth_repeats)
    machine_info["copy_bandwidth_bytes_per_s"] = bandwidth
    print(report.render_header(machine_info, bandwidth))
    if args.check:
        results = run_check(entries, switch)
    else:
        results = run_benchmark(entries, switch, plan, args.threads, bandwidth)
    summary = summarize(results)
    if not args.check:
        print("\n" + report.render_summary(summary))
    if args.json:
        save_json(args.json, machine_info, args, results, summary)
    if args.compare:
        old = load_speedups(args.compare)
        print(report.render_comparison(regressions(old, results), [r.id for r in results if r.id not in old],
                                       args.compare))
    if args.plot:
        problem = plot_speedups(results, args.plot)
        print(f"plot: {problem}" if problem else f"plot written to {args.plot}",
              file=sys.stderr if problem else sys.stdout)
    return EXIT_MISMATCH if summary["mismatches"] else 0


if __name__ == "__main__":
    sys.exit(main())
