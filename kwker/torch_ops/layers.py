"""torch.ops.kwker layers built on sorting: median_pool2d (and median_pool1d,
its one-row case).

    values, positions = torch.ops.kwker.median_pool2d(x, [3, 3], [1, 1], [1, 1, 1, 1], "reflect")
    values, positions = torch.ops.kwker.median_pool1d(x, 5, 1, [2, 2], "reflect")

Arguments are resolved (kwker.nn.functional.median_pool2d does that from
the usual int / pair / "same" forms): kernel_size and stride as pairs,
padding as F.pad's (left, right, top, bottom), padding_mode one of "zeros",
"reflect", "replicate", "circular".  The semantics and the gradient are
those of kwker.nn.reference.median_pool2d_windows (pad, unfold, median),
bit for bit; the CPU kernel reads float32/float64 in one native pass, every
other case (dtype, device) runs the reference itself.

Autograd: when a gradient may be needed, an autograd.Function whose backward
is the registered median_pool2d_backward op (native on the CPU), which sums
the gradient in the reference's order and so gives its bits exactly.  It is
once differentiable (double backward raises).  Where that op cannot promise
the reference's bits (circular padding, dtypes other than float32/float64)
the autograd kernel differentiates the reference itself, as it does under
forward-mode AD and torch.func transforms (grad, jacrev, vmap of grad).
"""
import torch
import torch.autograd.forward_ad as _forward_ad

from kwker._native import denormals_flushed
from kwker.nn import reference
from kwker.ops import median_pool as native
from kwker.torch_ops.autograd import (_below_autograd, _direct, function_kernel, _functorch_active,
                                      _may_need_grad, kernel_entry)
from kwker.torch_ops.checks import check, check_value
from kwker.torch_ops.schemas import LIB

_ARGS = "int[2] kernel_size, int[2] stride, int[4] padding, str padding_mode"
LIB.define(f"median_pool2d(Tensor self, {_ARGS}) -> (Tensor values, Tensor indices)")
LIB.define(f"median_pool2d_backward(Tensor grad_output, Tensor self, Tensor indices, {_ARGS}) "
           "-> Tensor")
LIB.define("median_pool1d(Tensor self, int kernel_size, int stride, int[2] padding, "
           "str padding_mode) -> (Tensor values, Tensor indices)")

PADDING_MODES = ("zeros", "reflect", "replicate", "circular")
_LOADED = native.lib is not None


def _native_takes(x, padding_mode):
    # (not while subnormals are flushed: the reference's torch.median then
    # reads them as zeros, the kernel's keys by their bits)
    return (_LOADED and x.dtype in native.DTYPES and padding_mode in native.MODES
            and not denormals_flushed()
            and x.layout is torch.strided and not x.is_neg() and x.dim() >= 2
            and x.numel() > 0 and x.shape[-2] > 0 and x.shape[-1] > 0)


def _check(x, kernel_size, stride, padding, padding_mode):
    """The errors the native path would otherwise meet as status codes;
    torch's own (from F.pad / F.unfold) come from the reference path."""
    check_value(padding_mode in PADDING_MODES, lambda: (
        f"padding_mode must be one of {PADDING_MODES}, got {padding_mode!r}"))
    check_value(len(kernel_size) == 2 and len(stride) == 2 and len(padding) == 4,
                       lambda: "kernel_size and stride need 2 values, padding 4")
    check_value(all(k > 0 for k in kernel_size) and all(s > 0 for s in stride),
                       lambda: "kernel_size and stride must be positive")
    check_value(all(p >= 0 for p in padding), lambda: "padding must be non-negative")
    check(x.dim() >= 2, lambda: "median_pool2d expects an input of at least 2 dims")
    h, w = x.shape[-2:]
    left, right, top, bottom = padding
    check(h + top + bottom >= kernel_size[0] and w + left + right >= kernel_size[1],
                 lambda: "kernel size can't be greater than the padded input size")


def _fits_padding(x, padding, padding_mode):
    """F.pad's limits, which the kernel shares (beyond them the reference
    path raises F.pad's error): reflect pads below the size, circular up
    to it."""
    h, w = x.shape[-2:]
    left, right, top, bottom = padding
    if padding_mode == "reflect":
        return max(top, bottom) < h and max(left, right) < w
    if padding_mode == "circular":
        return max(top, bottom) <= h and max(left, right) <= w
    return True


def median_pool2d_cpu(x, kernel_size, stride, padding, padding_mode):
    _check(x, kernel_size, stride, padding, padding_mode)
    if _native_takes(x, padding_mode) and _fits_padding(x, padding, padding_mode):
        return native.forward(x, kernel_size, stride, padding, padding_mode)
    return median_pool2d_any(x, kernel_size, stride, padding, padding_mode)


def median_pool2d_any(x, kernel_size, stride, padding, padding_mode):
    _check(x, kernel_size, stride, padding, padding_mode)
    values, indices = reference.median_pool2d_windows(x, kernel_size, stride, padding,
                                                      padding_mode)
    return values.contiguous(), indices.contiguous()


def median_pool2d_backward_cpu(grad, x, indices, kernel_size, stride, padding, padding_mode):
    if _native_takes(x, padding_mode) and padding_mode in native.BACKWARD_MODES \
            and grad.dtype == x.dtype and _fits_padding(x, padding, padding_mode):
        return native.backward(grad, indices, x.shape, kernel_size, stride, padding,
                               padding_mode)
    return median_pool2d_backward_any(grad, x, indices, kernel_size, stride, padding,
                                      padding_mode)


_PAD_BACKWARD = {"reflect": torch.ops.aten.reflection_pad2d_backward.default,
                 "replicate": torch.ops.aten.replication_pad2d_backward.default}


def median_pool2d_backward_any(grad, x, indices, kernel_size, stride, padding, padding_mode):
    """The reference's backward spelled out with the same aten kernels (it
    runs below autograd): the windows' gradient zero but at the given
    positions (median's backward), F.fold (col2im, unfold's backward), then
    the pad's backward.  Circular padding's backward is torch's composite of
    slices; summed here in another order, it can differ in rounding, so the
    autograd kernel never comes here for it (it differentiates the
    reference itself)."""
    import torch.nn.functional as F
    h, w = x.shape[-2:]
    left, right, top, bottom = padding
    planes = x.reshape(-1, 1, h, w)
    count = planes.shape[0]
    windows = grad.new_zeros((count, kernel_size[0] * kernel_size[1], grad.shape[-2] * grad.shape[-1]))
    windows.scatter_(1, indices.reshape(count, 1, -1), grad.reshape(count, 1, -1))
    padded = F.fold(windows, (h + top + bottom, w + left + right), tuple(kernel_size),
                    stride=tuple(stride))
    if padding_mode in _PAD_BACKWARD:
        grad_planes = _PAD_BACKWARD[padding_mode](padded, planes, list(padding))
    elif padding_mode == "zeros":
        grad_planes = padded[..., top:top + h, left:left + w]
    else:  # circular: the central copy plus the wrapped borders
        grad_planes = padded.new_zeros(planes.shape)
        rows = (torch.arange(h + top + bottom, device=x.device) - top) % h
        cols = (torch.arange(w + left + right, device=x.device) - left) % w
        flat = (rows[:, None] * w + cols[None, :]).reshape(-1)
        grad_planes.view(count, -1).index_add_(1, flat, padded.reshape(count, -1))
    return grad_planes.reshape(x.shape).contiguous()


# ---------------------------------------------------------------- fake

def median_pool2d_fake(x, kernel_size, stride, padding, padding_mode):
    _check(x, kernel_size, stride, padding, padding_mode)
    h, w = x.shape[-2:]
    left, right, top, bottom = padding
    oh = (h + top + bottom - kernel_size[0]) // stride[0] + 1
    ow = (w + left + right - kernel_size[1]) // stride[1] + 1
    shape = tuple(x.shape[:-2]) + (oh, ow)
    return x.new_empty(shape), x.new_empty(shape, dtype=torch.int64)


def median_pool2d_backward_fake(grad, x, indices, kernel_size, stride, padding, padding_mode):
    return x.new_empty(x.shape, dtype=grad.dtype)


# ------------------------------------------------------------ autograd

class _MedianPool2d(torch.autograd.Function):
    # forward(ctx, ...) without setup_context: see layers_sparse.py
    @staticmethod
    def forward(ctx, x, kernel_size, stride, padding, padding_mode):
        output = function_kernel(torch.ops.kwker.median_pool2d.default, median_pool2d_cpu, x,
                                 kernel_size, stride, padding, padding_mode)
        ctx.arguments = [kernel_size, stride, padding, padding_mode]
        ctx.mark_non_differentiable(output[1])
        ctx.save_for_backward(x, output[1])
        # no zeros for the positions' (int64, output-sized) missing gradient:
        # filling them cost as much as the backward kernel
        ctx.set_materialize_grads(False)
        return output

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_values, grad_indices):
        if grad_values is None:
            return None, None, None, None, None
        x, indices = ctx.saved_tensors
        grad = function_kernel(torch.ops.kwker.median_pool2d_backward.default,
                               median_pool2d_backward_cpu, grad_values, x, indices,
                               *ctx.arguments, below_autograd=False)
        return grad, None, None, None, None


def median_pool2d_autograd(x, kernel_size, stride, padding, padding_mode):
    if _direct(x):
        return median_pool2d_cpu(x, kernel_size, stride, padding, padding_mode)
    if (x.is_floating_point() or x.is_complex()) and _may_need_grad(x):
        if x.dtype in native.DTYPES and padding_mode in native.BACKWARD_MODES \
                and _forward_ad._current_level < 0 and not _functorch_active():
            return _MedianPool2d.apply(x, kernel_size, stride, padding, padding_mode)
        # the reference under torch's autograd: its gradient by definition.
        # Also for forward-mode AD and torch.func transforms, which the
        # autograd.Function (no jvp; custom_function_call has no kernel at
        # this key) does not serve
        _check(x, kernel_size, stride, padding, padding_mode)
        values, indices = reference.median_pool2d_windows(x, kernel_size, stride, padding,
                                                          padding_mode)
        return values.contiguous(), indices.contiguous()
    with _below_autograd():
        return torch.ops.kwker.median_pool2d.default(x, kernel_size, stride, padding,
                                                     padding_mode)


def median_pool2d_backward_autograd(grad, x, indices, *args):
    with _below_autograd():
        return torch.ops.kwker.median_pool2d_backward.default(grad, x, indices, *args)


# ---------------------------------------------------------------- vmap

def median_pool2d_vmap(info, in_dims, x, *args):
    """Every dim before the last two is a batch of planes: the vmapped dim
    joins them."""
    if in_dims[0] is None:
        return torch.ops.kwker.median_pool2d.default(x, *args), (None, None)
    check(x.dim() >= 3, lambda: "median_pool2d expects an input of at least 2 dims")
    return torch.ops.kwker.median_pool2d.default(x.movedim(in_dims[0], 0), *args), (0, 0)


# ------------------------------------------------------------ median_pool1d

def median_pool1d(x, kernel_size, stride, padding, padding_mode):
    """The 1-d median filter of x (*, L): the 2-d one of the one-row image
    (*, 1, L) with 1 x kernel_size windows and padding (left, right, 0, 0),
    so the same kernel, values, positions (0..kernel_size-1) and gradient
    (summed as F.unfold's backward, col2im, sums).  Registered as a
    composite of median_pool2d: autograd, vmap and compile see
    median_pool2d; torch.export keeps median_pool1d until its
    decompositions run."""
    check(x.dim() >= 1, lambda: "median_pool1d expects an input of at least 1 dim")
    check_value(len(padding) == 2, lambda: "median_pool1d's padding needs 2 values")
    values, indices = torch.ops.kwker.median_pool2d.default(
        x.unsqueeze(-2), [1, kernel_size], [1, stride], [padding[0], padding[1], 0, 0],
        padding_mode)
    return values.squeeze(-2), indices.squeeze(-2)


def _register():
    for name, cpu, other, fake, autograd in (
            ("median_pool2d", median_pool2d_cpu, median_pool2d_any, median_pool2d_fake,
             median_pool2d_autograd),
            ("median_pool2d_backward", median_pool2d_backward_cpu,
             median_pool2d_backward_any, median_pool2d_backward_fake,
             median_pool2d_backward_autograd)):
        LIB.impl(name, kernel_entry(other), "CompositeExplicitAutograd")
        LIB.impl(name, kernel_entry(cpu), "CPU")
        LIB.impl(name, kernel_entry(autograd), "Autograd")
        torch.library.register_fake("kwker::" + name, fake, lib=LIB)
    torch.library.register_vmap("kwker::median_pool2d", median_pool2d_vmap, lib=LIB)
    LIB.impl("median_pool1d", median_pool1d, "CompositeImplicitAutograd")


_register()
