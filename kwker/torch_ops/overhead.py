"""Per-call overhead of torch.ops.kwker on tiny inputs, next to torch's own
op and the other ways the same kernel could be registered.

    python -m kwker.torch_ops.overhead [--rounds 40] [--calls 1000]

One thread; per row the minimum over rounds of the mean µs per call.
"""
import argparse
import time

import torch

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


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--calls", type=int, default=1000)
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


if __name__ == "__main__":
    main()
