"""Text output of a run: header, per-input table, summary, check and comparison tables."""
from typing import List, Optional, Sequence

from .corpus import MAX_VARIANTS, VARIANT_ELEMENTS
from .numpy_ops import NUMPY_EQUIVALENTS
from .results import REGRESSION_TOLERANCE, InputResult

MISSING = "-"
TIME_UNITS = ((1.0, "s"), (1e-3, "ms"), (1e-6, "us"), (1e-9, "ns"))


def format_time(seconds: Optional[float]) -> str:
    if seconds is None:
        return MISSING
    for scale, unit in TIME_UNITS:
        if seconds >= scale:
            break  # else the smallest unit
    return f"{seconds / scale:.3g} {unit}"


def format_ratio(value: Optional[float]) -> str:
    return MISSING if value is None else f"{value:.2f}x"


def format_fraction(value: Optional[float]) -> str:
    return MISSING if value is None else f"{100 * value:.0f}%"


def format_ns(value: Optional[float]) -> str:
    return MISSING if value is None else f"{value:.3g}"


def format_mib(n_bytes: Optional[int]) -> str:
    return MISSING if n_bytes is None else f"{n_bytes / (1 << 20):.1f}"


def render_rows(headers: Sequence[str], rows: List[Sequence[str]], left_columns: int) -> List[str]:
    """Aligned text rows: the first `left_columns` columns left-aligned, the rest right."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows)]

    def line(cells):
        return "  ".join(str(c).ljust(w) if i < left_columns else str(c).rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()
    return [line(headers), "  ".join("-" * w for w in widths)] + [line(r) for r in rows]


def render_header(machine: dict, bandwidth: Optional[float]) -> str:
    kwker = machine["kwker"]
    flags = " ".join(f"{flag}={'yes' if present else 'no'}" for flag, present in machine["cpu_flags"].items())
    lines = [
        f"machine: {machine['cpu']} ({machine['cores']} cores; {flags})",
        f"kwker {kwker.get('version')} target {kwker.get('target')} | torch {machine['torch']} | "
        f"numpy {machine['numpy']} | python {machine['python']} | threads {machine['threads']}",
    ]
    if bandwidth:
        lines.append(f"single-thread copy bandwidth: {bandwidth / 1e9:.1f} GB/s (read + write)")
    return "\n".join(lines)


TABLE_HEADERS = ("id", "op", "shape", "dtype", "inputs", "torch", "kwker", "speed-up", "noise",
                 "ns/el", "radix", "numpy", "peak MiB t/k", "extra")


def result_cells(r: InputResult) -> List[str]:
    noise = max((n for n in (r.torch_noise, r.kwker_noise) if n is not None), default=None)
    memory = f"{format_mib(r.torch_peak_bytes)}/{format_mib(r.kwker_peak_bytes)}"
    return [("!! " if not r.correct else "") + r.id, r.op, "x".join(map(str, r.shape)) or "()", r.dtype,
            str(r.variants), format_time(r.torch_s), format_time(r.kwker_s), format_ratio(r.speedup), format_fraction(noise),
            format_ns(r.kwker_ns_per_element), format_ns(r.radix_bound_ns), format_time(r.numpy_s), memory,
            format_copies(r)]


def format_copies(r: InputResult) -> str:
    """Kwker's peak less its outputs in copies of the input, starred over the budget (1)."""
    if r.kwker_extra_copies is None or r.section != "ops":
        return MISSING
    return f"{r.kwker_extra_copies:.1f}" + ("" if r.within_memory_budget else "*")


def render_table(results: List[InputResult]) -> str:
    out = []
    for section in ("ops", "layers"):
        rows = [r for r in results if r.section == section]
        if not rows:
            continue
        if section == "layers":
            out.append("\nlayers (plain-torch recipe, its torch.median served by Kwker when installed):")
        for line in render_rows(TABLE_HEADERS, [result_cells(r) for r in rows], left_columns=4):
            out.append(line)
        for r in rows:
            if not r.correct:
                out.append(f"!! MISMATCH {r.id}: not bit-identical to torch: {r.mismatch}")
    out.append("\ninputs: how many inputs of the kind (the same generator, successive seeds) each "
               "timed call cycles through, all checked: one input timed over and over is learnt by the "
               "CPU's branch predictors, which flatters branchy code (torch's sorts) on inputs up to "
               f"~10^5 elements; together they hold >= {VARIANT_ELEMENTS} elements (at most "
               f"{MAX_VARIANTS} inputs).")
    out.append("noise: the larger IQR/median of the two paths' blocks. ns/el: Kwker's time per input "
               "element. radix: ns/el an LSD radix sort of (key, int64 index) needs just to move its "
               "data at the measured bandwidth (sorts of >= 1M elements). peak MiB: extra resident "
               "memory of a call, outputs included, torch/kwker: the second (the first, checked, call "
               "also pays one-time set-up), measured cold (the workspace blocks Kwker keeps "
               "between calls released first). extra: Kwker's peak "
               "less its outputs, in copies of the input; * where over one copy (the budget).")
    out.append("numpy: " + "; ".join(f"{op}: {how}" for op, how in NUMPY_EQUIVALENTS.items()))
    return "\n".join(out)


def render_summary(summary: dict) -> str:
    lines = []
    if "median_speedup" in summary:
        lines += [
            f"speed-up over {summary['timed_correct']} bit-identical inputs: median "
            f"{summary['median_speedup']:.2f}x, geometric mean {summary['geomean_speedup']:.2f}x, "
            f"min {summary['min_speedup']:.2f}x ({summary['min_speedup_id']})",
            f"slower than torch: {summary['slower_than_torch']} of {summary['timed_correct']}",
            "per op (median): " + ", ".join(
                f"{op} {speedup:.2f}x ({summary['per_op_count'][op]})"
                for op, speedup in summary["per_op_median_speedup"].items()),
        ]
    if summary.get("memory_measured"):
        over = summary["memory_over"]
        lines.append(
            f"memory (Kwker's peak less its outputs at most one copy of the input): "
            f"{summary['memory_within']} of {summary['memory_measured']} inputs, sort family "
            f"{summary['memory_sort_family_within']} of {summary['memory_sort_family']}"
            + ("; over: " + ", ".join(f"{i} ({op}) {c:.1f}" for i, op, c in over) if over else ""))
    if summary["mismatches"]:
        lines.append(f"!! {len(summary['mismatches'])} of {summary['inputs']} inputs NOT bit-identical "
                     f"to torch: {', '.join(summary['mismatches'])}")
    return "\n".join(lines)


def render_check(results: List[InputResult]) -> str:
    rows = [[r.id, r.op, "x".join(map(str, r.shape)), r.dtype, "ok" if r.correct else "MISMATCH"]
            for r in results]
    lines = render_rows(("id", "op", "shape", "dtype", "bit-identical"), rows, left_columns=5)
    lines += [f"!! MISMATCH {r.id}: {r.mismatch}" for r in results if not r.correct]
    failed = sum(not r.correct for r in results)
    lines.append(f"\n{len(results) - failed} of {len(results)} inputs bit-identical to torch"
                 + (f"; {failed} MISMATCHED" if failed else ""))
    return "\n".join(lines)


def render_comparison(rows, missing: List[str], old_path: str) -> str:
    table = [[run_id, f"{old:.2f}x", f"{new:.2f}x", f"{100 * (new / old - 1):+.0f}%",
              "REGRESSION" if regressed else ""] for run_id, old, new, regressed in rows]
    lines = [f"\ncompared with {old_path} (speed-up; regression = a drop of more than "
             f"{100 * REGRESSION_TOLERANCE:.0f}%):"]
    lines += render_rows(("id", "old", "new", "change", ""), table, left_columns=1)
    n_regressed = sum(regressed for *_, regressed in rows)
    lines.append(f"{n_regressed} regression(s) among {len(rows)} inputs timed in both runs")
    if missing:
        lines.append(f"not in the old run: {', '.join(missing)}")
    return "\n".join(lines)
