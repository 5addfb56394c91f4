"""Differential test of topk / median / nanmedian against torch, aimed at the
selection kernels: long rows, heavy ties (bf16-rounded logits), all-equal
rows, -inf masks, k around torch's k*64 <= len switch, MoE shapes, every
dtype topk supports, NaN- and +-0-heavy medians.

    PYTHONPATH=. python tests/native/select_diff.py [SEED] [ROUNDS]
prints "bad 0" when everything matches bit for bit.
"""
import sys
import torch
from kwker._native import ORDER_TORCH, ORDER_STABLE
from kwker.ops import selection

seed = int(sys.argv[1]) if len(sys.argv) > 1 else 0
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 1
torch.manual_seed(seed)
bad = 0
checks = 0
DTYPES = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
          torch.float16, torch.bfloat16, torch.float32, torch.float64]


def same(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(
        a.flatten().view(torch.uint8), b.flatten().view(torch.uint8))


def report(what, *info):
    global bad
    bad += 1
    if bad < 30:
        print("MISMATCH", what, *info)


def stable_topk(x, k, largest):
    # reference for ORDER_STABLE: stable sort, first k
    v, i = torch.sort(x, dim=1, descending=largest, stable=True)
    return v[:, :k], i[:, :k]


def check_topk(x, k, largest=True, srt=True, tag=""):
    global checks
    checks += 1
    v, i = torch.topk(x, k, dim=1, largest=largest, sorted=srt)
    v2, i2 = selection.topk(x, k, 1, largest, srt, ORDER_TORCH)
    if not (torch.equal(i, i2) and same(v, v2)):
        report("topk torch", tag, x.dtype, tuple(x.shape), k, largest, srt)
    if srt:
        v, i = stable_topk(x, k, largest)
        v2, i2 = selection.topk(x, k, 1, largest, srt, ORDER_STABLE)
        if x.dtype == torch.bfloat16:
            # torch's topk emits NaN canonically for bf16; compare keys via float
            v = torch.where(torch.isnan(v), torch.full_like(v, float("nan")), v)
        if not (torch.equal(i, i2) and same(v.contiguous(), v2)):
            report("topk stable", tag, x.dtype, tuple(x.shape), k, largest)


def check_median(x, tag=""):
    global checks
    for nan in (False, True):
        checks += 1
        f = torch.nanmedian if nan else torch.median
        v, i = f(x, 1)
        v2, i2 = selection.median_dim(x, 1, False, nan)
        if not (torch.equal(i, i2) and same(v, v2)):
            report("median_dim", tag, x.dtype, tuple(x.shape), nan)
        v = f(x)
        v2 = selection.median_all(x, nan)
        if not same(v, v2):
            report("median_all", tag, x.dtype, tuple(x.shape), nan, v, v2)


def make(kind, rows, n, dt):
    if kind == "logits":
        x = torch.randn(rows, n) * 2
    elif kind == "equal":
        x = torch.full((rows, n), 1.5)
    elif kind == "two":
        x = torch.randint(0, 2, (rows, n)).float()
    elif kind == "masked":
        x = torch.randn(rows, n)
        x[torch.rand(rows, n) < 0.9] = float("-inf")
    elif kind == "nan":
        x = torch.randn(rows, n).round()
        x[torch.rand(rows, n) < 0.3] = float("nan")
    elif kind == "zeros":
        x = torch.zeros(rows, n)
        x[torch.rand(rows, n) < 0.5] = -0.0
        x[torch.rand(rows, n) < 0.2] = 1.0
    elif kind == "sorted":
        x = torch.arange(rows * n).reshape(rows, n).float() % 97
    elif kind == "allnan":
        x = torch.full((rows, n), float("nan"))
    else:
        raise ValueError(kind)
    if dt.is_floating_point:
        return x.to(dt)
    y = torch.nan_to_num(x, nan=3.0, posinf=100.0, neginf=-100.0).round()
    if dt == torch.uint8:
        y = y.abs()
    return y.clamp(-128 if dt == torch.int8 else -1000, 127 if dt in (torch.int8, torch.uint8) else 1000).to(dt)


for rnd in range(rounds):
    # long rows with heavy ties, k around the k*64 <= len switch
    for n in (1000, 4096, 32000, 200000):
        for kind in ("logits", "masked", "equal", "two", "nan"):
            x = make(kind, 2, n, torch.bfloat16 if kind == "logits" else torch.float32)
            ks = {0, 1, 2, 8, 50, 100, n // 64, n // 64 + 1, n - 1, n}
            if n > 4096:
                ks -= {n - 1, n}
            for k in sorted(ks):
                for largest in (True, False):
                    for srt in (True, False):
                        if n >= 32000 and not srt and k > 100:
                            continue
                        check_topk(x, k, largest, srt, kind)
    # every dtype, moderate rows
    for dt in DTYPES:
        for kind in ("logits", "equal", "two", "masked", "sorted") + (("nan", "zeros") if dt.is_floating_point else ()):
            for n in (1, 7, 63, 64, 65, 128, 640, 1100):
                x = make(kind, 3, n, dt)
                for k in sorted({0, 1, 2, 8, n // 64, n // 2, n - 1, n} & set(range(0, n + 1))):
                    for largest in (True, False):
                        for srt in (True, False):
                            check_topk(x, k, largest, srt, kind)
                check_median(x, kind)
    # MoE router shapes
    for n in (8, 64, 128, 256):
        for dt in (torch.float32, torch.bfloat16):
            x = torch.randn(512, n).to(dt)
            for k in range(1, 9):
                if k <= n:
                    for srt in (True, False):
                        check_topk(x, k, True, srt, "moe")
    # vocab rows, bf16-rounded
    for n in (32000, 128256):
        x = (torch.randn(8, n) * 3).to(torch.bfloat16)
        for k in (1, 50, 100):
            check_topk(x, k, True, True, "vocab")
            check_topk(x.float(), k, True, True, "vocab-f32")
    # medians: NaN-heavy, +-0-heavy, all-NaN, long rows, strided rows
    for dt in (torch.float32, torch.float64, torch.bfloat16, torch.float16):
        for kind in ("nan", "zeros", "allnan", "logits", "equal", "two"):
            for n in (1, 2, 3, 33, 999, 1000, 5000, 100000):
                rows = 1 if n >= 100000 else 3
                check_median(make(kind, rows, n, dt), kind)
    for dt in (torch.int32, torch.int64, torch.uint8, torch.int16, torch.int8):
        for n in (1000, 100001):
            check_median(make("logits", 2, n, dt), "int")
    x = torch.randn(300, 40)
    v, i = torch.median(x.t(), 1)  # strided rows
    v2, i2 = selection.median_dim(x.t(), 1, False, False)
    checks += 1
    if not (torch.equal(i, i2) and same(v, v2)):
        report("median strided")
    v, i = torch.topk(x.t(), 5, 1)
    v2, i2 = selection.topk(x.t(), 5, 1, True, True, ORDER_TORCH)
    checks += 1
    if not (torch.equal(i, i2) and same(v, v2)):
        report("topk strided")

print("checks", checks)
print("bad", bad)
