"""Many short rows (the MoE-router and batch case): sort/argsort/msort of
rows of 2..16 and topk of rows up to 256 with k <= 8 run eight rows at once
(native/src/short_rows.h); topk of contiguous rows of 256..4095 with k <= 8
runs from a threshold, row by row (native/src/topk_threshold.h; on
AVX-512 from 128 for keys other than float32's); k = 1 of contiguous rows
in one pass (topk_top1.h), and so k = 2 or 3 of float32 rows, k = 2 of
bfloat16 ones (topk_few.h); on AVX-512, float32 rows of up to 128 along
the last dim sixteen at once (topk_short16.h, ahead of topk_few.h).
Differential tests against torch 2.13, values bit for bit and indices
(torch's order of equal values included), on both native targets, with
native row counters proving which kernel served the call (and, for topk,
which rows it handed back or emulated because of a tie).
"""
import pytest
import torch

from kwker import _native
from kwker_testing import ORIG, SELECT_DTYPES, SORT_DTYPES, compare, layout, make_values

lib = _native.lib
SHORT_SORT = 0     # KWK_COUNT_SHORT_SORT_ROWS
SHORT_TOPK = 1     # KWK_COUNT_SHORT_TOPK_ROWS
TOPK_REDONE = 2    # KWK_COUNT_SHORT_TOPK_REDONE
THRESHOLD_TOPK = 4    # KWK_COUNT_THRESHOLD_TOPK_ROWS
THRESHOLD_TIES = 5    # KWK_COUNT_THRESHOLD_TOPK_TIES
THRESHOLD_REDONE = 6  # KWK_COUNT_THRESHOLD_TOPK_REDONE
STABLE_BY_THRESHOLD = 7  # KWK_COUNT_SHORT_TOPK_STABLE_BY_THRESHOLD
TOP1 = 8           # KWK_COUNT_TOP1_ROWS
FEW = 13           # KWK_COUNT_FEW_TOPK_ROWS
FEW_BACK = 14      # KWK_COUNT_FEW_TOPK_TIES: of those, rows handed back

SORT_MAX = 16      # SR_SORT_MAX
TOPK_MAX_LEN = 256  # SR_TOPK_MAX_LEN
TOPK_MAX_K = 8     # SR_TOPK_MAX_K
MIN_ROWS = 8       # SR_MIN_ROWS
THRESHOLD_LENS = (256, 4095)  # TT_MIN_LEN, TT_MAX_LEN
THRESHOLD_MIN_LEN_NARROW = 128  # TT_MIN_LEN_NARROW on AVX-512: keys other than float32's
THRESHOLD_MIN_LEN_TOP1 = 128  # TT_MIN_LEN_TOP1 on AVX-512: k = 1
THRESHOLD_MIN_K_AT_MIN_LEN_AVX512 = 2  # TT_MIN_K_AT_MIN_LEN_T on AVX-512
THRESHOLD_MIN_K_AT_MIN_LEN = 3  # TT_MIN_K_AT_MIN_LEN
TOP1_MIN_LEN = {"avx512": 64, "avx2": 128}  # T1_MIN_LEN (topk_top1.h)
# T1_MAX_LEN, T1_MAX_LEN_BF16, T1_MAX_LEN_I64, T1_MAX_LEN_F64
TOP1_MAX_LEN = {torch.float32: 8192, torch.bfloat16: 4096, torch.int64: 2**31 - 1,
                torch.uint64: 2**31 - 1, torch.float64: 4095}
TOP1_MAX_LEN_BF16_AVX512 = 2**20  # bfloat16's bound on AVX-512 (the two-pass scan)
# topk_few.h's lengths (TF_MIN_LEN_K2, TF_MIN_LEN_K3, TF_MAX_LEN,
# TF_MIN_LEN_BF16, TF_MAX_LEN_BF16) by target, dtype and k
FEW_LENS = {"avx512": {(torch.float32, 2): (96, 4096), (torch.float32, 3): (160, 4096),
                       (torch.bfloat16, 2): (128, 2048)},
            "avx2": {(torch.float32, 2): (96, 2048), (torch.float32, 3): (256, 2048),
                     (torch.bfloat16, 2): (384, 512)}}
# topk_short16.h (AVX-512): S16_ROWS, S16_MAX_LEN (k <= TOPK_MAX_K, k < n)
GROUP16_ROWS, GROUP16_MAX_LEN = 16, 128
ROWS = 19          # two full groups of eight and a tail of three
# keys of at most 32 bits take the kernel; 64-bit ones the per-row path
NARROW = {d for d in SORT_DTYPES if d not in (torch.int64, torch.uint64, torch.float64)}
KINDS = ("random", "ties", "bf16ties", "equal", "nan", "special")


def counters():
    return [lib.kwk_counter(i) for i in range(15)]


def counted(fn):
    """fn()'s rows served by the kernels of this file, by counter: [sort,
    topk, redone, -, threshold topk, its ties, its redone, stable by
    threshold, top-1, -, -, -, -, few, its handed back]."""
    before = counters()
    fn()
    return [a - b for a, b in zip(counters(), before)]


def sort_takes_kernel(dtype, n, rows):
    return dtype in NARROW and 2 <= n <= SORT_MAX and rows >= MIN_ROWS


def topk_kernel(dtype, n, k, rows, sorted_=True, contiguous=True):
    """The counter of the kernel that takes a topk call (TOP1, FEW,
    THRESHOLD_TOPK or SHORT_TOPK), or None for the per-row path."""
    lo = TOP1_MIN_LEN.get(_native.target())  # (none on the portable target)
    hi = TOP1_MAX_LEN.get(dtype, 0)
    if dtype == torch.bfloat16 and _native.target() == "avx512":
        hi = TOP1_MAX_LEN_BF16_AVX512
    if lo is not None and k == 1 and contiguous and lo <= n <= hi:
        return TOP1
    if order_is_torch() and not sorted_ and k * 64 > n and k > 1:
        return None  # torch's nth_element leaves introselect order
    if (_native.target() == "avx512" and dtype == torch.float32 and contiguous
            and rows >= GROUP16_ROWS and k < n <= GROUP16_MAX_LEN and k <= TOPK_MAX_K):
        return SHORT_TOPK  # sixteen rows at once, the tail by the eight-rows kernel
    few = FEW_LENS.get(_native.target(), {}).get((dtype, k))
    if few and contiguous and few[0] <= n <= few[1]:
        return FEW
    if dtype not in NARROW or not 1 <= k <= TOPK_MAX_K:
        return None
    avx512 = _native.target() == "avx512"
    min_k = THRESHOLD_MIN_K_AT_MIN_LEN_AVX512 if avx512 else THRESHOLD_MIN_K_AT_MIN_LEN
    if contiguous and THRESHOLD_LENS[0] <= n <= THRESHOLD_LENS[1] and (
            n > THRESHOLD_LENS[0] or k >= min_k):
        return THRESHOLD_TOPK
    if contiguous and avx512 and n <= THRESHOLD_LENS[0] and (
            (k == 1 and n >= THRESHOLD_MIN_LEN_TOP1)
            or (dtype != torch.float32 and n >= THRESHOLD_MIN_LEN_NARROW)):
        return THRESHOLD_TOPK
    return SHORT_TOPK if 1 <= n <= TOPK_MAX_LEN and rows >= MIN_ROWS else None


def order_is_torch():
    from kwker import dispatch
    return dispatch.Policy.order == _native.ORDER_TORCH


def ks_for(n):
    return sorted({k for k in (1, 2, 3, n // 2, n - 1, n, TOPK_MAX_K, TOPK_MAX_K + 1)
                   if 1 <= k <= n})


# ------------------------------------------------------------------ sort

@pytest.mark.parametrize("dtype", SORT_DTYPES, ids=str)
def test_sort_every_short_length(kw, gen, target, dtype):
    """Rows of 1..33 (the kernel takes 2..16): sort both directions, stable
    or not, argsort and msort, every kind of values."""
    for n in range(1, 34):
        for kind in KINDS:
            x = make_values(kind, (ROWS, n), dtype, gen)
            for descending in (False, True):
                got = counted(lambda: compare("sort", x, dim=-1, descending=descending))
                expect = ROWS if sort_takes_kernel(dtype, n, ROWS) else 0
                assert got[SHORT_SORT] == expect, (n, kind, descending, got)
                compare("sort", x, dim=-1, descending=descending, stable=True)
                compare("argsort", x, dim=-1, descending=descending)
            compare("msort", x.t())


@pytest.mark.parametrize("lay", ("transposed", "step", "offset", "permuted"))
def test_sort_short_rows_layouts(kw, gen, lay):
    """Non-contiguous inputs, a non-last dim, 4-D inputs whose dims cannot be
    collapsed, and outputs torch lays out like the input."""
    for dtype in (torch.float32, torch.bfloat16, torch.int16, torch.uint8):
        for n in (2, 4, 7, 8, 16):
            x = layout(make_values("bf16ties", (5, 3, 4, n), dtype, gen), lay, -1)
            for dim in (-1, 0, 2):
                got = counted(lambda: compare("sort", x, dim=dim, descending=True))
                if dim == -1:
                    assert got[SHORT_SORT] == 60, (lay, dtype, n, got)
                compare("argsort", x, dim=dim)


def test_sort_whisper_and_groupsort_shapes(kw, gen):
    """The corpus shapes this kernel was built for, scaled down."""
    for shape in ((2, 4, 150, 7), (16, 32, 4)):
        x = torch.randn(shape, generator=gen)
        got = counted(lambda: compare("sort", x, dim=-1))
        assert got[SHORT_SORT] == x.numel() // shape[-1]
        compare("sort", x.to(torch.bfloat16), dim=-1, descending=True)


@pytest.mark.parametrize("dtype", (torch.bfloat16, torch.float16, torch.int16, torch.uint16),
                         ids=str)
def test_sort_16bit_rows_through_the_network(kw, gen, target, dtype):
    """16-bit rows of 2..16 go through short_sort_network.h widened to
    32-bit lanes (AVX2 and AVX-512 targets): rows back to back (a call
    whose row count is a multiple of eight, so the last row's last vector
    is stored through a copy; rows with gaps between them, read eight
    elements at a time up to the call's last row) and columns (a sort along
    dim 0, eight neighbouring rows per load), both directions, stable or
    not, ties, NaN of either sign, both zeros, infinities, extremes."""
    for n in (2, 3, 4, 5, 7, 8, 9, 13, 15, 16):
        for kind in KINDS:
            x = make_values(kind, (64, n), dtype, gen)
            if dtype.is_floating_point:
                x[3, 0] = -float("nan")
                x[5, -1] = -0.0
                x[5, 0] = 0.0
                x[6] = float("inf")
            wide = make_values(kind, (64, n + 5), dtype, gen)[:, 2:n + 2]  # gaps between rows
            cols = x.t().contiguous()  # n rows of 64: the network's column layout
            for descending in (False, True):
                for t in (x, wide):
                    got = counted(lambda: compare("sort", t, dim=-1, descending=descending))
                    assert got[SHORT_SORT] == 64, (n, kind, got)
                    compare("sort", t, dim=-1, descending=descending, stable=True)
                    compare("argsort", t, dim=-1, descending=descending)
                got = counted(lambda: compare("sort", cols, dim=0, descending=descending))
                assert got[SHORT_SORT] == 64, (n, kind, got)
                compare("sort", cols, dim=0, descending=descending, stable=True)


def test_sort_few_rows_take_per_row_kernel(kw, gen):
    """Fewer than eight rows: the per-row kernel (same answers)."""
    x = make_values("ties", (MIN_ROWS - 1, 8), torch.float32, gen)
    assert counted(lambda: compare("sort", x, dim=-1))[SHORT_SORT] == 0
    x = make_values("ties", (MIN_ROWS, 8), torch.float32, gen)
    assert counted(lambda: compare("sort", x, dim=-1))[SHORT_SORT] == MIN_ROWS


# ------------------------------------------------------------------ topk

def _topk_all(x, n, dtype, rows, dim=-1):
    """Every k, both directions, sorted or not; the counter must show the
    kernel took exactly the calls it applies to."""
    for k in ks_for(n):
        for largest in (True, False):
            for sorted_ in (True, False):
                got = counted(lambda: compare("topk", x, k, dim=dim, largest=largest,
                                              sorted=sorted_))
                kernel = topk_kernel(dtype, n, k, rows, sorted_, x.stride(dim) == 1)
                for counter in (SHORT_TOPK, THRESHOLD_TOPK, TOP1, FEW):
                    expect = rows if counter == kernel else 0
                    assert got[counter] == expect, (n, k, largest, sorted_, got)
                assert got[FEW_BACK] <= got[FEW]
                assert got[TOPK_REDONE] <= got[SHORT_TOPK]
                assert got[STABLE_BY_THRESHOLD] <= got[TOPK_REDONE]
                if order_is_torch():
                    assert got[STABLE_BY_THRESHOLD] == 0, got
                assert got[THRESHOLD_TIES] + got[THRESHOLD_REDONE] <= got[THRESHOLD_TOPK]
                if not order_is_torch():
                    assert got[THRESHOLD_TIES] == 0, got  # the stable answer is exact


@pytest.mark.parametrize("dtype", SELECT_DTYPES, ids=str)
def test_topk_every_short_length(kw, gen, target, dtype):
    for n in list(range(1, 34)) + [63, 64, 65, 127, 128, 255, 256, 257]:
        for kind in KINDS:
            x = make_values(kind, (ROWS, n), dtype, gen)
            _topk_all(x, n, dtype, ROWS)


def _cpu_targets():
    """Every native target this CPU runs, the AVX2 one too (the `target`
    fixture leaves it out where AVX-512 covers it; topk_top1.h's AVX2 loop
    is its own code)."""
    found = []
    for name in ("portable", "avx2", "avx512"):
        try:
            _native.set_target(name)
        except ValueError:
            continue
        found.append(name)
    _native.set_target("auto")
    return found


@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16, torch.float64, torch.int64),
                         ids=str)
@pytest.mark.parametrize("name", _cpu_targets())
def test_top1_kernel_every_target(kw, gen, name, dtype):
    """topk k = 1 of contiguous float32, bfloat16 and 64-bit rows
    (topk_top1.h): the first of the best keys on every target, lengths
    around each vector width and the kernel's bounds, ties, NaN (largest),
    both zeros, infinities, rows all NaN, both directions; int64's extremes."""
    _native.set_target(name)
    try:
        for n in (64, 65, 71, 72, 79, 80, 81, 127, 128, 129, 135, 136, 137, 639, 640, 641, 655,
                  656, 1000, 4096, 4097, 8191, 8192, 8193):
            for kind in KINDS + ("nan",):
                if kind == "nan" and not dtype.is_floating_point:
                    continue
                x = make_values(kind, (3, n), dtype, gen)
                if dtype.is_floating_point:
                    x[1, -1] = float("nan") if kind == "ties" else x[1, -1]
                    x[2, ::2] = -0.0 if kind == "equal" else x[2, ::2]
                else:
                    x[1, -1] = 2**63 - 1 if kind == "ties" else x[1, -1]
                    x[2, ::3] = -2**63 if kind == "equal" else x[2, ::3]
                for largest in (True, False):
                    got = counted(lambda: compare("topk", x, 1, largest=largest))
                    assert got[TOP1] == (3 if topk_kernel(dtype, n, 1, 3) == TOP1
                                         else 0), (n, kind, got)
        if dtype.is_floating_point:
            x = torch.full((3, 200), float("nan"), dtype=dtype)
            x[1, 40] = float("inf")
            for largest in (True, False):
                got = counted(lambda: compare("topk", x, 1, largest=largest))
                assert got[TOP1] == (3 if name != "portable" else 0), got
    finally:
        _native.set_target("auto")


@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16), ids=str)
def test_top1_two_pass_zeros_and_nans(kw, gen, dtype):
    """topk_top1.h's two-pass scan (AVX-512, rows from 640) keys +0.0 and
    -0.0 apart and NaNs of either sign outside the infinities.  Rows whose
    best is a zero (the first zero of either sign is torch's answer: every
    other element below (largest) or above (smallest) zero, zeros of both
    signs in either order, at several offsets within a vector); NaNs of
    either sign (the largest whatever its sign; the smallest is then the
    least of the rest); rows all NaN (of either sign, of two payloads), or
    all NaN but one element; the best
    in the row's last, overlapping vector, tied with an earlier one.  The
    rows of 64..200 check the one-pass scan on the same inputs."""
    nan = float("nan")
    for n in (64, 200, 640, 641, 1000, 9000):
        for largest in (True, False):
            sign = -1.0 if largest else 1.0
            for first, second in ((-0.0, 0.0), (0.0, -0.0)):
                for at in (0, 5, 15, 16, 31, n - 17, n - 2):
                    x = ((torch.rand(10, n, generator=gen) + 0.5) * sign).to(dtype)
                    x[0, at] = first
                    x[0, at + 1:] = torch.where(torch.rand(n - at - 1, generator=gen) < 0.3,
                                                torch.tensor(second), x[0, at + 1:].float()).to(dtype)
                    x[1, at] = first
                    x[1, -1] = second
                    x[2, at] = -nan  # a negative NaN
                    x[3, -1] = 100.0 * -sign  # the best in the overlapping last vector
                    x[3, n - 20] = 100.0 * -sign  # ... and a tie before it
                    x[4] = nan
                    x[5] = -nan
                    x[5, at] = 7.0
                    x[6, at:] = nan  # NaNs after the best, then before it
                    x[7, :at + 1] = -nan
                    x[8] = -nan
                    x[9] = nan  # NaNs of two payloads, the larger bits first
                    bits = x[9].view(torch.int16 if dtype == torch.bfloat16 else torch.int32)
                    bits[:at + 1] += 1
                    compare("topk", x, 1, largest=largest)


def test_top1_bfloat16_long_rows(kw, gen):
    """bfloat16 rows up to 2^20 take the two-pass scan on AVX-512 (the
    per-row kernel beyond): around the bound, vocabulary-sized rows with
    ties (bfloat16 logits repeat values), a NaN late in the row."""
    for n in (32000, 2**20, 2**20 + 1):
        x = make_values("bf16ties", (2, n), torch.bfloat16, gen)
        x[1, n - 3] = float("nan")
        for largest in (True, False):
            got = counted(lambda: compare("topk", x, 1, largest=largest))
            assert got[TOP1] == (2 if topk_kernel(torch.bfloat16, n, 1, 2) == TOP1 else 0), got


def _distinct_rows(rows, n, dtype, gen):
    """rows x n values, distinct within each row, exact in `dtype`: a
    permutation of -n/2.. (bfloat16 rows of more than 256: of n consecutive
    positive bit patterns from 2^-7)."""
    perm = ORIG["argsort"](torch.rand(rows, n, generator=gen), dim=-1)
    if dtype is torch.bfloat16 and n > 256:
        return (perm + 0x3C00).to(torch.int16).view(torch.bfloat16)
    return (perm - n // 2).to(dtype)


@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16), ids=str)
@pytest.mark.parametrize("name", _cpu_targets())
def test_few_kernel_every_target(kw, gen, name, dtype):
    """topk k = 2, 3 of contiguous float32 rows, k = 2 of bfloat16 ones
    (topk_few.h) on every target: lengths around its bounds and the vector
    widths (the last vector read overlapping), both directions, sorted or
    not.  Tie-free rows are answered; rows with a NaN (either sign,
    anywhere, the overlapped tail included), a tie among the k + 1 best, or
    -0.0 beside +0.0 among them are handed back; the best keys sharing a
    vector lane take the kernel's second pass."""
    _native.set_target(name)
    try:
        lens = FEW_LENS.get(name, {})
        for k in (2, 3):
            bounds = lens.get((dtype, k))
            if bounds is None and (dtype, 2) not in lens:
                bounds = (96, 128)  # (a target without the kernel: nothing taken)
            if bounds is None:
                continue
            lo, hi = bounds
            for n in sorted({lo - 1, lo, lo + 1, lo + 7, lo + 15, 200, 257, 1000, hi - 1, hi,
                             hi + 1}):
                x = _distinct_rows(8, n, dtype, gen)
                taken = topk_kernel(dtype, n, k, 8) == FEW
                for largest in (True, False):
                    for sorted_ in (True, False):
                        got = counted(lambda: compare("topk", x, k, largest=largest,
                                                      sorted=sorted_))
                        want = topk_kernel(dtype, n, k, 8, sorted_) == FEW
                        assert got[FEW] == (8 if want else 0), (n, k, got)
                        assert got[FEW_BACK] == 0, (n, k, got)
                if not taken:
                    continue
                y = x.clone()
                top = ORIG["topk"](x, k + 1, dim=-1).indices
                bottom = ORIG["topk"](x, k + 1, dim=-1, largest=False).indices
                y[0, n - 1] = float("nan")               # in the overlapped tail
                y[1, 5] = -float("nan")                  # a negative NaN
                y[2, top[2, k]] = y[2, top[2, k - 1]]    # the k-th and (k+1)-th tie
                y[3, top[3, 1]] = y[3, top[3, 0]]        # the best two tie
                y[4, :] = -1 - y[4, :].abs()             # all negative but two zeros:
                y[4, 3], y[4, n - 2] = -0.0, 0.0         #   -0.0 == +0.0, the best two
                y[5, top[5, 0]] = float("inf")           # +inf, alone: answered
                y[5, bottom[5, 0]] = -float("inf")
                y[6, :] = y[6, 0]                        # all equal
                # the best two in one lane (16 apart: lane 0 on AVX-512 and AVX2)
                y[7, :] = -y[7, :].abs() - 2
                y[7, 0], y[7, 16] = 100, 90
                y[7, 32] = 80 if k == 3 else y[7, 32]
                for largest in (True, False):
                    got = counted(lambda: compare("topk", y, k, largest=largest))
                    assert got[FEW] == 8, (n, k, got)
                    # largest: rows 0-4 and 6 back (row 2 ties at the (k+1)-th);
                    # smallest: the NaN rows, the all-equal row and the
                    # zeros (row 4's smallest are distinct: back only if tied)
                    if largest:
                        assert got[FEW_BACK] == 6, (n, k, got)
                    else:
                        assert got[FEW_BACK] >= 3, (n, k, got)
        if dtype is torch.bfloat16 and (dtype, 2) in lens:
            # longer bfloat16 rows: randn rounded (ties now and then)
            lo, hi = lens[(dtype, 2)]
            for n in (hi, (lo + hi) // 2):
                x = torch.randn(16, n, generator=gen).to(dtype)
                got = counted(lambda: compare("topk", x, 2))
                assert got[FEW] == 16, got
    finally:
        _native.set_target("auto")


def test_topk_sixteen_rows_kernel(kw, gen, target):
    """float32 rows sixteen at once (topk_short16.h on AVX-512; the other
    targets take the eight-rows kernel): every k and both directions over
    lengths around its column blocks of sixteen, 37 rows (two groups and a
    tail of five), rows read from a wider tensor too; tie-free rows are
    answered; rows with a NaN (either sign), a tie among the k + 1 best
    (-0.0 beside +0.0 included) or all equal are handed back, a -0.0 or an
    infinity alone is answered with its bits."""
    rows = 2 * GROUP16_ROWS + 5
    for n in (2, 3, 5, 8, 15, 16, 17, 31, 32, 33, 64, 100, 127, 128, 129):
        x = _distinct_rows(rows, n, torch.float32, gen)
        for k in sorted({1, 2, 3, 4, 5, 8, n - 1} & set(range(1, min(n, TOPK_MAX_K + 1)))):
            for largest in (True, False):
                for sorted_ in (True, False):
                    got = counted(lambda: compare("topk", x, k, largest=largest, sorted=sorted_))
                    if topk_kernel(torch.float32, n, k, rows, sorted_) == SHORT_TOPK:
                        assert got[SHORT_TOPK] == rows and got[TOPK_REDONE] == 0, (n, k, got)
        wide = torch.randn(rows, n + 3, generator=gen)[:, 1:n + 1]  # rows n + 3 apart
        compare("topk", wide, min(2, n - 1))
        if n < 8:
            continue
        k = 2
        y = x.clone()
        top = ORIG["topk"](x, k + 1, dim=-1).indices
        y[0, n - 1] = float("nan")                # in the row's last column block
        y[1, 1] = -float("nan")                   # a negative NaN
        y[2, top[2, k]] = y[2, top[2, k - 1]]     # the k-th and (k+1)-th tie
        y[3, top[3, 1]] = y[3, top[3, 0]]         # the best two tie
        y[4, :] = -1 - y[4, :].abs()              # all negative but two zeros:
        y[4, 3], y[4, n - 2] = -0.0, 0.0          #   -0.0 == +0.0, the best two
        y[5, top[5, 0]] = float("inf")            # +inf alone: answered
        y[6, :] = y[6, 0]                         # all equal
        y[7, :] = -1 - y[7, :].abs()              # -0.0 alone, the largest: answered
        y[7, n // 2] = -0.0
        y[20, 0] = float("nan")                   # the second group
        for largest in (True, False):
            for sorted_ in (True, False):
                got = counted(lambda: compare("topk", y, k, largest=largest, sorted=sorted_))
                if largest and topk_kernel(torch.float32, n, k, rows, sorted_) == SHORT_TOPK \
                        and _native.target() == "avx512" and n <= GROUP16_MAX_LEN:
                    assert got[TOPK_REDONE] == 7, (n, got)  # rows 0-4, 6 and 20


@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16, torch.int32, torch.int8),
                         ids=str)
def test_topk_ties_are_redone(kw, gen, dtype):
    """Rows with a tie among their first k + 1 keys go back to the per-row
    kernel (torch's order of equal values); tie-free rows do not."""
    n, k = 8, 2
    x = make_values("random", (16, n), dtype, gen)
    x = ORIG["argsort"](x.float(), dim=-1).to(dtype)  # distinct values per row
    got = counted(lambda: compare("topk", x, k))
    assert got[SHORT_TOPK] == 16 and got[TOPK_REDONE] == 0
    y = x.clone()
    y[3, :] = 5                     # all equal: a tie in the first k + 1
    y[7, 0] = y[7, 1] = 100         # a tie for the top value
    y[9][y[9] == n - 3] = n - 2     # the k-th and (k+1)-th equal
    y[11][y[11] == 1] = 0           # a tie outside the first k + 1: no redo
    got = counted(lambda: compare("topk", y, k))
    assert got[SHORT_TOPK] == 16 and got[TOPK_REDONE] == 3, got
    if dtype.is_floating_point:
        z = x.clone()
        z[2, 3] = float("nan")      # one NaN: the largest, no tie
        z[5, 1] = z[5, 6] = float("nan")  # two NaNs share a key: redone
        z[6, 0] = -0.0              # alone: fine
        got = counted(lambda: compare("topk", z, k))
        # the sixteen-rows kernel hands back every row holding a NaN
        sixteen = _native.target() == "avx512" and dtype == torch.float32
        assert got[TOPK_REDONE] == (2 if sixteen else 1), got
        got = counted(lambda: compare("topk", z, k, largest=False))


@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16, torch.float16, torch.int32,
                                   torch.int16, torch.uint8), ids=str)
def test_topk_threshold_lengths(kw, gen, target, dtype):
    """Rows around and inside the threshold kernel's lengths, fewer than
    eight rows too (it takes any number), every kind of values."""
    for n in (127, 128, 200, 255, 1000, 4094, 4095, 4096):
        for kind in ("random", "ties", "bf16ties", "nan", "sorted", "reversed"):
            x = make_values(kind, (3, n), dtype, gen)
            _topk_all(x, n, dtype, 3)


@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16, torch.int8), ids=str)
def test_topk_threshold_ties_and_overflow(kw, gen, target, dtype):
    """Threshold rows with a tie among their first k + 1 keys are emulated in
    torch's order on the spot; rows with too many candidates (all equal, or
    the largest values all in one vector lane) go back to the per-row
    kernel."""
    n, k = 256, 8
    x = ORIG["argsort"](make_values("random", (16, n), torch.float32, gen).float(), dim=-1)
    x = (x - 128).to(dtype)  # distinct values per row, int8 included
    got = counted(lambda: compare("topk", x, k))
    assert got[THRESHOLD_TOPK] == 16 and got[THRESHOLD_TIES] == 0, got
    y = x.clone()
    y[3, :] = 5                             # all equal: every key a candidate
    y[7][y[7] == 126] = 127                 # a tie for the top value
    y[9][y[9] == 127 - k] = 128 - k         # the k-th and (k+1)-th equal
    y[11][y[11] == -120] = -121             # a tie far below: exact as it is
    got = counted(lambda: compare("topk", y, k))
    torch_order = order_is_torch()
    assert got[THRESHOLD_TOPK] == 16, got
    assert got[THRESHOLD_TIES] == (2 if torch_order else 0), got
    assert got[THRESHOLD_REDONE] == 1, got
    # 1024 elements, the 128 in lane 0 (positions 8j) the largest
    lane0 = torch.arange(1024) % 8 == 0
    big = torch.arange(1024) // 8 - 20
    small = ORIG["argsort"](torch.rand(4, 1024, generator=gen), dim=-1) % 40 - 80
    w = torch.where(lane0, big, small).to(dtype)
    got = counted(lambda: compare("topk", w, k))
    assert got[THRESHOLD_REDONE] == 4, got
    got = counted(lambda: compare("topk", w, 2, largest=False))
    assert got[THRESHOLD_REDONE] == 0, got  # its smallest values are spread
    if dtype.is_floating_point:
        z = x.clone()
        z[2, 3] = float("nan")              # one NaN: the largest, no tie
        z[5, 1] = z[5, 100] = float("nan")  # two NaNs share a key
        got = counted(lambda: compare("topk", z, k))
        assert got[THRESHOLD_TIES] == (1 if torch_order else 0), got
        compare("topk", z, k, largest=False)


def _router_rows(n, dtype, gen):
    """Router-like rows (softmax of bfloat16 logits: a quarter of them tie
    among their 9 largest), one row all equal, one with every value twice."""
    logits = (torch.randn(64, n, generator=gen) * 2).to(torch.bfloat16).float()
    x = (logits.softmax(-1) if dtype.is_floating_point else logits * 8).to(dtype)
    x[5, :] = x[5, 0]
    x[9, : n // 2] = x[9, n // 2:]
    return x


ROUTER_CASES = ((128, 8), (64, 6), (16, 2), (200, 4), (128, 2), (256, 3))
ROUTER_DTYPES = (torch.float32, torch.bfloat16, torch.int32, torch.int16)


@pytest.mark.parametrize("dtype", ROUTER_DTYPES, ids=str)
def test_topk_tied_rows_torch_order(kw, gen, target, dtype):
    """In torch order the eight-rows kernel's tied rows (and those topk_few.h
    hands back) are emulated, never answered by the threshold kernel's
    stable ranking."""
    for n, k in ROUTER_CASES:
        x = _router_rows(n, dtype, gen)
        for largest in (True, False):
            got = counted(lambda: compare("topk", x, k, largest=largest))
            kernel = topk_kernel(dtype, n, k, 64)
            if kernel == THRESHOLD_TOPK:  # emulated on the spot
                assert got[THRESHOLD_TOPK] == 64 and got[THRESHOLD_TIES] >= 2, got
            elif kernel == FEW:  # handed back, emulated
                assert got[FEW] == 64 and got[FEW_BACK] >= 2, got
            else:
                assert got[SHORT_TOPK] == 64 and got[TOPK_REDONE] >= 2, got
            assert got[STABLE_BY_THRESHOLD] == 0, got


@pytest.mark.parametrize("dtype", ROUTER_DTYPES, ids=str)
def test_topk_tied_rows_stable_by_threshold(kw_stable, gen, target, dtype):
    """With ties="stable" the eight-rows kernel's tied contiguous rows of >=
    16 (and those topk_few.h hands back) are answered by the threshold
    kernel's ranking of (key, position);
    strided rows go to the per-row kernel.  Checked against a stable
    sort."""
    from test_exactness import _is_stable_topk
    for n, k in ROUTER_CASES:
        x = _router_rows(n, dtype, gen)
        for largest in (True, False):
            for sorted_ in (True, False):
                before = counters()
                got = torch.topk(x, k, -1, largest, sorted_)
                c = [a - b for a, b in zip(counters(), before)]
                kernel = topk_kernel(dtype, n, k, 64, sorted_)
                if kernel == THRESHOLD_TOPK:
                    # the threshold kernel itself ranks (key, position)
                    assert c[THRESHOLD_TOPK] == 64 and c[THRESHOLD_TIES] == 0, c
                elif kernel == FEW:  # rows handed back ranked by the threshold's
                    assert c[FEW] == 64, c
                    assert 0 < c[STABLE_BY_THRESHOLD] <= c[FEW_BACK], c
                else:
                    assert c[SHORT_TOPK] == 64, c
                    assert 0 < c[STABLE_BY_THRESHOLD] <= c[TOPK_REDONE], c
                _is_stable_topk(x, k, 1, largest, sorted_, got)
        y = layout(x, "step", -1)
        before = counters()
        got = torch.topk(y, k, -1)
        c = [a - b for a, b in zip(counters(), before)]
        assert c[STABLE_BY_THRESHOLD] == 0, c
        _is_stable_topk(y, k, 1, True, True, got)


def test_topk_threshold_layouts(kw, gen):
    """Rows of 300: contiguous rows at a storage offset take the threshold
    kernel, rows of every other element the per-row one."""
    for lay, expect in (("offset", 60), ("step", 0)):
        for dtype in (torch.float32, torch.bfloat16):
            x = layout(make_values("bf16ties", (3, 4, 5, 300), dtype, gen), lay, -1)
            got = counted(lambda: compare("topk", x, 8, dim=-1))
            assert got[THRESHOLD_TOPK] == expect, (lay, dtype, got)
            compare("topk", x, 3, dim=-1, largest=False, sorted=False)


@pytest.mark.parametrize("lay", ("transposed", "step", "offset", "permuted"))
def test_topk_short_rows_layouts(kw, gen, lay):
    """Strided rows, a non-last dim (router logits stored transposed), 4-D
    inputs, and k along dim 0."""
    for dtype in (torch.float32, torch.bfloat16, torch.int16):
        for n in (4, 8, 32):
            x = layout(make_values("random", (3, 4, 5, n), dtype, gen), lay, -1)
            got = counted(lambda: compare("topk", x, 2, dim=-1))
            assert got[SHORT_TOPK] == 60, (lay, dtype, n, got)
            compare("topk", x, 3, dim=0, largest=False)
            compare("topk", x, 4, dim=2, sorted=False)


def test_topk_router_shapes(kw, gen):
    """The corpus shapes, scaled down: top-2 of 8 experts, group selection,
    top-8 of 128, bf16 logits (ties common), smallest-2 of 4 (wanda)."""
    compare("topk", torch.randn(512, 8, generator=gen), 2)
    compare("topk", torch.randn(256, 8, generator=gen), 4)
    compare("topk", torch.randn(64, 8, 32, generator=gen), 2)
    compare("topk", torch.randn(256, 128, generator=gen), 8)
    compare("topk", torch.randn(128, 128, generator=gen).to(torch.bfloat16), 8)
    compare("topk", torch.randn(128, 128, generator=gen).to(torch.bfloat16), 8, sorted=False)
    compare("topk", torch.randn(1000, 4, generator=gen), 2, dim=1, largest=False)


def test_topk_stable_ties(kw_stable, gen):
    """ties="stable": equal values in index order, for rows the kernel keeps
    and rows it redoes alike."""
    for dtype in (torch.float32, torch.bfloat16, torch.int8):
        for n in (3, 8, 17, 64, 300, 1000):
            x = make_values("ties", (ROWS, n), dtype, gen)
            for k in ks_for(n):
                for largest in (True, False):
                    for sorted_ in (True, False):
                        got = torch.topk(x, k, largest=largest, sorted=sorted_)
                        ref = ORIG["sort"](x, dim=-1, descending=largest, stable=True)
                        assert torch.equal(got.values, ref.values[:, :k]), (dtype, n, k)
                        assert torch.equal(got.indices, ref.indices[:, :k]), (dtype, n, k)


# ------------------------------------------------- 64-bit rows of up to 8
# On AVX-512, sort, topk (sorted, or k = 1), kthvalue, median and nanmedian
# rank a 64-bit row of up to 8 keys in one vector (keys.h kwk_ranks8_u64);
# topk in torch order hands a row with equal keys to the per-row kernel.

WIDE = (torch.int64, torch.float64)
WIDE_KINDS = ("random", "ties", "equal", "nan", "special", "sorted", "reversed")


def _wide_rows(kind, n, dtype, gen, lay):
    """ROWS rows of n: contiguous rows, or rows along dim 0 of a
    contiguous tensor (a strided read, strided outputs)."""
    if lay == "rows":
        return make_values(kind, (ROWS, n), dtype, gen), -1
    return make_values(kind, (n, ROWS), dtype, gen), 0


@pytest.mark.parametrize("lay", ("rows", "dim0"))
@pytest.mark.parametrize("dtype", WIDE, ids=str)
def test_wide_short_rows_every_op(kw, gen, target, dtype, lay):
    for n in range(1, 10):
        for kind in WIDE_KINDS:
            x, dim = _wide_rows(kind, n, dtype, gen, lay)
            for descending in (False, True):
                compare("sort", x, dim=dim, descending=descending)
                compare("sort", x, dim=dim, descending=descending, stable=True)
                compare("argsort", x, dim=dim, descending=descending)
            for k in range(1, n + 1):
                compare("kthvalue", x, k, dim)
                for largest in (True, False):
                    for sorted_ in (True, False):
                        compare("topk", x, k, dim=dim, largest=largest, sorted=sorted_)
            compare("median", x, dim)
            compare("nanmedian", x, dim)


@pytest.mark.parametrize("dtype", WIDE, ids=str)
def test_wide_short_rows_stable_topk(kw_stable, gen, dtype):
    """ties="stable": equal keys by index, no hand-back."""
    for n in range(1, 10):
        for kind in ("ties", "equal", "nan"):
            x = make_values(kind, (ROWS, n), dtype, gen)
            for k in range(1, n + 1):
                for largest in (True, False):
                    got = torch.topk(x, k, largest=largest)
                    ref = ORIG["sort"](x, dim=-1, descending=largest, stable=True)
                    assert torch.equal(got.indices, ref.indices[:, :k]), (n, kind, k, largest)
                    picked = x.gather(-1, got.indices)
                    assert torch.equal(got.values.view(torch.int64), picked.view(torch.int64))


def test_wide_short_rows_all_nan_nanmedian(kw, gen):
    """nanmedian of rows with only NaNs (torch's nth_element rule) beside
    rows with some."""
    for n in range(1, 9):
        x = torch.randn(ROWS, n, dtype=torch.float64, generator=gen)
        x[3] = float("nan")
        x[5, : n // 2 + 1] = float("nan")
        compare("nanmedian", x, -1)
        compare("median", x, -1)


# ------------------------------------------------- inputs streamed from memory
PLAIN_LOADS_MIN_BYTES = 1 << 20  # KWK_PLAIN_LOADS_MIN_BYTES (plain_loads.h)


def _big_rows(rows, n, dtype, gen, step=0):
    """rows x n of distinct-ish values with a few ties and NaNs, over
    PLAIN_LOADS_MIN_BYTES; step > 0: the rows read n + step apart out of a
    wider tensor.  Contiguous ones end where their storage ends, so a whole
    vector read past the last row would leave the allocation (ASan)."""
    x = torch.randn(rows, n + step, generator=gen)
    x[::97, 0] = x[::97, -1]                      # ties
    x[5::211, n // 2] = float("nan")
    x = x.to(dtype) if dtype.is_floating_point else (x * 1e6).to(dtype)
    x = x[:, :n] if step else x
    assert x.numel() * x.element_size() >= PLAIN_LOADS_MIN_BYTES
    return x


@pytest.mark.parametrize("tail", (0, 5))
@pytest.mark.parametrize("step", (0, 3))
def test_short_rows_streamed_from_memory(kw, gen, target, step, tail):
    """Inputs of 1 MiB and more, where the short-row kernels read each row as
    a whole vector (plain_loads.h, short_sort_network.h) and only the loads
    that would pass the input's end stay masked: sort of float32 rows of 7
    and int64 rows of 5, topk of float32 rows of 17 (sixteen rows at once)
    and of int64 rows of 8, medians of float32 rows of 9 and 25.  Row
    counts a multiple of the kernels' groups of 8 and 16 (tail 0: the
    kernels read the last row themselves, which ends where the storage
    does, so a whole vector read past it leaves the allocation, which ASan
    reports: native/tests/pytest_sanitized.sh) or not (a tail for the
    per-row paths)."""
    x = _big_rows(40000 + tail, 7, torch.float32, gen, step)
    got = counted(lambda: compare("sort", x, dim=-1))
    assert got[SHORT_SORT] == x.shape[0], got
    compare("argsort", x, dim=-1, descending=True)
    compare("sort", _big_rows(30000 + tail, 5, torch.int64, gen, step), dim=-1, descending=True)
    y = _big_rows(16400 + tail, 17, torch.float32, gen, step)
    got = counted(lambda: compare("topk", y, 2))
    if topk_kernel(torch.float32, 17, 2, y.shape[0], contiguous=step == 0) == SHORT_TOPK:
        assert got[SHORT_TOPK] == y.shape[0], got
    compare("topk", y, 3, largest=False)
    compare("topk", _big_rows(20000 + tail, 8, torch.int64, gen, step), 2)
    compare("median", _big_rows(29136 + tail, 9, torch.float32, gen, step), -1)
    compare("median", _big_rows(11008 + tail, 25, torch.float32, gen, step), -1)
