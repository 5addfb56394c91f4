"""Autograd kernels, registered at the Autograd dispatch key.

Why by hand: torch.library.register_autograd (and custom_op) cost about twice
as much per call and fail under torch.func.grad in torch 2.13
(TORCH-NOTES.md).  Instead, when a gradient may be needed, the kernel takes
the indices from the operator (run below autograd) and recomputes the values
as `torch.gather(self, dim, indices)`: gather copies bits, so the values are
unchanged, and aten's gather supplies the backward (the gradient scattered
to the selected indices, as torch's own formulas for sort/topk/kthvalue/
median do), double backward, forward-mode AD and functorch support.

When no gradient can be needed (a plain CPU tensor, no grad required, no
trace, transform or mode active), the kernel calls the CPU kernel directly,
which skips a second trip through the dispatcher: most of what an eager call
costs on a small input.
"""
import torch
import torch.autograd.forward_ad as _forward_ad

from kwker.torch_ops import eager
from kwker.torch_ops.schemas import LIB, OUT, overload

_C = torch._C
_Tensor = torch.Tensor
_grad_enabled = torch.is_grad_enabled
_torch_function_mode = _C._is_torch_function_mode_enabled
_dispatch_modes = _C._len_torch_dispatch_stack
_functorch_active = _C._are_functorch_transforms_active
_tracing_state = _C._get_tracing_state
_below_autograd = _C._AutoDispatchBelowAutograd


try:  # Dynamo's per-code-object switch, in torch's C module
    from torch._C._dynamo.eval_frame import (_FrameAction, _FrameExecStrategy,
                                             set_code_exec_strategy as _set_strategy)
    _SKIP_FRAME_AND_CALLEES = _FrameExecStrategy(_FrameAction.SKIP, _FrameAction.SKIP)
except (ImportError, AttributeError):  # another torch: the public wrapper below
    _SKIP_FRAME_AND_CALLEES = None


def kernel_entry(fn):
    """fn as registered with the dispatcher, hidden from Dynamo.  Kernels
    run as fresh Python frames; when one runs eagerly inside a
    torch.compile'd function (an op Dynamo leaves out of the graph, such as
    unique without capture_dynamic_output_shape_ops) Dynamo would otherwise
    try to trace it and break on the native call.  Marking the code object
    "skip, callees too" costs nothing per call and does not import
    torch._dynamo (about 3 s); torch.compiler.disable would do both (0.5 µs
    a call)."""
    code = getattr(fn, "__code__", None)
    if code is None:  # a builtin: never traced
        return fn
    if _SKIP_FRAME_AND_CALLEES is not None:
        _set_strategy(code, _SKIP_FRAME_AND_CALLEES)
        return fn
    return torch.compiler.disable(fn)


def _nothing_watching() -> bool:
    """No mode, functorch transform, forward AD or TorchScript trace that
    must see a call."""
    return (_forward_ad._current_level < 0 and not _dispatch_modes()
            and not _functorch_active() and not _torch_function_mode()
            and _tracing_state() is None)


def _direct(x) -> bool:
    """True when the CPU kernel can run straight away: a plain CPU tensor
    that needs no gradient, and nothing watching."""
    return (type(x) is _Tensor and x.is_cpu
            and not (x.requires_grad and _grad_enabled()) and _nothing_watching())


def _plain_cpu_tensors(*args) -> bool:
    """Every tensor among args a plain CPU one, and nothing watching: a
    native kernel may read them directly."""
    if not _nothing_watching():
        return False
    for a in args:
        if isinstance(a, torch.Tensor) and (type(a) is not _Tensor or not a.is_cpu):
            return False
    return True


def _plain_cpu_call(args) -> bool:
    """Whether a call with these arguments may run its CPU kernel directly:
    grad mode off (inside autograd.Function.forward, and in a backward
    without create_graph) and _plain_cpu_tensors."""
    return not _grad_enabled() and _plain_cpu_tensors(*args)


def function_kernel(op, cpu, *args, below_autograd=True):
    """op(*args) as an autograd.Function's forward (below autograd) or
    backward (through autograd, for double backward) calls it: in plain
    eager use the CPU kernel itself, which skips the dispatcher's round trip
    (a layer's forward and backward each make one; ~10 us of a small
    layer's forward + backward), else the dispatcher."""
    if _plain_cpu_call(args):
        return cpu(*args)
    if below_autograd:
        with _below_autograd():
            return op(*args)
    return op(*args)


def _may_need_grad(x) -> bool:
    # dual tensors report requires_grad False: forward AD is checked apart
    return ((x.requires_grad and _grad_enabled()) or _forward_ad._current_level >= 0
            or _functorch_active())


def _differentiable(x) -> bool:
    return x.is_floating_point() or x.is_complex()


_HALF = (torch.float16, torch.bfloat16)


def _take_along(x, d, indices):
    """x.gather(d, indices) through torch.take on flat offsets: torch 2.13's
    CPU gather converts float16/bfloat16 through float32 and so changes NaN
    payloads; take copies the bits (and its backward puts the gradient at
    the same positions)."""
    x = x.contiguous()
    offsets = indices * x.stride(d)
    for j in range(x.dim()):
        if j != d:
            shape = [1] * x.dim()
            shape[j] = indices.shape[j]
            offsets = offsets + torch.arange(indices.shape[j], device=x.device).view(shape) \
                * x.stride(j)
    return torch.take(x, offsets)


def _gathered(x, dim, indices, reduced):
    """x's values at indices along dim: differentiable, bit-identical."""
    if x.dim() == 0:
        return x.gather(0, indices)
    d = dim % x.dim()
    gather = _take_along if x.dtype in _HALF else torch.gather
    if reduced:  # keepdim=False: the reduced dim is gone from indices
        return gather(x, d, indices.unsqueeze(d)).squeeze(d)
    return gather(x, d, indices)


def _selecting(name, cpu, dim_at, reduced_when):
    """Kernel for an op returning (values, indices) along a dim."""
    op = overload(name)

    def kernel(x, *args):
        if _direct(x):
            return cpu(x, *args)
        with _below_autograd():
            values, indices = op(x, *args)
        if _differentiable(x) and _may_need_grad(x):
            values = _gathered(x, _arg(args, dim_at, -1), indices, reduced_when(args))
        return values, indices
    return kernel


def _arg(args, pos, default):
    return args[pos] if len(args) > pos else default


def _sort_values_kernel(x, dim=-1, descending=False):
    if _direct(x):
        return eager.sort_values_cpu(x, dim, descending)
    if _differentiable(x) and _may_need_grad(x):
        with _below_autograd():
            _, indices = torch.ops.kwker.sort.default(x, dim, descending)
        return _gathered(x, dim, indices, False)
    with _below_autograd():
        return torch.ops.kwker.sort_values.default(x, dim, descending)


def _median_all(name, cpu, torch_op):
    op = overload(name)

    def kernel(x):
        if _direct(x):
            return cpu(x)
        if _differentiable(x) and _may_need_grad(x):
            # the value has no tie order, so torch's op gives the same bits,
            # and its gradient (spread evenly over the elements equal to the
            # median)
            return torch_op(x)
        with _below_autograd():
            return op(x)
    return kernel


def _not_differentiable(name, cpu):
    op = overload(name)

    def kernel(x, *args):
        if _direct(x):
            return cpu(x, *args)
        with _below_autograd():
            return op(x, *args)
    return kernel


def _out_kernel(name, cpu):
    """Like aten's out= functions: no autograd; an error when a grad is
    wanted."""
    op = overload(name)
    base = name[:-len("_out")]

    def kernel(x, *args, **outs):
        if _direct(x) and not any(o.requires_grad for o in outs.values()):
            return cpu(x, *args, **outs)
        if _grad_enabled() and (x.requires_grad or any(o.requires_grad for o in outs.values())):
            raise RuntimeError(
                f"{base}(): functions with out=... arguments don't support automatic "
                "differentiation, but one of the arguments requires grad.")
        with _below_autograd():
            return op(x, *args, **outs)
    return kernel


def _keepdim_false(pos):
    return lambda args: not _arg(args, pos, False)


def register(out_cpu_kernels):
    """Autograd kernels for every op; out_cpu_kernels: out op name -> CPU
    kernel."""
    never = lambda args: False  # noqa: E731
    kernels = {
        "sort": _selecting("sort", eager.sort_cpu, 0, never),
        "topk": _selecting("topk", eager.topk_cpu, 1, never),
        "kthvalue": _selecting("kthvalue", eager.kthvalue_cpu, 1, _keepdim_false(2)),
        "median.dim": _selecting("median.dim", eager.median_dim_cpu, 0, _keepdim_false(1)),
        "nanmedian.dim": _selecting("nanmedian.dim", eager.nanmedian_dim_cpu, 0,
                                    _keepdim_false(1)),
        "sort_values": _sort_values_kernel,
        "argsort": _not_differentiable("argsort", eager.argsort_cpu),
        "median": _median_all("median", eager.median_all_cpu, eager._VF.median),
        "nanmedian": _median_all("nanmedian", eager.nanmedian_all_cpu, eager._VF.nanmedian),
        # like torch's unique: no derivative (the outputs do not require grad)
        "unique": _not_differentiable("unique", eager.unique_cpu),
        "unique_dim": _not_differentiable("unique_dim", eager.unique_dim_cpu),
    }
    for name in OUT:
        kernels[name] = _out_kernel(name, out_cpu_kernels[name])
    for name, kernel in kernels.items():
        LIB.impl(name, kernel_entry(kernel), "Autograd")
