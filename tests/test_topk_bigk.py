"""Differential tests of topk in torch's nth_element branch (k * 64 > row
length: large k, mid-length rows) against torch 2.13: values bit for bit
and indices, torch's order of tied values included (native/src/topk_nth.h:
candidates from a sampled threshold when the k + 1 smallest keys are
distinct, the word emulation of nth_element + std::sort otherwise).

Rows: tie-free floats, bf16/f16-rounded values (ties everywhere), small
ints, all equal, -inf masses (masked scores), +-0, NaN; k at both ends of
the branch (the smallest k with k * 64 > n, n/2, n - 1, n) and the corpus'
large k (2016 of 16352); largest and sorted both ways; strided rows; the
stable order (ties="stable") against a stable sort.
"""
import pytest
import torch

from kwker_testing import ORIG, compare

# lengths around the word/sample sizes (sample 64..1024 keys), the AVX2
# compress's 8-lane groups, and the corpus' rows
LENGTHS = (65, 127, 1000, 1024, 2048, 4097, 16352)
FLOAT_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def ks_for(n):
    """k in the nth_element branch (k * 64 > n): its smallest, 20 and 31
    (the lane-minima threshold takes k + 1 <= 32), n/8, n/2, n/2 + 1, n - 1,
    n, and snapkv's 2016 where it fits."""
    ks = {n // 64 + 1, 20, 31, n // 8, n // 2, n // 2 + 1, n - 1, n, 2016}
    return sorted(k for k in ks if 1 <= k <= n and k * 64 > n)


def rows_for(n):
    """Enough rows for the fast path's minimum size (8192 elements)."""
    return max(2, -(-8192 // n))


def make_rows(kind, n, dtype, gen):
    r = rows_for(n)
    if kind == "random":
        x = torch.randn(r, n, generator=gen, dtype=torch.float64)
        return x.to(dtype) if dtype == torch.float32 else x.to(torch.float32).to(dtype)
    if kind == "rounded":  # bf16-rounded normals: ties everywhere
        return torch.randn(r, n, generator=gen).to(torch.bfloat16).to(dtype)
    if kind == "smallint":
        return torch.randint(0, 7, (r, n), generator=gen).to(dtype)
    if kind == "equal":
        return torch.full((r, n), 2.5, dtype=dtype)
    if kind == "minus_inf_mass":  # causal-masked scores: a -inf tail
        x = torch.randn(r, n, generator=gen).to(dtype)
        for i in range(r):
            x[i, (i * n) // (2 * r) + n // 4:] = float("-inf")
        return x
    if kind == "zeros":  # +0.0 / -0.0 masses with a few others
        x = torch.where(torch.rand(r, n, generator=gen) < 0.5, 0.0, -0.0).to(dtype)
        x[:, ::13] = torch.randn(r, x[:, ::13].shape[1], generator=gen).to(dtype)
        return x
    if kind == "nan":
        x = torch.randn(r, n, generator=gen).to(dtype)
        x[torch.rand(r, n, generator=gen) < 0.1] = float("nan")
        return x
    raise ValueError(kind)


KINDS = ("random", "rounded", "smallint", "equal", "minus_inf_mass", "zeros", "nan")


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("kind", KINDS)
def test_topk_nth_branch(kw, gen, dtype, kind):
    for n in LENGTHS:
        _compare_ks(make_rows(kind, n, dtype, gen), ks_for(n))


def _compare_ks(x, ks):
    """Each k largest and smallest (sorted), and largest unsorted."""
    for k in ks:
        for largest in (True, False):
            compare("topk", x, k, largest=largest)
        compare("topk", x, k, sorted=False)


# heap branch (k * 64 <= n) with k >= 128 (TN_HEAP_MIN_K): candidates first,
# the streamed heap select when the k + 1 smallest hold a tie
HEAP_LENGTHS = (8192, 16352, 40000)


def heap_ks_for(n):
    return sorted(k for k in {127, 128, 129, 200, n // 64} if k * 64 <= n)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("kind", KINDS)
def test_topk_heap_branch_large_k(kw, gen, dtype, kind):
    for n in HEAP_LENGTHS:
        x = make_rows(kind, n, dtype, gen)
        _compare_ks(x, heap_ks_for(n))
        compare("topk", x[:, ::3], 128)  # strided: keys gathered


# Long float32 rows of the heap branch where the sampled threshold expects
# under one candidate in 64 (topk_nth.h's TN_SPARSE: 262144 elements, k of
# 128 and 200): the AVX2 target tests 32 values at a time there, the AVX-512
# one collects them with the branch-free compress of tn_raw_f32_512.
RARE_N, RARE_KS = 262144, (128, 200)


@pytest.mark.parametrize("kind", KINDS)
def test_topk_heap_branch_rare_candidates(kw, gen, kind):
    x = make_rows(kind, RARE_N, torch.float32, gen)
    for k in RARE_KS:
        for largest in (True, False):
            compare("topk", x, k, largest=largest)


def test_topk_heap_branch_rare_candidates_stable(kw_stable, gen):
    for kind in ("random", "rounded", "nan", "minus_inf_mass"):
        x = make_rows(kind, RARE_N, torch.float32, gen)
        for k in RARE_KS:
            for largest in (True, False):
                compare("topk", x, k, largest=largest, reference=_stable_topk)


@pytest.mark.parametrize("dtype", (torch.int32, torch.int16, torch.uint8, torch.int8), ids=str)
def test_topk_nth_branch_ints(kw, gen, dtype):
    for n in (200, 3000, 9000):
        r = rows_for(n)
        lo = 0 if dtype == torch.uint8 else -100
        for x in (torch.randint(lo, 100, (r, n), generator=gen).to(dtype),
                  torch.randint(0, 3, (r, n), generator=gen).to(dtype)):
            for k in ks_for(n) + heap_ks_for(n):
                compare("topk", x, k)
                compare("topk", x, k, largest=False, sorted=False)


def test_topk_nth_branch_corpus_shapes(kw, gen):
    """The corpus' shapes: snapkv (bf16 1x32x16352, k=2016), quest (f16
    2048, k=256), the DSA indexer with causal -inf, torch_prune's k = n/2
    (smallest), a 1024-row kNN (k=20)."""
    x = (torch.rand(1, 32, 16352, generator=gen) ** 4).to(torch.bfloat16)
    compare("topk", x, 2016)
    compare("topk", torch.randn(1, 32, 1, 2048, generator=gen).half(), 256)
    s = torch.rand(64, 8192, generator=gen)
    for i in range(64):
        s[i, 7936 + i * 4:] = float("-inf")
    compare("topk", s, 2048)
    w = torch.randn(589824 // 8, generator=gen).abs()
    compare("topk", w, w.numel() // 2, largest=False)
    compare("topk", -torch.rand(16, 1024, 1024, generator=gen)[:2], 20)


def test_topk_nth_branch_strided(kw, gen):
    """Rows along a non-last dim and with a step (gathered keys)."""
    base = torch.randn(3000, 6, generator=gen).to(torch.bfloat16)
    for k in (100, 1500, 3000):
        compare("topk", base, k, dim=0)
        compare("topk", base.t()[:, ::2], k // 2, dim=1)


def _stable_topk(x, k, largest=True):
    """torch.topk with equal values in index order (ties="stable")."""
    values, indices = ORIG["sort"](x, dim=-1, descending=largest, stable=True)
    return torch.return_types.topk((values[..., :k].contiguous(), indices[..., :k].contiguous()))


@pytest.mark.parametrize("dtype", (torch.float32, torch.float16, torch.int16), ids=str)
def test_topk_nth_branch_stable(kw_stable, gen, dtype):
    for n in (1000, 5000, 16352):
        for kind in ("rounded", "smallint", "zeros", "random"):
            if kind == "zeros" and not dtype.is_floating_point:
                continue
            x = make_rows(kind, n, dtype, gen)
            for k in ks_for(n) + heap_ks_for(n):
                for largest in (True, False):
                    compare("topk", x, k, largest=largest, reference=_stable_topk)


# Rows climbing towards the selected end (ascending rows for the largest,
# descending for the smallest: cumulative sums, sorted scores): nearly every
# element enters the streamed heap or list select, which gives such a row to
# the general path once it has made more insertions than a row in random
# order would (select_kernels.h sw_heap_budget); that path selects exactly
# and emulates torch's order only where the top k + 1 tie.
CLIMB_DTYPES = (torch.float64, torch.int64, torch.bfloat16, torch.float16, torch.int32,
                torch.float32, torch.uint8)


def climbing_rows(dtype, n, gen, ties):
    """Three rows: ascending, ascending but for a shuffled last 5%, random
    (rows of one call taking either path); `ties`: values from a small set,
    so that the top k + 1 hold equal keys."""
    x = torch.randn(3, n, generator=gen, dtype=torch.float64)
    if dtype == torch.uint8:
        x = (x.abs() * (20 if ties else 80)).clamp(max=255)
    elif not dtype.is_floating_point:
        x = x * (8 if ties else 1e6)
    elif ties:
        x = (x * 8).round()
    x[:2] = x[:2].sort(-1).values
    tail = n - n // 20
    x[1, tail:] = x[1, tail:][torch.randperm(n - tail, generator=gen)]
    return x.to(dtype)


@pytest.mark.parametrize("dtype", CLIMB_DTYPES, ids=str)
@pytest.mark.parametrize("ties", (False, True), ids=("distinct", "ties"))
def test_topk_climbing_rows(kw, gen, dtype, ties):
    for n in (8192, 70000):
        x = climbing_rows(dtype, n, gen, ties)
        for k in (1, 8, 15, 20, 100):
            compare("topk", x, k)
            compare("topk", x.flip(-1), k, largest=False)
            compare("topk", x[:, ::2], k)  # strided: no raw-value skip
        compare("topk", x, 8, sorted=False)


@pytest.mark.parametrize("dtype", (torch.float64, torch.int64, torch.bfloat16, torch.float32),
                         ids=str)
def test_topk_climbing_rows_stable(kw_stable, gen, dtype):
    for ties in (False, True):
        x = climbing_rows(dtype, 8192, gen, ties)
        for k in (8, 15, 20, 100):
            compare("topk", x, k, reference=_stable_topk)
            compare("topk", x.flip(-1), k, largest=False,
                    reference=lambda t, k, largest: _stable_topk(t, k, largest))
