"""Both kernel sets of the native library (portable C and AVX2) give torch's
exact results: a representative subset of the exactness checks, run once per
target (kwker._native.set_target), restoring "auto" afterwards."""
import math
import os
import subprocess
import sys

import pytest
import torch

from kwker import _native
from kwker_testing import (ORIG, TARGET_NAMES, best_target, compare, layout, make_values,
                           native_target_params)

TARGETS = native_target_params(every=True)


@pytest.fixture(params=TARGETS)
def target(request, kw):
    _native.set_target(request.param)
    assert _native.target() == request.param
    assert kw.info()["target"] == request.param
    yield request.param
    _native.set_target("auto")


def test_set_target_rejects_unknown_names():
    with pytest.raises(ValueError):
        _native.set_target("avx512-imaginary")
    _native.set_target("auto")
    assert _native.target() in TARGET_NAMES


def test_auto_picks_the_best_available():
    _native.set_target("auto")
    assert _native.target() == best_target()


DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int64, torch.int32,
          torch.int16, torch.int8, torch.uint8]


@pytest.mark.parametrize("dtype", DTYPES + [torch.bool, torch.uint16, torch.uint64], ids=str)
def test_sort_per_target(target, gen, dtype):
    for kind in ("random", "ties", "nan", "special"):
        for shape in [(1,), (7,), (16,), (17,), (3, 33), (512, 8), (64, 64), (4, 1000)]:
            x = make_values(kind, shape, dtype, gen)
            for descending in (False, True):
                compare("sort", x, descending=descending)
                compare("sort", x, descending=descending, stable=True)
            compare("argsort", x, 0, True)
    x = layout(make_values("ties", (3, 5, 4, 7), dtype, gen), "permuted")
    for dim in range(4):
        compare("sort", x, dim)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_topk_per_target(target, gen, dtype):
    for kind in ("random", "ties", "nan", "special"):
        for shape in [(1,), (9,), (512, 8), (256, 64), (4, 1000)]:
            x = make_values(kind, shape, dtype, gen)
            n = shape[-1]
            for k in sorted({k for k in (0, 1, 2, n // 64, n // 64 + 1, n - 1, n) if k <= n}):
                compare("topk", x, k)
                compare("topk", x, k, largest=False, sorted=False)
    x = layout(make_values("ties", (3, 5, 4, 70), dtype, gen), "step", 3)
    compare("topk", x, 8)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_median_per_target(target, gen, dtype):
    for kind in ("random", "ties", "nan"):
        for shape in [(1,), (6,), (512, 8), (33, 65), (3, 1001)]:
            x = make_values(kind, shape, dtype, gen)
            for op in ("median", "nanmedian"):
                compare(op, x)
                compare(op, x, -1)
                compare(op, x, 0, True)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_kthvalue_per_target(target, gen, dtype):
    """Each kthvalue kernel per target: the batch selection (rows of 2..64),
    the select by rank (to 8192 on AVX-512, 4096 on AVX2), the bracket; tie
    kinds re-run torch's quickselect from each of them."""
    for kind in ("random", "ties", "nan", "special"):
        for shape in [(1,), (7,), (512, 8), (24, 64), (17, 65), (3, 1001), (2, 5000)]:
            x = make_values(kind, shape, dtype, gen)
            n = shape[-1]
            for k in sorted({k for k in (1, 2, max(1, n // 4), (n + 1) // 2, n) if k <= n}):
                compare("kthvalue", x, k)
    x = layout(make_values("ties", (3, 5, 4, 70), dtype, gen), "step", 3)
    compare("kthvalue", x, 5)
    compare("kthvalue", layout(make_values("ties", (40, 9), dtype, gen), "permuted"), 4, 0)


def misled_sample(n, shift, gen):
    """A permutation of distinct int64 values (multiples of 4) except at the
    positions kth_pick samples (every n // ns-th from the middle of the
    first step, ns = min(4 isqrt(n), 2048)), which hold values (4t + 1)
    whose ranks are those of an even spread shifted by `shift` ranks: its
    bracket misses the ranks near the middle by about |shift| - 2200
    (n = 70000), so 3000 takes the second pass on the low side (-3000 the
    high side) and 15000 misses twice (the exact select)."""
    ns = min(4 * math.isqrt(n), 2048)
    stride = n // ns
    pos = stride // 2 + stride * torch.arange(ns)
    m = n - ns
    t = (((torch.arange(ns) + 0.5) * n / ns).long() + shift).clamp(0, m - 1)
    x = torch.empty(n, dtype=torch.int64)
    rest = torch.ones(n, dtype=torch.bool)
    rest[pos] = False
    x[rest] = 4 * torch.randperm(m, generator=gen)
    x[pos] = 4 * t[torch.randperm(ns, generator=gen)] + 1
    return x


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.float64, torch.int64],
                         ids=str)
def test_kthvalue_bracket_per_target(target, gen, dtype):
    """The bracket path of rows past the select-by-rank length (kth_pick.h,
    for kthvalue and for median's rows past 65536): a k-th value shared by
    60% of the row (far more survivors than the sample predicts: the scratch
    grows, and torch's quickselect re-runs), keys over the dtype's whole
    range (the radix select's several rounds), ranks at the row's ends,
    half the row one value (ReLU outputs: the rank among the bracket's
    least keys; +0.0 alone or mixed with -0.0 for median()), NaN-heavy rows,
    strided rows (gathered in blocks, not read in place), and rows whose
    sample misjudges the rank (misled_sample: the second pass either side,
    and the exact select after two misses)."""
    n = 70_000
    crowded = make_values("random", (n,), dtype, gen)
    crowded[torch.rand(n, generator=gen) < 0.6] = 0
    spread = make_values("random", (n,), dtype, gen)
    relu = spread.clamp(min=0)  # half the row one value, the median at its end
    rows = [crowded, spread, relu]
    rows += [misled_sample(n, shift, gen).to(dtype) for shift in (3000, -3000, 15000, -15000)]
    if dtype.is_floating_point:
        mixed = relu.clone()  # zeros of both signs: which one nth_element leaves shows
        mixed[(mixed == 0) & (torch.rand(n, generator=gen) < 0.5)] = -0.0
        rows.append(mixed)
        nan = spread.clone()
        nan[torch.rand(n, generator=gen) < 0.3] = float("nan")
        rows.append(nan)
        for at in (1000, n - 5):  # the first NaN far in: in a full block, in the last
            late = spread.clone()
            late[at] = float("nan")
            late[at + 3] = float("nan")
            rows.append(late)
    for x in rows:
        for k in (1, 2, n // 100, n // 3, n // 2, n - 1, n):
            compare("kthvalue", x, k)
        for op in ("median", "nanmedian"):
            compare(op, x)
            compare(op, x, 0)
    strided = make_values("random", (2 * n,), dtype, gen).view(n, 2)
    strided[torch.rand(n, generator=gen) < 0.6, 1] = 0
    for k in (1, n // 3, n):
        compare("kthvalue", strided, k, 0)
    compare("median", strided, 0)


def _bracket_passes(fn):
    """(rows, second passes, exact selects) of kth_pick's sampled bracket
    during fn() (kwker.h KWK_COUNT_KTH_BRACKET_*)."""
    lib = _native.lib
    before = [lib.kwk_counter(i) for i in (9, 10, 11)]
    fn()
    return tuple(lib.kwk_counter(i) - b for i, b in zip((9, 10, 11), before))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.float64, torch.int64],
                         ids=str)
def test_kthvalue_bracket_passes_per_target(target, gen, dtype):
    """The bracket's passes, counted: one for ranks at the row's ends (the
    bracket has no lower or no upper end; its top a NaN's key: a NaN rank
    or the last value below the NaNs); the second pass where
    misled_sample shifts the sample 3000 ranks (either side); the exact
    select where it shifts it 15000.  (Answers are checked against torch in
    test_kthvalue_bracket_per_target: a wrong end converted to a value
    still counts consistently, so only these counts show it.)"""
    n = 70_000
    x = make_values("random", (n,), dtype, gen)
    for k in (1, 2, n - 1, n):  # (a rank inside misses ~4% of random rows)
        assert _bracket_passes(lambda: compare("kthvalue", x, k)) == (1, 0, 0), k
    if dtype.is_floating_point:
        y = x.clone()
        y[[5, 777, n - 3]] = float("nan")
        for k in (1, n - 3, n):
            assert _bracket_passes(lambda: compare("kthvalue", y, k)) == (1, 0, 0), k
        z = x.clone()  # a fifth +inf, the rank among them: both ends +inf's key
        z[torch.rand(n, generator=gen) < 0.2] = float("inf")
        assert _bracket_passes(lambda: compare("kthvalue", z, n - n // 10)) == (1, 0, 0)
    for shift, passes in ((3000, (1, 1, 0)), (-3000, (1, 1, 0)), (15000, (1, 1, 1)),
                          (-15000, (1, 1, 1))):
        m = misled_sample(n, shift, gen).to(dtype)
        assert _bracket_passes(lambda: compare("kthvalue", m, n // 2)) == passes, shift


def test_long_rows_per_target(target, gen):
    x = make_values("ties", (1, 100_000), torch.float32, gen)
    compare("sort", x)
    compare("topk", x, 1000)
    compare("median", x, 1)
    xi = make_values("random", (100_000,), torch.int64, gen)
    compare("sort", xi)


@pytest.mark.parametrize("bits", [8, 17, 19])
def test_values_only_narrow_keys_per_target(target, bits):
    """Values-only sorts (msort, unique) of keys spanning `bits` bits: 8 is
    one radix digit (counted, not scattered); 17-19 take the MSD pass and
    then one counted digit per bucket, where every key of a bucket shares
    the bits above the digit (the portable target: the SIMD ones quicksort
    keys wider than 16 bits)."""
    g = torch.Generator().manual_seed(bits)
    span = 1 << bits
    for dtype in (torch.int32, torch.int64):
        x = torch.randint(-span // 2, span // 2, (140_000,), dtype=dtype, generator=g) + 12345
        compare("msort", x)
        compare("unique", x)
    compare("msort", torch.randint(0, span, (140_000,), generator=g).float() * 0.25 - 7.0)


@pytest.mark.parametrize("n", [30_000, 65_536, 131_072, 131_073, 300_000])
def test_values_only_wide_keys_per_target(target, n):
    """Values-only sorts (msort) of 64-bit keys spanning more than 40 bits,
    at lengths around the AVX2 target's hand-over from its quicksort to the
    indexed sort and back (values_sort.h VS_QSORT64_MAX_N,
    VS_INDEXED64_MAX_N), with repeated keys and both float64 zero signs
    absent and present (then the indexed sort takes every target's row)."""
    g = torch.Generator().manual_seed(n)
    ids = torch.randint(-(1 << 61), 1 << 61, (n // 3,), generator=g)
    compare("msort", ids[torch.randint(0, n // 3, (n,), generator=g)])
    f = torch.randn(n, generator=g, dtype=torch.float64) * 1e6
    compare("msort", f)
    f[::997] = 0.0
    f[5::1001] = -0.0
    compare("msort", f)


def test_environment_variable_forces_portable():
    """KWKER_TARGET=portable picks the portable kernels at load time."""
    code = ("import kwker, torch; from kwker import _native;"
            "print(_native.target());"
            "x = torch.randn(50, 70); kwker.install();"
            "from kwker.patching import original;"
            "assert torch.equal(torch.sort(x).indices, original('sort')(x).indices)")
    env = dict(os.environ, KWKER_TARGET="portable")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "portable"
    assert ORIG["sort"] is torch.sort
