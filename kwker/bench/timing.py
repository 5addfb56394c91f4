"""Timing: torch and Kwker in alternating blocks, so drift (frequency, other load)
hits both alike; medians over the blocks, and their spread as the noise."""
import statistics
import time
from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence, Tuple

from torch.utils.benchmark import Timer


@dataclass(frozen=True)
class TimingPlan:
    rounds: int             # blocks per path
    min_rounds: int         # ... at least, however slow the call (the noise needs quartiles)
    block_s: float          # target duration of one block; a block runs the call >= once
    budget_s: float         # per path and input: slow calls get fewer rounds, down to min_rounds
    bandwidth_repeats: int  # copies timed for the memory bandwidth (best of them)


# Measured on the 2-core development machine (shared, loaded): the full corpus takes
# ~3.6 CPU-minutes (~4 minutes wall when idle; calls of 1-4 s, e.g. the 16M-element
# sort and unique(dim=0), are held to min_rounds by the budget); --quick, 27 inputs,
# ~21 CPU-seconds.
FULL_PLAN = TimingPlan(rounds=7, min_rounds=3, block_s=0.025, budget_s=1.0, bandwidth_repeats=5)
QUICK_PLAN = TimingPlan(rounds=3, min_rounds=3, block_s=0.010, budget_s=0.3, bandwidth_repeats=3)


CLOCK_TICK_S = 1e-9  # perf_counter's resolution: no call takes less


@dataclass(frozen=True)
class Stats:
    median_s: float
    noise: float            # interquartile range / median of the per-block means


def stats_of(samples: List[float]) -> Stats:
    median = statistics.median(samples)
    if len(samples) > 1:
        q1, _, q3 = statistics.quantiles(samples, n=4, method="inclusive")
    else:
        q1 = q3 = median
    return Stats(median, (q3 - q1) / median if median > 0 else 0.0)


class Cycle:
    """One call made on each of an input's variants in turn (corpus.make_variants):
    calling it runs them all once, and the timing functions report the time per call.
    The variants run in a plain loop, so the time adds no more than its iterations."""

    def __init__(self, calls: Sequence[Callable]):
        self.calls = tuple(calls)
        self.size = len(self.calls)
        if not self.size:
            raise ValueError("a Cycle needs at least one call")

    def __call__(self):
        for call in self.calls:
            call()


def calls_per_run(call: Callable) -> int:
    """How many calls one run of `call` makes: a Cycle's size, else 1."""
    return call.size if isinstance(call, Cycle) else 1


def block_shape(call: Callable, plan: TimingPlan) -> Tuple[int, int]:
    """(calls per block, rounds) for `call` under `plan`, from a warm-up call, and a
    second timed call when the warm-up was shorter than a block."""
    def seconds_of_one_call():
        start = time.perf_counter()
        call()
        return max(time.perf_counter() - start, CLOCK_TICK_S)

    once = seconds_of_one_call()  # warm-up (lazy initialization); estimate enough for a slow call
    if once < plan.block_s:
        once = seconds_of_one_call()
    number = max(1, round(plan.block_s / once))
    rounds = int(plan.budget_s / (number * once))
    return number, max(plan.min_rounds, min(plan.rounds, rounds))


def block_time(call: Callable, number: int, threads: int) -> float:
    """Mean seconds per call over `number` runs of `call` (a Cycle's run makes several)."""
    timer = Timer(stmt="call()", globals={"call": call}, num_threads=threads)
    return timer.timeit(number).mean / calls_per_run(call)


def time_interleaved(torch_call: Callable, kwker_call: Callable, kwker_on, plan: TimingPlan,
                     threads: int, numpy_call: Optional[Callable] = None
                     ) -> Tuple[Stats, Stats, Optional[Stats]]:
    """Stats of torch_call, of kwker_call (run inside the context manager kwker_on())
    and of numpy_call (None: not timed), timed in alternating blocks, one of each per
    round, the order reversed every other round: drift on the shared machine (other
    load, frequency) reaches every path alike, numpy's included (timed on its own
    after the other two, its ratio to Kwker's moved by up to 30% between runs)."""
    torch_number, torch_rounds = block_shape(torch_call, plan)
    with kwker_on():
        kwker_number, kwker_rounds = block_shape(kwker_call, plan)
    rounds = min(torch_rounds, kwker_rounds)
    if numpy_call is not None:
        numpy_number, numpy_rounds = block_shape(numpy_call, plan)
        rounds = min(rounds, numpy_rounds)
    torch_samples, kwker_samples, numpy_samples = [], [], []

    def torch_block():
        torch_samples.append(block_time(torch_call, torch_number, threads))

    def kwker_block():
        with kwker_on():
            kwker_samples.append(block_time(kwker_call, kwker_number, threads))

    def numpy_block():
        numpy_samples.append(block_time(numpy_call, numpy_number, threads))

    blocks = [torch_block, kwker_block] + ([numpy_block] if numpy_call is not None else [])
    for round_index in range(rounds):
        for block in (blocks if round_index % 2 == 0 else blocks[::-1]):
            block()
    return (stats_of(torch_samples), stats_of(kwker_samples),
            stats_of(numpy_samples) if numpy_call is not None else None)
