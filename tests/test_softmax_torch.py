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


_AVX2_SCRIPT = r"""
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


def test_renormalize_one_or_two_weights_is_torchs(gen):
    """kwk_renormalize_f32 (the router's top-1 / top-2 renormalisation):
    w / w.sum(-1, keepdim=True) in place, bit for bit, zero sums included;
    other k are refused."""
    for k in (1, 2):
        w = torch.rand(1000, k, generator=gen)
        w[::7] = 0.0  # 0 / 0: NaN, as torch's
        w[1::7, 0] = 1e-45  # subnormal terms
        want = w / w.sum(dim=-1, keepdim=True)
        got = w.clone()
        assert _native.lib.kwk_renormalize_f32_addr(got.data_ptr(), 1000, k) == 0
        assert torch.equal(_bits(got), _bits(want))
    w = torch.rand(10, 3, generator=gen)
    assert _native.lib.kwk_renormalize_f32_addr(w.data_ptr(), 10, 3) != 0
    assert _native.lib.kwk_renormalize_f32_addr(w.data_ptr(), -1, 2) != 0
