"""median_pool2d on the native kernel: contiguous planes in, contiguous
planes out, one call for all planes."""
import torch

from kwker import _native
from kwker.ops._call import CODES, advise_fresh, lib

_INT64 = torch.int64
_forward = lib.kwk_median_pool2d_addr if lib is not None else None
_backward = lib.kwk_median_pool2d_backward_addr if lib is not None else None

# padding_mode -> the kernel's code; the modes the kernel reads itself
MODES = {"zeros": 0, "reflect": 1, "replicate": 2, "circular": 3}
# the modes whose backward the kernel sums in torch's order: circular
# padding's backward (slices of slices in torch) adds in another order
BACKWARD_MODES = frozenset({"zeros", "reflect", "replicate"})
DTYPES = frozenset({torch.float32, torch.float64})


def geometry(h, w, kernel_size, stride, padding):
    """The kernel's geometry array: kernel, stride, padding (top, bottom,
    left, right), padded size and output size; padding comes as F.pad's
    (left, right, top, bottom)."""
    kh, kw = kernel_size
    sh, sw = stride
    left, right, top, bottom = padding
    hp, wp = h + top + bottom, w + left + right
    oh, ow = (hp - kh) // sh + 1, (wp - kw) // sw + 1
    return torch.tensor([kh, kw, sh, sw, top, bottom, left, right, hp, wp, oh, ow],
                        dtype=_INT64)


def forward(x, kernel_size, stride, padding, mode):
    """(values, window positions) for x of shape (*, H, W)."""
    x = x.contiguous()
    h, w = x.shape[-2:]
    g = geometry(h, w, kernel_size, stride, padding)
    oh, ow = int(g[10]), int(g[11])
    shape = x.shape[:-2] + (oh, ow)
    values = x.new_empty(shape)
    index = x.new_empty(shape, dtype=_INT64)
    advise_fresh(values, index)
    planes = x.numel() // (h * w)
    status = _forward(CODES[x.dtype], x.data_ptr(), planes, h, w, g.data_ptr(), MODES[mode],
                      values.data_ptr(), index.data_ptr())
    if status:
        _native.check(status, "median_pool2d")
    return values, index


def backward(grad, index, input_shape, kernel_size, stride, padding, mode):
    grad = grad.contiguous()
    index = index.contiguous()
    h, w = input_shape[-2:]
    g = geometry(h, w, kernel_size, stride, padding)
    grad_input = grad.new_empty(input_shape)
    advise_fresh(grad_input)
    planes = grad_input.numel() // (h * w)
    status = _backward(CODES[grad.dtype], grad.data_ptr(), index.data_ptr(), planes, h, w,
                       g.data_ptr(), MODES[mode], grad_input.data_ptr())
    if status:
        _native.check(status, "median_pool2d_backward")
    return grad_input
