"""Speed of kwker.nn's top-k layers against their plain-torch references
(kwker.nn.reference_topk), one thread, same run; printed by
python -m kwker.nn.bench (or python -m kwker.nn.bench_topk alone).

Rows: the TopK SAE activation at widths 16k-64k (forward, forward+backward),
the MoE router on 4096 tokens (forward, forward+backward of the weights),
and the logits filters on vocabularies of 32k and 128k (forward: sampling
runs without gradients).  Every row first checks the outputs are equal."""
import argparse

import torch

from kwker.nn import reference_topk as R
from kwker.nn import topk_layers as T
from kwker.nn.bench import best_per_input, forward_backward, variants

SAE = [(64, 16384, 32), (256, 16384, 64), (64, 65536, 128), (256, 65536, 256)]
SAE_QUICK = [(64, 16384, 32), (64, 65536, 128)]
MOE_EXPERTS = (8, 64, 128, 256)
MOE_K = (1, 2, 8)
VOCABS = (32000, 128256)
BATCHES = (1, 8, 32)
FILTERS = (("top-k 50", R.top_k_filter, T.top_k_filter, 50),
           ("top-p 0.9", R.top_p_filter, T.top_p_filter, 0.9),
           ("min-p 0.05", R.min_p_filter, T.min_p_filter, 0.05))


def _same(a, b):
    if isinstance(a, tuple):
        return all(_same(x, y) for x, y in zip(a, b))
    return torch.equal(a, b) or (a.is_floating_point() and torch.equal(a.isnan(), b.isnan())
                                 and torch.equal(a.nan_to_num(), b.nan_to_num()))


def _row(label, ref, fast, x, grad, repeats):
    xs = variants(x)
    for v in xs:
        assert _same(ref(v), fast(v)), label
    t_ref = best_per_input(lambda v: lambda: ref(v), xs, repeats)
    t_fast = best_per_input(lambda v: lambda: fast(v), xs, repeats)
    if grad is None:
        return label, t_ref, t_fast, None, None
    xgs = [v.clone().requires_grad_() for v in xs]
    b_ref = best_per_input(lambda v: forward_backward(ref, v, grad), xgs, repeats)
    b_fast = best_per_input(lambda v: forward_backward(fast, v, grad), xgs, repeats)
    return label, t_ref, t_fast, b_ref, b_fast


def rows(repeats, quick=False):
    gen = torch.Generator().manual_seed(0)
    for batch, width, k in (SAE_QUICK if quick else SAE):
        x = torch.randn(batch, width, generator=gen)
        grad = torch.randn(batch, width, generator=gen)
        yield _row(f"topk act {batch}x{width} k={k}", lambda t: R.topk_activation(t, k),
                   lambda t: T.topk_activation(t, k), x, grad, repeats)
    for experts in MOE_EXPERTS[1::2] if quick else MOE_EXPERTS:
        logits = torch.randn(4096, experts, generator=gen)
        for k in MOE_K:
            grad = torch.randn(4096, k, generator=gen)
            yield _row(f"router 4096x{experts} k={k}", lambda t: R.topk_softmax(t, k),
                       lambda t: T.topk_softmax(t, k), logits, grad, repeats)
    for vocab in VOCABS:
        for batch in BATCHES[::2] if quick else BATCHES:
            scores = torch.randn(batch, vocab, generator=gen) * 2
            for name, ref, fast, value in FILTERS:
                yield _row(f"{name} {batch}x{vocab}", lambda t: ref(t, value),
                           lambda t: fast(t, value), scores, None, repeats)


def print_rows(repeats, quick=False):
    print(f"\ntop-k layers, float32, 1 thread; ms per call (min of {repeats}); "
          "ratio = reference / kwker")
    print(f"{'layer':>30} {'fwd ref':>8} {'fwd kwk':>8} {'x':>6} {'f+b ref':>8} "
          f"{'f+b kwk':>8} {'x':>6}")
    for label, t_ref, t_fast, b_ref, b_fast in rows(repeats, quick):
        back = (f"{b_ref * 1e3:8.2f} {b_fast * 1e3:8.2f} {b_ref / b_fast:5.1f}x"
                if b_ref is not None else f"{'-':>8} {'-':>8} {'-':>6}")
        print(f"{label:>30} {t_ref * 1e3:8.3f} {t_fast * 1e3:8.3f} {t_ref / t_fast:5.1f}x "
              f"{back}", flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    print_rows(args.repeats, args.quick)


if __name__ == "__main__":
    main()
