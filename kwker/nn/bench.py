"""Speed of kwker.nn's layers against their plain-torch references, in one
run, on one thread: python -m kwker.nn.bench [--repeats N] [--quick]

Each figure is the minimum over repeats of a timed loop; ratios are
reference time / Kwker time.  Where installed, kornia's median_blur, OpenCV's
medianBlur and scipy.ndimage.median_filter are timed on the same input
(forward only for OpenCV and scipy: they have no backward)."""
import argparse
import importlib.util
import timeit

import torch

from kwker.nn import functional as KF
from kwker.nn import reference as R

# (input shape, window side): the 3x3 network, the 5x5 one written out,
# and a generated 7x7 network
CASES = [((1, 3, 224, 224), 3), ((64, 3, 64, 64), 3), ((1, 3, 224, 224), 5),
         ((64, 3, 64, 64), 5), ((1, 3, 224, 224), 7)]


def best(fn, repeats, budget=0.2):
    """Seconds per call: the fastest of `repeats` loops, each ~budget/repeats
    long."""
    fn()
    once = min(timeit.repeat(fn, number=1, repeat=3))
    number = max(1, int(budget / repeats / max(once, 1e-6)))
    return min(timeit.repeat(fn, number=number, repeat=repeats)) / number


def variants(x, seed=0):
    """x, then copies of it with its elements in new random orders: as many inputs
    as kwker.bench.corpus.variant_count gives x's size (one for large inputs).  A
    timed loop cycles through them because a single input repeated is learnt by
    the CPU's branch predictors, which flatters branchy code such as torch's
    sorts (kwker.bench.corpus.make_variants has the measurements)."""
    from kwker.bench.corpus import variant_count
    gen = torch.Generator().manual_seed(seed)
    flat = x.reshape(-1)
    return [x] + [flat[torch.randperm(flat.numel(), generator=gen)].view_as(x)
                  for _ in range(variant_count(x.numel()) - 1)]


def best_per_input(make_run, xs, repeats):
    """Seconds per input: best() of a loop running make_run(x)() for each x in xs,
    divided by their number."""
    runs = [make_run(x) for x in xs]

    def every_input():
        for run in runs:
            run()
    return best(every_input, repeats) / len(runs)


def forward_backward(fn, x, grad):
    """A call of fn(x) and its backward with `grad` (the first output's, for
    layers returning several)."""
    def run():
        x.grad = None
        out = fn(x)
        (out[0] if isinstance(out, tuple) else out).backward(grad)
    return run


def median_pool2d_rows(repeats):
    rows = []
    for shape, k in CASES:
        gen = torch.Generator().manual_seed(0)
        x = torch.randn(shape, generator=gen)
        args = ((k, k), (1, 1), (k // 2,) * 4, "reflect")
        ref = lambda t: R.median_pool2d(t, *args)  # noqa: E731
        fast = lambda t: KF.median_pool2d(t, k)  # noqa: E731
        assert torch.equal(ref(x), fast(x))
        t_ref, t_fast = best(lambda: ref(x), repeats), best(lambda: fast(x), repeats)
        others = {}
        if importlib.util.find_spec("kornia"):
            import kornia
            others["kornia"] = best(lambda: kornia.filters.median_blur(x, k), repeats)
        if importlib.util.find_spec("cv2") and k <= 5:  # medianBlur: float32 up to 5x5
            import cv2
            cv2.setNumThreads(1)  # one thread, as torch and Kwker here
            planes = x.reshape(-1, *shape[-2:]).numpy()
            others["opencv"] = best(lambda: [cv2.medianBlur(p, k) for p in planes], repeats)
        if importlib.util.find_spec("scipy"):
            from scipy import ndimage
            arr = x.numpy()
            others["scipy"] = best(lambda: ndimage.median_filter(arr, size=(1, 1, k, k),
                                                                 mode="mirror"), repeats)
        xg = x.clone().requires_grad_()
        grad = torch.randn(shape, generator=gen)
        b_ref = best(forward_backward(ref, xg, grad), repeats)
        b_fast = best(forward_backward(fast, xg, grad), repeats)
        rows.append((shape, k, t_ref, t_fast, b_ref, b_fast, others))
    return rows


def median_pool1d_rows(repeats):
    """(shape, k, reference, Kwker, reference f+b, Kwker f+b, whisper's
    recipe) for 1-d filters: whisper's timing median filter (F.pad reflect,
    Tensor.unfold, sort, the middle element; values only)."""
    rows = []
    for shape, k in (((10, 40, 1500), 3), ((10, 40, 1500), 7)):
        gen = torch.Generator().manual_seed(0)
        x = torch.randn(shape, generator=gen)
        args = (k, 1, (k // 2, k // 2), "reflect")
        ref = lambda t: R.median_pool1d(t, *args)  # noqa: E731
        fast = lambda t: KF.median_pool1d(t, k)  # noqa: E731
        whisper = lambda t: torch.nn.functional.pad(  # noqa: E731
            t, (k // 2, k // 2), mode="reflect").unfold(-1, k, 1).sort()[0][..., k // 2]
        assert torch.equal(ref(x), fast(x)) and torch.equal(whisper(x), fast(x))
        xg = x.clone().requires_grad_()
        grad = torch.randn(shape, generator=gen)
        rows.append((shape, k, best(lambda: ref(x), repeats), best(lambda: fast(x), repeats),
                     best(forward_backward(ref, xg, grad), repeats),
                     best(forward_backward(fast, xg, grad), repeats),
                     best(lambda: whisper(x), repeats)))
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="fewer top-k layer rows")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    print("median_pool2d kxk, stride 1, reflect padding, float32, 1 thread; ms per call (min of "
          f"{args.repeats})")
    print(f"{'input':>16} {'k':>2} {'fwd ref':>8} {'fwd kwk':>8} {'x':>6} {'f+b ref':>8} "
          f"{'f+b kwk':>8} {'x':>6}  others (fwd ms, ratio to kwker)")
    for shape, k, t_ref, t_fast, b_ref, b_fast, others in median_pool2d_rows(args.repeats):
        extra = "  ".join(f"{name} {t * 1e3:.2f} ({t / t_fast:.1f}x)"
                          for name, t in others.items())
        print(f"{'x'.join(map(str, shape)):>16} {k:2d} {t_ref * 1e3:8.2f} {t_fast * 1e3:8.2f} "
              f"{t_ref / t_fast:5.1f}x {b_ref * 1e3:8.2f} {b_fast * 1e3:8.2f} "
              f"{b_ref / b_fast:5.1f}x  {extra}")
    print("median_pool1d, stride 1, reflect padding, float32, 1 thread; ms per call")
    for shape, k, t_ref, t_fast, b_ref, b_fast, t_whisper in median_pool1d_rows(args.repeats):
        print(f"{'x'.join(map(str, shape)):>16} {k:2d} {t_ref * 1e3:8.2f} {t_fast * 1e3:8.2f} "
              f"{t_ref / t_fast:5.1f}x {b_ref * 1e3:8.2f} {b_fast * 1e3:8.2f} "
              f"{b_ref / b_fast:5.1f}x  whisper's unfold + sort {t_whisper * 1e3:.2f} "
              f"({t_whisper / t_fast:.1f}x)")
    print()
    from kwker.nn import bench_sparse
    bench_sparse.print_rows(args.repeats)
    print()
    from kwker.nn import bench_topk
    bench_topk.print_rows(args.repeats, args.quick)


if __name__ == "__main__":
    main()
