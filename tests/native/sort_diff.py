"""Differential test of kwker's sort against torch 2.13 on the inputs that
reach the deep paths of the kernels: long rows (1000..200000) with heavy
ties, all-equal rows, sorted / reversed / organ-pipe / sawtooth rows, rows
built by a McIlroy adversary against libstdc++'s introsort (so torch itself
falls back to heap sort at the depth limit), for every dtype, both
directions, stable and torch order (uint16/32/64: stable only where torch
sorts them).

    PYTHONPATH=. python tests/native/sort_diff.py [SEED] [SCALE]
    KWKER_TARGET=portable PYTHONPATH=. python tests/native/sort_diff.py

Prints "bad 0" when everything matches bit for bit.
"""
import sys

import torch

from kwker._native import ORDER_STABLE, ORDER_TORCH
from kwker.ops import sorting

SEED = int(sys.argv[1]) if len(sys.argv) > 1 else 0
SCALE = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0
torch.manual_seed(SEED)
torch.set_num_threads(1)

DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
          torch.float16, torch.bfloat16, torch.float32, torch.float64]
UNSIGNED = [torch.uint16, torch.uint32, torch.uint64]


def same_bits(a, b):
    return (a.dtype == b.dtype and a.shape == b.shape
            and torch.equal(a.contiguous().view(-1).view(torch.uint8),
                            b.contiguous().view(-1).view(torch.uint8)))


# --- McIlroy's adversary ("A killer adversary for quicksort") against the
# libstdc++ introsort that torch runs: a Python port of its moves with a
# comparator that fixes values lazily so that pivots come out bad.
def _introsort_ids(ids, less, stats):
    def move_median_to_first(result, a, b, c):
        if less(ids[a], ids[b]):
            if less(ids[b], ids[c]):
                ids[result], ids[b] = ids[b], ids[result]
            elif less(ids[a], ids[c]):
                ids[result], ids[c] = ids[c], ids[result]
            else:
                ids[result], ids[a] = ids[a], ids[result]
        elif less(ids[a], ids[c]):
            ids[result], ids[a] = ids[a], ids[result]
        elif less(ids[b], ids[c]):
            ids[result], ids[c] = ids[c], ids[result]
        else:
            ids[result], ids[b] = ids[b], ids[result]

    def partition(first, last, pivot):
        while True:
            while less(ids[first], ids[pivot]):
                first += 1
            last -= 1
            while less(ids[pivot], ids[last]):
                last -= 1
            if not first < last:
                return first
            ids[first], ids[last] = ids[last], ids[first]
            first += 1

    def loop(first, last, depth):
        while last - first > 16:
            if depth == 0:
                stats["heap"] += 1
                # heap sort of the range: any comparisons will do for the
                # adversary (values get fixed consistently)
                sub = ids[first:last]
                import functools
                sub.sort(key=functools.cmp_to_key(lambda x, y: -1 if less(x, y) else (1 if less(y, x) else 0)))
                ids[first:last] = sub
                return
            depth -= 1
            mid = first + (last - first) // 2
            move_median_to_first(first, first + 1, mid, last - 1)
            cut = partition(first + 1, last, first)
            loop(cut, last, depth)
            last = cut

    n = len(ids)
    loop(0, n, 2 * (n.bit_length() - 1))


def adversary_input(n):
    gas = n
    val = [gas] * n
    state = {"solid": 0, "candidate": -1}

    def freeze(x):
        val[x] = state["solid"]
        state["solid"] += 1

    def less(x, y):
        if val[x] == gas and val[y] == gas:
            freeze(x if x == state["candidate"] else y)
        if val[x] == gas:
            state["candidate"] = x
        elif val[y] == gas:
            state["candidate"] = y
        return val[x] < val[y]

    stats = {"heap": 0}
    _introsort_ids(list(range(n)), less, stats)
    return torch.tensor(val, dtype=torch.int64), stats["heap"]


def rows_for(kind, rows, n, dt):
    """an int64 'level' tensor of the kind, then cast to dt"""
    if kind == "ties":
        lv = torch.randint(0, max(2, n // 50), (rows, n))
    elif kind == "fewties":
        lv = torch.randint(0, 5, (rows, n))
    elif kind == "equal":
        lv = torch.full((rows, n), 3)
    elif kind == "sorted":
        lv = (torch.arange(n) // 3).expand(rows, n).clone()
    elif kind == "reversed":
        lv = ((n - torch.arange(n)) // 3).expand(rows, n).clone()
    elif kind == "organ":
        a = torch.arange(n)
        lv = torch.minimum(a, n - a).expand(rows, n).clone()
    elif kind == "sawtooth":
        lv = (torch.arange(n) % 97).expand(rows, n).clone()
    elif kind == "randn":
        x = torch.randn(rows, n) * 3
        if dt.is_floating_point:
            x = x.to(dt)
            x[:, ::11] = float("nan")
            x[:, 1::13] = -0.0
            x[:, 2::17] = float("inf")
            return x
        lv = x.round().long()
    else:
        raise ValueError(kind)
    if dt == torch.bool:
        return (lv % 2).bool()
    if dt == torch.uint8:
        return (lv % 256).to(dt)
    if dt == torch.int8:
        return (lv % 256 - 128).to(dt)
    if dt in (torch.float16, torch.bfloat16):
        return (lv % 2000).to(dt)  # exact in both
    if dt in UNSIGNED:
        return lv.abs().to(dt)
    return lv.to(dt)


bad = 0
checked = 0


def check(x, stable_only=False, label=""):
    global bad, checked
    for desc in (False, True):
        for stable in ((True,) if stable_only else (False, True)):
            try:
                v, i = torch.sort(x, dim=-1, descending=desc, stable=stable)
            except (RuntimeError, NotImplementedError):
                return
            v2, i2 = sorting.sort(x, x.dim() - 1, desc, ORDER_STABLE if stable else ORDER_TORCH)
            checked += 1
            if not (torch.equal(i, i2) and same_bits(v, v2)):
                bad += 1
                if bad < 20:
                    print("mismatch", label, x.dtype, tuple(x.shape), "desc", desc, "stable", stable)


LENGTHS = [17, 33, 200, 1000, 1500, 4097, 20000, 65537, 200000]
for n in LENGTHS:
    rows = max(1, int(200000 * SCALE) // (n * 8))
    for kind in ["ties", "fewties", "equal", "sorted", "reversed", "organ", "sawtooth", "randn"]:
        if n >= 65537 and kind in ("sorted", "sawtooth", "fewties") and SCALE < 2:
            continue
        for dt in DTYPES:
            check(rows_for(kind, min(rows, 3), n, dt), label=f"{kind} n={n}")
        for dt in UNSIGNED:
            check(rows_for(kind, 1, n, dt), stable_only=True, label=f"{kind} n={n}")

# adversarial rows: torch's own sort goes to heap sort on them
for n in (300, 1000, 3000):
    lv, heaps = adversary_input(n)
    assert heaps > 0, "the adversary did not reach the depth limit"
    for dt in (torch.int32, torch.int64, torch.float32, torch.float64, torch.int16):
        x = lv.to(dt)
        check(x.unsqueeze(0), label=f"adversary n={n} heaps={heaps}")
        check((x // 7).unsqueeze(0), label=f"adversary//7 n={n}")
        check((-x).unsqueeze(0), label=f"-adversary n={n}")

print("checked", checked, "bad", bad)
