"""Differential tests of the batched sort of short rows (native/src/batch_sort.h:
eight rows of up to 1024 elements with keys of at most 32 bits sorted at once
by one sorting network) against torch 2.13: values bit for bit, indices
including torch's order of tied values.

The batch path is chosen by the row length, the dtype and the row count
alone, so these shapes take it on an AVX2 build; the tie handling has three
cases, each covered: tie-free rows (the network's order is torch's), rows
with a tie among tie-free ones (redone one by one with the std::sort
emulation), and calls whose rows mostly tie (batching stops after a probe).
"""
import pytest
import torch

from kwker_testing import ORIG, SORT_DTYPES, assert_tensor_same, compare, layout, make_values

BATCH_DTYPES = tuple(d for d in SORT_DTYPES if d.itemsize <= 4)
BATCH_DTYPES_64 = (torch.int64, torch.uint64)
# around the switch points: std::sort's insertion threshold (16), the
# network's powers of two, the batch limits (AVX-512: 384 stable, 576 torch
# order; AVX2: 1024)
LENGTHS = (8, 9, 16, 17, 31, 33, 64, 100, 128, 129, 255, 256, 257, 384, 385, 512, 576, 577,
           700, 1024, 1025)
MIN_FAST_NUMEL = 2048  # below it the call goes to torch (support.SIZE_RULES)


def _rows_for(n, base):
    """A row count of the form 8m + 5 (a partial last batch) with enough
    elements for the fast path."""
    rows = max(base, -(-MIN_FAST_NUMEL // n))
    return rows + (5 - rows % 8) % 8


def _some_rows_tie(x, gen):
    """Every third row gets a tie (its element 1 copies element n-1): the
    other rows stay tie-free, so the batch keeps running."""
    x = x.clone()
    n = x.shape[-1]
    if n > 1:
        x[::3, ..., 1] = x[::3, ..., n - 1]
    return x


def _inputs(n, dtype, gen):
    rows = _rows_for(n, 13)
    rand = make_values("random", (rows, n), dtype, gen)
    yield "random", rand
    yield "some_ties", _some_rows_tie(rand, gen)
    yield "ties", make_values("ties", (rows, n), dtype, gen)
    if dtype.is_floating_point:
        yield "special", make_values("special", (rows, n), dtype, gen)
        yield "nan", make_values("nan", (rows, n), dtype, gen)


@pytest.mark.parametrize("dtype", BATCH_DTYPES, ids=str)
def test_batch_sort_lengths(kw, gen, dtype):
    for n in LENGTHS:
        for name, x in _inputs(n, dtype, gen):
            for descending in (False, True):
                compare("sort", x, dim=-1, descending=descending)
            compare("sort", x, dim=-1, stable=True, descending=n % 2 == 0)
            compare("argsort", x, dim=-1, descending=n % 3 == 0)


@pytest.mark.parametrize("kind", ("transposed", "step", "offset"))
def test_batch_sort_layouts(kw, gen, kind):
    """Rows read through strides: along dim 0 of a row-major tensor (eight
    adjacent rows share each cache line), every other element, an offset."""
    for dtype in (torch.float32, torch.bfloat16, torch.int16):
        for n in (24, 100, 300):
            x = make_values("random", (_rows_for(n, 40), n), dtype, gen)
            compare("sort", layout(x, kind), dim=-1)
            compare("sort", layout(_some_rows_tie(x, gen), kind), dim=-1, descending=True)
            xt = layout(x.t().contiguous(), kind, dim=0)
            compare("sort", xt, dim=0)
            compare("argsort", _some_rows_tie(xt.t(), gen).t(), dim=0, descending=True)


def test_batch_sort_mostly_ties_then_free(kw, gen):
    """A call whose first rows all tie and whose later rows do not: the
    probe stops the batching, the remaining rows still come out right."""
    for n in (40, 200):
        rows = 200
        x = make_values("random", (rows, n), torch.float32, gen)
        x[:100] = torch.randint(0, 4, (100, n), generator=gen).float()
        compare("sort", x, dim=-1)
        compare("sort", x.flip(0), dim=-1, descending=True)


def test_batch_msort_and_outputs(kw, gen):
    """Values only (msort sorts dim 0), and the out= form."""
    x = make_values("random", (64, 333), torch.float32, gen)
    compare("msort", x.t().contiguous())
    vals = torch.empty(0)
    idx = torch.empty(0, dtype=torch.long)
    compare("sort", x, dim=-1, out=(vals, idx), fast=None)


@pytest.mark.parametrize("dtype", (torch.float32, torch.float64, torch.int64, torch.uint64,
                                   torch.int32, torch.uint32, torch.bfloat16), ids=str)
def test_values_only_contiguous_rows(kw, gen, dtype):
    """Values only along contiguous rows, enough of them to batch: msort of
    x.t() (its dim 0 runs along x's rows) and torch.ops.kwker.sort_values.
    float32 and 64-bit rows take the bare-key sort there instead of the
    batch (sort_kernels.h: bare_values); rows holding both zeros, or NaNs
    of several payloads, the indexed sort, whose order then shows in the
    bits."""
    import kwker.torch_ops  # noqa: F401  (registers torch.ops.kwker)
    for n in (17, 64, 255, 256, 257, 512, 700):
        for name, x in _inputs(n, dtype, gen):
            compare("msort", x.t())
            for descending in (False, True):
                ref = ORIG["sort"](x, dim=-1, descending=descending, stable=True).values
                assert_tensor_same(ref, torch.ops.kwker.sort_values(x, -1, descending),
                                   f"sort_values {name} n={n} descending={descending}")


@pytest.mark.parametrize("dtype", (torch.float32, torch.float64, torch.bfloat16, torch.float16),
                         ids=str)
def test_values_only_zero_signs_and_one_nan(kw, gen, dtype):
    """Values-only float rows whose NaNs (if any) share one payload, so the
    bare-key sort takes them unless both zero signs occur: zeros of one
    sign keep it (-0.0 alone, +0.0 alone), both signs go to the indexed
    sort (their order then shows in the bits), at lengths with a partial
    last vector."""
    import kwker.torch_ops  # noqa: F401  (registers torch.ops.kwker)
    nan = torch.tensor([float("nan")], dtype=dtype)
    for n in (17, 31, 32, 33, 100, 255, 257, 1001, 5003):
        rows = _rows_for(n, 13)
        base = make_values("random", (rows, n), dtype, gen)
        where = torch.rand(rows, n, generator=gen)
        zero_pos, zero_neg = torch.zeros((), dtype=dtype), -torch.zeros((), dtype=dtype)
        cases = {
            "neg_zeros": torch.where(where < 0.2, zero_neg, base),
            "pos_zeros": torch.where(where < 0.2, zero_pos, base),
            "both_zeros": torch.where(where < 0.1, zero_neg, torch.where(where < 0.2, zero_pos, base)),
            "neg_zeros_one_nan": torch.where(where > 0.9, nan, torch.where(where < 0.2, zero_neg, base)),
            # a NaN with the sign bit set: its key sorts below -inf's (values_sort.h's range check)
            "pos_zeros_negative_nan": torch.where(where > 0.95, -nan, torch.where(where < 0.2, zero_pos, base)),
            "both_zeros_one_nan": torch.where(where > 0.9, nan, torch.where(
                where < 0.1, zero_neg, torch.where(where < 0.2, zero_pos, base))),
        }
        for name, x in cases.items():
            compare("msort", x.t())
            for descending in (False, True):
                ref = ORIG["sort"](x, dim=-1, descending=descending, stable=True).values
                assert_tensor_same(ref, torch.ops.kwker.sort_values(x, -1, descending),
                                   f"sort_values {name} n={n} descending={descending}")


def _offset_rows(span, base, dtype):
    """base + span as dtype: added as int64 bit patterns (wrapping) and
    viewed as uint64 for that dtype, whose own arithmetic torch lacks."""
    as_int64 = base - (1 << 64) if base >= 1 << 63 else base
    x = span + as_int64
    return x if dtype is torch.int64 else x.view(torch.uint64)


@pytest.mark.parametrize("dtype", (torch.int64, torch.uint64), ids=str)
def test_values_only_64bit_spans(kw, gen, dtype):
    """Values-only 64-bit integer rows by the span of their keys, which picks
    the bare-key sort's method (values_sort.h): up to 32 bits as offsets
    from the row's smallest (here near both ends of the range), 33..40 bits
    by the radix sort of offsets, wider by the quicksort, and past 2^15
    elements the indexed sort; lengths with a partial last vector."""
    import kwker.torch_ops  # noqa: F401  (registers torch.ops.kwker)
    top = (1 << 63) - 1 if dtype is torch.int64 else (1 << 64) - 1
    bottom = -(1 << 63) if dtype is torch.int64 else 0
    for n in (17, 64, 255, 1001, 40000):
        rows = _rows_for(n, 13)
        for bits in (20, 32, 33, 40, 41, 62):
            span = torch.randint(0, 1 << bits, (rows, n), generator=gen)
            for base in (bottom, top - (1 << bits) + 1, -(1 << (bits - 1))):
                if dtype is torch.uint64 and base < 0:
                    continue
                x = _offset_rows(span, base, dtype)
                compare("msort", x.t())
                for descending in (False, True):
                    ref = ORIG["sort"](x, dim=-1, descending=descending, stable=True).values
                    assert_tensor_same(ref, torch.ops.kwker.sort_values(x, -1, descending),
                                       f"sort_values bits={bits} base={base} n={n} "
                                       f"descending={descending}")


def test_batch_sort_inner_dim(kw, gen):
    """Rows along dim 1 of a 4-D tensor (depth bins per pixel): eight
    neighbouring rows read and written position by position; an inner size
    that is not a multiple of eight leaves batches straddling two outer
    slices (read row by row).  Position j of eight neighbours is one vector
    (batch_load_adjacent: 4- and 2-byte elements; odd row lengths end on
    an overlapping pair)."""
    for dtype in (torch.float32, torch.float16, torch.int32, torch.uint8, torch.bfloat16,
                  torch.int16, torch.uint16, torch.uint32):
        for shape in ((2, 64, 6, 8), (3, 40, 5, 7), (1, 17, 4, 4)):
            x = make_values("random", shape, dtype, gen)
            if dtype.is_floating_point:  # batch_load_adjacent's keys of NaN, -0.0, inf
                special = make_values("special", shape, dtype, gen)
                special.view(-1)[::7] = torch.finfo(dtype).max  # next to inf
                compare("sort", special, dim=1)
                compare("sort", special, dim=1, stable=True)  # (no redo of tied rows)
                compare("argsort", make_values("nan", shape, dtype, gen), dim=1, stable=True,
                        descending=True)
            compare("sort", x, dim=1)
            compare("sort", x, dim=1, descending=True, stable=True)
            compare("argsort", _some_rows_tie(x.transpose(1, 3), gen).transpose(1, 3), dim=1)
            compare("sort", layout(x, "permuted"), dim=1)


@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16, torch.int16, torch.int8,
                                   torch.bool, torch.float64, torch.int64), ids=str)
def test_batch_sort_staged_columns(kw, gen, dtype):
    """Rows along a non-last dim with many neighbours (sort_rows_batched's
    stage: up to 1 KB of neighbouring rows per position copied to a buffer,
    sorted there, outputs copied back): inner sizes that leave a partial
    stage at the end of each outer slice and batches straddling two slices, rows
    too long for the network (the one-row path, staged one row at a time),
    rows with ties redone inside a stage (torch order), rows long enough to
    narrow the stage (64 KB / len bytes), values only, indices only; and
    out= tensors that are themselves strided, which install() hands to
    torch (the fallback must keep the caller's tensors; outputs laid out
    apart from the input's rows are checked natively, test_sort.c
    check_strided_out)."""
    # inner sizes putting positions >= 1 KB apart (STAGE_MIN_STRIDE) for every dtype
    for shape in ((2, 33, 1100), (1, 64, 1064), (1, 200, 1030), (1, 577, 1040), (1, 700, 1030)):
        x = make_values("random", shape, dtype, gen)
        tied = x.clone()
        tied[:, 1, ::5] = tied[:, -1, ::5]  # every fifth column ties
        for v in (x, tied):
            compare("sort", v, dim=1)
            compare("sort", v, dim=1, descending=True, stable=True)
            compare("argsort", v, dim=1, stable=True)
            compare("argsort", v, dim=1, descending=True)
            compare("msort", v)
        outs = [(torch.empty(shape[::-1], dtype=dtype).transpose(0, 2),
                 torch.empty(shape[::-1], dtype=torch.int64).transpose(0, 2)) for _ in range(2)]
        got = torch.sort(tied, dim=1, out=outs[0])
        want = ORIG["sort"](tied, dim=1, out=outs[1])
        assert_tensor_same(got.values, want.values)
        assert_tensor_same(got.indices, want.indices)


@pytest.mark.parametrize("dtype", (torch.float32, torch.int32, torch.bfloat16, torch.int8), ids=str)
def test_batch_sort_sixteen_rows(kw, gen, dtype):
    """Rows of KWK_BATCH16_MIN_LEN = 40 to KWK_BATCH16_MAX_LEN = 320 along
    the last dim go sixteen at a time through one network (AVX-512;
    sort_rows_batched16), two batches of eight side by side: row counts
    leaving no batch, one batch (8-row loop) or a partial one after the
    pairs; ties in either half (torch order redoes those rows); values
    only; rows where most tie (the batching stops after a pair)."""
    for n in (39, 40, 64, 100, 320, 321):
        for rows in (16, 24, 16 * 5 + 8 + 3):
            x = make_values("random", (rows, n), dtype, gen)
            tied = x.clone()
            tied[1::7, 1] = tied[1::7, n - 1]  # rows 1, 8, 15, ...: both halves
            for v in (x, tied):
                compare("sort", v, dim=-1)
                compare("sort", v, dim=-1, descending=True, stable=True)
                compare("argsort", v, dim=-1, stable=True)
                compare("msort", v.t())
            mostly = x.clone()
            mostly[2:, 0] = mostly[2:, 5]  # nearly every row ties
            compare("sort", mostly, dim=-1)


@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16, torch.int16), ids=str)
def test_batch_sort_sixteen_adjacent_rows(kw, gen, dtype):
    """Rows of 40..256 (KWK_BATCH16_ADJ_MAX_LEN) along a non-last dim whose
    inner size is a multiple of sixteen go sixteen side by side through one
    network (position j of the sixteen read and written as one run, staged
    where far apart): an outer dim, inner sizes of 16 and 48 (three groups
    a slice) and 24 (groups would straddle slices: the eight-row loop),
    rows past the length (the eight-row loop), ties in some columns of
    either half (torch order redoes those rows), and a transposed output
    layout."""
    for n in (40, 100, 256, 257):
        for shape, dim in (((n, 16), 0), ((2, n, 48), 1), ((3, n, 24), 1)):
            x = make_values("random", shape, dtype, gen)
            tied = x.clone()
            tied.select(dim, 1).narrow(-1, 3, 2).copy_(tied.select(dim, n - 1).narrow(-1, 3, 2))
            tied.select(dim, 0).narrow(-1, 12, 1).copy_(tied.select(dim, 7).narrow(-1, 12, 1))
            for v in (x, tied):
                compare("sort", v, dim=dim)
                compare("sort", v, dim=dim, descending=True, stable=True)
                compare("argsort", v, dim=dim, stable=True)
            compare("msort", v.movedim(dim, 0))
            compare("sort", x.transpose(-1, -2).contiguous().transpose(-1, -2), dim=dim)


@pytest.mark.parametrize("dtype", (torch.float32, torch.int64, torch.bfloat16), ids=str)
def test_sort_staged_long_columns(kw, gen, dtype):
    """Rows of STAGE_LONG_ROW = 1024 elements or more along a non-last dim
    are staged when their stride is a multiple of 256 bytes
    (STAGE_ALIAS_BYTES), not only from 1 KB: rows one position short, at
    the length and past it; strides of 256 and 768 bytes (staged) and of
    256 + 3 elements (in place); an outer dim (stages within each slice);
    ties (torch order's emulation on the staged copy)."""
    es = torch.empty((), dtype=dtype).element_size()
    cols = 256 // es
    for shape in ((1023, cols), (1024, cols), (2500, 3 * cols), (1100, cols + 3), (2, 1030, cols)):
        dim = len(shape) - 2
        x = make_values("random", shape, dtype, gen)
        tied = x.clone()
        tied.narrow(dim, 0, 300).copy_(tied.narrow(dim, 500, 300))  # 300 ties in every row
        for v in (x, tied):
            compare("sort", v, dim=dim)
            compare("sort", v, dim=dim, descending=True, stable=True)
            compare("argsort", v, dim=dim, stable=True)


@pytest.mark.parametrize("dtype", (torch.float32, torch.int32, torch.uint32, torch.float64,
                                   torch.int64, torch.uint64, torch.bfloat16, torch.float16,
                                   torch.int16), ids=str)
def test_sort_rowmajor_stage(kw, gen, dtype):
    """Rows sorted one at a time along a non-last dim, 2-, 4- and 8-byte
    elements, inner size >= 8 (sort_kernels.h's row-major stage, AVX2 and
    AVX-512): a cache line's worth of neighbouring rows transposed into
    contiguous rows, sorted there, their outputs transposed back, at any
    stride.  Inner sizes of 8, 9, 13 (stages with the transposes' remainder
    rows), 16 and 72; an outer dim; row lengths off the 4- and 8-position
    blocks; torch order's ties on the staged copy; values only, indices
    only.  (Outputs laid out apart from the input's rows are checked
    natively, test_sort.c check_strided_out: out= goes to torch.)"""
    for shape, dim in (((1027, 8), 0), ((2, 1500, 13), 1), ((701, 72), 0), ((3, 333, 16), 1),
                       ((4099, 9), 0)):
        x = make_values("random", shape, dtype, gen)
        tied = x.clone()
        tied.narrow(dim, 0, 40).copy_(tied.narrow(dim, 100, 40))  # ties in every row
        for v in (x, tied):
            compare("sort", v, dim=dim)
            compare("sort", v, dim=dim, descending=True, stable=True)
            compare("argsort", v, dim=dim, stable=True)
            compare("argsort", v, dim=dim, descending=True)
            compare("msort", v.movedim(dim, 0))


@pytest.mark.parametrize("dtype", BATCH_DTYPES_64, ids=str)
def test_batch_sort_64bit_offsets(kw, gen, dtype):
    """64-bit integer rows whose range fits in 32 bits (ids, positions,
    permutations) are sorted as offsets from each row's minimum, wherever
    the values sit; a call whose rows span more goes row by row."""
    for n in (16, 17, 24, 64, 196, 1024):  # AVX-512 batches stable rows up to 16
        rows = _rows_for(n, 13)
        base = torch.randint(0, 1 << 20, (rows, 1), generator=gen)
        perm = torch.stack([torch.randperm(n, generator=gen) for _ in range(rows)])
        for x in (perm, perm + (base << 40), perm * 3 + (1 << 62) - 4 * n,
                  torch.randint(0, (1 << 32) - 1, (rows, n), generator=gen)):
            if dtype == torch.uint64:
                x = x.abs().to(torch.uint64)
            x = x.to(dtype)
            compare("sort", x, dim=-1, descending=n % 2 == 0)
            compare("argsort", x, dim=-1, stable=True)
            compare("sort", _some_rows_tie(x, gen), dim=-1)
        wide = make_values("random", (rows, n), dtype, gen)
        compare("sort", wide, dim=-1)
        compare("sort", x.t().contiguous(), dim=0)


@pytest.mark.parametrize("dtype", BATCH_DTYPES_64, ids=str)
def test_batch_sort_64bit_range_edges(kw, gen, dtype):
    """The vector load of contiguous 64-bit rows (batch_sort.h
    batch_load64_rows; torch order takes the network for rows of 9..448):
    each row's range from vectors of four whose last overlaps the one
    before, the offsets from the row's smallest narrowed to 32 bits eight
    positions at a time (the last block overlapping too).  A range of
    exactly 2^32 - 1 fits; one of 2^32 in any row of a batch sends the
    batch row by row; values at the type's ends; rows a wider tensor's
    slices (their starts apart), and rows of a step the load does not
    take."""
    span = (1 << 32) - 1  # the widest range that fits
    if dtype == torch.int64:
        lows = (-(1 << 63), (1 << 63) - 1 - span, -(1 << 31))
    else:  # uint64's ends, and a range across 2^63 (int64's sign)
        lows = (0, (1 << 64) - 1 - span, (1 << 63) - (1 << 31))

    def as_dtype(values):  # int64 arithmetic, bits read as dtype
        return values.view(dtype) if dtype == torch.uint64 else values

    for n in (9, 13, 17, 23, 64, 100, 256, 300, 448, 449):
        rows = _rows_for(n, 21)
        offsets = torch.randint(0, 1 << 32, (rows, n), generator=gen, dtype=torch.int64)
        offsets[:, 3] = 0
        offsets[:, n - 2] = span
        for low in lows:
            bits = low - (1 << 64) if low >= 1 << 63 else low  # as int64 bits
            x = offsets + bits  # wraps as the unsigned values do
            wide = x.clone()
            if low + span + 1 < 1 << 64 and low + span + 1 < (1 << 63 if dtype == torch.int64
                                                              else 1 << 64):
                wide[rows // 2, 0] = x[rows // 2, n - 2] + 1  # one row spans 2^32
            else:
                wide[rows // 2, 0] = x[rows // 2, 3] - 1
            tied = _some_rows_tie(x, gen)
            for v in (x, wide, tied):
                v = as_dtype(v)
                compare("sort", v, dim=-1)
                compare("sort", v, dim=-1, descending=True)
                compare("argsort", v, dim=-1)
        slab = as_dtype(torch.randint(0, 1 << 31, (rows, n + 7), generator=gen))
        compare("sort", slab[:, 3:n + 3], dim=-1)
        compare("sort", slab[:, ::2], dim=-1, descending=True)


@pytest.mark.parametrize("dtype", (torch.int32, torch.uint32, torch.int64, torch.uint64), ids=str)
def test_batch_sort_permutation_rows(kw, gen, dtype):
    """Calls whose first eight rows are permutations of consecutive integers
    (argsort(ids_shuffle) in MAE) skip the network and place each row
    (sort_kernels.h batch_rows_are_permutations); later rows that are not
    permutations (ties in torch order, a key range one short of the length
    with a repeat, arbitrary values) are still sorted exactly."""
    for n in (17, 33, 196, 256, 1000):
        rows = _rows_for(n, 21)
        perm = torch.stack([torch.randperm(n, generator=gen) for _ in range(rows)]) + 5
        repeat = perm.clone()
        repeat[9::4, 2] = repeat[9::4, 3]  # a repeat; min and max mostly kept
        mixed = perm.clone()
        mixed[10:] = torch.randint(0, n // 3 + 1, (rows - 10, n), generator=gen)
        for x in (perm, repeat, mixed, perm.flip(-1)):
            x = x.to(dtype)
            for descending in (False, True):
                compare("sort", x, dim=-1, descending=descending)
                compare("argsort", x, dim=-1, descending=descending, stable=True)
            compare("argsort", x, dim=-1)
            compare("sort", x.t().contiguous(), dim=0, descending=True)
            compare("argsort", x.t(), dim=0)


# ------------------------------------------------------------------ median

MEDIAN_DTYPES = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.float16,
                 torch.bfloat16, torch.float32)
MEDIAN_MIN_NUMEL = 8192  # rows of up to 16 go to torch below it (support.SIZE_RULES)


def _nan_rows(x, gen):
    """Some rows with one NaN, some with several, one all NaN."""
    x = x.contiguous().clone()
    n = x.shape[-1]
    rows = x.view(-1, n)
    rows[::3, n // 2] = float("nan")
    rows[1::5, ::2] = float("nan")
    rows[2] = float("nan")
    return x


@pytest.mark.parametrize("dtype", MEDIAN_DTYPES, ids=str)
def test_batch_median_short_rows(kw, gen, dtype):
    """median / nanmedian over rows of 2..64 (the batch kernel) and 65 (the
    one-row kernel): the lower median at stable rank (n-1)//2, the first NaN
    of a row that has one, nanmedian's rank among the non-NaN elements and
    its index 0 for an all-NaN row; a row count that is not a multiple of
    eight (the last batch overlaps the one before)."""
    for n in (2, 3, 5, 8, 9, 16, 17, 25, 32, 33, 64, 65):
        rows = -(-MEDIAN_MIN_NUMEL // n) + 3
        kinds = ["random", "ties", "equal"] + (["special"] if dtype.is_floating_point else [])
        for kind in kinds:
            x = make_values(kind, (rows, n), dtype, gen)
            compare("median", x, -1)
            compare("nanmedian", x, -1, True)
            if dtype.is_floating_point:
                y = _nan_rows(x, gen)
                compare("median", y, -1)
                compare("nanmedian", y, -1)
                # NaN in two rows only: pairs of batches with and without
                # one (AVX-512 selects sixteen rows at once, a pair holding
                # a NaN row batch by batch)
                z = x.clone()
                z[[5, 37], n // 3] = float("nan")
                compare("median", z, -1)
                compare("nanmedian", z, -1)


def test_batch_median_layouts(kw, gen):
    """Rows read through strides, and rows along a non-last dim of dtypes
    the float32 column kernel does not take."""
    for dtype in (torch.float32, torch.bfloat16, torch.int16):
        x = make_values("ties", (1100, 9), dtype, gen)
        for kind in ("transposed", "step", "offset"):
            compare("median", layout(x, kind), -1)
            compare("nanmedian", layout(x, kind), 1, keepdim=True)
        # rows 12 apart in a wider tensor (float32: sixteen rows at once
        # on AVX-512, each read by a masked load)
        base = make_values("special" if dtype.is_floating_point else "ties", (1100, 12), dtype,
                           gen)
        wide = base[:, 2:11]
        compare("median", wide, -1)
        if dtype.is_floating_point:
            base[::3, 6] = float("nan")
            base[1::5, 2:11:2] = float("nan")
            base[2] = float("nan")
            compare("median", wide, -1)
            compare("nanmedian", wide, -1)
        y = make_values("random", (2, 9, 700), dtype, gen)
        compare("median", y, 1)
        if dtype.is_floating_point:
            compare("nanmedian", _nan_rows(y.transpose(1, 2), gen).transpose(1, 2), 1)
        compare("median", y.transpose(0, 1).contiguous().transpose(0, 1), 1)
