"""The out= operators (kwker::sort_out, ...): the functional kernel's result
written into the caller's tensors as aten's out= functions do.

An output of the wrong shape is resized (with torch's deprecation warning
when it held elements); a wrong dtype or device is torch's RuntimeError; a
non-contiguous output of the right shape keeps its strides and is filled in
place.
"""
import warnings

import torch

from kwker.torch_ops import eager, fake
from kwker.torch_ops.schemas import OUT

# functional op -> names of its outputs in the out= schema
_OUT_NAMES = {1: ("out",), 2: ("values", "indices")}

_DTYPE_NAMES = {
    torch.float32: "float", torch.float64: "double", torch.float16: "c10::Half",
    torch.bfloat16: "c10::BFloat16", torch.int64: "long int", torch.int32: "int",
    torch.int16: "short int", torch.int8: "signed char", torch.uint8: "unsigned char",
    torch.bool: "bool",
}


def _dtype_name(dtype):
    return _DTYPE_NAMES.get(dtype, str(dtype))


def resize_output(out, shape) -> None:
    """aten's resize_output: warn when a non-empty output changes shape."""
    shape = torch.Size(shape)
    if out.shape == shape:
        return
    if out.numel() != 0:
        warnings.warn(
            f"An output with one or more elements was resized since it had shape "
            f"{list(out.shape)}, which does not match the required output shape "
            f"{list(shape)}. This behavior is deprecated, and in a future PyTorch release "
            "outputs will not be resized unless they have zero elements. You can explicitly "
            "reuse an out tensor t by resizing it, inplace, to zero elements with "
            "t.resize_(0).", UserWarning, stacklevel=3)
    out.resize_(shape)


def _check(out, result, x) -> None:
    if out.dtype != result.dtype:
        raise RuntimeError(f"Expected out tensor to have dtype {_dtype_name(result.dtype)}, "
                           f"but got {_dtype_name(out.dtype)} instead")
    if out.device != x.device:
        raise RuntimeError(f"Expected out tensor to be on device {x.device}, "
                           f"but got {out.device} instead")


def _writer(functional, names):
    """Out kernel: functional(x, *args) written into outs[names]."""
    def kernel(x, *args, **outs):
        results = functional(x, *args)
        if len(names) == 1:
            results = (results,)
        for name, result in zip(names, results):
            out = outs[name]
            _check(out, result, x)
            resize_output(out, result.shape)
            out.copy_(result)
        targets = tuple(outs[name] for name in names)
        return targets if len(targets) > 1 else targets[0]
    return kernel


def _fake_writer(functional, names):
    def kernel(x, *args, **outs):
        results = functional(x, *args)
        if len(names) == 1:
            results = (results,)
        for name, result in zip(names, results):
            _check(outs[name], result, x)
            resize_output(outs[name], result.shape)
        targets = tuple(outs[name] for name in names)
        return targets if len(targets) > 1 else targets[0]
    return kernel


def _names(functional_name):
    return _OUT_NAMES[2 if functional_name in eager.PAIRS else 1]


CPU = {name: _writer(eager.KERNELS[f][0], _names(f)) for name, (f, _) in OUT.items()}
ANY = {name: _writer(eager.KERNELS[f][1], _names(f)) for name, (f, _) in OUT.items()}
FAKE = {name: _fake_writer(fake.FAKES[f], _names(f)) for name, (f, _) in OUT.items()}
