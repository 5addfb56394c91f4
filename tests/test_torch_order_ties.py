"""sort(stable=False) on tie-heavy rows: the exact std::sort emulation's fast
paths (ranges of one key done by reversals, short rows straight to the
emulation) against torch.sort itself.

The row shapes mimic where they come from: a dominant value at either end
(top-k masked logits: -inf; k-NN votes and padding: one value), NaN masses,
+-0 mixes, a handful of distinct values, all equal; lengths around
std::sort's insertion threshold (16/17), the emulation's block (256) and the
short-row switch (128/129).
"""
import pytest
import torch

from kwker_testing import compare

LENGTHS = [16, 17, 18, 31, 32, 33, 64, 127, 128, 129, 130, 255, 256, 257, 258, 300, 513, 1000,
           1025, 4100]
DTYPES = [torch.float32, torch.bfloat16, torch.float64, torch.int64, torch.float16]


def dominated(n, dtype, gen, fill, frac):
    """A row where `frac` of the entries equal `fill`, the rest random
    (a few repeated)."""
    x = torch.randn(n, generator=gen).to(dtype) if dtype.is_floating_point \
        else torch.randint(-50, 50, (n,), generator=gen).to(dtype)
    mask = torch.rand(n, generator=gen) < frac
    return torch.where(mask, torch.tensor(fill, dtype=dtype), x)


def fills_for(dtype):
    if dtype.is_floating_point:
        return [float("-inf"), float("inf"), 0.0, -0.0, float("nan"), 0.5]
    return [torch.iinfo(dtype).min, torch.iinfo(dtype).max, 0]


def check_rows(x):
    for descending in (False, True):
        compare("sort", x, descending=descending, stable=False)
        compare("sort", x, -1, descending)
        compare("argsort", x, descending=descending)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_one_value_dominates(kw, gen, dtype):
    for n in LENGTHS:
        for fill in fills_for(dtype):
            for frac in (0.5, 0.9, 0.98, 0.999):
                check_rows(dominated(n, dtype, gen, fill, frac))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_few_distinct_values(kw, gen, dtype):
    for n in LENGTHS:
        for distinct in (1, 2, 3, 13):
            x = torch.randint(0, distinct, (4, n), generator=gen).to(dtype)
            check_rows(x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64], ids=str)
def test_signed_zero_and_nan_masses(kw, gen, dtype):
    for n in LENGTHS:
        r = torch.rand(3, n, generator=gen)
        x = torch.where(r < 0.4, torch.tensor(0.0), torch.tensor(-0.0))
        x = torch.where(r > 0.8, torch.tensor(float("nan")), x)
        x = torch.where((r > 0.7) & (r <= 0.8), torch.randn(3, n, generator=gen), x)
        check_rows(x.to(dtype))


def test_topp_after_topk_rows(kw, gen):
    """logits with all but top_k entries -inf (transformers' top-k then
    top-p), bf16-rounded as a 16-bit model gives them."""
    for n, k in ((32000, 50), (4100, 3), (1000, 1), (300, 40)):
        x = torch.randn(3, n, generator=gen).to(torch.bfloat16).float() * 3
        kth = x.topk(k, dim=-1).values[:, -1:]
        x = torch.where(x < kth, torch.tensor(float("-inf")), x)
        check_rows(x)


def test_knn_votes_rows(kw, gen):
    """k-NN class votes: almost all zeros, a few classes with a few distinct
    positive weights (descending, so the zeros are at the far end)."""
    x = torch.zeros(20, 1000)
    cls = torch.randint(0, 1000, (20, 20), generator=gen)
    w = torch.randint(1, 6, (20, 20), generator=gen).float() / 8
    x.scatter_add_(1, cls, w)
    check_rows(x)


@pytest.mark.parametrize("odd", [-0.0, float("nan"), float("-nan")], ids=str)
def test_zero_rows_with_one_odd_element(kw, gen, odd):
    """Rows of +0.0 and a few values, with one -0.0 or NaN: the float32
    decode writes a zero's key as +0.0 once it has found the row free of
    -0.0 and NaN (sort_kernels.h f32_row_plain), so the one odd element must
    be seen wherever it is: first, in the vector part, in the scalar tail."""
    for n in (64, 203, 1000, 1025):
        for at in (0, n // 2, n - 1):
            x = torch.zeros(2, n)
            x[:, torch.randint(0, n, (n // 20,), generator=gen)] = torch.rand(n // 20, generator=gen)
            x[:, at] = odd
            check_rows(x)


def test_all_equal_and_blocks(kw, gen):
    """Rows of one value; rows made of long constant blocks in either order
    (each recursion range of one key)."""
    for n in LENGTHS:
        check_rows(torch.full((2, n), 3.0))
        blocks = torch.arange(n) * 4 // n
        check_rows(blocks.float())
        check_rows(blocks.flip(0).float())
        check_rows((blocks % 2).float())
