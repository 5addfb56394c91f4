"""torch.ops.kwker sparse layers: sparsemax, entmax15, group_sort, sort_pool.

    probs, support = torch.ops.kwker.sparsemax(scores, -1)
    probs = torch.ops.kwker.entmax15(scores, -1)
    values, positions = torch.ops.kwker.group_sort(x, 2, -1, False)
    pooled, nodes = torch.ops.kwker.sort_pool(x, 30, num_nodes)

Semantics: kwker.nn.reference_sparse (the entmax package's sparsemax and
entmax15, LNets' GroupSort, PyG's SortAggregation), bit for bit, forward
and backward.  The CPU kernels (sparse_kernels.h) take float32/float64;
every other case (dtype, device, a row the kernel defers) runs the
reference itself.

Autograd: an autograd.Function whose backward is the registered
*_backward op, itself the reference's closed form in torch ops (the same
ops on the same layouts, hence the same bits); the backward ops are
differentiable, so double backward works.  Forward-mode AD and torch.func
transforms differentiate the reference instead.
"""
import torch
import torch.autograd.forward_ad as _forward_ad

from kwker._native import denormals_flushed
from kwker.nn import reference_sparse as reference
from kwker.ops import sparse as native
from kwker.torch_ops.autograd import (_below_autograd, _direct, function_kernel, _functorch_active,
                                      _may_need_grad, kernel_entry)
from kwker.torch_ops.checks import check, check_index, check_value
from kwker.torch_ops.schemas import LIB

LIB.define("sparsemax(Tensor self, int dim=-1) -> (Tensor output, Tensor support)")
LIB.define("sparsemax_backward(Tensor grad, Tensor output, Tensor support, int dim) -> Tensor")
LIB.define("entmax15(Tensor self, int dim=-1) -> Tensor")
LIB.define("entmax15_backward(Tensor grad, Tensor output, int dim) -> Tensor")
LIB.define("group_sort(Tensor self, int group_size, int dim=-1, bool descending=False) "
           "-> (Tensor values, Tensor positions)")
LIB.define("group_sort_backward(Tensor grad, Tensor positions, int group_size, int dim) "
           "-> Tensor")
LIB.define("sort_pool(Tensor self, int k, Tensor? num_nodes=None) -> (Tensor output, "
           "Tensor index)")
LIB.define("sort_pool_backward(Tensor grad, Tensor self, Tensor index, Tensor output) "
           "-> Tensor")

_LOADED = native.lib is not None


def _takes(x):
    # (not while subnormals are flushed: the reference's sort and arithmetic
    # then read them as zeros)
    return (_LOADED and x.dtype in native.DTYPES and not denormals_flushed()
            and x.layout is torch.strided
            and not x.is_neg() and x.dim() >= 1 and x.numel() > 0)


def _dim(x, dim):
    check(x.dim() >= 1, lambda: "expected a tensor of at least 1 dim")
    check_index(-x.dim() <= dim < x.dim(), lambda: f"dim {dim} out of range")
    return dim % x.dim()


def _like(x, rows, d):
    """rows (x moved so that d is last, contiguous) back in x's shape and
    in the layout the reference's elementwise ops give it (x's, for a
    dense x): the backward's sums then run in the reference's order."""
    moved = rows.movedim(-1, d)
    if d == x.dim() - 1 and x.is_contiguous():
        return moved
    return torch.empty_like(x).copy_(moved)


# ------------------------------------------------- sparsemax and entmax15

def sparsemax_cpu(x, dim=-1):
    d = _dim(x, dim)
    if _takes(x):
        got = native.simplex_rows(x.movedim(d, -1), entmax=False)
        if got is not None:
            return _like(x, got[0], d), got[1].unsqueeze(d)
    return sparsemax_any(x, dim)


def sparsemax_any(x, dim=-1):
    return reference.sparsemax_forward(x, _dim(x, dim))


def entmax15_cpu(x, dim=-1):
    d = _dim(x, dim)
    if _takes(x):
        got = native.simplex_rows(x.movedim(d, -1), entmax=True)
        if got is not None:
            return _like(x, got[0], d)
    return entmax15_any(x, dim)


def entmax15_any(x, dim=-1):
    return reference.entmax15_forward(x, _dim(x, dim))


def _native_backward_rows(grad, output, dim):
    """Whether a backward's native rows give the reference's bits: it sums
    rows of grad's layout, the same order only when grad and output are
    contiguous rows along dim."""
    return (_dim(output, dim) == output.dim() - 1 and _takes(grad)
            and grad.dtype == output.dtype and grad.shape == output.shape
            and grad.is_contiguous() and output.is_contiguous() and grad.shape[-1] > 0)


def sparsemax_backward_cpu(grad, output, support, dim):
    if _native_backward_rows(grad, output, dim):
        return native.sparsemax_backward_rows(grad, output, support)
    return sparsemax_backward_any(grad, output, support, dim)


def sparsemax_backward_any(grad, output, support, dim):
    return reference.sparsemax_backward(grad, output, support, _dim(output, dim))


def entmax15_backward_cpu(grad, output, dim):
    if _native_backward_rows(grad, output, dim):
        return native.entmax15_backward_rows(grad, output)
    return entmax15_backward_any(grad, output, dim)


def entmax15_backward_any(grad, output, dim):
    return reference.entmax15_backward(grad, output, _dim(output, dim))


def sparsemax_fake(x, dim=-1):
    d = _dim(x, dim)
    shape = list(x.shape)
    shape[d] = 1
    return torch.empty_like(x), x.new_empty(shape, dtype=torch.int64)


def entmax15_fake(x, dim=-1):
    _dim(x, dim)
    return torch.empty_like(x)


def _backward_fake(grad, output, *args):
    return torch.empty_like(output)


# The layers' autograd.Functions serve plain eager reverse mode only (forward
# AD and functorch transforms take the references: _function_path), so they
# are written in the older style, forward(ctx, ...), without setup_context:
# with setup_context, torch binds every apply's arguments by
# inspect.signature, 50 us a call (a 128x256 GroupSort's whole native
# forward and backward take 47 us).

class _Sparsemax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, dim):
        output = function_kernel(torch.ops.kwker.sparsemax.default, sparsemax_cpu, x, dim)
        ctx.dim = dim
        ctx.mark_non_differentiable(output[1])
        ctx.save_for_backward(output[0], output[1])
        ctx.set_materialize_grads(False)  # (see _MedianPool2d)
        return output

    @staticmethod
    def backward(ctx, grad, _):
        if grad is None:
            return None, None
        output, support = ctx.saved_tensors
        return function_kernel(torch.ops.kwker.sparsemax_backward.default, sparsemax_backward_cpu,
                               grad, output, support, ctx.dim, below_autograd=False), None


class _Entmax15(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, dim):
        output = function_kernel(torch.ops.kwker.entmax15.default, entmax15_cpu, x, dim)
        ctx.dim = dim
        ctx.save_for_backward(output)
        return output

    @staticmethod
    def backward(ctx, grad):
        (output,) = ctx.saved_tensors
        return function_kernel(torch.ops.kwker.entmax15_backward.default, entmax15_backward_cpu,
                               grad, output, ctx.dim, below_autograd=False), None


def _function_path(x):
    """The autograd.Function serves reverse mode; forward AD and functorch
    transforms take the reference (which they differentiate as torch ops
    where they can)."""
    return _forward_ad._current_level < 0 and not _functorch_active()


def sparsemax_autograd(x, dim=-1):
    if _direct(x):
        return sparsemax_cpu(x, dim)
    if x.is_floating_point() and _may_need_grad(x):
        if _function_path(x):
            return _Sparsemax.apply(x, dim)
        return sparsemax_any(x, dim)
    with _below_autograd():
        return torch.ops.kwker.sparsemax.default(x, dim)


def entmax15_autograd(x, dim=-1):
    if _direct(x):
        return entmax15_cpu(x, dim)
    if x.is_floating_point() and _may_need_grad(x):
        if _function_path(x):
            return _Entmax15.apply(x, dim)
        return entmax15_any(x, dim)
    with _below_autograd():
        return torch.ops.kwker.entmax15.default(x, dim)


def _backward_autograd(name, any_kernel):
    """A backward op under autograd: its torch formula when a gradient of
    it may be needed (double backward), else the op below autograd."""
    op = getattr(torch.ops.kwker, name).default

    def kernel(grad, *args):
        tensors = [grad] + [a for a in args if isinstance(a, torch.Tensor)]
        if any(_may_need_grad(t) for t in tensors if t.is_floating_point()):
            return any_kernel(grad, *args)
        with _below_autograd():
            return op(grad, *args)
    return kernel


# ------------------------------------------------------------- GroupSort

def _group_check(x, group_size, dim):
    d = _dim(x, dim)
    check_value(1 <= group_size <= native.MAX_GROUP, lambda: (
        f"group_size must be in 1..{native.MAX_GROUP}, got {group_size}"))
    check_value(x.shape[d] % group_size == 0, lambda: (
        f"the size of dim {d} ({x.shape[d]}) is not a multiple of group_size ({group_size})"))
    return d


def group_sort_cpu(x, group_size, dim=-1, descending=False):
    d = _group_check(x, group_size, dim)
    if _takes(x):
        if d == x.dim() - 1:  # no views to make and undo
            return native.group_sort_rows(x, group_size, descending)
        values, positions = native.group_sort_rows(x.movedim(d, -1), group_size, descending)
        return values.movedim(-1, d).contiguous(), positions.movedim(-1, d).contiguous()
    return group_sort_any(x, group_size, dim, descending)


def group_sort_any(x, group_size, dim=-1, descending=False):
    d = _group_check(x, group_size, dim)
    values, positions = reference.group_sort_with_positions(x, group_size, d, descending)
    return values.contiguous(), positions.to(torch.uint8).contiguous()


def group_sort_backward_cpu(grad, positions, group_size, dim):
    d = _group_check(grad, group_size, dim)
    # the kernel reads uint8 positions shaped as grad (the forward's); any
    # other positions tensor takes the reference, and its errors
    if (_takes(grad) and type(positions) is torch.Tensor and positions.dtype == torch.uint8
            and positions.shape == grad.shape and positions.layout is torch.strided):
        if d == grad.dim() - 1:
            rows = native.group_sort_backward_rows(grad, positions, group_size)
            if rows is not None:
                return rows
        else:
            rows = native.group_sort_backward_rows(grad.movedim(d, -1),
                                                   positions.movedim(d, -1), group_size)
            if rows is not None:
                return rows.movedim(-1, d).contiguous()
    return group_sort_backward_any(grad, positions, group_size, dim)


def group_sort_backward_any(grad, positions, group_size, dim):
    """sort's backward: each gradient back to the position it came from."""
    d = _group_check(grad, group_size, dim)
    groups = (grad.shape[d] // group_size, group_size)
    grouped = grad.unflatten(d, groups)
    where = positions.to(torch.int64).unflatten(d, groups)
    return torch.zeros_like(grouped).scatter(d + 1, where, grouped).flatten(d, d + 1) \
        .contiguous()


def group_sort_fake(x, group_size, dim=-1, descending=False):
    _group_check(x, group_size, dim)
    return (torch.empty_like(x, memory_format=torch.contiguous_format),
            torch.empty_like(x, dtype=torch.uint8, memory_format=torch.contiguous_format))


def group_sort_backward_fake(grad, positions, group_size, dim):
    _group_check(grad, group_size, dim)
    return torch.empty_like(grad, memory_format=torch.contiguous_format)


class _GroupSort(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group_size, dim, descending):
        output = function_kernel(torch.ops.kwker.group_sort.default, group_sort_cpu, x,
                                 group_size, dim, descending)
        ctx.group_size, ctx.dim = group_size, dim
        ctx.mark_non_differentiable(output[1])
        ctx.save_for_backward(output[1])
        ctx.set_materialize_grads(False)  # (see _MedianPool2d)
        return output

    @staticmethod
    def backward(ctx, grad, _):
        if grad is None:
            return None, None, None, None
        (positions,) = ctx.saved_tensors
        grad_input = function_kernel(torch.ops.kwker.group_sort_backward.default,
                                     group_sort_backward_cpu, grad, positions, ctx.group_size,
                                     ctx.dim, below_autograd=False)
        return grad_input, None, None, None


def group_sort_autograd(x, group_size, dim=-1, descending=False):
    if _direct(x):
        return group_sort_cpu(x, group_size, dim, descending)
    if x.is_floating_point() and _may_need_grad(x):
        if _function_path(x):
            return _GroupSort.apply(x, group_size, dim, descending)
        d = _group_check(x, group_size, dim)
        values, positions = reference.group_sort_with_positions(x, group_size, d, descending)
        return values.contiguous(), positions.to(torch.uint8).contiguous()
    with _below_autograd():
        return torch.ops.kwker.group_sort.default(x, group_size, dim, descending)


# ----------------------------------------------------------- SortPooling

def _pool_check(x, k, num_nodes):
    check(x.dim() == 3, lambda: "sort_pool expects (batch, nodes, channels)")
    check_value(k >= 0, lambda: f"k must be non-negative, got {k}")
    if num_nodes is not None:
        check(num_nodes.shape == (x.shape[0],),
                     lambda: "num_nodes must hold one count per graph")


def sort_pool_cpu(x, k, num_nodes=None):
    _pool_check(x, k, num_nodes)
    batch, nodes, channels = x.shape
    if _takes(x) and batch > 0 and channels > 0 and k > 0 and \
            (num_nodes is None or (num_nodes.device.type == "cpu"
                                   and not num_nodes.is_floating_point())):
        counts = (torch.full((batch,), nodes, dtype=torch.int64) if num_nodes is None
                  else num_nodes.to(torch.int64))
        lo, hi = (0, nodes) if num_nodes is None else map(int, torch.aminmax(counts))
        # the reference needs a real node (min over them) and counts in range
        if 0 <= lo and 0 < hi <= nodes:
            got = native.sort_pool(x, k, counts)
            if got is not None:
                return got[0].view(batch, k * channels), got[1]
    return sort_pool_any(x, k, num_nodes)


def sort_pool_any(x, k, num_nodes=None):
    _pool_check(x, k, num_nodes)
    out, index = reference.sort_pool_with_index(x, k, num_nodes)
    return out.contiguous(), index.contiguous()


def sort_pool_backward_any(grad, x, index, output):
    """The reference's backward: each kept row's gradient to its node, but
    not to entries PyG's "== min - 1 -> 0" rule zeroed (an output 0 that
    was not 0 in x)."""
    batch, nodes, channels = x.shape
    k = index.shape[1]
    grad = grad.reshape(batch, k, channels)
    taken = index.clamp(min=0).unsqueeze(-1).expand(-1, -1, channels)
    kept_x = x.gather(1, taken)
    out = output.reshape(batch, k, channels)
    passes = (index >= 0).unsqueeze(-1) & ~((out == 0) & (kept_x != 0))
    grad_input = grad.new_zeros((batch, nodes, channels))
    graphs, rows = (index >= 0).nonzero(as_tuple=True)
    kept = torch.where(passes, grad, 0)[graphs, rows]
    grad_input[graphs, index[graphs, rows]] = kept  # each node at most once: a copy
    return grad_input


def sort_pool_backward_cpu(grad, x, index, output):
    if (_takes(x) and all(type(t) is torch.Tensor and t.layout is torch.strided
                          and not t.is_neg() for t in (grad, index, output))):
        grad_input = native.sort_pool_backward(grad, x, index, output)
        if grad_input is not None:
            return grad_input
    return sort_pool_backward_any(grad, x, index, output)


def sort_pool_fake(x, k, num_nodes=None):
    _pool_check(x, k, num_nodes)
    batch, _, channels = x.shape
    return x.new_empty((batch, k * channels)), x.new_empty((batch, k), dtype=torch.int64)


def sort_pool_backward_fake(grad, x, index, output):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


class _SortPool(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, k, num_nodes):
        output = function_kernel(torch.ops.kwker.sort_pool.default, sort_pool_cpu, x, k,
                                 num_nodes)
        ctx.mark_non_differentiable(output[1])
        ctx.save_for_backward(x, output[1], output[0])
        ctx.set_materialize_grads(False)  # (see _MedianPool2d)
        return output

    @staticmethod
    def backward(ctx, grad, _):
        if grad is None:
            return None, None, None
        x, index, output = ctx.saved_tensors
        return function_kernel(torch.ops.kwker.sort_pool_backward.default, sort_pool_backward_cpu,
                               grad, x, index, output, below_autograd=False), None, None


def sort_pool_autograd(x, k, num_nodes=None):
    if _direct(x):
        return sort_pool_cpu(x, k, num_nodes)
    if x.is_floating_point() and _may_need_grad(x):
        if _function_path(x):
            return _SortPool.apply(x, k, num_nodes)
        return sort_pool_any(x, k, num_nodes)
    with _below_autograd():
        return torch.ops.kwker.sort_pool.default(x, k, num_nodes)


# ---------------------------------------------------------------- vmap

def _dim_vmap(op_name, defaults, dim_position, outputs):
    """defaults: every argument after self as the schema gives them
    (vmap rules receive only those passed)."""
    op = getattr(torch.ops.kwker, op_name).default

    def rule(info, in_dims, x, *args):
        args = tuple(args) + tuple(defaults[len(args):])
        if in_dims[0] is None:
            out = op(x, *args)
            return out, (None,) * outputs if outputs > 1 else None
        x = x.movedim(in_dims[0], 0)
        args = list(args)
        args[dim_position] = _dim(x[0], args[dim_position]) + 1
        out = op(x, *args)
        return out, (0,) * outputs if outputs > 1 else 0
    return rule


def _register():
    ops = (
        ("sparsemax", sparsemax_cpu, sparsemax_any, sparsemax_fake, sparsemax_autograd),
        ("sparsemax_backward", sparsemax_backward_cpu, sparsemax_backward_any, _backward_fake,
         _backward_autograd("sparsemax_backward", sparsemax_backward_any)),
        ("entmax15", entmax15_cpu, entmax15_any, entmax15_fake, entmax15_autograd),
        ("entmax15_backward", entmax15_backward_cpu, entmax15_backward_any, _backward_fake,
         _backward_autograd("entmax15_backward", entmax15_backward_any)),
        ("group_sort", group_sort_cpu, group_sort_any, group_sort_fake, group_sort_autograd),
        ("group_sort_backward", group_sort_backward_cpu, group_sort_backward_any,
         group_sort_backward_fake,
         _backward_autograd("group_sort_backward", group_sort_backward_any)),
        ("sort_pool", sort_pool_cpu, sort_pool_any, sort_pool_fake, sort_pool_autograd),
        ("sort_pool_backward", sort_pool_backward_cpu, sort_pool_backward_any,
         sort_pool_backward_fake,
         _backward_autograd("sort_pool_backward", sort_pool_backward_any)),
    )
    for name, cpu, other, fake, autograd in ops:
        LIB.impl(name, kernel_entry(other), "CompositeExplicitAutograd")
        LIB.impl(name, kernel_entry(cpu), "CPU")
        LIB.impl(name, kernel_entry(autograd), "Autograd")
        torch.library.register_fake("kwker::" + name, fake, lib=LIB)
    torch.library.register_vmap("kwker::sparsemax", _dim_vmap("sparsemax", (-1,), 0, 2), lib=LIB)
    torch.library.register_vmap("kwker::entmax15", _dim_vmap("entmax15", (-1,), 0, 1), lib=LIB)
    torch.library.register_vmap("kwker::group_sort", _dim_vmap("group_sort", (None, -1, False), 1, 2), lib=LIB)


_register()
