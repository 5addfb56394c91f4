"""Differential tests of the selection fast paths for long and short rows
(kthvalue over long rows, median/kthvalue over many short rows along a
non-last dim, topk over short MoE-router rows) against torch 2.13: values
bit for bit, indices including torch's order of tied values, NaN placement.

Every length around each kernel's switch points is covered, with tie-heavy
data (small ints, bf16-rounded values, all-equal rows), NaN rows and
non-contiguous / expanded inputs.
"""
import pytest
import torch

from kwker_testing import (LAYOUTS, SELECT_DTYPES, compare, layout, make_values)

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
