"""--plot: a bar chart of the speed-ups (matplotlib, the `bench` extra)."""
from typing import List, Optional

from .results import InputResult

INCHES_PER_BAR = 0.12
MIN_WIDTH_INCHES = 8.0
HEIGHT_INCHES = 5.0
FACTOR_TICKS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100)


def plot_speedups(results: List[InputResult], path: str) -> Optional[str]:
    """Write the chart to `path`; return None, or why no chart was written."""
    try:
        import matplotlib
        matplotlib.use("Agg")  # files only: no display needed
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except ImportError:
        return "matplotlib is not installed (pip install 'kwker[bench]' or pip install matplotlib)"
    timed = sorted((r for r in results if r.speedup is not None), key=lambda r: r.speedup)
    if not timed:
        return "no timed inputs to plot"
    ops = sorted({r.op for r in timed})
    palette = plt.get_cmap("tab10")
    colour = {op: palette(i % 10) for i, op in enumerate(ops)}
    figure, axes = plt.subplots(figsize=(max(MIN_WIDTH_INCHES, INCHES_PER_BAR * len(timed)), HEIGHT_INCHES))
    speedups = [r.speedup for r in timed]
    axes.bar(range(len(timed)), speedups, color=[colour[r.op] for r in timed])
    axes.set_yscale("log")
    axes.set_yticks([t for t in FACTOR_TICKS if min(speedups) / 2 <= t <= max(speedups) * 2])
    axes.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda value, _: f"{value:g}x"))
    axes.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    axes.axhline(1.0, color="black", linewidth=1)
    axes.set_xlim(-1, len(timed))
    axes.set_xticks(range(len(timed)))
    axes.set_xticklabels([r.id + (" (MISMATCH)" if not r.correct else "") for r in timed],
                         rotation=90, fontsize=5)
    axes.set_ylabel("speed-up over torch (log scale)")
    axes.set_title("Kwker vs torch on the corpus, sorted")
    axes.legend(handles=[plt.Rectangle((0, 0), 1, 1, color=colour[op]) for op in ops], labels=ops,
                fontsize=7, loc="upper left")
    figure.tight_layout()
    figure.savefig(path, dpi=150)
    plt.close(figure)
    return None
