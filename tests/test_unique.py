"""torch.unique (flattened form) from Kwker's sort: torch's exact output,
inverse and counts for every dtype, value kind and layout, including the
inputs whose answer depends on torch's unstable sort order (+0.0 beside
-0.0, several NaNs with return_inverse or with different payloads), which
are sorted in torch's own order."""
import pytest
import torch

from kwker.ops import unique as unique_ops

from kwker_testing import (LAYOUTS, SORT_DTYPES, VALUE_KINDS, _int_range, _nan_payloads, compare,
                           layout, make_values)

FLAGS = [(False, False), (True, False), (False, True), (True, True)]


@pytest.mark.parametrize("kind", VALUE_KINDS)
@pytest.mark.parametrize("dtype", SORT_DTYPES, ids=str)
def test_unique_flags(kw, gen, dtype, kind):
    for shape in [(1,), (7,), (3, 20), (4, 5, 6), (5000,)]:
        x = make_values(kind, shape, dtype, gen)
        for ri, rc in FLAGS:
            fast = True
            compare("unique", x, return_inverse=ri, return_counts=rc, fast=fast)
            compare("unique", x, True, ri, rc, fast=fast)  # positionally
            compare("unique", x, method=True, sorted=False, return_inverse=ri,
                    return_counts=rc, fast=fast)


@pytest.mark.parametrize("lay", LAYOUTS)
def test_unique_layouts(kw, gen, lay):
    for dtype in (torch.float32, torch.int64, torch.int8):
        x = layout(make_values("ties", (3, 5, 4, 7), dtype, gen), lay)
        compare("unique", x, return_inverse=True, return_counts=True)


def test_unique_long_and_0dim(kw, gen):
    x = make_values("ties", (200_000,), torch.int64, gen) * 1000
    compare("unique", x, return_inverse=True, return_counts=True)
    compare("unique", make_values("random", (100_000,), torch.float32, gen), return_counts=True)
    compare("unique", torch.tensor(2.5), return_inverse=True)
    compare("unique", torch.tensor(7), return_inverse=True, return_counts=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16],
                         ids=str)
def test_unique_equal_keys_with_different_bits(kw, gen, dtype):
    """The sign of a merged zero and the NaN entries come out as torch's
    unstable sort orders them: reproduced by sorting in torch's order."""
    zeros = torch.tensor([0.0, -0.0, 1.0, 0.0], dtype=dtype)
    compare("unique", zeros)
    compare("unique", zeros.abs(), return_inverse=True, fast=True)
    compare("unique", -zeros.abs(), return_counts=True, fast=True)  # only -0.0
    nan = float("nan")
    one_nan = torch.tensor([2.0, nan, 1.0, 2.0], dtype=dtype)
    compare("unique", one_nan, return_inverse=True, return_counts=True, fast=True)
    two_nans = torch.tensor([nan, 2.0, nan, 1.0], dtype=dtype)
    compare("unique", two_nans, return_counts=True, fast=True)  # same payload
    compare("unique", two_nans, return_inverse=True)
    mixed = torch.cat([_nan_payloads(dtype)[:2], two_nans[1:2]])  # two NaN bit patterns
    compare("unique", mixed)
    for n in (5, 17, 100, 1000, 5000):  # around std::sort's insertion-sort and recursion sizes
        x = make_values("ties", (n,), dtype, gen)
        x = torch.where(torch.rand(n, generator=gen) < 0.3, -x, x)  # -0.0 beside +0.0
        nan = _nan_payloads(dtype)
        x = torch.where(torch.rand(n, generator=gen) < 0.1,
                        nan[torch.randint(0, len(nan), (n,), generator=gen)], x)
        for ri, rc in FLAGS:
            compare("unique", x, return_inverse=ri, return_counts=rc)
    for n in (100, 1000, 5000):  # NaNs of one payload, no zeros: which NaN entry each maps to
        x = make_values("random", (n,), dtype, gen)
        x = torch.where(x == 0, 1.0, x).to(dtype)
        x[torch.rand(n, generator=gen) < 0.1] = float("nan")
        compare("unique", x, return_inverse=True, fast=True)
        compare("unique", x, return_inverse=True, return_counts=True, fast=True)


def _few_values(dtype, shape, distinct, gen):
    """Elements drawn from `distinct` values spread over the dtype's range
    (no NaN, no zero)."""
    if dtype.is_floating_point:
        pool = torch.randn(distinct, generator=gen, dtype=torch.float64) * 1e3
        pool = torch.where(pool == 0, 1.0, pool).to(dtype)
    elif dtype is torch.bool:
        pool = torch.tensor([False, True])
    else:
        wide = torch.int64 if dtype is torch.uint64 else dtype  # (drawn as bits, viewed)
        lo, hi = _int_range(wide)
        pool = torch.randint(lo, hi, (distinct,), generator=gen, dtype=torch.int64).to(wide)
        pool = pool.view(dtype)
    return pool[torch.randint(0, pool.shape[0], shape, generator=gen)]


@pytest.mark.parametrize("dtype", SORT_DTYPES, ids=str)
def test_unique_by_hashing(kw, gen, dtype, hash_spy):
    """Inputs of few distinct values skip the sort (the hashing pass): torch's
    exact output, inverse (in the input's shape) and counts, with one NaN,
    with -0.0 alone, and for layouts that are copied first; inputs it must
    decline (both zero signs, two NaNs, too many distinct values) come out
    right through the sort."""
    for shape, distinct in [((300,), 1), ((5000,), 7), ((40, 50), 200), ((3, 7, 70), 25),
                            ((9000,), 1000)]:
        x = _few_values(dtype, shape, distinct, gen)
        for ri, rc in FLAGS:
            hash_spy.clear()
            compare("unique", x, return_inverse=ri, return_counts=rc)
            # the values alone of a short input: sorted without trying
            tried = ri or rc or x.numel() >= unique_ops.HASH_MIN_NUMEL_VALUES
            assert hash_spy == ([True] if tried else []), (shape, distinct, ri, rc)
        if x.ndim > 1:
            hash_spy.clear()
            compare("unique", x.transpose(0, -1), return_inverse=True, return_counts=True)
            assert hash_spy == [True]
    runs = _few_values(dtype, (20, 1), 20, gen).expand(20, 250)  # segment-id-like runs
    hash_spy.clear()
    compare("unique", runs, return_inverse=True, return_counts=True)
    assert hash_spy == [True]
    if dtype.is_floating_point:
        x = _few_values(dtype, (5000,), 30, gen)
        # what the hashing pass does with each: answers ([True]); both zeros
        # too, merged, with torch's first zero's sign written in afterwards;
        # two NaNs are found by the pre-scan and never hashed ([])
        spied = {"one NaN": [True], "-0.0 alone": [True], "both zeros": [True],
                 "two NaNs": [], "two NaN payloads": []}
        if dtype == torch.float64:
            # float64 keys this far apart do not pack with an index: which
            # zero comes first is not known cheaply, and torch's order sorts
            spied["both zeros"] = [False]
        for what, want in spied.items():
            y = x.clone()
            if "NaN" in what:
                nans = _nan_payloads(dtype)
                y[123] = nans[0]
                if what != "one NaN":
                    y[4999] = nans[1] if "payloads" in what else nans[0]
            else:
                y[77] = -0.0
                if what == "both zeros":
                    y[3000] = 0.0
            for ri, rc in FLAGS:
                hash_spy.clear()
                compare("unique", y, return_inverse=ri, return_counts=rc)
                assert hash_spy == want, (what, ri, rc)
    # more distinct values than the pass takes: sorted, after it declined
    # part way (a half of the elements with the inverse, an eighth without)
    if dtype.itemsize > 1:
        x = _few_values(dtype, (5000,), 1200, gen)
        for ri, rc, declined in [(False, False, True), (True, False, False), (False, True, False)]:
            hash_spy.clear()
            compare("unique", x, return_inverse=ri, return_counts=rc)
            assert hash_spy == [not declined]
        x = make_values("random", (20000,), dtype, gen)  # mostly distinct: declined early
        if torch.unique(x).numel() > 16000:
            hash_spy.clear()
            compare("unique", x, return_inverse=True)
            assert hash_spy == [False]
    # each value twice in a row: past HASH_MAX_DISTINCT (torch raises for
    # unsigned inputs this long: its radix sort)
    if dtype in (torch.int32, torch.int64, torch.float32, torch.float64):
        ids = torch.randperm(1 << 20, generator=gen)[:unique_ops.HASH_MAX_DISTINCT + 500] + 1
        twice = ids.to(dtype).view(-1, 1).expand(-1, 2)
        hash_spy.clear()
        compare("unique", twice, return_inverse=True, return_counts=True)
        assert hash_spy == [False]


INT_DTYPES = [d for d in SORT_DTYPES if not d.is_floating_point and d is not torch.uint64]
# the integer dtypes torch.unique takes on CPU (and the bitmap pass with it)
UNIQUE_INT_DTYPES = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)


def _in_range(dtype, n, low, span, gen, runs=False):
    """n integers of `dtype` drawn from [low, low + span) (clipped to the
    dtype), both ends present; in runs of a few when `runs`."""
    lo, hi = _int_range(dtype)
    low = max(lo, min(low, hi - span))  # (randint: high at most the dtype's max)
    x = torch.randint(low, low + span, (n,), generator=gen, dtype=torch.int64)
    x[0], x[-1] = low, low + span - 1
    if runs:
        x = x[torch.arange(n) // 5]
    return x.to(dtype)


@pytest.mark.parametrize("dtype", UNIQUE_INT_DTYPES, ids=str)
def test_unique_dense_ranges(kw, gen, dtype, dense_spy):
    """Integers of a short range (many distinct values or few) take the
    bitmap pass: torch's exact output, inverse and counts, for ranges at the
    dtype's bottom, top and (signed) across zero, all distinct, in runs, and
    through a copied layout; ranges past the pass's widest (one 64-value
    word per element up to 2^16 words) are declined and still come out
    right."""
    lo, hi = _int_range(dtype)

    def takes(n, low, span):  # unique_dense.h's rule
        return ((span - 1) >> 6) < max(min(n, 1 << 16), n // 4)

    for n in (256, 1000, 1024, 5000, 70000):
        widest = 64 * min(n, 1 << 16)
        spans = [1, 2, n // 3, n, 2 * n, 2 * n + 1, widest - 64, widest + 64, 1 << 40]
        for span in spans:
            span = min(span, hi - lo)
            for low in {lo, hi - span, -(span // 2) if lo < 0 else 7}:
                low = max(lo, min(low, hi - span))  # as _in_range clips it
                taken = takes(n, low, span)
                x = _in_range(dtype, n, low, span, gen, runs=span == n // 3)
                for ri, rc in FLAGS:
                    dense_spy.clear()
                    compare("unique", x, return_inverse=ri, return_counts=rc)
                    assert dense_spy == [taken], (n, span, low, ri, rc)
        # every value of a range once (whole words of the bitmap), shuffled
        if n <= hi - lo + 1:
            x = (torch.randperm(n, generator=gen) + max(lo, -n // 2)).to(dtype)
            dense_spy.clear()
            compare("unique", x, return_inverse=True, return_counts=True)
            assert dense_spy == [True]
    span = min(20000, hi - lo)
    x = _in_range(dtype, 6000, lo, span, gen).view(60, 100)
    dense_spy.clear()
    compare("unique", x.t(), return_inverse=True, return_counts=True)  # copied first
    assert dense_spy == [takes(6000, lo, span)]


def test_unique_dense_bool(kw, gen, dense_spy):
    """bool takes the bitmap pass's table (two values): torch's output,
    inverse and counts, one value or both, random or in runs, through a
    copied layout, and bytes other than 0 and 1 counted as True."""
    for n in (256, 1000, 5000, 100_000):
        for p in (0.0, 0.3, 1.0):
            x = torch.rand(n, generator=gen) < p
            for y in (x, x[torch.arange(n) // 7], x.view(-1, 4).t()):
                for ri, rc in FLAGS:
                    dense_spy.clear()
                    compare("unique", y, return_inverse=ri, return_counts=rc)
                    assert dense_spy == [True], (n, p, ri, rc)
    odd = torch.tensor([0, 1, 2, 255, 0, 7] * 100, dtype=torch.uint8).view(torch.bool)
    for ri, rc in FLAGS:
        dense_spy.clear()
        compare("unique", odd, return_inverse=ri, return_counts=rc)
        assert dense_spy == [True]


def _packs(x, dim):
    """Whether the slices along dim fit Kwker's 63-bit keys: the bits of
    each column's value range, summed (Python integers: exact)."""
    cols = x.movedim(dim, 0).reshape(x.shape[dim], -1).t().tolist()
    return sum((max(c) - min(c)).bit_length() for c in cols) <= 63


@pytest.mark.parametrize("dtype", INT_DTYPES, ids=str)
def test_unique_dim(kw, gen, dtype):
    """unique(dim=) of integer slices: torch's sorted slices, inverse and
    counts, with torch's output layout, for every dim of 1-3-D inputs."""
    for shape in [(1,), (9,), (6, 2), (40, 3), (3, 40), (5, 4, 3), (1, 7, 2)]:
        for kind in ("ties", "random"):
            x = make_values(kind, shape, dtype, gen)
            for dim in range(-x.ndim, x.ndim):
                fast = True if _packs(x, dim) else "unique_dim"
                for ri, rc in FLAGS:
                    compare("unique", x, return_inverse=ri, return_counts=rc, dim=dim, fast=fast)
    x = make_values("ties", (50, 3), dtype, gen)
    compare("unique", x.t(), dim=1, return_inverse=True)  # non-contiguous
    compare("unique", x, True, True, True, 0)  # positionally
    compare("unique", x, method=True, dim=0, return_counts=True)


def test_unique_dim_pairs_and_extremes(kw, gen):
    # (category, instance) pairs per pixel, as torchmetrics' panoptic quality
    pairs = torch.stack([torch.randint(0, 30, (20_000,), generator=gen),
                         torch.randint(-1, 200, (20_000,), generator=gen)], 1)
    compare("unique", pairs, dim=0, return_counts=True)
    compare("unique", pairs, dim=0, return_inverse=True)
    info = torch.iinfo(torch.int64)
    wide = torch.tensor([[info.min, 0], [info.max, 1], [info.min, 0], [0, 1]])
    compare("unique", wide, dim=0, return_counts=True, fast="unique_dim")  # span 2^64 - 1
    compare("unique", wide[:, :1], dim=0, return_counts=True, fast="unique_dim")
    compare("unique", torch.tensor([[info.min], [-1], [info.min]]), dim=0, return_counts=True)
    compare("unique", torch.tensor([[2 ** 62, 0], [0, 1], [2 ** 62, 0]]), dim=0,
            return_inverse=True, fast="unique_dim")  # 63 + 1 bits: too wide
    compare("unique", torch.tensor([[2 ** 61, 0], [0, 1], [2 ** 61, 0]]), dim=0,
            return_inverse=True, fast=True)  # 62 + 1 bits: packs
    compare("unique", torch.tensor([[True, False], [True, False]]), dim=0, return_counts=True)


@pytest.mark.parametrize("passes", ["dense", "hash"])
def test_unique_dim_of_few_distinct_slices_decodes_the_keys(kw, gen, passes, request):
    """Slices of few distinct keys take the bitmap pass (or, with it turned off, the
    hashing pass) and are decoded from their distinct keys, with room for at most
    2^(key bits) of them: every combination present (the room exactly filled), columns of
    one value (no bits), negative and extreme columns, bool and int8 slices, 3-D slices
    along each dim, every flag.  More distinct slices than the passes take are sorted."""
    spy = request.getfixturevalue(passes + "_spy")
    grid = torch.cartesian_prod(torch.arange(4), torch.arange(-3, 5), torch.tensor([7]))
    every = grid[torch.randint(0, grid.shape[0], (2000,), generator=gen)]
    every[:grid.shape[0]] = grid  # each of the 32 combinations at least once
    info = torch.iinfo(torch.int64)
    extreme = torch.tensor([[info.min, 3], [info.min + 1, 3], [info.min, 2]]).repeat(300, 1)
    cases = [every, every.to(torch.int8), every[:, :1], (every > 0), extreme,
             torch.randint(-2, 2, (5, 4, 3), generator=gen, dtype=torch.int16)[
                 torch.randint(0, 5, (300,), generator=gen)]]
    for x in cases:
        for dim in range(x.ndim):
            for ri, rc in FLAGS:
                spy.clear()
                packs = _packs(x, dim)
                compare("unique", x, return_inverse=ri, return_counts=rc, dim=dim,
                        fast=True if packs else "unique_dim")
                if packs and x.ndim == 2 and dim == 0:  # keys of at most 5 bits
                    # (the hashing pass pays for values alone from 4096 slices)
                    tried = passes == "dense" or ri or rc
                    assert spy == ([True] if tried else []), (x.shape, dim, ri, rc)
    many = torch.randint(0, 1 << 20, (4000, 2), generator=gen)
    spy.clear()
    compare("unique", many, dim=0, return_inverse=True, return_counts=True)
    assert spy == [False]  # too many distinct: declined, sorted


def test_unique_forms_left_to_torch(kw, gen):
    x = make_values("ties", (6, 40), torch.int64, gen)
    compare("unique", x.float(), dim=0, fast="unique_dim")
    compare("unique", x.to(torch.uint64), return_counts=True, dim=1, fast="unique_dim")
    compare("unique", x, dim=2, fast="dim")
    compare("unique", torch.zeros(3, 0, dtype=torch.int64), dim=0, fast="nonempty")
    compare("unique", torch.zeros(0, 3, dtype=torch.int64), dim=0, fast="nonempty")
    compare("unique", torch.tensor(3), dim=0, fast="dim")
    compare("unique", x, sorted=1, fast="arguments")
    compare("unique", torch.empty(0), fast="nonempty")
    compare("unique", x.float().requires_grad_(), fast="no_grad")
    compare("unique", torch.zeros(40_000, dtype=torch.uint32), fast="torch_raises")
