"""Plain-torch references of Kwker's sparse layers: sparsemax, 1.5-entmax,
GroupSort and SortPooling.  The fast operators (kwker.torch_ops.
layers_sparse) reproduce these bit for bit; the benchmark measures against
them.

- sparsemax / entmax15: the entmax package's exact sort-based algorithms
  (deep-spin/entmax, `entmax.sparsemax` and `entmax.entmax15`: shift by the
  row maximum, full descending sort, cumulative sums, threshold and support
  size), with its closed-form backward passes.
- group_sort: LNets' GroupSort (Anil, Lucas & Grosse 2019, "Sorting out
  Lipschitz function approximation"; cemanil/LNets `group_sort`): split
  `dim` into consecutive groups of `group_size` and sort each ascending.
  MaxMin is GroupSort with group_size 2 (each pair as (min, max); LNets'
  separate MaxMin module lays the maxima out before the minima instead).
  Equal elements keep their index order (torch.sort(stable=True)), which
  also decides where their gradients go.
- sort_pool: PyG's SortAggregation (torch_geometric.nn.aggr.SortAggregation,
  DGCNN's SortPooling) on a dense batch: per graph, nodes by last channel
  descending (stable), the first k kept, missing rows zero, flattened to
  (B, k * C).  PyG pads with min(x) - 1 and then zeroes every entry equal
  to it; that rule is kept as is.
"""
import torch


def _ix_like(x, dim):
    """1, 2, ..., n along dim, shaped to broadcast against x."""
    n = x.shape[dim]
    shape = [1] * x.dim()
    shape[dim] = n
    return torch.arange(1, n + 1, dtype=x.dtype, device=x.device).view(shape)


def sparsemax_threshold(z, dim):
    """(tau, support size) of z (already shifted by its maximum)."""
    srt = torch.sort(z, dim=dim, descending=True)[0]
    cumsum_m1 = srt.cumsum(dim) - 1
    support = (_ix_like(z, dim) * srt > cumsum_m1).sum(dim=dim, keepdim=True)
    tau = cumsum_m1.gather(dim, support - 1) / support.to(z.dtype)
    return tau, support


def entmax15_threshold(z, dim):
    """(tau, support size) of z (shifted by its maximum and halved)."""
    srt = torch.sort(z, dim=dim, descending=True)[0]
    rho = _ix_like(z, dim)
    mean = srt.cumsum(dim) / rho
    mean_sq = (srt ** 2).cumsum(dim) / rho
    ss = rho * (mean_sq - mean ** 2)
    delta = (1 - ss) / rho
    tau = mean - torch.sqrt(torch.clamp(delta, 0))
    support = (tau <= srt).sum(dim=dim, keepdim=True)
    return tau.gather(dim, support - 1), support


def sparsemax_forward(x, dim=-1):
    """(output, support size with dim kept)."""
    z = x - x.max(dim=dim, keepdim=True)[0]
    tau, support = sparsemax_threshold(z, dim)
    return torch.clamp(z - tau, min=0), support


def entmax15_forward(x, dim=-1):
    z = (x - x.max(dim=dim, keepdim=True)[0]) / 2
    tau, _ = entmax15_threshold(z, dim)
    return torch.clamp(z - tau, min=0) ** 2


def sparsemax_backward(grad, output, support, dim):
    """The entmax package's: the gradient on the support, minus its mean
    there."""
    grad_input = grad.masked_fill(output == 0, 0)
    v_hat = grad_input.sum(dim=dim, keepdim=True) / support.to(output.dtype)
    return torch.where(output != 0, grad_input - v_hat, grad_input)


def entmax15_backward(grad, output, dim):
    """The entmax package's: with gppr = sqrt(y),
    gppr * g - gppr * sum(gppr * g) / sum(gppr)."""
    gppr = output.sqrt()
    dx = grad * gppr
    q = dx.sum(dim, keepdim=True) / gppr.sum(dim, keepdim=True)
    return dx - q * gppr


class _Sparsemax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, dim):
        output, support = sparsemax_forward(x, dim)
        ctx.dim = dim
        ctx.save_for_backward(support, output)
        return output

    @staticmethod
    def backward(ctx, grad):
        support, output = ctx.saved_tensors
        return sparsemax_backward(grad, output, support, ctx.dim), None


class _Entmax15(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, dim):
        output = entmax15_forward(x, dim)
        ctx.dim = dim
        ctx.save_for_backward(output)
        return output

    @staticmethod
    def backward(ctx, grad):
        (output,) = ctx.saved_tensors
        return entmax15_backward(grad, output, ctx.dim), None


def sparsemax(x, dim=-1):
    return _Sparsemax.apply(x, dim)


def entmax15(x, dim=-1):
    return _Entmax15.apply(x, dim)


def group_sort_with_positions(x, group_size, dim=-1, descending=False):
    """(values, position of each value within its group)."""
    dim = dim % x.dim() if x.dim() else 0
    n = x.shape[dim]
    if group_size < 1 or n % group_size:
        raise ValueError(f"the size of dim {dim} ({n}) is not a multiple of "
                         f"group_size ({group_size})")
    grouped = x.unflatten(dim, (n // group_size, group_size))
    values, positions = grouped.sort(dim=dim + 1, descending=descending, stable=True)
    return values.flatten(dim, dim + 1), positions.flatten(dim, dim + 1)


def group_sort(x, group_size, dim=-1, descending=False):
    return group_sort_with_positions(x, group_size, dim, descending)[0]


def sort_pool_with_index(x, k, num_nodes=None):
    """(PyG's SortAggregation of the dense batch x (B, N, C) whose graph b
    has its num_nodes[b] real nodes first (all N when None): (B, k * C);
    the node each kept row came from (B, k), -1 for padding)."""
    batch, nodes, channels = x.shape
    if num_nodes is None:
        real = torch.ones(batch, nodes, dtype=torch.bool, device=x.device)
    else:
        real = torch.arange(nodes, device=x.device) < num_nodes.view(-1, 1)
    fill = x.detach()[real].min() - 1
    dense = torch.where(real.unsqueeze(-1), x, fill)
    perm = dense[:, :, -1].sort(dim=-1, descending=True, stable=True)[1]
    dense = dense.gather(1, perm.unsqueeze(-1).expand(-1, -1, channels))
    index = torch.where(real.gather(1, perm), perm, -1)
    if nodes >= k:
        dense, index = dense[:, :k], index[:, :k]
    else:
        dense = torch.cat([dense, dense.new_full((batch, k - nodes, channels), fill)], dim=1)
        index = torch.cat([index, index.new_full((batch, k - nodes), -1)], dim=1)
    dense = dense.masked_fill(dense == fill, 0)
    return dense.reshape(batch, k * channels), index


def sort_pool(x, k, num_nodes=None):
    return sort_pool_with_index(x, k, num_nodes)[0]


class Sparsemax(torch.nn.Module):
    """sparsemax over dim (Martins & Astudillo 2016), as entmax.Sparsemax.
    No parameters or buffers."""

    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return sparsemax(x, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class Entmax15(Sparsemax):
    """1.5-entmax over dim (Peters, Niculae & Martins 2019), as
    entmax.Entmax15.  No parameters or buffers."""

    def forward(self, x):
        return entmax15(x, self.dim)


class GroupSort(torch.nn.Module):
    """GroupSort activation (see the module docstring); group_size=2 is
    MaxMin."""

    def __init__(self, group_size=2, dim=-1, descending=False):
        super().__init__()
        self.group_size, self.dim, self.descending = group_size, dim, descending

    def forward(self, x):
        return group_sort(x, self.group_size, self.dim, self.descending)

    def extra_repr(self):
        return f"group_size={self.group_size}, dim={self.dim}, descending={self.descending}"


class SortPooling(torch.nn.Module):
    """SortPooling / PyG SortAggregation(k) on dense batches (B, N, C),
    optionally with the real node count of each graph."""

    def __init__(self, k):
        super().__init__()
        self.k = k

    def forward(self, x, num_nodes=None):
        return sort_pool(x, self.k, num_nodes)

    def extra_repr(self):
        return f"k={self.k}"
