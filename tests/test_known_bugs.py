"""Mismatches with torch 2.13 found by this suite and still open, pinned as
minimal reproducers.  Each is xfail(strict=True): when Kwker is fixed the
test XPASSes, which fails the suite - then drop the marker, move the test to
test_regressions.py, and remove the bug's tolerance in kwker_testing.known_bug
(which lets the broad exactness tests pass an input hitting the bug only
when Kwker's result is exactly the predicted wrong one).
"""
import pytest
import torch

import kwker
from kwker_testing import ORIG, assert_same

nan = float("nan")


@pytest.mark.xfail(strict=True, reason=(
    "kwker bug: torch.nanmedian(x, dim) on an all-NaN row of length >= 4 - torch returns "
    "the index its nth_element leaves (6 for a row of 8: [0,0,0,2,2,3,5,6,7,8] for lengths "
    "1..10) and that element's NaN bits; kwker returns index 0"))
def test_nanmedian_dim_all_nan_row(kw):
    x = torch.full((1, 8), nan)
    x.view(torch.int32)[0, 6] = 0x7FC12345  # a NaN payload makes the value differ too
    ref = ORIG["nanmedian"](x, 1)  # values [nan (0x7fc12345)], indices [6]
    got = torch.nanmedian(x, 1)    # values [nan (0x7fc00000)], indices [0]
    assert kwker.stats()["nanmedian"]["fast"] == 1
    assert_same(ref, got)


def test_torch_all_nan_row_indices():
    """The torch behaviour the open bug is about (not an xfail: a fact)."""
    expected = [0, 0, 0, 2, 2, 3, 5, 6, 7, 8]
    assert [int(ORIG["nanmedian"](torch.full((1, n), nan), 1).indices)
            for n in range(1, 11)] == expected


def test_all_nan_row_tolerance_is_narrow(kw):
    """kwker_testing.known_bug accepts kwker's result on all-NaN rows only; any
    other difference still fails."""
    from kwker_testing import known_bug
    x = torch.full((3, 8), nan)
    x[1] = torch.arange(8.0)
    ref = ORIG["nanmedian"](x, 1)
    got = torch.nanmedian(x, 1)
    bad = type(got)((got.values.clone(), got.indices.clone()))
    bad.indices[1] += 1
    assert known_bug("nanmedian", x, (1,), {}, ref, bad) is None
    assert known_bug("median", x, (1,), {}, ref, got) is None
