"""nn.Modules with a fast path: each subclasses its plain-torch reference
(same constructor, parameters, buffers and state_dict) and adds use_fast:
False = the reference's forward, True = Kwker's operator, "auto" = the
operator where its native kernel takes the input (it is faster than the
reference there at every size measured; elsewhere the operator would only
run the reference)."""
import torch

from kwker.nn import functional, reference
from kwker.ops import median_pool as _native_median_pool

USE_FAST_VALUES = (False, True, "auto")


class FastModule:
    """Mixin: the use_fast switch (a plain attribute, not state)."""

    def _init_fast(self, use_fast):
        if use_fast not in USE_FAST_VALUES:
            raise ValueError(f"use_fast must be one of {USE_FAST_VALUES}, got {use_fast!r}")
        self.use_fast = use_fast

    def _fast_for(self, x) -> bool:
        if self.use_fast == "auto":
            return self._native_takes(x)
        return bool(self.use_fast)


class MedianPool2d(FastModule, reference.MedianPool2d):
    __doc__ = reference.MedianPool2d.__doc__ + """

    Kwker's torch.ops.kwker.median_pool2d when use_fast says so: the same
    values and gradients bit for bit, in one native pass (float32/float64 on
    the CPU with zeros, reflect or replicate padding)."""

    def __init__(self, kernel_size=3, stride=1, padding=None, padding_mode="reflect",
                 use_fast="auto"):
        super().__init__(kernel_size, stride, padding, padding_mode)
        self._init_fast(use_fast)

    def _native_takes(self, x):
        return (x.device.type == "cpu" and x.dtype in _native_median_pool.DTYPES
                and self.padding_mode in _native_median_pool.MODES
                and _native_median_pool.lib is not None)

    def forward(self, x):
        if self._fast_for(x):
            kernel_size, stride, padding, mode = self.resolved(x)
            return torch.ops.kwker.median_pool2d.default(x, list(kernel_size), list(stride),
                                                         list(padding), mode)[0]
        return super().forward(x)

    def extra_repr(self):
        return super().extra_repr() + f", use_fast={self.use_fast!r}"


class MedianPool1d(FastModule, reference.MedianPool1d):
    __doc__ = reference.MedianPool1d.__doc__ + """

    Kwker's torch.ops.kwker.median_pool1d (median_pool2d's kernel on the
    one-row image) when use_fast says so: the reference's values and
    gradients bit for bit."""

    def __init__(self, kernel_size=3, stride=1, padding=None, padding_mode="reflect",
                 use_fast="auto"):
        super().__init__(kernel_size, stride, padding, padding_mode)
        self._init_fast(use_fast)

    _native_takes = MedianPool2d._native_takes

    def forward(self, x):
        if self._fast_for(x):
            kernel_size, stride, padding, mode = self.resolved(x)
            return torch.ops.kwker.median_pool1d.default(x, kernel_size, stride, list(padding),
                                                         mode)[0]
        return super().forward(x)

    def extra_repr(self):
        return super().extra_repr() + f", use_fast={self.use_fast!r}"


def fast_modules(model):
    """(name, module) of every Kwker fast module in model (model included)."""
    return [(name, m) for name, m in model.named_modules() if isinstance(m, FastModule)]


def set_use_fast(model, use_fast=True):
    """Set use_fast on every Kwker fast module in model; returns model."""
    if use_fast not in USE_FAST_VALUES:
        raise ValueError(f"use_fast must be one of {USE_FAST_VALUES}, got {use_fast!r}")
    for _, m in fast_modules(model):
        m.use_fast = use_fast
    return model


def deactivate(model):
    """Every fast path off (each module runs its reference), e.g. before
    TorchScript export; returns model."""
    return set_use_fast(model, False)
