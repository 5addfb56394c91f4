"""What a run found per input, and the summary over inputs."""
import math
import statistics
from dataclasses import asdict, dataclass
from typing import Dict, List, Optional, Tuple

REGRESSION_TOLERANCE = 0.10   # --compare flags speed-ups that fell by more than this
# Issue 3's memory budget: beyond its outputs a call may hold at most one copy of
# its input.  The resident-set peak moves in whole pages, so calls within this
# slack of the budget count as within it.
MEMORY_SLACK_BYTES = 64 << 10
SORT_FAMILY = ("sort", "argsort", "msort", "unique")  # the ops issue 3 sets the budget for


@dataclass
class InputResult:
    id: str
    op: str
    section: str                  # "ops" or "layers"
    shape: Tuple[int, ...]
    dtype: str
    numel: int
    correct: bool
    mismatch: Optional[str] = None   # what differs from torch, or the error Kwker raised
    torch_s: Optional[float] = None
    kwker_s: Optional[float] = None
    torch_noise: Optional[float] = None
    kwker_noise: Optional[float] = None
    numpy_s: Optional[float] = None
    radix_bound_ns: Optional[float] = None
    torch_peak_bytes: Optional[int] = None
    kwker_peak_bytes: Optional[int] = None
    variants: int = 1                # inputs a timed call cycles through (corpus.variant_count)
    input_bytes: Optional[int] = None    # the checked input's elements
    output_bytes: Optional[int] = None   # Kwker's outputs' elements

    @property
    def kwker_extra_copies(self) -> Optional[float]:
        """Kwker's peak memory less its outputs, in copies of the input (the
        memory budget allows 1)."""
        if self.kwker_peak_bytes is None or self.output_bytes is None or not self.input_bytes:
            return None
        return max(0, self.kwker_peak_bytes - self.output_bytes) / self.input_bytes

    @property
    def within_memory_budget(self) -> Optional[bool]:
        if self.kwker_extra_copies is None:
            return None
        return self.kwker_peak_bytes <= self.output_bytes + self.input_bytes + MEMORY_SLACK_BYTES

    @property
    def speedup(self) -> Optional[float]:
        if self.torch_s is None or not self.kwker_s:
            return None
        return self.torch_s / self.kwker_s

    @property
    def kwker_ns_per_element(self) -> Optional[float]:
        if self.kwker_s is None or not self.numel:
            return None
        return self.kwker_s / self.numel * 1e9

    def to_json(self) -> dict:
        record = asdict(self)
        record["speedup"] = self.speedup
        record["kwker_ns_per_element"] = self.kwker_ns_per_element
        record["kwker_extra_copies"] = self.kwker_extra_copies
        return record


def summarize(results: List[InputResult]) -> dict:
    """Speed-up statistics over the inputs Kwker got right (a wrong answer's speed does not count)."""
    timed = [r for r in results if r.correct and r.speedup is not None]
    summary = {"inputs": len(results), "mismatches": [r.id for r in results if not r.correct],
               "timed_correct": len(timed)}
    summary.update(memory_summary(results))
    if not timed:
        return summary
    speedups = [r.speedup for r in timed]
    slowest = min(timed, key=lambda r: r.speedup)
    per_op = {}
    for op in sorted({r.op for r in timed}):
        per_op[op] = statistics.median(r.speedup for r in timed if r.op == op)
    summary.update({
        "median_speedup": statistics.median(speedups),
        "geomean_speedup": math.exp(statistics.fmean(math.log(s) for s in speedups)),
        "min_speedup": slowest.speedup,
        "min_speedup_id": slowest.id,
        "per_op_median_speedup": per_op,
        "per_op_count": {op: sum(r.op == op for r in timed) for op in per_op},
        "slower_than_torch": sum(s < 1.0 for s in speedups),
    })
    return summary


def memory_summary(results: List[InputResult]) -> dict:
    """How many op inputs (layers are plain-torch recipes, not one call) kept
    Kwker's peak memory within its outputs and one copy of the input, and
    the others, most copies first."""
    measured = [r for r in results if r.section == "ops" and r.within_memory_budget is not None]
    over = sorted((r for r in measured if not r.within_memory_budget),
                  key=lambda r: -r.kwker_extra_copies)
    family = [r for r in measured if r.op in SORT_FAMILY]
    return {"memory_measured": len(measured), "memory_within": len(measured) - len(over),
            "memory_sort_family": len(family),
            "memory_sort_family_within": sum(bool(r.within_memory_budget) for r in family),
            "memory_over": [(r.id, r.op, r.kwker_extra_copies) for r in over]}


def regressions(old_speedups: Dict[str, float],
                results: List[InputResult]) -> List[Tuple[str, float, float, bool]]:
    """(id, old speed-up, new speed-up, regressed) for inputs timed in both runs."""
    rows = []
    for r in results:
        if r.id in old_speedups and old_speedups[r.id] and r.speedup is not None:
            old = old_speedups[r.id]
            rows.append((r.id, old, r.speedup, r.speedup < old * (1 - REGRESSION_TOLERANCE)))
    return rows
