"""Differential tests of the selection fast paths for long and short rows
(kthvalue over long rows, median/kthvalue over many short rows along a
non-last dim, topk over short MoE-router rows) against torch 2.13: values
bit for bit, indices including torch's order of tied values, NaN placement.

Every length around each kernel's switch points is covered, with tie-heavy
data (small ints, bf16-rounded values, all-equal rows), NaN rows and
non-contiguous / expanded inputs.
"""
import math

import pytest
import torch

from kwker_testing import (LAYOUTS, ORIG, SELECT_DTYPES, compare, layout, make_values)

# kthvalue's long-row kernel starts at 128 elements (KTH_LONG_MIN) and reads
# rows in blocks of 2048 (SW_SRC_BLOCK); its bracket sample grows with sqrt(n)
KTH_LONG_LENGTHS = (127, 128, 129, 300, 1000, 2047, 2048, 2049, 4097, 6000, 20000)


def kth_ranks(n):
    """The ends, the middle, a percentile near each end, and neighbours."""
    return sorted({k for k in (1, 2, n // 100 + 1, n // 2, n // 2 + 1, n - n // 1000 - 1,
                               n - 1, n) if 1 <= k <= n})


def _tie_kinds(n, dtype, gen):
    """Rows whose k-th value is shared: small ints, bf16-rounded normals,
    all equal, two values, a sea of zeros (+0.0 and -0.0) with a few others."""
    out = {
        "smallint": torch.randint(0, 5, (n,), generator=gen).to(dtype),
        "equal": torch.full((n,), 3, dtype=dtype),
        "two": (torch.randint(0, 2, (n,), generator=gen) * 7).to(dtype),
    }
    if dtype.is_floating_point:
        out["bf16"] = torch.randn(n, generator=gen).to(torch.bfloat16).to(dtype)
        z = torch.zeros(n, dtype=dtype)
        z[torch.rand(n, generator=gen) < 0.5] = -0.0
        z[torch.rand(n, generator=gen) < 0.1] = 1.5
        out["zeros"] = z
    return out


@pytest.mark.parametrize("dtype", SELECT_DTYPES, ids=str)
def test_kthvalue_long_rows(kw, gen, dtype):
    for n in KTH_LONG_LENGTHS:
        xs = dict(_tie_kinds(n, dtype, gen))
        xs["random"] = make_values("random", (n,), dtype, gen)
        for name, x in xs.items():
            for k in kth_ranks(n):
                compare("kthvalue", x, k, 0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16],
                         ids=str)
def test_kthvalue_long_rows_nan(kw, gen, dtype):
    """NaN is the largest value: ranks inside the NaNs give torch's NaN
    (its bits and index among several NaNs), ranks below them do not."""
    for n in (512, 3000, 9000):
        x = torch.randn(n, generator=gen).to(dtype)
        x[torch.rand(n, generator=gen) < 0.2] = float("nan")
        x[5] = -float("nan")
        for k in kth_ranks(n):
            compare("kthvalue", x, k, 0)
        compare("kthvalue", torch.full((n,), float("nan"), dtype=dtype), n // 2, 0)


@pytest.mark.parametrize("lay", LAYOUTS)
def test_kthvalue_long_rows_layouts(kw, gen, lay):
    """Strided rows (a non-last dim, steps, offsets) and several rows per call."""
    for dtype in (torch.float32, torch.int16):
        base = make_values("ties", (3, 1500), dtype, gen)
        x = layout(base, lay, -1)
        for k in (1, 700, 1500):
            compare("kthvalue", x, k, -1)
            compare("kthvalue", x.transpose(0, 1), k, 0, keepdim=True)
    e = torch.randn(1, 3000, generator=gen).expand(4, 3000)
    compare("kthvalue", e, 2000, 1)
    compare("kthvalue", e.t(), 2000, 0)


def test_kthvalue_long_rows_corpus_like(kw, gen):
    """Shapes of the corpus inputs: percentiles of flattened activations
    (ReLU: most of the row exactly zero), conformal scores, prune masks."""
    relu = torch.relu(torch.randn(200000, generator=gen))
    compare("kthvalue", relu, 199990, -1)
    compare("kthvalue", relu, 100000, -1)  # inside the zeros: torch's tie order
    scores = torch.rand(10000, generator=gen) ** 4
    compare("kthvalue", scores, 9001, 0)
    compare("kthvalue", torch.rand(512, generator=gen), 256, -1)


# ------------------------------------------- median of short rows, non-last dim
# float32 rows of 1..16 elements along a dim whose neighbours are adjacent
# (inner stride 1) are ranked eight at a time; inner sizes around multiples
# of 8 leave remainders that take the per-row path.  On AVX-512 rows of
# 2..32 go sixteen at a time (batch_median.h bm_f32_columns_median), the
# remainders and groups with a NaN as before (past 16: row by row).

MC_LENGTHS = tuple(range(1, 18)) + (20, 25, 32, 33)
MC_INNER = (7, 8, 9, 16, 21, 37)


def _mc_values(kind, shape, gen):
    if kind == "smallint":
        return torch.randint(-2, 3, shape, generator=gen).float()
    if kind == "bf16":
        return torch.randn(shape, generator=gen).to(torch.bfloat16).float()
    if kind == "equal":
        return torch.full(shape, 2.5)
    if kind == "zeros":  # +0.0 and -0.0 tie: the index decides the sign
        z = torch.zeros(shape)
        z[torch.rand(shape, generator=gen) < 0.5] = -0.0
        z[torch.rand(shape, generator=gen) < 0.2] = 1.0
        return z
    return torch.randn(shape, generator=gen)


@pytest.mark.parametrize("op", ["median", "nanmedian"])
@pytest.mark.parametrize("kind", ["random", "smallint", "bf16", "equal", "zeros"])
def test_median_short_rows_dim0(kw, gen, op, kind):
    for n in MC_LENGTHS:
        for inner in MC_INNER:
            x = _mc_values(kind, (n, 2, inner), gen)
            compare(op, x, 0)
            compare(op, x, 0, keepdim=True)
            compare(op, x.reshape(1, n, 2 * inner), 1)


@pytest.mark.parametrize("op", ["median", "nanmedian"])
def test_median_short_rows_nan_groups(kw, gen, op):
    """A NaN in one row of a group of eight sends that group to the per-row
    path; the other groups stay on the vector path."""
    for n in (1, 2, 5, 9, 10, 16, 18, 25, 32):
        x = _mc_values("smallint", (n, 3, 40), gen)
        x[n // 2, 1, 3] = float("nan")
        x[0, 2, 17] = -float("nan")
        x[:, 0, 30] = float("nan")  # an all-NaN row
        compare(op, x, 0)


def test_median_short_rows_layouts(kw, gen):
    """Corpus-like shapes and strided / expanded inputs (strides other than
    an adjacent inner dim take the per-row path; results are torch's)."""
    compare("median", _mc_values("random", (10, 1, 48, 64), gen), 0, keepdim=True)
    compare("median", _mc_values("bf16", (10, 64, 32, 5, 5), gen), 0)
    compare("median", _mc_values("smallint", (1, 3, 9, 32, 32), gen), 2)
    base = _mc_values("smallint", (9, 40, 3), gen)
    compare("median", base.permute(0, 2, 1), 0)       # inner stride 3
    compare("median", base[:, ::2, 0], 0)             # inner stride 6
    compare("median", _mc_values("random", (5, 64), gen)[:, 1:], 0)  # offset


# topk over long contiguous float rows streams with a raw-value block skip
# (float compares against the current k-th value instead of gathered keys)
# from SW_SKIP_STREAM_MIN = 4096 elements; the first blocks fill the heap
SKIP_LENGTHS = (4095, 4096, 4097, 6000, 65536, 65537, 130000)
SKIP_DTYPES = (torch.float32, torch.bfloat16, torch.float64)


def _skip_rows(kind, n, dtype, gen):
    if kind == "minus_inf_mass":  # logits after top-k masking: few finite values
        x = torch.full((2, n), float("-inf"), dtype=dtype)
        x[:, torch.randint(0, n, (40,), generator=gen)] = torch.randn(2, 40, generator=gen).to(dtype)
        return x
    if kind == "zeros":  # +0.0 and -0.0 everywhere, a few positives and negatives
        x = torch.where(torch.rand(2, n, generator=gen) < 0.5, 0.0, -0.0).to(dtype)
        x[:, ::997] = torch.randn(2, x[:, ::997].shape[1], generator=gen).to(dtype)
        return x
    if kind == "subnormal":
        tiny = torch.finfo(dtype).tiny
        return (torch.rand(2, n, generator=gen, dtype=torch.float64) * tiny).to(dtype)
    return make_values(kind, (2, n), dtype, gen)


@pytest.mark.parametrize("dtype", SKIP_DTYPES, ids=str)
@pytest.mark.parametrize("kind", ["random", "bf16ties", "equal", "sorted", "reversed", "nan",
                                  "special", "minus_inf_mass", "zeros", "subnormal"])
def test_topk_long_rows_with_block_skip(kw, gen, dtype, kind):
    for n in SKIP_LENGTHS:
        x = _skip_rows(kind, n, dtype, gen)
        for k in (1, 5, 15, 50):
            for largest in (True, False):
                compare("topk", x, k, largest=largest)
        compare("topk", x, 20, sorted=False)
        compare("topk", x[:, ::2], 5)  # strided: no skip, same answer


@pytest.mark.parametrize("dtype", SKIP_DTYPES, ids=str)
def test_topk_long_rows_with_block_skip_stable(kw_stable, gen, dtype):
    # (no NaN rows in bfloat16 here: torch's bfloat16 topk returns NaNs
    # canonical, its sort with their bits, so the sort is no reference there)
    kinds = ("bf16ties", "zeros", "minus_inf_mass") + (("nan",) if dtype != torch.bfloat16 else ())
    for kind in kinds:
        x = _skip_rows(kind, 70000, dtype, gen)
        for k in (1, 8, 50):
            compare("topk", x, k, largest=True, reference=_stable_topk)
            compare("topk", x, k, largest=False, reference=_stable_topk)


def _stable_topk(x, k, largest=True):
    """torch.topk with equal values in index order (ties="stable")."""
    values, indices = ORIG["sort"](x, dim=-1, descending=largest, stable=True)
    return torch.return_types.topk((values[..., :k].contiguous(), indices[..., :k].contiguous()))


# topk of contiguous float32 rows of TN_LANE_ROW_MIN = 1024 to
# TN_LANE_ROW_MAX = 32768 elements with k from TN_LANE_MIN_K = 4 (m = k + 1
# in torch's order, k in the stable one, up to 512) takes its candidates
# beyond the m-th best of L lane bounds (topk_nth.h: L the least power of
# two from 64 that is >= 4 m, or >= 3 m for m <= 32 on rows shorter than
# 1024 m, rows of at least 8 L; from 1024 m elements the bounds come from
# a quarter of the row).  Lengths around both ends, the lane counts' depth
# and the quarter's switch; k where L doubles (m = 16/17, 21/22, 32/33,
# ..., 256/257) and around the largest m; rows that make the
# bounds loose (sorted: a quarter's bounds far below the answer) or useless
# (NaN in every element of some lanes: a smallest-k bound of +inf that no
# element meets).  bfloat16 rows (other paths) run the same checks.
LANE_LENGTHS = (1023, 1024, 1025, 1031, 2048, 2049, 4100, 8191, 8192, 16383, 16384, 16385,
                32768, 32769)
LANE_KS = (3, 4, 15, 16, 20, 21, 22, 31, 32, 50, 63, 64, 127, 128, 255, 256, 511, 512)


def _lane_rows(kind, n, dtype, gen):
    rows = max(2, -(-8192 // n))
    if kind == "nan_lanes":  # whole lanes (every 64th element, shifted) NaN
        x = torch.randn(rows, n, generator=gen).to(dtype)
        for lane in (0, 5, 63):
            x[:, lane::64] = float("nan")
        return x
    if kind == "nan_all_but":  # NaN everywhere but k-ish values
        x = torch.full((rows, n), float("nan"), dtype=dtype)
        x[:, torch.randint(0, n, (20,), generator=gen)] = torch.randn(rows, 20, generator=gen).to(dtype)
        return x
    if kind == "clustered":  # the best values all in one stretch of the row
        x = torch.randn(rows, n, generator=gen).to(dtype)
        x[:, n // 3:n // 3 + 200] += 50
        return x
    return _skip_rows(kind, n, dtype, gen)


@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16), ids=str)
@pytest.mark.parametrize("kind", ["random", "bf16ties", "sorted", "reversed", "nan", "nan_lanes",
                                  "nan_all_but", "clustered", "minus_inf_mass", "zeros", "equal",
                                  "special", "subnormal"])
def test_topk_lane_threshold(kw, gen, dtype, kind):
    for n in LANE_LENGTHS:
        x = _lane_rows(kind, n, dtype, gen)
        for k in LANE_KS:
            if 4 * k > n:
                continue
            for largest in (True, False):
                compare("topk", x, k, largest=largest)
        compare("topk", x, 16, sorted=False)


@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16), ids=str)
def test_topk_lane_threshold_stable(kw_stable, gen, dtype):
    kinds = ("random", "bf16ties", "sorted", "nan_lanes", "clustered", "zeros")
    kinds += ("nan",) if dtype != torch.bfloat16 else ()  # (see the test above)
    for kind in kinds:
        for n in (1024, 4100, 16385, 32768):
            x = _lane_rows(kind, n, dtype, gen)
            if kind.startswith("nan") and dtype == torch.bfloat16:
                continue
            for k in (4, 16, 17, 64, 128, 257, 512):
                for largest in (True, False):
                    compare("topk", x, k, largest=largest, reference=_stable_topk)


def test_topk_lane_threshold_gives_way_to_ties(kw, gen):
    """A call whose rows mostly tie among their k + 1 best (float32 logits
    rounded to bfloat16) leaves the lane path after TN_LANE_PROBE_ROWS = 4
    rows for the streamed heap it replaced; rows before and after the
    switch, tied or not, keep torch's answer."""
    for n in (4100, 16384):
        tied = torch.randn(12, n, generator=gen).to(torch.bfloat16).float() * 4
        tied[:, :40] = 7.0  # a tie across every k below
        free = torch.randn(12, n, generator=gen, dtype=torch.float64).float()
        for x in (tied, torch.cat([tied[:6], free[:6]]), torch.cat([free[:6], tied[:6]]),
                  torch.cat([tied[:3], free[:3], tied[3:9], free[3:]])):
            for k in (8, 16, 50):
                compare("topk", x, k)
                compare("topk", x, k, largest=False)


# Selection along a dim whose stride maps a long row to few cache sets
# (kwker/ops/_call.py: _rows_thrash) reads a copy with the dim moved last:
# the rows' positions, hence values, indices and tie order, must not change.
# Middle dims (rows with outer and inner both > 1), keepdim, ties, NaN.
@pytest.mark.parametrize("dtype", (torch.float32, torch.float64, torch.int32, torch.bfloat16), ids=str)
@pytest.mark.parametrize("shape,dim", [((520, 1), 0), ((2, 300, 1), 1), ((600, 2, 2), 0)], ids=str)
def test_selection_along_thrashing_strides(kw, gen, dtype, shape, dim):
    from kwker.ops._call import _rows_thrash
    es = torch.empty((), dtype=dtype).element_size()
    shape = shape[:-1] + (shape[-1] * 4096 // es,)  # rows 4 or 8 KB apart
    x = make_values("ties", shape, dtype, gen)
    inner = math.prod(shape[dim + 1:])
    assert _rows_thrash(shape[dim], inner * es), "the shape no longer takes the copy"
    if dtype.is_floating_point:
        x.select(dim, 7).fill_(float("nan"))  # a NaN in every row (index 7)
        x.select(dim, 3)[..., ::3] = float("nan")
    for keepdim in (False, True):
        compare("median", x, dim, keepdim=keepdim)
        compare("kthvalue", x, 40, dim, keepdim=keepdim)
    compare("topk", x, 9, dim)
    compare("topk", x, 9, dim, largest=False, sorted=False)
    if dtype.is_floating_point:
        compare("nanmedian", x, dim)
        if dtype in (torch.float32, torch.float64):
            compare("quantile", x, 0.3, dim)
            compare("nanquantile", x, torch.tensor([0.1, 0.5], dtype=dtype), dim, keepdim=True)
