"""Per-call overhead of torch.ops.kwker on tiny inputs, next to torch's own
op and the other ways the same kernel could be registered.

    python -m kwker.torch_ops.overhead [--rounds 40] [--calls 1000] [--large]

One thread; per row the minimum over rounds of the mean µs per call.
"""
import argparse
import time

import torch

import kwker
import kwker.torch_ops  # noqa: F401  (registers torch.ops.kwker)
from kwker.torch_ops import eager


def _alternatives():
    """The same CPU kernel registered the other ways TORCH-NOTES.md lists,
    in a scratch namespace."""
    lib = torch.library.Library("kwker_overhead", "DEF")
    schema = "(Tensor self, SymInt k, int dim=-1, bool largest=True, bool sorted=True) " \
             "-> (Tensor values, Tensor indices)"
    lib.define("topk_cpu_only" + schema)
    lib.impl("topk_cpu_only", eager.topk_cpu, "CPU")
    lib.define("topk_autograd_redispatch" + schema)
    lib.impl("topk_autograd_redispatch", eager.topk_cpu, "CPU")
    op = torch.ops.kwker_overhead.topk_autograd_redispatch.default

    def redispatch(x, *args):
        with torch._C._AutoDispatchBelowAutograd():
            return op(x, *args)
    lib.impl("topk_autograd_redispatch", redispatch, "Autograd")

    @torch.library.custom_op("kwker_overhead::topk_custom_op", mutates_args=())
    def custom(x: torch.Tensor, k: int, dim: int = -1, largest: bool = True,
               sorted: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
        return eager.topk_cpu(x, k, dim, largest, sorted)

    @custom.register_fake
    def _(x, k, dim=-1, largest=True, sorted=True):
        return kwker.torch_ops.fake.topk(x, k, dim, largest, sorted)

    def backward(ctx, grad_values, grad_indices):
        return torch.zeros(ctx.shape, dtype=grad_values.dtype).scatter(
            ctx.dim, ctx.indices, grad_values), None, None, None, None

    def setup_context(ctx, inputs, output):
        ctx.shape, ctx.dim, ctx.indices = inputs[0].shape, inputs[2], output[1]
    custom.register_autograd(backward, setup_context=setup_context)
    return lib, {
        "Library op, CPU kernel only (no autograd)": torch.ops.kwker_overhead.topk_cpu_only,
        "Library op, Autograd kernel redispatching": op,
        "torch.library.custom_op + register_autograd": custom,
    }


def _best_times(rows, x, calls, rounds):
    """Per row, the minimum over rounds of the mean µs per call; the rows
    take turns within each round, so load on a shared machine hits them
    alike."""
    best = {name: float("inf") for name in rows}
    for _ in range(rounds):
        for name, fn in rows.items():
            start = time.perf_counter()
            for _ in range(calls):
                fn(x, 3)
            best[name] = min(best[name], (time.perf_counter() - start) / calls * 1e6)
    return best


def _large_inputs(rounds):
    """torch.ops.kwker and, under install(), a forward+backward step on
    inputs that require grad, against torch on the same inputs (min of
    `rounds`, one thread)."""
    from kwker.torch_ops import quantile, unique
    K = torch.ops.kwker
    g = torch.Generator().manual_seed(0)
    scores, rows, flat = (torch.randn(4096, 256, generator=g), torch.randn(512, 2048, generator=g),
                          torch.randn(1 << 20, generator=g))
    ids = (flat * 1000).long()
    qs = torch.tensor([0.1, 0.5, 0.9])
    ops = [
        ("topk 4096x256 k=8", lambda: torch.topk(scores, 8), lambda: K.topk(scores, 8)),
        ("sort(stable) 512x2048", lambda: torch.sort(rows, stable=True), lambda: K.sort(rows)),
        ("median(dim) 512x2048", lambda: torch.median(rows, 1), lambda: K.median.dim(rows, 1)),
        ("quantile 2^20, 3 q", lambda: torch.quantile(flat, qs), lambda: quantile(flat, qs)),
        ("unique 2^20 int64", lambda: torch.unique(ids), lambda: unique(ids)),
    ]

    def train_step(fn, x):
        def step():
            leaf = x.detach().requires_grad_()
            fn(leaf).sum().backward()
        return step
    steps = [
        ("topk 4096x256 k=8", lambda t: torch.topk(t, 8).values, scores),
        ("sort 512x2048", lambda t: torch.sort(t, dim=1).values, rows),
        ("median(dim) 512x2048", lambda t: torch.median(t, 1).values, rows),
    ]

    def best(fn):
        times = []
        for _ in range(rounds):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        return min(times) * 1e3

    print(f"large inputs, one thread, min of {rounds} runs")
    for name, theirs, ours in ops:
        t, k = best(theirs), best(ours)
        print(f"  {name:<26} torch {t:8.2f} ms  torch.ops.kwker {k:8.2f} ms  {t / k:5.2f}x")
    for name, fn, x in steps:
        t = best(train_step(fn, x))
        with kwker.installed():
            k = best(train_step(fn, x))
        print(f"  {name:<26} forward+backward: torch {t:8.2f} ms  under kwker.install() "
              f"{k:8.2f} ms  {t / k:5.2f}x")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--large", action="store_true",
                        help="also time large inputs and install()'s training step")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    x = torch.randn(8, 8)
    lib, alternatives = _alternatives()
    rows = {
        "torch.topk(x, 3)": torch.topk,
        "torch.ops.kwker.topk(x, 3)": torch.ops.kwker.topk,
        "torch.ops.kwker.topk.default(x, 3)": torch.ops.kwker.topk.default,
        "CPU kernel called from Python (no dispatcher)": eager.topk_cpu,
        **alternatives,
    }
    sorts = {
        "torch.sort(x, stable=True)": lambda t, _: torch.sort(t, stable=True),
        "torch.ops.kwker.sort(x)": lambda t, _: torch.ops.kwker.sort(t),
        "torch.median(x, 1)": lambda t, _: torch.median(t, 1),
        "torch.ops.kwker.median(x, 1)": lambda t, _: torch.ops.kwker.median(t, 1),
        # an overloaded packet resolves the overload on every call
        "torch.ops.kwker.median.dim(x, 1)": lambda t, _: torch.ops.kwker.median.dim(t, 1),
    }
    print(f"8x8 float32, one thread, min of {args.rounds} rounds of {args.calls} calls "
          f"(torch {torch.__version__})")
    for name, us in _best_times({**rows, **sorts}, x, args.calls, args.rounds).items():
        print(f"  {name:<48} {us:6.1f} µs")
    del lib
    if args.large:
        _large_inputs(rounds=5)


if __name__ == "__main__":
    main()
