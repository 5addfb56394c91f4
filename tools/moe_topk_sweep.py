"""topk of MoE router shapes (issue 4: 4096 tokens x 8/64/128/256 experts,
k 1..8) under install()'s defaults against torch:

    python tools/moe_topk_sweep.py [rounds=N]

float32 rows of two kinds: "randn" (tie-free logits) and "smx_bf16" (the
softmax of bf16-rounded logits, as MoE routers compute their weights: equal
logits give equal weights, so some rows' top k + 1 hold ties and take the
emulation of torch's order).  Each call cycles through 8 inputs of its kind
(one repeated input is learnt by the branch predictors); torch and Kwker
alternate in one process, min over the rounds, one thread.  Prints torch's
and Kwker's time per call and the ratio, then the median ratio."""
import statistics
import sys
import timeit

import torch

import kwker

torch.set_num_threads(1)
EXPERTS = (8, 64, 128, 256)
KS = (1, 2, 4, 8)
KINDS = ("randn", "smx_bf16")


def inputs(experts, kind, seed):
    g = torch.Generator().manual_seed(seed)
    xs = []
    for _ in range(8):
        x = torch.randn(4096, experts, generator=g)
        if kind == "smx_bf16":
            x = torch.softmax(x.bfloat16().float() * 2, -1)
        xs.append(x)
    return xs


def main():
    rounds = 5
    for a in sys.argv[1:]:
        if a.startswith("rounds="):
            rounds = int(a.split("=")[1])
    ratios = []
    for experts in EXPERTS:
        for k in KS:
            if k >= experts:
                continue
            for kind in KINDS:
                xs = inputs(experts, kind, experts * 100 + k)
                best = [float("inf"), float("inf")]
                for _ in range(rounds):
                    for i in (0, 1):
                        if i:
                            kwker.install()
                        t = timeit.timeit(lambda: [torch.topk(x, k, dim=-1) for x in xs], number=3)
                        kwker.uninstall()
                        best[i] = min(best[i], t / 3 / len(xs) * 1e6)
                ratios.append(best[0] / best[1])
                print(f"4096x{experts:<3d} k={k} {kind:9s} torch {best[0]:8.1f} us  "
                      f"kwker {best[1]:7.1f} us  {best[0] / best[1]:6.2f}x", flush=True)
    print(f"median {statistics.median(ratios):.2f}x over {len(ratios)} calls, "
          f"min {min(ratios):.2f}x, max {max(ratios):.2f}x")


if __name__ == "__main__":
    main()
