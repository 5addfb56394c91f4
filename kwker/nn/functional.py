"""Kwker's layers as functions on tensors (the fast operators)."""
import torch

import kwker.torch_ops  # noqa: F401  (registers torch.ops.kwker)
from kwker.nn.reference import _pair, resolve_padding, resolve_padding1d


def median_pool2d(x, kernel_size=3, stride=1, padding=None, padding_mode="reflect"):
    """The median filter of x (*, H, W): each output the lower median of its
    kernel_size window (torch.median's: the element at stable rank (n-1)//2
    in row-major window order, or the window's first NaN).  Padding as
    kwker.nn.reference.resolve_padding (default "same", the output as large
    as the input at stride 1), padding_mode "reflect" (default), "zeros",
    "replicate" or "circular".  Equals kwker.nn.reference.median_pool2d bit
    for bit, gradient included (it goes to each window's median element).
    kornia.filters.median_blur(x, k, border_type) equals
    median_pool2d(x, k, padding_mode=border_type) on finite inputs (kornia
    0.9 makes a window holding inf or NaN NaN)."""
    kernel_size, stride = _pair(kernel_size), _pair(stride)
    h, w = x.shape[-2:]
    padding = resolve_padding(h, w, kernel_size, stride, padding)
    return torch.ops.kwker.median_pool2d.default(x, list(kernel_size), list(stride),
                                                 list(padding), padding_mode)[0]


def median_pool1d(x, kernel_size=3, stride=1, padding=None, padding_mode="reflect"):
    """The 1-d median filter of x (*, L), as median_pool2d of the one-row
    image (same kernel, same rules); padding None/"same" (default), an int
    or (left, right).  Equals kwker.nn.reference.median_pool1d bit for bit,
    gradient included (see its note on Tensor.unfold recipes)."""
    padding = resolve_padding1d(x.shape[-1], kernel_size, stride, padding)
    return torch.ops.kwker.median_pool1d.default(x, kernel_size, stride, list(padding),
                                                 padding_mode)[0]
