"""kwker.nn and the layer operators (torch.ops.kwker.median_pool2d): forward
values, window positions and gradients bit for bit against the plain-torch
reference (kwker.nn.reference), opcheck, gradcheck, vmap, compile, export,
and the modules' use_fast machinery."""
import pytest
import torch
from torch.library import opcheck

import kwker.nn as knn
from kwker.nn import functional as KF
from kwker.nn import reference as R
from kwker.ops import median_pool as native
from kwker_testing import bits, make_values

K = torch.ops.kwker

# (kernel_size, stride, padding as F.pad's (left, right, top, bottom))
GEOMETRIES = [
    ((3, 3), (1, 1), (1, 1, 1, 1)),   # the default: the 3x3 network
    ((3, 3), (2, 3), (0, 1, 2, 0)),   # the network at other strides, uneven padding
    ((5, 5), (1, 1), (2, 2, 2, 2)),   # the general path
    ((2, 4), (2, 1), (1, 2, 0, 1)),   # even, non-square windows
    ((1, 1), (1, 1), (0, 0, 0, 0)),
    ((7, 3), (3, 2), (3, 3, 1, 1)),
]
MODES = ["zeros", "reflect", "replicate", "circular"]
KINDS = ["random", "ties", "nan", "special"]


def _assert_same(ref, got):
    assert ref.dtype == got.dtype and ref.shape == got.shape
    assert torch.equal(bits(ref), bits(got)), (ref != got).nonzero()[:5].tolist()


def _input(kind, shape, dtype, gen):
    x = make_values(kind, shape, dtype, gen)
    if kind == "special":  # at most one inf per window's worth: keeps sums finite below
        x = x.nan_to_num(nan=float("nan"), posinf=3.0, neginf=-3.0)
    return x


# `target` (each native kernel set in turn): a fixture in conftest.py


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("mode", MODES)
def test_forward_and_backward_equal_the_reference(dtype, mode, target, gen):
    """Values (bits: -0.0, NaN payloads), positions and the gradient (bits:
    the same sums in the same order) of every geometry and value kind; rows
    21 wide: vector steps of 8 and 4 and a scalar tail."""
    # two value kinds per geometry, every kind on every path (test time)
    for i, (kernel, stride, padding) in enumerate(GEOMETRIES):
        for kind in (KINDS[i % 4], KINDS[(i + 1) % 4]):
            x = _input(kind, (2, 1, 7, 21), dtype, gen)
            args = (list(kernel), list(stride), list(padding), mode)
            ref_values, ref_index = R.median_pool2d_windows(x, kernel, stride, padding, mode)
            values, index = K.median_pool2d(x, *args)
            _assert_same(ref_values, values)
            assert torch.equal(ref_index, index)

            xr = x.clone().requires_grad_()
            xf = x.clone().requires_grad_()
            grad = torch.randn(values.shape, generator=gen, dtype=dtype)
            (ref_grad,) = torch.autograd.grad(
                R.median_pool2d(xr, kernel, stride, padding, mode), xr, grad)
            (got_grad,) = torch.autograd.grad(K.median_pool2d(xf, *args)[0], xf, grad)
            _assert_same(ref_grad, got_grad)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_3x3_network_on_every_zero_one_window(dtype, target):
    """The median-of-9 network on all 2^9 windows of zeros and ones: by the
    zero-one principle it then selects the median of any totally ordered
    input, and with so many ties the positions check the tie rule too.  The
    windows sit side by side in one 3-row plane (window i at column 3i), so
    the stride-1 vector path meets them all."""
    codes = torch.arange(512)
    windows = ((codes[:, None] >> torch.arange(9)) & 1).to(dtype).view(512, 3, 3)
    windows = windows.permute(1, 0, 2).reshape(1, 3, 512 * 3)
    args = ([3, 3], [1, 1], [0, 0, 0, 0], "zeros")
    ref_values, ref_index = R.median_pool2d_windows(windows, *args)
    values, index = K.median_pool2d(windows, *args)
    assert torch.equal(values, ref_values) and torch.equal(index, ref_index)


@pytest.mark.parametrize("kernel", [(4, 4), (2, 7)])
def test_generated_networks_on_every_zero_one_window(kernel, target):
    """Windows other than 3x3 run a generated median network (up to 128
    elements): all 2^n zero-one windows of two shapes through the kernel
    (native/tests/test_median_net.c checks the networks alone up to n = 25),
    positions included, so the tie rule is checked on every tie pattern."""
    kh, kw = kernel
    n = kh * kw
    codes = torch.arange(1 << n)
    windows = ((codes[:, None] >> torch.arange(n)) & 1).to(torch.float32).view(-1, kh, kw)
    windows = windows.permute(1, 0, 2).reshape(1, kh, (1 << n) * kw)
    # stride 1: the vector rows see every window (and the mixed ones between)
    args = (list(kernel), [1, 1], [0, 0, 0, 0], "zeros")
    ref_values, ref_index = R.median_pool2d_windows(windows, *args)
    values, index = K.median_pool2d(windows, *args)
    assert torch.equal(values, ref_values) and torch.equal(index, ref_index)


@pytest.mark.parametrize("kernel", [(9, 9), (11, 11), (8, 16), (12, 11)])
@pytest.mark.parametrize("kind", KINDS)
def test_large_windows(kernel, kind, target, gen):
    """Windows of 64..128 elements (generated networks at their largest) and
    one of 132 (past MP_NET_MAX: the insertion sort), stride 1 (vector rows)
    and 2."""
    x = _input(kind, (1, 2, 14, 27), torch.float32, gen)
    for stride in ([1, 1], [2, 2]):
        args = (list(kernel), stride, [kernel[1] // 2, 2, kernel[0] // 2, 1], "reflect")
        ref_values, ref_index = R.median_pool2d_windows(x, *args)
        values, index = K.median_pool2d(x, *args)
        _assert_same(ref_values, values)
        assert torch.equal(ref_index, index)


def test_layouts_and_ranks(gen):
    """Non-contiguous inputs, a lone plane (H, W) and extra leading dims."""
    x = make_values("ties", (4, 10, 3, 7), torch.float32, gen).permute(0, 2, 3, 1)
    for t in (x, x[0, 0], x.unsqueeze(0), x[..., ::2, :]):
        args = ([3, 3], [1, 1], [1, 1, 1, 1], "reflect")
        ref_values, ref_index = R.median_pool2d_windows(t, *args)
        values, index = K.median_pool2d(t, *args)
        _assert_same(ref_values, values)
        assert torch.equal(ref_index, index)


@pytest.mark.parametrize("shape", [(0, 3, 8, 8), (2, 0, 8, 8), (1, 1, 1, 1), (1, 1, 2, 1)])
def test_empty_and_tiny_inputs(shape, gen):
    """As the reference: empty batches pass through, reflect padding of a
    1-pixel side raises F.pad's error."""
    x = torch.randn(shape, generator=gen)
    for mode in ("zeros", "replicate", "reflect"):
        padding = R.resolve_padding(*shape[-2:], (3, 3), (1, 1), None)
        try:
            want = R.median_pool2d(x, (3, 3), (1, 1), padding, mode)
        except RuntimeError:
            with pytest.raises(RuntimeError):
                KF.median_pool2d(x, padding_mode=mode)
            continue
        _assert_same(want, KF.median_pool2d(x, padding_mode=mode))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.int32])
def test_other_dtypes_run_the_reference(dtype, gen):
    x = make_values("ties", (2, 6, 7), dtype, gen)
    args = ([3, 3], [1, 1], [1, 1, 1, 1], "reflect")
    if not dtype.is_floating_point:  # F.unfold's own error
        with pytest.raises(NotImplementedError):
            R.median_pool2d_windows(x, *args)
        with pytest.raises(NotImplementedError):
            K.median_pool2d(x, *args)
        return
    ref = R.median_pool2d_windows(x, *args)
    got = K.median_pool2d(x, *args)
    _assert_same(ref[0], got[0])
    assert torch.equal(ref[1], got[1])


@pytest.mark.parametrize("mode", ["zeros", "reflect"])
def test_gradcheck(mode, gen):
    x = torch.randn(2, 2, 6, 7, dtype=torch.float64, generator=gen, requires_grad=True)
    for kernel, stride, padding in GEOMETRIES[:4]:
        fn = lambda t: K.median_pool2d(t, list(kernel), list(stride), list(padding), mode)[0]  # noqa: E731
        assert torch.autograd.gradcheck(fn, (x,))


def test_func_transforms_and_forward_ad(gen):
    """torch.func.grad, vmap(grad) and forward-mode AD take the reference's
    own derivatives: the same numbers."""
    import torch.autograd.forward_ad as fwAD
    x = make_values("ties", (2, 5, 6), torch.float64, gen)
    fast = lambda t: KF.median_pool2d(t).pow(2).sum()  # noqa: E731
    ref = lambda t: R.median_pool2d(t, (3, 3), (1, 1), (1, 1, 1, 1), "reflect").pow(2).sum()  # noqa: E731
    _assert_same(torch.func.grad(ref)(x), torch.func.grad(fast)(x))
    _assert_same(torch.vmap(torch.func.grad(ref))(x), torch.vmap(torch.func.grad(fast))(x))
    tangent = torch.randn(x.shape, generator=gen, dtype=x.dtype)
    with fwAD.dual_level():
        got = fwAD.unpack_dual(KF.median_pool2d(fwAD.make_dual(x, tangent))).tangent
        want = fwAD.unpack_dual(R.median_pool2d(fwAD.make_dual(x, tangent), (3, 3), (1, 1),
                                                (1, 1, 1, 1), "reflect")).tangent
    _assert_same(want, got)


def test_double_backward_raises(gen):
    x = torch.randn(1, 5, 5, dtype=torch.float64, generator=gen, requires_grad=True)
    y = KF.median_pool2d(x)
    (g,) = torch.autograd.grad(y.sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="once_differentiable|does not require grad"):
        torch.autograd.grad(g.sum(), x)


def test_opcheck(gen):
    utils = ("test_schema", "test_faketensor", "test_aot_dispatch_dynamic",
             "test_autograd_registration")
    inputs = [
        torch.randn(2, 3, 6, 5, dtype=torch.float64, generator=gen).requires_grad_(),
        make_values("ties", (3, 7, 6), torch.float32, gen).narrow(-1, 1, 4),  # strided
        make_values("ties", (1, 2, 5, 5), torch.bfloat16, gen),
    ]
    for x, (kernel, stride, padding), mode in zip(
            inputs, GEOMETRIES[:3], ("reflect", "zeros", "replicate")):
        args = (x, list(kernel), list(stride), list(padding), mode)
        opcheck(K.median_pool2d.default, args,
                test_utils=utils if x.requires_grad else utils[:3])
    x = inputs[0].detach()
    values, index = K.median_pool2d(x, [3, 3], [1, 1], [1, 1, 1, 1], "reflect")
    opcheck(K.median_pool2d_backward.default,
            (torch.randn_like(values), x, index, [3, 3], [1, 1], [1, 1, 1, 1], "reflect"),
            test_utils=utils[:3])


def test_backward_op_off_the_native_path_is_the_references(gen):
    """The composite backward (other devices; here called directly) gives
    the native one's bits."""
    from kwker.torch_ops import layers
    x = make_values("ties", (2, 3, 7, 6), torch.float32, gen)
    args = ([3, 3], [1, 1], [1, 1, 1, 1], "reflect")
    values, index = K.median_pool2d(x, *args)
    grad = torch.randn(values.shape, generator=gen)
    _assert_same(layers.median_pool2d_backward_any(grad, x, index, *args),
                 K.median_pool2d_backward(grad, x, index, *args))


def test_vmap(gen):
    x = make_values("ties", (4, 3, 8, 9), torch.float32, gen)
    args = ([3, 3], [1, 1], [1, 1, 1, 1], "reflect")
    ref = K.median_pool2d(x, *args)
    for dim in (0, 1):
        got = torch.vmap(lambda t: K.median_pool2d(t, *args), in_dims=dim)(x.movedim(0, dim))
        assert torch.equal(ref[0], got[0]) and torch.equal(ref[1], got[1])


def test_compile_fullgraph_module_forward_and_backward(gen):
    import torch._dynamo
    torch._dynamo.reset()
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 3, 1, dtype=torch.float64),
                                knn.MedianPool2d(3, use_fast=True))
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    for shape in ((2, 3, 8, 9), (1, 3, 5, 12)):
        x = torch.randn(shape, dtype=torch.float64, generator=gen, requires_grad=True)
        ref = model(x)
        got = compiled(x)
        _assert_same(ref, got)
        grad = torch.randn(ref.shape, generator=gen, dtype=torch.float64)
        _assert_same(torch.autograd.grad(ref, x, grad)[0], torch.autograd.grad(got, x, grad)[0])
    torch._dynamo.reset()


def test_export(gen):
    model = knn.MedianPool2d(3, use_fast=True)
    x = torch.randn(2, 3, 8, 8, generator=gen)
    ep = torch.export.export(model, (x,))
    assert any("kwker.median_pool2d" in str(n.target) for n in ep.graph.nodes)
    _assert_same(model(x), ep.module()(x))


# --------------------------------------------------------------- modules

@pytest.mark.parametrize("use_fast", [False, True, "auto"])
def test_module_matches_its_reference(use_fast, gen):
    kwargs = dict(kernel_size=(3, 5), stride=2, padding=None, padding_mode="replicate")
    fast, ref = knn.MedianPool2d(**kwargs, use_fast=use_fast), R.MedianPool2d(**kwargs)
    assert fast.state_dict().keys() == ref.state_dict().keys()
    assert list(fast.parameters()) == [] and list(fast.buffers()) == []
    x = make_values("ties", (2, 3, 11, 10), torch.float32, gen).requires_grad_()
    _assert_same(ref(x), fast(x))
    # "same": ceil(size / stride) outputs
    assert fast(x).shape[-2:] == (6, 5)


def test_use_fast_switches(gen, monkeypatch):
    calls = []
    real = R.median_pool2d_windows

    def counting(*args):
        calls.append(1)
        return real(*args)
    monkeypatch.setattr(R, "median_pool2d_windows", counting)
    model = torch.nn.Sequential(knn.MedianPool2d(3), torch.nn.ReLU(),
                                torch.nn.Sequential(knn.MedianPool2d(5, use_fast=False)))
    assert [name for name, _ in knn.fast_modules(model)] == ["0", "2.0"]
    x = torch.randn(1, 2, 8, 8, generator=gen)
    knn.set_use_fast(model, True)
    model(x)
    assert calls == []  # both on the native kernel
    knn.deactivate(model)
    assert all(m.use_fast is False for _, m in knn.fast_modules(model))
    model(x)
    assert len(calls) == 2
    calls.clear()
    knn.set_use_fast(model, "auto")
    model(x.to(torch.bfloat16))  # no native kernel: "auto" takes the reference
    assert len(calls) == 2
    with pytest.raises(ValueError):
        knn.set_use_fast(model, "always")
    with pytest.raises(ValueError):
        knn.MedianPool2d(use_fast=1.5)


def test_resolve_padding():
    assert R.resolve_padding(10, 10, (3, 3), (1, 1), None) == (1, 1, 1, 1)
    assert R.resolve_padding(10, 10, (4, 4), (1, 1), "same") == (1, 2, 1, 2)
    assert R.resolve_padding(10, 9, (3, 3), (2, 2), None) == (1, 1, 0, 1)
    assert R.resolve_padding(5, 5, (3, 3), (1, 1), 2) == (2, 2, 2, 2)
    assert R.resolve_padding(5, 5, (3, 3), (1, 1), (1, 2)) == (2, 2, 1, 1)


# ------------------------------------------------------------ median_pool1d

@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("mode", MODES)
def test_median_pool1d_equals_its_reference_and_the_unfold_recipe(dtype, mode, target, gen):
    """median_pool1d (median_pool2d's kernel on the one-row image): values,
    positions and gradient bits as the reference; values and positions as
    the usual recipe F.pad + Tensor.unfold + median (whose gradient may round
    differently: its backward sums in another order)."""
    for kernel, stride, padding in ((3, 1, (1, 1)), (5, 1, (2, 2)), (4, 2, (1, 2)),
                                    (25, 1, (12, 12)), (7, 3, (0, 0))):
        for kind in KINDS:
            x = _input(kind, (2, 3, 40), dtype, gen)
            args = (kernel, stride, list(padding), mode)
            values, index = K.median_pool1d(x, *args)
            ref_values, ref_index = R.median_pool1d_windows(x, *args)
            _assert_same(ref_values, values)
            assert torch.equal(ref_index, index)
            pad_mode = "constant" if mode == "zeros" else mode
            recipe = torch.nn.functional.pad(x, padding, mode=pad_mode).unfold(
                -1, kernel, stride).median(-1)
            _assert_same(recipe.values, values)
            assert torch.equal(recipe.indices, index)
            if mode == "circular":
                continue
            xr = x.clone().requires_grad_()
            xf = x.clone().requires_grad_()
            grad = torch.randn(values.shape, generator=gen, dtype=dtype)
            (ref_grad,) = torch.autograd.grad(R.median_pool1d(xr, *args), xr, grad)
            (got_grad,) = torch.autograd.grad(K.median_pool1d(xf, *args)[0], xf, grad)
            _assert_same(ref_grad, got_grad)


def test_median_pool1d_module_opcheck_and_transforms(gen):
    x = make_values("ties", (2, 3, 17), torch.float64, gen).requires_grad_()
    fast, ref = knn.MedianPool1d(5, use_fast=True), R.MedianPool1d(5)
    assert fast.state_dict().keys() == ref.state_dict().keys()
    _assert_same(ref(x), fast(x))
    assert fast(x).shape == x.shape  # "same"
    assert knn.MedianPool1d(4, stride=2)(x).shape[-1] == 9
    xg = torch.randn(2, 3, 11, dtype=torch.float64, generator=gen, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: KF.median_pool1d(t, 3), (xg,))  # no ties
    opcheck(K.median_pool1d.default, (x, 5, 1, [2, 2], "reflect"),
            test_utils=("test_schema", "test_autograd_registration", "test_faketensor",
                        "test_aot_dispatch_dynamic"))
    got = torch.vmap(lambda t: K.median_pool1d(t, 3, 1, [1, 1], "zeros")[0])(x.detach())
    _assert_same(K.median_pool1d(x.detach(), 3, 1, [1, 1], "zeros")[0], got)
    model = knn.MedianPool1d(3, use_fast=True)
    ep = torch.export.export(model, (x.detach(),))
    assert any("kwker.median_pool1d" in str(n.target) for n in ep.graph.nodes)
    _assert_same(model(x.detach()), ep.module()(x.detach()))
    # decomposed (as AOTInductor lowers it): the median_pool2d it is made of
    ep = ep.run_decompositions()
    assert any("kwker.median_pool2d" in str(n.target) for n in ep.graph.nodes)
    _assert_same(model(x.detach()), ep.module()(x.detach()))
    with pytest.raises(ValueError):
        K.median_pool1d(x, 3, 1, [1, 1, 1, 1], "zeros")


# ---------------------------------------------------------------- errors

def test_bad_arguments_raise_torchs_errors():
    x = torch.randn(1, 3, 4, 4)
    with pytest.raises(ValueError):
        K.median_pool2d(x, [3, 3], [1, 1], [1, 1, 1, 1], "mirror")
    with pytest.raises(RuntimeError):
        K.median_pool2d(x, [3, 3], [1, 1], [4, 4, 1, 1], "reflect")  # F.pad's own error
    with pytest.raises(RuntimeError):
        K.median_pool2d(x, [7, 7], [1, 1], [1, 1, 1, 1], "zeros")
    with pytest.raises(RuntimeError):
        K.median_pool2d(torch.randn(5), [1, 1], [1, 1], [0, 0, 0, 0], "zeros")
    with pytest.raises(ValueError):
        K.median_pool2d(x, [0, 3], [1, 1], [1, 1, 1, 1], "zeros")


def test_native_status_codes_for_bad_geometry():
    """The C entry point validates on its own (a status, never a bad read)."""
    lib = native.lib
    x = torch.randn(1, 4, 4)
    out = torch.empty(1, 4, 4)
    index = torch.empty(1, 4, 4, dtype=torch.int64)
    good = native.geometry(4, 4, (3, 3), (1, 1), (1, 1, 1, 1))
    assert lib.kwk_median_pool2d_addr(native.CODES[x.dtype], x.data_ptr(), 1, 4, 4,
                                      good.data_ptr(), 1, out.data_ptr(), index.data_ptr()) == 0
    for position, value in ((10, 5), (4, 4), (0, 0), (9, 7)):
        bad = good.clone()
        bad[position] = value
        assert lib.kwk_median_pool2d_addr(native.CODES[x.dtype], x.data_ptr(), 1, 4, 4,
                                          bad.data_ptr(), 1, out.data_ptr(),
                                          index.data_ptr()) == lib.KWK_E_ARG
    assert lib.kwk_median_pool2d_addr(native.CODES[torch.int32], x.data_ptr(), 1, 4, 4,
                                      good.data_ptr(), 1, out.data_ptr(),
                                      index.data_ptr()) == lib.KWK_E_DTYPE


# ---------------------------------------------------------------- kornia

@pytest.mark.parametrize("border", ["reflect", "constant", "replicate"])
@pytest.mark.parametrize("size", [3, 5, 7])
def test_matches_kornia_median_blur(border, size, gen):
    """kornia.filters.median_blur (0.9: lower median, odd windows, the
    output as large as the input) on finite inputs; kornia makes a window
    holding inf or NaN NaN, so those are left out."""
    kornia = pytest.importorskip("kornia")
    x = make_values("ties", (2, 3, 12, 11), torch.float32, gen) + \
        torch.randn(2, 3, 12, 11, generator=gen) * 0.01
    mode = "zeros" if border == "constant" else border
    ref = kornia.filters.median_blur(x, size, border_type=border)
    got = KF.median_pool2d(x, size, padding_mode=mode)
    assert torch.equal(ref, got)
