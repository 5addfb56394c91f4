"""Bad input under install(): out= tensors of the wrong dtype, out= tensors
that overlap the input, quantile's q out of [0, 1] and rows too long for it,
k and dims out of range, dtypes no kernel takes.  Each call behaves exactly
as torch's own: the same result, or the same exception type and message,
and the same final contents of the input and out= tensors.

(test_dispatch.py covers more argument forms; compare() checks after every
differential call that the input is bit-identical.)
"""
import pytest
import torch

import kwker
from kwker_testing import ORIG, bits, compare, fallbacks, make_values, run


def _same_outcome(op, make):
    """make() -> (args, kwargs, tensors to compare afterwards, the input
    first); called twice so torch and Kwker each get fresh, identical
    tensors."""
    args_ref, kwargs_ref, watch_ref = make()
    args_got, kwargs_got, watch_got = make()
    ref = run(ORIG[op], *args_ref, **kwargs_ref)
    kwker.reset_stats()
    got = run(getattr(torch, op), *args_got, **kwargs_got)
    assert ref[0] == got[0], (ref, got)
    if ref[0] == "raise":
        assert type(got[1]) is type(ref[1]) and str(got[1]) == str(ref[1]), (ref[1], got[1])
    for j, (r, g) in enumerate(zip(watch_ref, watch_got)):
        assert r.shape == g.shape and r.dtype == g.dtype and r.stride() == g.stride()
        # after an error, out= tensors torch resized hold uninitialised memory:
        # then only the input (always first) is compared
        if ref[0] == "ok" or j == 0:
            assert torch.equal(bits(r), bits(g)), f"tensor {j} differs from torch's afterwards"
    return ref, got


def _x(gen):
    return make_values("ties", (6, 40), torch.float32, gen)


@pytest.mark.parametrize("op,args,outs", [
    ("sort", (1,), (torch.float64, torch.int64)),
    ("sort", (1,), (torch.float32, torch.int32)),
    ("topk", (3,), (torch.float16, torch.int64)),
    ("topk", (3,), (torch.float32, torch.float32)),
    ("kthvalue", (2,), (torch.int32, torch.int64)),
    ("median", (1,), (torch.float32, torch.int16)),
    ("nanmedian", (0,), (torch.bfloat16, torch.int64)),
    ("msort", (), (torch.int64,)),
    ("median", (), (torch.float64,)),
], ids=repr)
def test_out_of_the_wrong_dtype(kw, gen, op, args, outs):
    x = _x(gen)

    def make():
        out = tuple(torch.empty(0, dtype=d) for d in outs)
        xx = x.clone()
        return (xx,) + args, {"out": out if len(out) > 1 else out[0]}, (xx,) + out

    ref, _ = _same_outcome(op, make)
    assert ref[0] == "raise", "torch accepts this out= dtype: the case tests nothing"
    assert fallbacks(op) == {"arguments": 1}


@pytest.mark.parametrize("case", ["values_is_input", "values_is_input_view",
                                  "indices_overlap_values", "msort_into_input",
                                  "topk_into_input", "median_into_input_column"])
def test_out_overlapping_the_input(kw, gen, case):
    """torch checks some overlaps and not others; whatever it does (raise,
    or write through the overlap), Kwker does the same, since out= calls go
    to torch."""
    x = _x(gen)

    def make():
        xx = x.clone()
        if case == "values_is_input":
            return ("sort", (xx, 1), {"out": (xx, torch.empty(0, dtype=torch.long))}, (xx,))
        if case == "values_is_input_view":
            return ("sort", (xx, 1), {"out": (xx[:, :], torch.empty(0, dtype=torch.long))}, (xx,))
        if case == "indices_overlap_values":
            both = torch.zeros(2, 6, 40, dtype=torch.long)
            src = xx.long()
            return ("sort", (src, 1), {"out": (both[0], both[0])}, (src, both))
        if case == "msort_into_input":
            return ("msort", (xx,), {"out": xx}, (xx,))
        if case == "topk_into_input":
            return ("topk", (xx, 40), {"out": (xx, torch.empty(0, dtype=torch.long))}, (xx,))
        return ("median", (xx, 1), {"out": (xx[:, 0], torch.empty(0, dtype=torch.long))}, (xx,))

    op = make()[0]

    def make_call():
        _, args, kwargs, watch = make()
        return args, kwargs, watch

    _same_outcome(op, make_call)
    assert fallbacks(op) == {"arguments": 1}


def test_quantile_bad_q_and_rows_too_long(kw, gen):
    x = _x(gen)
    for q in (1.5, -0.1, torch.tensor([0.2, 1.01]), float("nan")):
        compare("quantile", x, q, fast="arguments")
        compare("nanquantile", x, q, 1, fast="arguments")
    # torch: "quantile() input tensor is too large" past 2^24 (after sorting)
    long_row = torch.zeros(2 ** 24 + 1)
    compare("quantile", long_row, 0.5, fast="torch_raises")
    compare("quantile", long_row[1:], 0.5)  # 2^24 elements: the kernel answers


def test_k_dims_and_dtypes_torch_rejects(kw, gen):
    x = _x(gen)
    for op, args in [("topk", (41,)), ("topk", (-1,)), ("kthvalue", (0,)), ("kthvalue", (41,)),
                     ("kthvalue", (3, 2)), ("sort", (-3,)), ("median", (2,)),
                     ("nanmedian", (-3, True)), ("argsort", (5,))]:
        compare(op, x, *args, fast="dim")
    for op, args, dtype in [("topk", (2,), torch.bool), ("kthvalue", (2,), torch.uint32),
                            ("kthvalue", (1,), torch.complex64), ("median", (0,), torch.uint64),
                            ("msort", (), torch.complex128)]:
        compare(op, torch.ones(4, 5, dtype=dtype), *args, fast="dtype")
