"""quantile and nanquantile: torch's exact results (bits, shape, strides)
from the selection kernel, for every interpolation mode, q form, dim and
layout; the calls whose answer depends on torch's sort order (+0.0 beside
-0.0, NaNs with different payloads at the selected rank) go to torch."""
import pytest
import torch

from kwker import _native
from kwker_testing import ORIG, compare, layout, make_values, native_target_params

OPS = ("quantile", "nanquantile")
DTYPES = (torch.float32, torch.float64)
MODES = ("linear", "lower", "higher", "midpoint", "nearest")
# kinds whose values hold no -0.0 and no NaN: always the fast path
PLAIN_KINDS = ("random", "ties", "equal", "sorted", "reversed")


def q_forms(dtype):
    """q as torch takes it: Python floats (rounded to dtype by torch), a
    0-dim tensor, short 1-D tensors (one or two selections per row) and long
    ones (the sorted path), including the ends and unsorted, repeated q."""
    return [
        0.5, 0.0, 1.0, 0.3, 1 / 3,
        torch.tensor(0.25, dtype=dtype),
        torch.tensor([0.1, 0.9], dtype=dtype),
        torch.tensor([0.9, 0.1, 0.5, 0.5], dtype=dtype),
        torch.linspace(0, 1, 11, dtype=dtype),
        torch.rand(40, dtype=torch.float64).to(dtype),
    ]


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("kind", PLAIN_KINDS)
def test_every_mode_and_q_form(kw, gen, op, dtype, kind):
    for shape, dim in [((1,), None), ((7,), 0), ((3, 20), 1), ((3, 20), 0), ((4, 5, 6), -2),
                       ((2, 1000), None), ((2, 1000), 1), ((5, 3), None)]:
        x = make_values(kind, shape, dtype, gen)
        for q in q_forms(dtype):
            for mode in MODES:
                compare(op, x, q, dim=dim, interpolation=mode)
        compare(op, x, 0.75, dim, True)  # keepdim, positionally
        compare(op, x, torch.tensor([0.2, 0.7], dtype=dtype), dim=dim, keepdim=True)
        compare(op, x, q=0.6, dim=dim)  # q by keyword
        compare(op, x, 0.4, method=True, dim=dim, interpolation="midpoint")


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_long_rows(kw, gen, op, dtype):
    """Rows long enough to be read block by block (one bracketing pass for a
    few q) and the sorted path for many q."""
    for kind in ("random", "ties", "sorted"):
        x = make_values(kind, (200_000,), dtype, gen)
        for q in (0.5, torch.tensor([0.01, 0.5, 0.99], dtype=dtype), 1.0, 0.0,
                  torch.linspace(0, 1, 9, dtype=dtype)):
            for mode in ("linear", "nearest"):
                compare(op, x, q, interpolation=mode)
        compare(op, x.reshape(2, 100_000), 0.3, dim=1)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("lay", ("transposed", "step", "offset", "permuted"))
def test_layouts(kw, gen, op, lay):
    x = layout(make_values("random", (3, 5, 4, 7), torch.float32, gen), lay)
    for dim in (None, 0, 1, 2, 3, -1):
        compare(op, x, torch.tensor([0.3, 0.6], dtype=torch.float32), dim=dim)
        compare(op, x, 0.5, dim=dim, keepdim=True, interpolation="higher")


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_short_rows_through_the_sorting_network(kw, gen, op, dtype):
    """Rows of 2..32 go 8 (float32) or 4 (float64) at a time through a
    sorting network: every length around it, full groups and a remainder,
    rows along the last dim and across a strided one, ties, NaN rows."""
    for length in list(range(1, 34)) + [48]:
        for rows in (3, 8, 13):
            for kind in ("random", "ties", "equal", "reversed"):
                x = make_values(kind, (rows, length), dtype, gen)
                if kind == "random" and length > 2:
                    x[1, length // 2] = float("nan")  # a NaN row (one NaN pattern)
                q = torch.tensor([0.0, 0.25, 0.5, 0.9, 1.0], dtype=dtype)
                for mode in ("linear", "nearest"):
                    compare(op, x, q, dim=1, interpolation=mode)
                compare(op, x.t().contiguous(), 0.3, dim=0, interpolation="midpoint")


@pytest.mark.parametrize("op", OPS)
def test_short_float32_rows_eight_at_once(kw, gen, op):
    """float32 rows of 2..32 without NaN are answered eight at a time in
    vectors (quantile_kernels.h qk_group8_f32): rows side by side in memory
    (dim 0 of a matrix: eight adjacent columns load as one vector) or apart
    (dim 1, or every other column), every mode, q lists, remainders of 1..7
    rows; a group holding only -0.0 keeps its bits (the lerp's and lower's
    zero is -0.0), and groups holding both zeros or a NaN are answered row
    by row (or by torch, when the rank lands on the zeros)."""
    dtype = torch.float32
    q = torch.tensor([0.0, 0.1, 0.25, 0.5, 0.9, 1.0], dtype=dtype)
    for length in (2, 3, 5, 7, 12, 16, 17, 24, 32):
        for cols in (8, 16, 21, 37):
            x = make_values("random", (length, cols), dtype, gen)
            if cols >= 16:
                x[:, 8:16] = make_values("ties", (length, 8), dtype, gen)
            if cols > 16:
                x[::2, 16:24] = -0.0  # only negative zeros in the third group
            if cols > 24:
                x[0, 26] = float("nan")  # a NaN in the fourth group
                x[0, 24], x[-1, 24] = 0.0, -0.0  # both zeros there too
            for mode in MODES:
                compare(op, x, q, dim=0, interpolation=mode, fast=None)
                compare(op, x, 0.5, dim=0, interpolation=mode, fast=None)
            compare(op, x.t(), q, dim=1, fast=None)
            compare(op, x[:, ::2], 0.3, dim=0, interpolation="midpoint", fast=None)
            compare(op, x.t().contiguous(), q, dim=1, keepdim=True, interpolation="nearest",
                    fast=None)
    # the fast path itself (no NaN, no zero pair: nothing left to torch)
    x = make_values("random", (12, 1000), dtype, gen)
    compare(op, x, 0.5, dim=0)
    compare(op, x, q, dim=0, interpolation="lower")


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_rows_dominated_by_one_value(kw, gen, dtype):
    """ReLU activations (torch.ao's observers): most of a row is 0.0, so a
    rank near 0 lands in a run longer than its sampled bracket can hold;
    also a run at the top (clamped values) and in the middle."""
    for n in (600, 3136, 20000):
        x = make_values("random", (4, n), dtype, gen).abs()
        x[0] = torch.where(torch.rand(n, generator=gen) < 0.64, 0.0, x[0])   # zeros at the bottom
        x[1] = torch.where(torch.rand(n, generator=gen) < 0.7, 6.0, x[1])    # ReLU6: run at the top
        x[2] = torch.where(torch.rand(n, generator=gen) < 0.5, 0.25, x[2])   # a run in the middle
        for q in (torch.tensor([0.0, 0.9, 1.0], dtype=dtype), 0.5, 0.3,
                  torch.tensor([0.1, 0.5, 0.9], dtype=dtype)):
            for mode in ("lower", "linear", "higher"):
                compare("quantile", x, q, dim=1, interpolation=mode)
        compare("nanquantile", x, torch.tensor([0.0, 1.0], dtype=dtype), dim=1)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_nan_rows_with_one_nan_pattern_stay_fast(kw, gen, dtype):
    """quantile of a row holding NaN is NaN, and nanquantile of an all-NaN
    row is NaN: with one NaN bit pattern the answer is known (quieted by the
    lerp, raw for lower/higher/nearest)."""
    x = make_values("random", (6, 50), dtype, gen)
    x[1, 3] = float("nan")
    x[2] = float("nan")
    x[4, ::2] = float("nan")
    x[5] = -x[5].abs().neg()  # nothing special: negative values
    for mode in MODES:
        for q in (0.5, torch.tensor([0.0, 0.3, 1.0], dtype=dtype)):
            compare("quantile", x, q, dim=1, interpolation=mode)
            compare("nanquantile", x, q, dim=1, interpolation=mode)
            compare("nanquantile", x, q, interpolation=mode)
            compare("quantile", x, q, dim=0, interpolation=mode)
    neg_nan = torch.full((9,), float("nan"), dtype=dtype).neg()  # one pattern, sign set
    compare("quantile", neg_nan, 0.5)
    compare("nanquantile", neg_nan, torch.tensor([0.0, 0.5], dtype=dtype), interpolation="lower")


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_equal_keys_with_different_bits_go_to_torch(kw, gen, op, dtype):
    """Which of +0.0 and -0.0 (or of two NaN payloads) torch's unstable
    sort puts at the selected rank is not reproduced: those calls fall back,
    and the rest still take the fast path."""
    zeros = torch.tensor([0.0, -0.0, 0.0, -0.0, 1.0], dtype=dtype)
    compare(op, zeros, 0.25, interpolation="lower", fast="tie_bits")
    compare(op, zeros, 1.0, fast=True)  # the rank lands on 1.0
    only_neg = torch.tensor([-0.0, -0.0, 2.0], dtype=dtype)
    compare(op, only_neg, 0.2, fast=True)
    nans = torch.tensor([1.0, float("nan"), 2.0], dtype=dtype)
    nans = torch.cat([nans, nans.neg()])  # two NaN patterns
    all_nan = nans[[1, 4]]
    compare("quantile", nans, 0.5, fast="tie_bits")
    compare("nanquantile", all_nan, 0.5, fast="tie_bits")
    compare("nanquantile", nans, 0.5, fast=True)  # NaNs ignored
    for kind in ("nan", "special", "bf16ties"):
        x = make_values(kind, (4, 30), dtype, gen)
        for mode in MODES:
            compare(op, x, torch.tensor([0.1, 0.5, 0.9], dtype=dtype), dim=1,
                    interpolation=mode, fast=None)


@pytest.mark.parametrize("op", OPS)
def test_bad_arguments_get_torchs_errors(kw, op):
    x = torch.randn(4, 5)
    bad = [
        ((1.5,), {}), ((-0.1,), {}), ((float("nan"),), {}),
        ((torch.tensor([0.5, 1.2]),), {}), ((torch.tensor([0.5], dtype=torch.float64),), {}),
        ((torch.rand(2, 2),), {}), ((0.5,), {"dim": 2}), ((0.5,), {"interpolation": "cubic"}),
        ((0.5,), {"dim": 1.0}), ((torch.tensor([0.5]),), {"keepdim": 1}),
    ]
    for args, kwargs in bad:
        compare(op, x, *args, fast=None, **kwargs)
    compare(op, torch.empty(0), 0.5, fast=None)
    compare(op, torch.empty(3, 0), 0.5, dim=1, fast=None)
    compare(op, torch.empty(0, 3), 0.5, dim=1, fast=None)
    compare(op, torch.arange(5), 0.5, fast="dtype")  # integer input: torch raises
    compare(op, torch.randn(5).half(), 0.5, fast="dtype")
    compare(op, torch.tensor(3.0), 0.5, fast=True)
    compare(op, torch.tensor(3.0), 0.5, dim=0, fast=None)


@pytest.mark.parametrize("op", OPS)
def test_forms_left_to_torch(kw, op):
    x = torch.randn(4, 50)
    out = torch.empty(())
    compare(op, x, 0.5, out=out, fast="arguments")
    q = torch.tensor([0.5], requires_grad=True)
    compare(op, x, q, fast="arguments")
    x_grad = x.clone().requires_grad_()
    compare(op, x_grad, 0.5, fast="no_grad")


@pytest.mark.parametrize("target", native_target_params())
def test_both_targets(kw, gen, target):
    _native.set_target(target)
    try:
        for shape in ((5, 30), (3, 2000), (100_000,)):
            for kind in ("random", "ties", "nan"):
                x = make_values(kind, shape, torch.float32, gen)
                for op in OPS:
                    for q in (0.5, torch.tensor([0.05, 0.5, 0.95]), torch.linspace(0, 1, 7)):
                        compare(op, x, q, dim=-1, fast=None)
                        compare(op, x.double(), q if isinstance(q, float) else q.double(),
                                fast=None)
    finally:
        _native.set_target("auto")


def test_native_validation():
    """The C entry point checks what it is handed."""
    lib = _native.lib
    x = torch.randn(10)
    q = torch.tensor([0.5, 2.0], dtype=torch.float64)
    out = torch.empty(2)
    f32 = _native.DTYPE_CODES[torch.float32]
    call = lib.kwk_quantile_addr
    assert call(f32, x.data_ptr(), 1, 10, 1, 0, 1, 0, q.data_ptr(), 2, out.data_ptr(),
                1, 1, 1, 0, 0) == lib.KWK_E_ARG  # q out of range
    assert call(f32, x.data_ptr(), 1, 10, 1, 0, 1, 0, q.data_ptr(), 1, out.data_ptr(),
                1, 1, 1, 7, 0) == lib.KWK_E_ARG  # interpolation mode
    assert call(_native.DTYPE_CODES[torch.int32], x.data_ptr(), 1, 10, 1, 0, 1, 0, q.data_ptr(),
                1, out.data_ptr(), 1, 1, 1, 0, 0) == lib.KWK_E_DTYPE
    assert call(f32, x.data_ptr(), 1, 0, 1, 0, 1, 0, q.data_ptr(), 1, out.data_ptr(),
                1, 1, 1, 0, 0) == lib.KWK_E_ARG  # empty row
    assert call(f32, x.data_ptr(), 1, 10, 1, 0, 1, 0, 0, 1, out.data_ptr(),
                1, 1, 1, 0, 0) == lib.KWK_E_ARG  # null q
    assert call(f32, x.data_ptr(), 1, 10, 1, 0, 1, 0, q.data_ptr(), 1, 0,
                1, 1, 1, 0, 0) == lib.KWK_E_ARG  # null out
    assert call(f32, x.data_ptr(), 1, 10, 1, 0, 1, 0, q.data_ptr(), 1, out.data_ptr(),
                1, 1, 1, 0, 0) == lib.KWK_OK
    assert out[0].item() == ORIG["quantile"](x, 0.5).item()
