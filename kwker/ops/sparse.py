"""The sparse layers' native kernels (sparse_kernels.h) on tensors:
contiguous rows in, contiguous results out.  Each returns None when the
kernel defers (the caller then runs the reference)."""
import torch

from kwker import _native
from kwker.ops._call import CODES, advise_fresh, lib

DTYPES = frozenset({torch.float32, torch.float64})
MAX_GROUP = 256  # positions within a group are stored as uint8

if lib is not None:
    _simplex = lib.kwk_sparse_simplex_addr
    _group_sort = lib.kwk_group_sort_addr
    _sparsemax_backward = lib.kwk_sparsemax_backward_addr
    _entmax15_backward = lib.kwk_entmax15_backward_addr
    _group_sort_backward = lib.kwk_group_sort_backward_addr
    _sort_pool = lib.kwk_sort_pool_addr
    _sort_pool_backward = lib.kwk_sort_pool_backward_addr
    _DEFER = lib.KWK_DEFER
    _E_ARG = lib.KWK_E_ARG  # from group_sort_backward: a position outside its group


def simplex_rows(x, entmax):
    """(output, support (rows,)) of sparsemax (entmax=False) or entmax15
    over the last dim of x: the kernel's rows, and the reference's for the
    rows the kernel leaves to it (support -1)."""
    from kwker.nn import reference_sparse as reference
    x = x.contiguous()
    n = x.shape[-1]
    rows = x.numel() // n
    out = torch.empty_like(x)
    support = torch.empty(x.shape[:-1], dtype=torch.int64)
    code = CODES[x.dtype]
    if not entmax:
        status = _simplex(code, 0, x.data_ptr(), rows, n, out.data_ptr(), support.data_ptr(), 0)
    else:
        stats = x.new_empty(x.shape[:-1] + (2,))
        status = _simplex(code, 1, x.data_ptr(), rows, n, out.data_ptr(), support.data_ptr(),
                          stats.data_ptr())
        if status not in (0, _DEFER):
            _checked(status, "entmax15", None)
        # torch's own square root (MKL's; not always correctly rounded)
        tau = (stats[..., 0] - torch.sqrt(stats[..., 1])).contiguous()
        status = _simplex(code, 2, x.data_ptr(), rows, n, out.data_ptr(), support.data_ptr(),
                          tau.data_ptr()) if status == 0 else _apply_kept(code, x, out, support,
                                                                            tau)
    if status == _DEFER:
        # the rows left to the reference (rows are independent there)
        flat_x, flat_out, flat_support = x.view(-1, n), out.view(-1, n), support.view(-1)
        redo = (flat_support < 0).nonzero().squeeze(1)
        if entmax:
            flat_out[redo] = reference.entmax15_forward(flat_x[redo])
            flat_support[redo] = 0  # not used for entmax15
        else:
            values, sizes = reference.sparsemax_forward(flat_x[redo])
            flat_out[redo], flat_support[redo] = values, sizes.squeeze(1)
        return out, support
    return _checked(status, "entmax15" if entmax else "sparsemax", (out, support))


def _apply_kept(code, x, out, support, tau):
    status = _simplex(code, 2, x.data_ptr(), x.numel() // x.shape[-1], x.shape[-1],
                      out.data_ptr(), support.data_ptr(), tau.data_ptr())
    return _DEFER if status == 0 else status


def _checked(status, what, result):
    if status:
        _native.check(status, what)
    return result


def sparsemax_backward_rows(grad, output, support):
    """kwker.nn.reference_sparse.sparsemax_backward over the last dim of
    contiguous grad and output, bit for bit: the masking and the final
    subtraction natively, the row sums by torch (its summation order)."""
    code = CODES[grad.dtype]
    rows, n = grad.numel() // grad.shape[-1], grad.shape[-1]
    masked = torch.empty_like(grad)
    status = _sparsemax_backward(code, 0, grad.data_ptr(), output.data_ptr(), rows, n,
                                 masked.data_ptr(), 0)
    _checked(status, "sparsemax_backward", None)
    shift = (masked.sum(dim=-1, keepdim=True) / support.to(grad.dtype)).contiguous()
    status = _sparsemax_backward(code, 1, grad.data_ptr(), output.data_ptr(), rows, n,
                                 masked.data_ptr(), shift.data_ptr())
    return _checked(status, "sparsemax_backward", masked)


def entmax15_backward_rows(grad, output):
    """kwker.nn.reference_sparse.entmax15_backward over the last dim of
    contiguous grad and output, bit for bit: the elementwise steps natively,
    the square root and the row sums by torch (MKL's root, torch's summation
    order), the root taken without the output's zeros (kwk_entmax15_backward)."""
    code = CODES[grad.dtype]
    rows, n = grad.numel() // grad.shape[-1], grad.shape[-1]
    gppr = torch.empty_like(output)
    dx = torch.empty_like(grad)
    y = output.data_ptr()
    status = _entmax15_backward(code, 0, 0, y, rows, n, gppr.data_ptr(), 0, 0)
    _checked(status, "entmax15_backward", None)
    gppr.sqrt_()
    status = _entmax15_backward(code, 1, grad.data_ptr(), y, rows, n, gppr.data_ptr(),
                                dx.data_ptr(), 0)
    _checked(status, "entmax15_backward", None)
    q = (dx.sum(dim=-1, keepdim=True) / gppr.sum(dim=-1, keepdim=True)).contiguous()
    status = _entmax15_backward(code, 2, 0, y, rows, n, gppr.data_ptr(), dx.data_ptr(),
                                q.data_ptr())
    return _checked(status, "entmax15_backward", dx)


def group_sort_rows(x, group_size, descending):
    """(values, uint8 positions) with the last dim of contiguous x sorted in
    groups of group_size."""
    x = x.contiguous()
    out = torch.empty_like(x)
    perm = torch.empty(x.shape, dtype=torch.uint8)
    status = _group_sort(CODES[x.dtype], x.data_ptr(), x.numel() // group_size, group_size,
                         int(descending), out.data_ptr(), perm.data_ptr())
    if status:
        _native.check(status, "group_sort")
    return out, perm


def group_sort_backward_rows(grad, perm, group_size):
    """grad with each group's elements sent back to their uint8 positions
    (perm shaped as grad), or None when a position is out of its group (the
    reference then raises torch's error)."""
    grad = grad.contiguous()
    perm = perm.contiguous()
    grad_input = torch.empty_like(grad)
    status = _group_sort_backward(CODES[grad.dtype], grad.data_ptr(), perm.data_ptr(),
                                  grad.numel() // group_size, group_size,
                                  grad_input.data_ptr())
    if status == _E_ARG:
        return None
    if status:
        _native.check(status, "group_sort_backward")
    return grad_input


def sort_pool(x, k, counts):
    """(kept rows (B, k, C), node index (B, k), -1 for zero rows) or None."""
    x = x.contiguous()
    batch, nodes, channels = x.shape
    counts = counts.to(torch.int64).contiguous()
    out = x.new_empty((batch, k, channels))
    index = torch.empty((batch, k), dtype=torch.int64)
    status = _sort_pool(CODES[x.dtype], x.data_ptr(), batch, nodes, channels,
                        counts.data_ptr(), k, out.data_ptr(), index.data_ptr())
    if status == _DEFER:
        return None
    if status:
        _native.check(status, "sort_pool")
    return out, index


def sort_pool_backward(grad, x, index, output):
    """kwker.torch_ops' sort_pool_backward_any natively (a copy: the same
    bits), or None for what the kernel does not take (other dtypes, an
    index past the nodes: the reference then raises torch's error)."""
    dtype = x.dtype
    if (lib is None or dtype not in DTYPES or grad.dtype != dtype or output.dtype != dtype
            or index.dtype != torch.int64 or x.dim() != 3 or index.dim() != 2):
        return None
    batch, nodes, channels = x.shape
    k = index.shape[1]
    if index.shape[0] != batch or grad.numel() != batch * k * channels \
            or output.numel() != grad.numel():
        return None
    grad, x = grad.contiguous(), x.contiguous()
    index, output = index.contiguous(), output.contiguous()
    grad_input = torch.empty((batch, nodes, channels), dtype=dtype)
    advise_fresh(grad_input)
    status = _sort_pool_backward(CODES[dtype], grad.data_ptr(), x.data_ptr(), index.data_ptr(),
                                 output.data_ptr(), batch, nodes, channels, k,
                                 grad_input.data_ptr())
    if status == _E_ARG:
        return None
    return _checked(status, "sort_pool_backward", grad_input)
