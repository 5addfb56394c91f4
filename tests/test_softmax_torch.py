"""The router's softmax on Kwker's kernel (native/src/softmax_torch.h,
kwker.ops.topk_layers.softmax_f32) against torch.softmax itself, bit for
bit: every row length around the vector widths, the softmax's exponential
over the negative floats (rows [0, d]: for d below -16.7 the second output
is exp(d) itself), special values, other input dtypes, both ATen vector
widths (the 8-lane one in a subprocess whose torch runs its AVX2 kernels),
every native target, and the probe that turns the kernel off."""
import os
import subprocess
import sys

import pytest
import torch

from kwker import _native
from kwker.ops import topk_layers as L
from kwker_testing import bits as _bits

LANES = L._SOFTMAX_LANES.get(torch.backends.cpu.get_cpu_capability(), 0)
pytestmark = pytest.mark.skipif(
    _native.lib is None or not LANES,
    reason="the native library, and torch running its AVX2 or AVX-512 kernels")


def _native_softmax(x, lanes):
    x = x.contiguous()
    out = torch.empty_like(x)
    status = _native.lib.kwk_softmax_f32_addr(x.data_ptr(), x.shape[0], x.shape[1], lanes,
                                              out.data_ptr())
    return status, out


def _rows_equal(x, lanes=LANES):
    status, out = _native_softmax(x, lanes)
    assert status == 0
    want = torch.softmax(x, -1)
    bad = (_bits(out) != _bits(want)).any(1)
    assert not bad.any(), f"{int(bad.sum())} rows of {tuple(x.shape)} differ, first {x[bad][0]}"


@pytest.mark.parametrize("n", list(range(1, 41)) + [47, 63, 64, 65, 100, 255, 256, 1000, 4099])
def test_every_row_length(n, target, gen):
    rows = max(8, 20000 // n)
    for scale in (1.0, 8.0, 60.0):
        x = torch.randn(rows, n, generator=gen) * scale
        if n > 3:
            x[::3, n // 2] = float("-inf")  # exp of -inf: 0
            x[1::5, 0] = x[1::5, 1]  # ties at the maximum
        _rows_equal(x)


def test_exp_over_the_negative_floats(target):
    # rows [0, d]: e = (1, exp(d)), s = 1 + exp(d): every 61st negative float
    # down to -112 (the full sweep, 1.1e9 values, matched when written)
    d = torch.arange(0x80000000, 0xC2E00000, 61, dtype=torch.int64).to(torch.int32)
    d = d.view(torch.float32)
    # around 0, the ends of the polynomial's range and the underflow
    d = torch.cat([d, -torch.logspace(-40, 2.05, 20000)])
    x = torch.stack([torch.zeros_like(d), d], 1)
    _rows_equal(x)


def test_other_input_dtypes_convert_first(gen):
    for dtype in (torch.bfloat16, torch.float16, torch.float64):
        x = (torch.randn(300, 8, generator=gen) * 5).to(dtype)
        got = L.softmax_f32(x)
        assert got.dtype == torch.float32
        assert torch.equal(_bits(got), _bits(torch.softmax(x, dim=-1, dtype=torch.float32)))


@pytest.mark.parametrize("n", [8, 40])  # short rows, each in a register; rows taken 4 at a time
def test_nan_and_infinite_rows_defer_to_torch(n, target, gen):
    x = torch.randn(6, n, generator=gen)
    for special in (float("nan"), float("inf")):
        for row in range(6):  # each place in a group of rows, and after the groups
            for col in (3, n - 1):  # (n - 1: past the last whole vector of 16)
                y = x.clone()
                y[row, col] = special
                assert _native_softmax(y, LANES)[0] == _native.lib.KWK_DEFER
                got, want = L.softmax_f32(y), torch.softmax(y, -1)
                assert torch.equal(_bits(got), _bits(want))
    y = x.clone()
    y[4] = float("-inf")  # all -inf: NaN row, torch's
    got = L.softmax_f32(y)
    assert torch.equal(_bits(got), _bits(torch.softmax(y, -1)))


def test_shapes_and_layouts(gen):
    for shape in [(8,), (3, 5, 8), (2, 0, 8), (1, 1)]:
        x = torch.randn(shape, generator=gen)
        got = L.softmax_f32(x)
        assert got.shape == x.shape
        assert torch.equal(_bits(got), _bits(torch.softmax(x, -1)))
    x = torch.randn(16, 10, generator=gen)[:, ::2]  # non-contiguous
    assert torch.equal(_bits(L.softmax_f32(x)), _bits(torch.softmax(x, -1)))


def test_a_failed_probe_keeps_torchs_softmax(monkeypatch, gen):
    calls = []

    def wrong(x, rows, n, lanes, out):
        calls.append(n)
        return 0  # leaves out unwritten: not torch's values

    monkeypatch.setattr(L, "_softmax", wrong)
    monkeypatch.setattr(L, "_softmax_lanes", None)
    x = torch.randn(64, 8, generator=gen)
    got = L.softmax_f32(x)
    assert calls and L._softmax_lanes == 0
    assert torch.equal(_bits(got), _bits(torch.softmax(x, -1)))


# kwk_router_backward_f32 (the router's backward) against torch's autograd
# of the reference's steps, as code the 8-lane subprocess runs too:
# router_backward_bad(lanes) counts the rows that differ.  Probabilities
# with exact zeros (large logits) and some not a softmax's (negative, -0.0:
# the dense sum's rows), -0.0 / +0.0 / tiny / inf gradients (products that
# are -0.0, sums that cancel, inf - inf), selected columns in one lane and
# in two; every length the layer gives the kernel (router_backward_takes:
# shorter than a vector, or whole vectors), with torch on one thread and
# on two over rows enough for its thread pool (the two copies of its loop
# differ on rows with a partial last vector, which the layer keeps from
# the kernel).  A NaN in the gradient or the probabilities: KWK_DEFER.
_ROUTER_BACKWARD_CHECK = r"""
import torch
from kwker import _native


def _reference_router_grad(p, ids, g, renormalize):
    gt = g
    if renormalize:
        t = p.gather(-1, ids).requires_grad_()
        w = t / t.sum(-1, keepdim=True)
        (gt,) = torch.autograd.grad(w, t, g)
    gp = torch.zeros_like(p).scatter_(-1, ids, gt)
    return torch._softmax_backward_data(gp, p, -1, torch.float32)


def router_backward_bad(lanes):
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        bad = _router_backward_bad(lanes, 96)
        torch.set_num_threads(2)
        return bad + _router_backward_bad(lanes, 2048)
    finally:
        torch.set_num_threads(threads)


def _router_backward_bad(lanes, rows):
    gen = torch.Generator().manual_seed(7)
    bad = 0
    for n in list(range(1, lanes + 1)) + [2 * lanes, 3 * lanes, 4 * lanes, 16 * lanes, 64 * lanes]:
        for k in sorted({1, min(2, n), min(3, n), min(8, n)}):
            x = torch.randn(rows, n, generator=gen) * 4
            x[::4] *= 40  # probabilities that are exactly zero
            p = torch.softmax(x, -1)
            p[5::17, n // 2] = -0.0
            p[6::17, -1] = -0.25
            ids = torch.rand(rows, n, generator=gen).argsort(-1)[:, :k].contiguous()
            if n > lanes and k == 2:  # both in one lane, and in lanes meeting late
                ids[::3, 1] = (ids[::3, 0] + lanes) % n
                ids[1::3, 1] = (ids[1::3, 0] + lanes // 2) % n
                ids[:, 1] = torch.where(ids[:, 1] == ids[:, 0], (ids[:, 0] + 1) % n, ids[:, 1])
            g = torch.randn(rows, k, generator=gen)
            g[::6] = -0.0
            g[1::6, 0] = 0.0
            g[2::6] = 1e-30  # products that underflow
            g[3::6, 0] = -g[3::6, -1]  # cancelling terms
            g[7::13, -1] = float("inf")
            g[8::13] = float("-inf")
            for renormalize in (0, 1):
                out = torch.empty_like(p)
                status = _native.lib.kwk_router_backward_f32_addr(
                    p.data_ptr(), ids.data_ptr(), g.data_ptr(), rows, n, k, renormalize, lanes,
                    out.data_ptr())
                assert status == 0, status
                want = _reference_router_grad(p, ids, g, renormalize)
                bad += int((out.view(torch.int32) != want.view(torch.int32)).any(1).sum())
                for where in (g, p):  # a NaN anywhere: deferred
                    keep = where[-1, -1].item()
                    where[-1, -1] = float("nan")
                    status = _native.lib.kwk_router_backward_f32_addr(
                        p.data_ptr(), ids.data_ptr(), g.data_ptr(), rows, n, k, renormalize,
                        lanes, out.data_ptr())
                    bad += status != _native.lib.KWK_DEFER
                    where[-1, -1] = keep
    return bad
"""

# kwk_renormalize_f32 against w / w.sum(-1, keepdim=True), as code the
# 8-lane subprocess runs too: every k it takes (1..8), terms of
# spread magnitudes and both signs (the sum's order shows in the last bits),
# -0.0 rows and zero sums (0 / 0: NaN, as torch's), subnormals, infinities.
_RENORMALIZE_CHECK = r"""
import torch
from kwker import _native


def renormalize_bad():
    gen = torch.Generator().manual_seed(11)
    bad = 0
    for k in range(1, 9):
        w = torch.randn(3000, k, generator=gen) * 10.0 ** torch.randint(-6, 7, (3000, k),
                                                                      generator=gen)
        w[::2] = w[::2].abs()  # a router's weights: positive
        w[::7] = 0.0
        w[1::7] = -0.0
        w[2::7, 0] = 1e-45
        w[3::11, -1] = float("inf")
        want = w / w.sum(dim=-1, keepdim=True)
        got = w.clone()
        assert _native.lib.kwk_renormalize_f32_addr(got.data_ptr(), 3000, k) == 0
        bad += int((got.view(torch.int32) != want.view(torch.int32)).any(1).sum())
    return bad
"""

_AVX2_SCRIPT = _ROUTER_BACKWARD_CHECK + _RENORMALIZE_CHECK + r"""
import os, torch
from kwker import _native
_native.set_target(os.environ["KWK_TEST_TARGET"])
torch.manual_seed(0)
assert torch.backends.cpu.get_cpu_capability() == "AVX2", torch.backends.cpu.get_cpu_capability()
bad = 0
for n in list(range(1, 42)) + [63, 64, 65, 100, 255, 1000, 4099]:
    x = torch.randn(max(9, 20000 // n), n) * 6  # (rows four at a time, and the rest)
    if n > 3:
        x[::3, n // 2] = float("-inf")
        x[1::5, 0] = x[1::5, -1]  # ties at the maximum, one in the tail past 8 lanes
    out = torch.empty_like(x)
    assert _native.lib.kwk_softmax_f32_addr(x.data_ptr(), x.shape[0], n, 8, out.data_ptr()) == 0
    bad += int((out.view(torch.int32) != torch.softmax(x, -1).view(torch.int32)).any(1).sum())
for n in (8, 9, 12, 17, 40):  # a NaN or inf anywhere (the tail too): torch's softmax instead
    for row, col in ((1, 0), (5, n - 1), (8, n // 2)):
        for special in (float("nan"), float("inf")):
            x = torch.randn(9, n)
            x[row, col] = special
            out = torch.empty_like(x)
            status = _native.lib.kwk_softmax_f32_addr(x.data_ptr(), 9, n, 8, out.data_ptr())
            bad += status != _native.lib.KWK_DEFER
bad += router_backward_bad(8)
bad += renormalize_bad()
print("bad", bad)
"""


def test_eight_lanes_against_torchs_avx2_kernels(target):
    if torch.backends.cpu.get_cpu_capability() not in ("AVX2", "AVX512"):
        pytest.skip("torch runs no AVX2 kernels here")
    env = dict(os.environ, ATEN_CPU_CAPABILITY="avx2", KWK_TEST_TARGET=target)
    run = subprocess.run([sys.executable, "-c", _AVX2_SCRIPT], env=env, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == "bad 0"


def test_router_backward_kernel_is_torchs(target):
    """kwk_router_backward_f32 with torch's vector width here (the 8-lane
    order: test_eight_lanes_against_torchs_avx2_kernels), every target."""
    namespace = {}
    exec(_ROUTER_BACKWARD_CHECK, namespace)
    assert namespace["router_backward_bad"](LANES) == 0


def test_router_backward_kernel_checks_its_arguments():
    lib, p = _native.lib, torch.softmax(torch.randn(4, 6), -1)
    g, out = torch.randn(4, 2), torch.empty(4, 6)
    for ids in (torch.tensor([[0, 6]] * 4), torch.tensor([[-1, 2]] * 4),
                torch.tensor([[3, 3]] * 4)):
        assert lib.kwk_router_backward_f32_addr(p.data_ptr(), ids.data_ptr(), g.data_ptr(), 4, 6, 2,
                                                1, LANES, out.data_ptr()) == lib.KWK_E_ARG
    ids, g = torch.arange(6).repeat(4, 2), torch.randn(4, 12)
    # renormalised k over 8 (torch's sums of such rows: another order), lanes
    # other than 8 or 16, k over n, k = 0
    for k, n, renormalize, lanes in ((9, 12, 1, LANES), (2, 6, 0, 4), (7, 6, 0, LANES),
                                     (0, 6, 0, LANES)):
        p, out = torch.softmax(torch.randn(4, n), -1), torch.empty(4, n)
        assert lib.kwk_router_backward_f32_addr(p.data_ptr(), ids.data_ptr(), g.data_ptr(), 4, n, k,
                                                renormalize, lanes, out.data_ptr()) == lib.KWK_E_ARG


@pytest.mark.parametrize("experts,k,dtype", [(8, 2, torch.float32), (5, 1, torch.bfloat16),
                                              (64, 8, torch.float32), (20, 3, torch.float64)])
def test_router_gradients_through_the_kernel_are_torchs(experts, k, dtype, gen):
    """topk_softmax's weights, their gradient and its gradient (the softmax
    on Kwker's kernel, differentiated as torch's) equal the reference's."""
    import kwker.torch_ops  # noqa: F401  (registers torch.ops.kwker)
    from kwker.nn import reference_topk as R
    x = (torch.randn(512, experts, generator=gen) * 3).to(dtype)
    a, b = x.clone().requires_grad_(), x.clone().requires_grad_()
    (wa, ia), (wb, ib) = torch.ops.kwker.topk_softmax(a, k, True), R.topk_softmax(b, k, True)
    assert L._softmax_lanes == LANES  # (the kernel ran, not torch.softmax)
    assert torch.equal(ia, ib) and torch.equal(_bits(wa), _bits(wb))
    g = torch.randn(wa.shape, generator=gen)
    (ga,) = torch.autograd.grad(wa, a, g, create_graph=True)
    (gb,) = torch.autograd.grad(wb, b, g, create_graph=True)
    assert torch.equal(ga, gb)
    (hga,) = torch.autograd.grad(ga.sum(), a)
    (hgb,) = torch.autograd.grad(gb.sum(), b)
    assert torch.equal(hga, hgb)


def test_renormalize_is_torchs(gen):
    """kwk_renormalize_f32 (the router's renormalisation) under torch's
    kernels here (and the AVX2 ones: the subprocess); k from 9 on, and bad
    arguments, are refused."""
    namespace = {}
    exec(_RENORMALIZE_CHECK, namespace)
    assert namespace["renormalize_bad"]() == 0
    w = torch.rand(10, 9, generator=gen)
    for k in (0, 9):
        assert _native.lib.kwk_renormalize_f32_addr(w.data_ptr(), 10, k) != 0
    assert _native.lib.kwk_renormalize_f32_addr(w.data_ptr(), -1, 2) != 0
