"""torch's own backward for a selection computed by Kwker's kernels, so
that install() can serve inputs that require grad.

The kernel runs inside an autograd.Function whose backward is the formula
torch uses for sort, topk, kthvalue and median(dim)
(value_selecting_reduction_backward): a zeros tensor of the input's shape
with the incoming gradient scattered (written, not added: a -0.0 gradient
stays -0.0) at the returned indices.  The values are the kernel's own, bit
for bit.  install() only takes this path in plain eager mode (no functorch
transform, forward AD or trace; see kwker.support.context_failure).
"""
import torch


class _TorchSelectionBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, run, dim, keepdim):
        values, indices = run()
        ctx.mark_non_differentiable(indices)
        ctx.save_for_backward(indices)
        ctx.shape, ctx.dim, ctx.keepdim = x.shape, dim, keepdim
        return values, indices

    @staticmethod
    def backward(ctx, grad_values, grad_indices):
        indices, = ctx.saved_tensors
        if not ctx.keepdim and len(ctx.shape) > 0:
            grad_values = grad_values.unsqueeze(ctx.dim)
            indices = indices.unsqueeze(ctx.dim)
        # out of place: differentiable again (double backward gathers)
        grad = grad_values.new_zeros(ctx.shape).scatter(ctx.dim, indices, grad_values)
        return grad, None, None, None


def with_torch_backward(x, dim, keepdim, run):
    """run() -> (values, indices) along wrapped `dim` of x; the values get
    torch's gradient with respect to x."""
    return _TorchSelectionBackward.apply(x, run, dim, keepdim)
