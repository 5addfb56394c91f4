"""Speed of the sparse layers (sparsemax, entmax15, GroupSort, SortPooling)
against their plain-torch references, in one run, one thread; printed by
python -m kwker.nn.bench (or python -m kwker.nn.bench_sparse alone).

Sizes: sparsemax/entmax15 over attention rows (256 heads x 50 queries x 50
keys), a 32k vocabulary (64 x 32000, logits ~ N(0, 1) and N(0, 3^2)) and
TabNet's attentive transformer (1024 x 54); GroupSort on 128 x 256 with
groups of 2 (MaxMin) and 4; SortPooling with PyG's PROTEINS settings
(batch 128, up to 336 nodes, 97 channels, k = 30, ragged graphs)."""
import argparse

import torch

from kwker.nn import reference_sparse as R
from kwker.nn import sparse as S
from kwker.nn.bench import best_per_input, forward_backward, variants


def _cases():
    gen = torch.Generator().manual_seed(0)
    randn = lambda *shape: torch.randn(shape, generator=gen)  # noqa: E731
    attention, vocab, tabnet = randn(256, 50, 50), randn(64, 32000), randn(1024, 54)
    counts = torch.randint(10, 337, (128,), generator=gen)
    graphs = randn(128, 336, 97)
    cases = []
    for name, fast, ref in (("sparsemax", S.sparsemax, R.sparsemax),
                            ("entmax15", S.entmax15, R.entmax15)):
        for label, x in (("256x50x50", attention), ("64x32000", vocab),
                         ("64x32000 x3", vocab * 3), ("1024x54", tabnet)):
            cases.append((name, label, x, fast, ref))
    x = randn(128, 256)
    for g in (2, 4):
        cases.append((f"group_sort g={g}", "128x256", x,
                      lambda t, g=g: S.group_sort(t, g), lambda t, g=g: R.group_sort(t, g)))
    cases.append(("sort_pool k=30", "128x336x97", graphs,
                  lambda t: S.sort_pool(t, 30, counts), lambda t: R.sort_pool(t, 30, counts)))
    return cases


def rows(repeats):
    out = []
    for name, label, x, fast, ref in _cases():
        xs = variants(x)
        for v in xs:  # timed only when bit-identical
            want = ref(v)
            assert torch.equal(want, fast(v)), name
        t_ref = best_per_input(lambda v: lambda: ref(v), xs, repeats)
        t_fast = best_per_input(lambda v: lambda: fast(v), xs, repeats)
        xgs = [v.clone().requires_grad_() for v in xs]
        grad = torch.randn(want.shape, generator=torch.Generator().manual_seed(1))
        b_ref = best_per_input(lambda v: forward_backward(ref, v, grad), xgs, repeats)
        b_fast = best_per_input(lambda v: forward_backward(fast, v, grad), xgs, repeats)
        out.append((name, label, t_ref, t_fast, b_ref, b_fast))
    return out


def print_rows(repeats):
    print("sparse layers, float32, 1 thread; ms per call (min of "
          f"{repeats}); ratio = reference / kwker")
    print(f"{'layer':>17} {'input':>12} {'fwd ref':>8} {'fwd kwk':>8} {'x':>6} "
          f"{'f+b ref':>8} {'f+b kwk':>8} {'x':>6}")
    for name, label, t_ref, t_fast, b_ref, b_fast in rows(repeats):
        print(f"{name:>17} {label:>12} {t_ref * 1e3:8.3f} {t_fast * 1e3:8.3f} "
              f"{t_ref / t_fast:5.1f}x {b_ref * 1e3:8.3f} {b_fast * 1e3:8.3f} "
              f"{b_ref / b_fast:5.1f}x")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    print_rows(args.repeats)


if __name__ == "__main__":
    main()
