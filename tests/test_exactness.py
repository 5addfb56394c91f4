"""Kwker's results are torch's, bit for bit (the core contract).

Each check calls torch's captured original and the installed op on the same
input and compares values by bit pattern, indices, dtype, shape and strides,
checks that the input was not touched, and that the fast path actually ran
(kwker.stats) - a test that silently fell back could not fail.
"""
import pytest
import torch

from kwker import _native

from kwker_testing import (FLOAT_DTYPES, LAYOUTS, ORIG, SELECT_DTYPES, SORT_DTYPES, VALUE_KINDS,
                      _nan_payloads, assert_same, bits, compare, layout, make_values)

UNSIGNED_WIDE = (torch.uint16, torch.uint32, torch.uint64)

# Row shapes (the sort dim last): 1 element, tiny rows, MoE-like many short
# rows, a wide matrix.
SORT_SHAPES = [(1,), (2,), (5,), (16,), (17,), (3, 20), (512, 8), (256, 64)]


def ks_for(length):
    """topk k values: the ends, and around torch's partial_sort switch
    (k * 64 <= len)."""
    ks = {0, 1, 2, length - 1, length}
    for k in (length // 64 - 1, length // 64, length // 64 + 1):
        ks.add(k)
    return sorted(k for k in ks if 0 <= k <= length)


def sort_variants(descending):
    """(args, kwargs) call forms for sort/argsort: positional, keyword, all
    stable spellings."""
    return [
        ((-1, descending), {}),
        ((), {"dim": -1, "descending": descending}),
        ((), {"descending": descending, "stable": False}),
        ((), {"dim": -1, "descending": descending, "stable": True}),
        ((), {"stable": None, "descending": descending}),
    ]


# ------------------------------------------------------------------- sort

@pytest.mark.parametrize("kind", VALUE_KINDS)
@pytest.mark.parametrize("dtype", SORT_DTYPES, ids=str)
def test_sort_dtypes_values(kw, gen, dtype, kind):
    for shape in SORT_SHAPES:
        x = make_values(kind, shape, dtype, gen)
        for descending in (False, True):
            for args, kwargs in sort_variants(descending):
                compare("sort", x, *args, **kwargs)
            compare("argsort", x, -1, descending)
            compare("argsort", x, descending=descending, stable=True)
        compare("msort", x.t() if x.ndim == 2 else x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bfloat16, torch.int8,
                                   torch.float16, torch.bool, torch.uint32], ids=str)
def test_sort_every_small_length(kw, gen, dtype):
    """Every row length 1..40 and around libstdc++'s thresholds (insertion
    sort at 16, the median-of-3 introsort partitions), tie-heavy."""
    for n in list(range(1, 41)) + [47, 63, 64, 65, 100, 127, 128, 129, 255, 257, 1000, 1025]:
        for kind in ("ties", "bf16ties", "random"):
            x = make_values(kind, (4, n), dtype, gen)
            for descending in (False, True):
                compare("sort", x, dim=1, descending=descending)
                compare("sort", x, dim=1, descending=descending, stable=True)


@pytest.mark.parametrize("dtype,kind", [
    (torch.float32, "random"), (torch.float32, "nan"), (torch.bfloat16, "bf16ties"),
    (torch.float64, "special"), (torch.int64, "random"), (torch.int64, "ties"),
    (torch.int32, "ties"), (torch.uint8, "random")], ids=str)
def test_sort_long_rows(kw, gen, dtype, kind):
    """1 x 200000 and 1-D 200000 (torch's radix path for 1-D ascending ints,
    which is stable)."""
    x = make_values(kind, (1, 200_000), dtype, gen)
    compare("sort", x)
    compare("sort", x[0])
    compare("argsort", x[0], descending=True)


@pytest.mark.parametrize("dtype", [torch.int64, torch.float64, torch.uint64], ids=str)
def test_sort_wide_keys(kw, gen, dtype):
    """64-bit keys too wide to pack with their index (sort_kernels.h
    wide_sort): rows of 64 sorted by their keys' top bits, with keys that
    agree on every top bit (a unit apart) or are equal (copied), which the
    scan for runs of equal top bits must still order, and rows with none,
    which skip it; and rows of 2^19 + 37, whose values are read from the
    source in random order with prefetching (emit_words), with and without
    repeated keys (torch's order then comes from the emulation), both
    directions, both orders."""
    def wide(shape):
        if dtype is torch.float64:
            return torch.randn(shape, dtype=dtype, generator=gen) * 1e10
        x = torch.randint(-2**62, 2**62, shape, generator=gen)
        return x if dtype is torch.int64 else x.to(torch.uint64)
    short = wide((256, 64))
    short[::2, 5] = short[::2, 40]                      # equal keys
    if dtype is not torch.float64:
        short[1::4, 10] = short[1::4, 11] ^ 1           # equal top bits, other keys
    long_rows = wide((2, (1 << 19) + 37))
    long_rows[1, ::4096] = long_rows[1, 7]              # 129 equal keys in row 1
    for x in (short, long_rows):
        for descending in (False, True):
            compare("sort", x, descending=descending)
            compare("sort", x, descending=descending, stable=True)
    compare("argsort", long_rows[0], descending=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64], ids=str)
def test_sort_dominant_value_rows(kw, gen, target, dtype):
    """Rows where one value fills nearly every slot (top-p after top-k: -inf
    but for k logits; kNN votes: zeros but for a few classes; padding), in
    torch's tie order: the emulation's partitions then meet blocks with no
    gap or one (exchanged run by run) and long all-equal ranges (followed
    on views of a copy above 256 words, reversed in place below).  Lengths
    around those switches, few and fewer exceptions, both directions."""
    fill = {torch.float32: float("-inf"), torch.bfloat16: 0.0, torch.int64: 7}[dtype]
    for n in (255, 257, 513, 1000, 4099, 32000):
        for others in (0, 1, 3, 50):
            x = torch.full((2, n), fill, dtype=dtype)
            for r in range(2):
                pos = torch.randperm(n, generator=gen)[:others]
                x[r, pos] = make_values("random", (others,), dtype, gen)
            for descending in (False, True):
                compare("sort", x, descending=descending)
                compare("argsort", x, descending=descending)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int32,
                                   torch.int64], ids=str)
def test_sort_dominant_key_split_stable(kw, gen, target, dtype):
    """The stable order of rows dominated by one key (sort_kernels.h:
    words_sort_dominant): a pass splits off the words below and above the
    key, sorted apart, the key's own staying in index order.  Keys from
    the row's middle (words on both sides), shares around the sample's bar
    (6 of 16: 30-70%), rows around KWK_DOM_MIN_N (128) and past it, the
    fill at random places or in one block at either end (padding), single
    rows and batches of 16 (whose first rows decide the batch network
    against the split), both directions."""
    fill = {torch.float32: 0.0, torch.float64: -0.0, torch.bfloat16: 0.5,
            torch.int32: 3, torch.int64: -(1 << 40)}[dtype]
    split_rows = lambda: _native.lib.kwk_counter(15)  # KWK_COUNT_DOMINANT_SPLIT_ROWS
    before = split_rows()
    for n in (127, 128, 129, 336, 1000, 5000):
        for share in (0.3, 0.45, 0.7, 0.99):
            for place in ("random", "tail", "head"):
                if dtype is torch.int64:  # keys of 42 bits: packed with the index
                    x = torch.randint(-(1 << 41), 1 << 41, (16, n), generator=gen)
                else:
                    x = make_values("random", (16, n), dtype, gen)
                if dtype.is_floating_point:
                    x[:, ::7] = -x[:, ::7]  # keys below and above the fill
                count = int(n * share)
                for r in range(16):
                    if place == "random":
                        pos = torch.randperm(n, generator=gen)[:count]
                    else:
                        pos = torch.arange(n - count, n) if place == "tail" else torch.arange(count)
                    x[r, pos] = fill
                if dtype is torch.float64:
                    x[0, :count:3] = 0.0  # +0.0 among the -0.0 fill: one key, two bit patterns
                for descending in (False, True):
                    compare("sort", x, descending=descending, stable=True)
                    compare("sort", x[3], descending=descending, stable=True)
                    compare("argsort", x[5], descending=descending, stable=True)
    # long parts full of ties of their own (the radix passes sort them by
    # key bits alone, so they must get them in index order)
    x = torch.randint(-40, 40, (2, 20000), generator=gen).to(dtype)
    x[:, torch.randperm(20000, generator=gen)[:9000]] = 0
    for descending in (False, True):
        compare("sort", x, descending=descending, stable=True)
    # at least every row of 99% fill was split: the single rows of 128 and
    # more, and the batches' rows from KWK_DOM_BATCH_MIN_N (256) (the
    # sample finds a key of 45% or 70% most times, not always); float64
    # keys are too wide to pack with an index, and take the wide sort;
    # bfloat16 rows of KWK_H16_SORT_MIN_LEN.. the 16-bit counting sort
    if dtype not in (torch.float64, torch.bfloat16):
        assert split_rows() - before >= 5 * 3 * 2 * 2 + 3 * 3 * 2 * 16, split_rows() - before


def test_sort_values_rebuilt_from_keys(kw, gen, target):
    """Sorted float32 rows have their values rebuilt from the sorted keys
    (sort_kernels.h: emit_words_decoded; eight words at a time on AVX2 and
    AVX-512 from 64 words, elsewhere from 16384) but for zeros and NaNs,
    whose groups of eight are copied from the source by index: +-0.0, NaN
    payloads, infinities and subnormals scattered so that they fall at
    every offset of the groups, few and many of them; dense outputs and
    strided ones (the sort along dim 0)."""
    specials = torch.cat([torch.tensor([0.0, -0.0, float("inf"), -float("inf"), 1e-45, -1e-45]),
                          _nan_payloads(torch.float32)])
    for n in (64, 71, 1000, 16384, 16391, 40000):
        for count in (1, 3, 40):
            x = torch.randn(n, generator=gen)
            m = min(n, count * specials.numel())
            pos = torch.randperm(n, generator=gen)[:m]
            x[pos] = specials.repeat(count)[:m]
            for descending in (False, True):
                compare("sort", x, descending=descending)
                compare("sort", x, descending=descending, stable=True)
            compare("sort", x[:n // 2 * 2].view(2, -1).t(), dim=0, descending=True)
        # bfloat16-rounded values: runs of equal keys, torch's tie order
        x = torch.randn(n, generator=gen).bfloat16().float()
        x[torch.randperm(n, generator=gen)[:50]] = -0.0
        compare("sort", x)
        compare("sort", x, descending=True, stable=True)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int16, torch.bool, torch.int8, torch.uint8,
                                   torch.float16], ids=str)
def test_sort_around_radix_switch(kw, gen, dtype):
    """torch sorts 1-D ascending integer inputs of >= 32768 elements with a
    (stable) radix sort, shorter ones with std::sort: tie-heavy inputs on
    both sides of the switch, and the strided 1-D case."""
    for n in (32767, 32768):
        x = make_values("ties", (n,), dtype, gen)
        compare("sort", x)
        compare("argsort", x, descending=True)
        compare("sort", layout(x, "step", 0))
    compare("sort", make_values("ties", (2, 32768), dtype, gen))


def _small_range_values(dtype, n, span, end, gen):
    """n integers of `dtype` spanning `span` values from the dtype's least
    value (end "low"), around zero ("mid") or up to its largest ("high")."""
    r = torch.randint(0, span, (n,), generator=gen, dtype=torch.int64)
    if dtype is torch.uint64:  # built as int64 bits (2^64 - span wraps to -span)
        base = {"low": 0, "mid": 1000, "high": -span}[end]
        return (r + base).view(torch.uint64)
    info = torch.iinfo(dtype)
    base = {"low": info.min, "mid": -100 if info.min < 0 else 100, "high": info.max - span + 1}[end]
    return (r + base).to(dtype)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.uint32, torch.uint64], ids=str)
def test_sort_small_key_range(kw, gen, target, dtype):
    """Stable sorts of long integer rows whose keys span at most 256 values
    are counted (sort_kernels.h sort_small_range_row): spans of 1, 2, 200 and
    256 take it, 257 does not; keys at both ends of the dtype's range and
    around zero; rows around KWK_SMALL_RANGE_MIN_LEN (16384), with 0..3
    elements past the four quarters; descending, argsort (no values) and
    outputs with a stride (sorting along dim 0)."""
    rows = lambda: _native.lib.kwk_counter(12)  # KWK_COUNT_SMALL_RANGE_SORT_ROWS
    for n, span, end in [(16384, 200, "mid"), (16387, 256, "high"), (16385, 1, "low"),
                         (16386, 2, "high"), (16383, 200, "mid"), (16384, 257, "low")]:
        x = _small_range_values(dtype, n, span, end, gen)
        taken = n >= 16384 and span <= 256
        before = rows()
        compare("sort", x, stable=True)
        compare("sort", x, descending=True, stable=True)
        compare("argsort", x, stable=True)
        two = torch.stack([x, x[torch.arange(n - 1, -1, -1)]], 1)  # along dim 0: outputs 2 apart
        compare("sort", two, dim=0, stable=True)
        assert rows() - before == (5 if taken else 0), (n, span, end)
    # rows of a matrix, and the default stable=False where torch's own sort is
    # stable (1-D ascending integers from 32768: its radix sort) - not for the
    # unsigned ones, which torch refuses there
    compare("sort", _small_range_values(dtype, 2 * 20001, 100, "mid", gen).reshape(2, 20001),
            stable=True)
    if dtype in (torch.int32, torch.int64):
        before = rows()
        compare("sort", _small_range_values(dtype, 40001, 128, "low", gen))
        assert rows() - before == 1


WORDS_IN_OUTPUT_MIN_N = 1 << 16  # sort_kernels.h KWK_WORDS_IN_OUTPUT_MIN_N


@pytest.mark.parametrize("dtype", SORT_DTYPES, ids=str)
def test_long_rows_sort_in_their_index_output(kw, gen, target, dtype):
    """Rows of KWK_WORDS_IN_OUTPUT_MIN_N elements and more whose index output
    is dense keep their packed words in that output and decode them there in
    place (sort_kernels.h sort_one_row): every path after the words are
    loaded (the stable sort, torch's tie order by the emulation, rows with
    expected ties, permutations, wide 64-bit keys, small integer ranges whose
    counting sort reads the words from the workspace instead), ascending and
    descending, a row of exactly the threshold and one just under it, two
    rows, argsort (indices alone) and indices written with a stride (along
    dim 0: not in the output).  (Unsigned rows of 32768 and more as 1 x n:
    torch refuses the 1-D ones, whose sort it sends to its radix sort.)"""
    n = WORDS_IN_OUTPUT_MIN_N
    row = (lambda x: x.reshape(1, -1)) if dtype in UNSIGNED_WIDE else (lambda x: x)
    kinds = ["random", "ties", "bf16ties", "reversed", "nan"]
    for kind in kinds:
        x = row(make_values(kind, (n + 3,), dtype, gen))
        for descending in (False, True):
            compare("sort", x, descending=descending)
            compare("sort", x, descending=descending, stable=True)
    x = row(make_values("random", (n,), dtype, gen))
    compare("sort", x)
    compare("argsort", x, stable=True)
    compare("sort", row(make_values("ties", (n - 1,), dtype, gen)))
    compare("sort", make_values("ties", (2, n), dtype, gen), dim=1)
    compare("sort", make_values("ties", (n, 2), dtype, gen), dim=0)
    if dtype in (torch.bool, torch.uint8, torch.int8):
        return
    # a permutation of lo..lo + n - 1 (placed, not sorted) and, for integers,
    # a span of 200 values (the counting sort) and keys too wide to pack
    perm = torch.randperm(n + 5, generator=gen)
    if not dtype.is_floating_point and dtype not in (torch.int16, torch.uint16):
        compare("sort", row(perm.to(dtype)), stable=True)
        compare("argsort", row(perm.to(dtype)), descending=True)
        small = row(_small_range_values(dtype, n + 3, 200, "mid", gen))
        rows = lambda: _native.lib.kwk_counter(12)  # KWK_COUNT_SMALL_RANGE_SORT_ROWS
        before = rows()
        compare("sort", small, stable=True)
        compare("sort", small, descending=True, stable=True)
        assert rows() - before == 2
    if dtype in (torch.int64, torch.uint64, torch.float64):
        compare("sort", row(make_values("special", (n + 1,), dtype, gen)))
        compare("sort", row(make_values("random", (n + 1,), dtype, gen)), stable=True)
        compare("argsort", row(make_values("random", (n + 1,), dtype, gen)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64], ids=str)
def test_long_rows_sort_with_a_misaligned_values_output(kw, gen, target, dtype):
    """kwk_sort with a values output 4 bytes off an 8-byte boundary: the
    tied keys' list (and wide keys) then go to a buffer of their own, not
    into that output (sort_one_row's vals_words), with the same result."""
    from kwker.ops._call import CODES
    n = WORDS_IN_OUTPUT_MIN_N + 3
    kinds = ["ties", "random"] if dtype == torch.int64 else ["ties"]  # random int64: wide keys
    for kind in kinds:
        x = make_values(kind, (n,), dtype, gen)
        ref = ORIG["sort"](x.reshape(1, -1), dim=-1)  # std::sort's order of ties
        room = torch.empty(n * x.element_size() + 8, dtype=torch.uint8)
        start = (-room.data_ptr()) % 8 + 4  # 4 bytes past an 8-byte boundary
        indices = torch.empty(n, dtype=torch.int64)
        assert (room.data_ptr() + start) % 8 == 4
        status = _native.lib.kwk_sort_addr(CODES[dtype], x.data_ptr(), 1, n, 1, n, 1, 0,
                                           room.data_ptr() + start, indices.data_ptr(), n, 1, 0,
                                           0, _native.ORDER_TORCH)
        assert status == 0
        # (read back through an aligned copy: torch views no int64 at that offset)
        values = room[start:start + n * x.element_size()].clone().view(dtype)
        assert_same(ref.values.reshape(-1), values)
        assert_same(ref.indices.reshape(-1), indices)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64], ids=str)
def test_long_rows_sort_into_overlapping_outputs_stays_in_bounds(kw, gen, target, dtype):
    """kwk_sort's outputs must not overlap each other or the source (kwker.h);
    a C caller whose outputs do gets unspecified values but no access out
    of bounds: sort_one_row keeps its words and tied keys out of outputs
    that meet (run under native/tests/pytest_sanitized.sh to see it)."""
    from kwker.ops._call import CODES
    n = WORDS_IN_OUTPUT_MIN_N + 3
    for kind in ("ties", "random"):  # torch's tie order; random int64: wide keys
        x = make_values(kind, (n,), dtype, gen)
        # the indices' n words, and room for values that start halfway in them
        room = torch.zeros(n * 8 + n * x.element_size() + 64, dtype=torch.uint8)
        base = room.data_ptr() + (-room.data_ptr()) % 8
        for values_at in (base, base + 8 * (n // 2)):  # values inside the indices' bytes
            status = _native.lib.kwk_sort_addr(CODES[dtype], x.data_ptr(), 1, n, 1, n, 1, 0,
                                               values_at, base, n, 1, 0, 0, _native.ORDER_TORCH)
            assert status == 0
        # the source inside the indices' bytes
        src = room[: n * x.element_size()].view(dtype) if dtype == torch.float32 else None
        if src is not None:
            src.copy_(x)
            out = torch.empty(n, dtype=dtype)
            assert _native.lib.kwk_sort_addr(CODES[dtype], src.data_ptr(), 1, n, 1, n, 1, 0,
                                             out.data_ptr(), src.data_ptr(), n, 1, 0, 0,
                                             _native.ORDER_TORCH) == 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bfloat16], ids=str)
def test_sort_of_sorted_runs(kw, gen, target, dtype):
    """Rows made of a few sorted runs (per-level detection scores, batches
    concatenated; sort_kernels.h merges them pairwise, eight words a block
    on AVX-512): run counts around KWK_RUNS_MAX = 8, runs of 1..7 elements
    among long ones, ascending and descending runs, ties across runs, and
    rows under and over KWK_ADAPT_MIN_N = 256."""
    for n in (255, 256, 300, 4700, 10000):
        for runs in (2, 3, 5, 8, 9):
            cuts = torch.randperm(n - 1, generator=gen)[:runs - 1] + 1
            if runs > 2:
                cuts[0] = min(int(cuts[1]) + 3, n - 1)  # one run of a few elements
            bounds = [0] + sorted(set(int(c) for c in cuts)) + [n]
            vals = make_values("random", (n,), dtype, gen)
            for descending_runs in (False, True):
                parts = [ORIG["sort"](vals[a:b], descending=descending_runs).values
                         for a, b in zip(bounds, bounds[1:]) if b > a]
                x = torch.cat(parts)
                tied = x.clone()
                tied[n // 3] = tied[2 * n // 3]  # an equal pair in two runs
                for v in (x, tied):
                    compare("sort", v, stable=True)
                    compare("sort", v, descending=True, stable=True)
                    compare("argsort", v, descending=descending_runs)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int16, torch.uint8,
                                   torch.uint64, torch.bool], ids=str)
@pytest.mark.parametrize("lay", LAYOUTS)
@pytest.mark.parametrize("shape", [(6, 9, 11), (3, 5, 4, 7)], ids=str)
def test_sort_layouts_every_dim(kw, gen, dtype, lay, shape):
    """3-D and 4-D inputs, every dim in both spellings, five layouts; output
    strides must be torch's (empty_like of the input)."""
    base = make_values("ties", shape, dtype, gen)
    for dim in range(-len(shape), len(shape)):
        x = layout(base, lay, dim)
        assert torch.equal(x, base)
        for descending in (False, True):
            compare("sort", x, dim, descending)
            compare("sort", x, dim=dim, descending=descending, stable=True)
            compare("argsort", x, dim=dim, descending=descending)
    compare("msort", layout(base, lay, 0))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.float16], ids=str)
def test_sort_expanded(kw, gen, dtype):
    """Stride-0 dims: along the sort dim (torch returns an arange of indices:
    the input is not really sorted) and across it."""
    col = make_values("ties", (5, 1), dtype, gen)
    row = make_values("ties", (1, 7), dtype, gen)
    scalar = make_values("random", (1,), dtype, gen)
    for x in (col.expand(5, 7), row.expand(5, 7), scalar.expand(300),
              col.expand(5, 7)[:, None, :].expand(5, 3, 7), row.expand(5, 7)[1:, ::2]):
        for dim in range(-x.ndim, x.ndim):
            for descending in (False, True):
                compare("sort", x, dim, descending)
                compare("sort", x, dim=dim, descending=descending, stable=True)
                compare("argsort", x, dim, descending)


@pytest.mark.parametrize("dtype", SORT_DTYPES, ids=str)
def test_sort_methods(kw, gen, dtype):
    x = make_values("ties", (6, 33), dtype, gen)
    compare("sort", x, method=True)
    compare("sort", x, 0, True, method=True)
    compare("sort", x, dim=0, descending=True, stable=True, method=True)
    compare("sort", x, stable=None, method=True)
    compare("argsort", x, 1, True, method=True)
    compare("argsort", x, stable=True, dim=0, method=True)
    compare("msort", x, method=True)


def test_unsigned_radix_raises(kw, gen):
    """torch raises NotImplementedError for 1-D ascending uint16/32/64 sorts of
    >= 32768 elements; Kwker hands them to torch, which raises."""
    for dtype in UNSIGNED_WIDE:
        x = make_values("random", (40_000,), dtype, gen)
        compare("sort", x, fast="torch_raises")
        compare("argsort", x, fast="torch_raises")
        compare("msort", x, fast="torch_raises")
        compare("sort", x, descending=True)  # descending is supported
        compare("sort", x[:32767])
        compare("sort", x[None], dim=1)  # 2-D is supported
        with pytest.raises(NotImplementedError):
            ORIG["sort"](x)


# ---------------------------------------------------------- ties="stable"

def _as_stable(op):
    """torch's op with stable=True and the same dim/descending."""
    def reference(x, *args, **kwargs):
        kwargs.pop("stable", None)
        kwargs.update(zip(("dim", "descending"), args))
        return ORIG[op](x, stable=True, **kwargs)
    return reference


_stable_sort = _as_stable("sort")
_stable_argsort = _as_stable("argsort")


@pytest.mark.parametrize("dtype", SORT_DTYPES, ids=str)
@pytest.mark.parametrize("kind", ["ties", "bf16ties", "equal", "nan", "special"])
def test_sort_ties_stable_mode(kw_stable, gen, dtype, kind):
    """ties="stable": sort(stable=False) gives torch.sort(stable=True)."""
    for shape in [(1,), (5,), (17,), (512, 8), (256, 64), (8, 1000)]:
        x = make_values(kind, shape, dtype, gen)
        for descending in (False, True):
            compare("sort", x, -1, descending, reference=_stable_sort)
            compare("sort", x, descending=descending, stable=False, reference=_stable_sort)
            compare("argsort", x, descending=descending, reference=_stable_argsort)
            # stable=True is stable in both modes
            compare("sort", x, descending=descending, stable=True)
    x = layout(make_values("ties", (3, 5, 4, 7), dtype, gen), "permuted")
    for dim in range(4):
        compare("sort", x, dim, True, reference=_stable_sort)


# ------------------------------------------------------------------- topk

TOPK_SHAPES = [(1,), (2,), (5,), (20,), (512, 8), (256, 64), (16, 1000), (2, 5000)]


@pytest.mark.parametrize("kind", VALUE_KINDS)
@pytest.mark.parametrize("dtype", SELECT_DTYPES, ids=str)
def test_topk_dtypes_values(kw, gen, dtype, kind):
    for shape in TOPK_SHAPES:
        x = make_values(kind, shape, dtype, gen)
        for k in ks_for(shape[-1]):
            for largest in (True, False):
                compare("topk", x, k, largest=largest)
                compare("topk", x, k, -1, largest, False)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32], ids=str)
def test_topk_every_small_length(kw, gen, dtype):
    for n in list(range(1, 34)) + [63, 64, 65, 127, 128, 129, 200, 640, 641]:
        x = make_values("ties", (3, n), dtype, gen)
        for k in ks_for(n) + [min(n, 3), n // 2]:
            for largest in (True, False):
                for sorted_ in (True, False):
                    compare("topk", x, k, 1, largest, sorted_)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.uint8],
                         ids=str)
@pytest.mark.parametrize("kind", ["random", "ties", "nan"])
def test_topk_long_rows(kw, gen, dtype, kind):
    x = make_values(kind, (1, 200_000), dtype, gen)
    for k in (1, 8, 100, 3125, 3126, 5000, 199_999):
        compare("topk", x, k)
        compare("topk", x[0], k, largest=False, sorted=False)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int8], ids=str)
@pytest.mark.parametrize("lay", LAYOUTS)
@pytest.mark.parametrize("shape", [(6, 9, 11), (3, 5, 4, 7)], ids=str)
def test_topk_layouts_every_dim(kw, gen, dtype, lay, shape):
    base = make_values("ties", shape, dtype, gen)
    for dim in range(-len(shape), len(shape)):
        x = layout(base, lay, dim)
        n = shape[dim]
        for k in (0, 1, 2, n - 1, n):
            compare("topk", x, k, dim)
            compare("topk", x, k, dim=dim, largest=False, sorted=False)


@pytest.mark.parametrize("dtype", [torch.int64, torch.float64], ids=str)
def test_topk_wide_keys_close_in_low_bits(kw, gen, dtype):
    """64-bit keys spanning more bits than their index leaves: the k best
    are sorted as words holding each key's top bits, and keys that agree on
    every kept bit (clusters a few units apart at both ends of the range)
    must still come out in (key, index) order; with repeats in the mix, the
    tie check sends rows to torch's order."""
    n = 1000
    for repeats in (False, True):
        if dtype is torch.int64:
            off = torch.randperm(n, generator=gen)[: n // 2] if not repeats else \
                torch.randint(0, 40, (n // 2,), generator=gen)
            x = torch.cat([-(2**62) + off, 2**62 - off])
        else:
            off = torch.randperm(n, generator=gen)[: n // 2].double() if not repeats else \
                torch.randint(0, 40, (n // 2,), generator=gen).double()
            x = torch.cat([-1e300 * (1 + off * 2**-52), 1e300 * (1 + off * 2**-52)])
        x = x[torch.randperm(n, generator=gen)].reshape(1, n).repeat(3, 1)
        x[1] = x[1].flip(0)
        for k in (40, 100, 499, 501, n):
            for largest in (True, False):
                compare("topk", x, k, largest=largest)


def test_topk_expanded(kw, gen):
    col = make_values("ties", (5, 1), torch.float32, gen)
    row = make_values("ties", (1, 70), torch.float32, gen)
    for x in (col.expand(5, 70), row.expand(5, 70), col.expand(5, 70)[:, None].expand(5, 2, 70)):
        for dim in range(x.ndim):
            for k in sorted({0, 1, 2, x.shape[dim] - 1, x.shape[dim]}):
                for largest in (True, False):
                    compare("topk", x, k, dim, largest)
                    compare("topk", x, k, dim, largest, False)


def test_topk_forms(kw, gen):
    x = make_values("ties", (8, 130), torch.float32, gen)
    compare("topk", x, 3)
    compare("topk", x, k=3)
    compare("topk", x, 3, dim=0)
    compare("topk", x, 3, 1, False)
    compare("topk", x, 3, 1, True, False)
    compare("topk", x, 3, sorted=False, largest=False, dim=-2)
    compare("topk", x, 3, method=True)
    compare("topk", x, k=5, dim=0, largest=False, method=True)
    compare("topk", x, 4, 1, True, False, method=True)


def assert_numbers_equal(a, b):
    """Equal as numbers: NaN == NaN, -0.0 == +0.0."""
    assert a.shape == b.shape and a.dtype == b.dtype
    same = (a == b) | (torch.isnan(a) & torch.isnan(b)) if a.dtype.is_floating_point else a == b
    assert bool(same.all()), f"{a} != {b}"


def _topk_nan_canonical(dtype):
    """The bits torch.topk writes for every NaN of `dtype`, or None if it
    keeps the input's bits (torch 2.13 canonicalizes bfloat16 NaNs in topk:
    it computes in float)."""
    if not dtype.is_floating_point:
        return None
    nans = _nan_payloads(dtype)
    out = bits(ORIG["topk"](nans, len(nans)).values)
    if torch.equal(out.sort().values, bits(nans).sort().values):
        return None
    assert (out == out[0]).all()
    return out[0]


def topk_emitted_bits(gathered_bits, dtype):
    """The bits torch.topk emits for the input elements `gathered_bits`."""
    canonical = _topk_nan_canonical(dtype)
    if canonical is None:
        return gathered_bits
    return torch.where(torch.isnan(gathered_bits.view(dtype)), canonical, gathered_bits)


def _is_stable_topk(x, k, dim, largest, sorted_, got):
    """ties="stable" topk: values equal torch's; indices (and value bits) are
    the first k of torch.sort(stable=True); with sorted=False, the same set."""
    ref_v, ref_i = ORIG["topk"](x, k, dim, largest, True)
    s_v, s_i = ORIG["sort"](x, dim=dim, descending=largest, stable=True)
    s_v, s_i = s_v.narrow(dim, 0, k), s_i.narrow(dim, 0, k)
    v, i = got
    assert type(got) is torch.return_types.topk
    assert v.dtype == x.dtype and i.dtype == torch.int64 and v.shape == ref_v.shape
    assert v.stride() == ref_v.stride() and i.stride() == ref_i.stride()
    # the values are torch's (as numbers: a tie between -0.0 and +0.0 or two
    # NaN payloads may pick the other element) and the bits of x at indices
    # (gathered as integers: torch.gather on float16 quiets signalling NaNs)
    # as torch.topk emits them
    assert torch.equal(topk_emitted_bits(torch.gather(bits(x), dim, i), x.dtype), bits(v))
    if sorted_:
        assert torch.equal(i, s_i), "indices are not the stable order"
        assert_numbers_equal(ref_v, v)
    else:
        assert torch.equal(i.sort(dim).values, s_i.sort(dim).values)
        assert_numbers_equal(ref_v.sort(dim).values, v.sort(dim).values)


def test_topk_wide_keys_stable_mode(kw_stable, gen):
    """ties="stable" topk of full-range int64 rows holding repeated
    extremes: the k best, sorted as words of cut keys, keep index order
    among equal keys however the selection left them."""
    vals = torch.tensor([-2**63, 2**63 - 1, 0, -1, 2**62, -2**62])
    for n in (191, 1000):
        x = vals[torch.randint(0, len(vals), (4, n), generator=gen)]
        x[2, ::7] = torch.randint(-2**62, 2**62, (len(range(0, n, 7)),), generator=gen)
        # a few keys at one end keep the row from packing; the k smallest
        # are then repeats of a narrow span
        x[3] = torch.randint(0, 3, (n,), generator=gen)
        x[3, ::29] = 2**63 - 1
        for k in (50, n // 2, n):
            for largest in (True, False):
                got = torch.topk(x, k, -1, largest, True)
                _is_stable_topk(x, k, 1, largest, True, got)


@pytest.mark.parametrize("dtype", SELECT_DTYPES, ids=str)
@pytest.mark.parametrize("kind", ["ties", "bf16ties", "equal", "nan", "special"])
def test_topk_ties_stable_mode(kw_stable, gen, dtype, kind):
    for shape in [(1,), (10,), (512, 8), (256, 64), (4, 1000)]:
        x = make_values(kind, shape, dtype, gen)
        for k in ks_for(shape[-1]):
            for largest in (True, False):
                for sorted_ in (True, False):
                    kw_stable.reset_stats()
                    got = torch.topk(x, k, -1, largest, sorted_)
                    assert kw_stable.stats()["topk"] == {"fast": 1, "fallback": {}}
                    _is_stable_topk(x, k, x.ndim - 1, largest, sorted_, got)


# --------------------------------------------------------- median, nanmedian

MEDIAN_SHAPES = [(1,), (2,), (7,), (20,), (512, 8), (256, 64), (16, 1001), (3, 4, 5)]


@pytest.mark.parametrize("op", ["median", "nanmedian"])
@pytest.mark.parametrize("kind", VALUE_KINDS)
@pytest.mark.parametrize("dtype", SELECT_DTYPES, ids=str)
def test_median_dtypes_values(kw, gen, op, dtype, kind):
    for shape in MEDIAN_SHAPES:
        x = make_values(kind, shape, dtype, gen)
        compare(op, x)
        for dim in range(-x.ndim, x.ndim):
            compare(op, x, dim)
            compare(op, x, dim, True)
            compare(op, x, dim=dim, keepdim=False)


@pytest.mark.parametrize("op", ["median", "nanmedian"])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_median_nan_rows(kw, gen, op, dtype):
    """All-NaN rows, rows with one NaN at each position, NaN-only tensors."""
    for n in (1, 2, 3, 8, 65):
        x = make_values("bf16ties", (n + 2, n), dtype, gen)
        for r in range(n):
            x[r, r] = float("nan")
        x[n] = float("nan")  # all-NaN row
        x[n + 1, ::2] = -float("nan")
        for args in [(), (1,), (1, True), (0,), (-1, False)]:
            compare(op, x, *args)
            compare(op, x.t(), *args)
        compare(op, x[n])
        compare(op, x[n], 0)


@pytest.mark.parametrize("op", ["median", "nanmedian"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("lay", LAYOUTS)
def test_median_layouts(kw, gen, op, dtype, lay):
    for shape in [(6, 9, 11), (3, 5, 4, 7)]:
        base = make_values("nan" if dtype.is_floating_point else "ties", shape, dtype, gen)
        for dim in range(-len(shape), len(shape)):
            x = layout(base, lay, dim)
            compare(op, x, dim)
            compare(op, x, dim, keepdim=True)
        compare(op, layout(base, lay, 0))


@pytest.mark.parametrize("op", ["median", "nanmedian"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.int64, torch.float64], ids=str)
def test_median_rows_of_the_vector_select(kw, gen, op, dtype):
    """32- and 64-bit keys of rows of 33..65536 take the AVX-512 quicksort's
    select (select_words.h sw_rank_select_u32/_u64), then the index among
    equal keys a vector at a time: lengths at both ends and between, rows
    with a run of one value around the median (43% and 90% zeros, +0.0
    beside -0.0 in float rows), two values, NaN-padded rows."""
    for n in (32, 33, 47, 576, 1124, 5000, 65536, 65537):
        rows = 3 if n < 60000 else 1
        x = make_values("random", (rows, n), dtype, gen)
        zero = torch.zeros((), dtype=dtype)
        x[0] = torch.where(torch.rand(n, generator=gen) < 0.43, zero, x[0])
        if rows > 1:
            x[1] = torch.where(torch.rand(n, generator=gen) < 0.9, zero, x[1])
            x[2] = torch.randint(0, 2, (n,), generator=gen).to(dtype)
            if dtype.is_floating_point:
                x[1, ::3] = -0.0
                x[2, n // 3:] = float("nan")
        compare(op, x, 1)
        compare(op, x.t(), 0)
        if n < 60000:
            compare(op, x)


@pytest.mark.parametrize("op", ["median", "nanmedian"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64], ids=str)
def test_median_long_rows(kw, gen, op, dtype):
    for kind in ("random", "ties", "nan"):
        x = make_values(kind, (2, 100_001), dtype, gen)
        compare(op, x)
        compare(op, x, 1)
        compare(op, x[:, :100_000], -1, True)
        compare(op, x[0])


def _median_contiguous(op):
    def reference(x, *args, **kwargs):
        return ORIG[op](x.contiguous(), *args, **kwargs)
    return reference


@pytest.mark.parametrize("op", ["median", "nanmedian"])
def test_median_expanded(kw, gen, op):
    """Stride-0 inputs.  torch 2.13's median/nanmedian over an expanded
    (stride-0) dim returns wrong values (it reads garbage: e.g.
    torch.median(torch.tensor(7.).expand(5), 0) gives 1.4e-45); Kwker
    deliberately gives the answer torch gives on a contiguous copy
    (/work/shared/SEMANTICS.md).  Across the dim torch is right and must be
    matched as is."""
    col = make_values("ties", (5, 1), torch.float32, gen)
    row = make_values("nan", (1, 8), torch.float32, gen)
    scalar = torch.tensor([7.5])
    for x in (col.expand(5, 8), row.expand(5, 8), scalar.expand(5),
              col.expand(5, 8)[:, None].expand(5, 3, 8)):
        compare(op, x)
        for dim in range(x.ndim):
            for keepdim in (False, True):
                if x.stride(dim) == 0 and x.shape[dim] > 1:
                    compare(op, x, dim, keepdim, reference=_median_contiguous(op))
                else:
                    compare(op, x, dim, keepdim)


@pytest.mark.parametrize("op", ["median", "nanmedian"])
def test_median_forms(kw, gen, op):
    x = make_values("ties", (6, 13), torch.float64, gen)
    compare(op, x, method=True)
    compare(op, x, 0, method=True)
    compare(op, x, 1, True, method=True)
    compare(op, x, dim=1, keepdim=True, method=True)
    compare(op, x, keepdim=True, dim=-2)
    compare(op, x, dim=0)


@pytest.mark.parametrize("op", ["median", "nanmedian"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32], ids=str)
def test_median_ties_stable_mode(kw_stable, gen, op, dtype):
    """torch's median index is the stable-rank one: both modes equal torch."""
    for shape in [(9,), (512, 8), (64, 65), (4, 1000)]:
        x = make_values("nan" if dtype.is_floating_point else "ties", shape, dtype, gen)
        compare(op, x)
        compare(op, x, -1)
        compare(op, x, 0, True)


# ------------------------------------------------------------ cross-checks

def test_results_are_new_tensors(kw, gen):
    """Outputs never alias the input (torch allocates fresh outputs)."""
    x = make_values("random", (4, 50), torch.float32, gen)
    for out in (torch.sort(x).values, torch.topk(x, 3).values, torch.msort(x),
                torch.median(x, 1).values, torch.median(x)):
        assert out.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()
    v, i = torch.sort(x)
    v.fill_(0)
    i.fill_(0)
    assert_same(ORIG["sort"](x).values, torch.sort(x).values)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bfloat16], ids=str)
@pytest.mark.parametrize("kind", ["ties", "nan"])
def test_overlapping_views(kw, gen, dtype, kind):
    """Overlapping windows from unfold (a median filter is
    x.unfold(-1, k, 1).median(-1)): outputs are fresh dense tensors, as
    torch's empty_like gives for overlapping inputs."""
    x = make_values(kind, (3, 200), dtype, gen)
    for u in (x.unfold(-1, 9, 1), x.unfold(-1, 16, 5), x.unfold(0, 2, 1),
              x[:, :50].unfold(1, 7, 3).transpose(1, 2)):
        for dim in range(-u.ndim, u.ndim):
            compare("sort", u, dim)
            compare("sort", u, dim, True)
            compare("argsort", u, dim=dim, stable=True)
            compare("topk", u, min(3, u.shape[dim]), dim)
            compare("median", u, dim)
            compare("nanmedian", u, dim, True)
        compare("median", u)
        compare("msort", u)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int16, torch.bfloat16], ids=str)
def test_memory_format_layouts(kw, gen, dtype):
    """channels_last(_3d), sliced channels_last (torch's empty_like then
    suggests a memory format for a non-dense input), permuted slices and an
    expanded-then-permuted 5-D view: every op along every dim."""
    base = make_values("ties", (2, 6, 5, 7), dtype, gen)
    base3 = make_values("ties", (2, 3, 4, 5, 6), dtype, gen)
    cl = base.to(memory_format=torch.channels_last)
    cl3 = base3.to(memory_format=torch.channels_last_3d)
    views = [cl, cl[:, ::2], cl[..., 1:], cl[:, :, ::2, ::3], cl3, cl3[:, 1:, :, ::2],
             base.permute(3, 1, 0, 2)[::2], base.transpose(0, 3)[1:],
             base[:, :, None].expand(2, 6, 3, 5, 7).permute(2, 0, 4, 1, 3)]
    for v in views:
        for dim in range(-v.ndim, v.ndim):
            compare("sort", v, dim)
            compare("sort", v, dim, True)
            compare("argsort", v, dim)
            if v.shape[dim] >= 2:
                compare("topk", v, 2, dim)
            # torch's median is wrong over a stride-0 dim (test_median_expanded)
            reference = _median_contiguous if v.stride(dim) == 0 and v.shape[dim] > 1 else None
            compare("median", v, dim, True,
                    reference=reference("median") if reference else None)
            compare("nanmedian", v, dim,
                    reference=reference("nanmedian") if reference else None)
        compare("median", v)
        compare("nanmedian", v)
        compare("msort", v)


# --------------------------------------------------------------- kthvalue

KTH_SHAPES = [(1,), (2,), (7,), (20,), (512, 8), (64, 64), (8, 1001), (3, 4, 5)]


def kth_for(length):
    """k values: the ends, the middle, and a few around them."""
    return sorted({k for k in (1, 2, length // 2, length // 2 + 1, length - 1, length)
                   if 1 <= k <= length})


@pytest.mark.parametrize("kind", VALUE_KINDS)
@pytest.mark.parametrize("dtype", SELECT_DTYPES, ids=str)
def test_kthvalue_dtypes_values(kw, gen, dtype, kind):
    """Tie-heavy kinds exercise the emulation of torch's quickselect: a k-th
    value shared by several elements must come with torch's index."""
    for shape in KTH_SHAPES:
        x = make_values(kind, shape, dtype, gen)
        for dim in range(-x.ndim, x.ndim):
            for k in kth_for(x.shape[dim]):
                compare("kthvalue", x, k, dim)
            compare("kthvalue", x, 1, dim, True)
            compare("kthvalue", x, k=x.shape[dim], dim=dim, keepdim=False)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int16], ids=str)
@pytest.mark.parametrize("lay", LAYOUTS)
def test_kthvalue_layouts(kw, gen, dtype, lay):
    for shape in [(6, 9, 11), (3, 5, 4, 7)]:
        base = make_values("nan" if dtype.is_floating_point else "ties", shape, dtype, gen)
        for dim in range(-len(shape), len(shape)):
            x = layout(base, lay, dim)
            compare("kthvalue", x, 3, dim)
            compare("kthvalue", x, x.shape[dim], dim, keepdim=True)
            compare("kthvalue", x, 2, dim, method=True)


def test_kthvalue_out_of_range_raises_like_torch(kw, gen):
    x = make_values("ties", (6, 40), torch.float32, gen)
    compare("kthvalue", x, 41, fast="dim")
    compare("kthvalue", x, 0, fast="dim")


def test_kthvalue_stable_mode(kw_stable, gen):
    """ties="stable": the element at stable rank k-1."""
    for dtype in (torch.float32, torch.int8, torch.bfloat16):
        x = make_values("bf16ties", (16, 50), dtype, gen)
        for k in (1, 7, 25, 50):
            got = torch.kthvalue(x, k)
            order = ORIG["sort"](x, stable=True)
            assert torch.equal(got.indices, order.indices[:, k - 1])
            assert torch.equal(bits(got.values), bits(order.values[:, k - 1]))
