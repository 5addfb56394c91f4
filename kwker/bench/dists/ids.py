"""Integer keys: ids, labels, graph indices, permutations, timestamps, lengths."""
import torch

from .registry import distribution
from .toolkit import log_normal, numel, rows_and_length, shuffled, zipf_ranks

GROUP_SIZE_SIGMA = 0.6  # graphs of a batch, groups of an index: sizes vary ~2x


def group_sizes(n: int, n_groups: int, rng) -> torch.Tensor:
    """Sizes of n_groups groups (log-normal weights) adding up to n exactly."""
    weights = log_normal((n_groups,), rng, 1.0, GROUP_SIZE_SIGMA)
    members = torch.multinomial(weights, n, replacement=True, generator=rng)
    return torch.bincount(members, minlength=n_groups)


RECIPROCAL_FRACTION = 0.03  # citation pairs that point both ways
CITATION_ZIPF = 1.0         # a few papers draw most citations


@distribution("edge_keys")
def _edge_keys(shape, params, rng):
    """PyG coalesce keys row * N + col of an undirected graph: the edges grouped by row,
    then the flipped edges grouped by their new row; reciprocal edges repeat keys."""
    n_nodes = params["num_nodes"]
    n_edges = shape[0] // 2
    n_reciprocal = int(n_edges * RECIPROCAL_FRACTION)
    source = torch.randint(0, n_nodes, (n_edges - n_reciprocal,), generator=rng)
    cited = shuffled(torch.arange(n_nodes), rng)[zipf_ranks(source.numel(), n_nodes, CITATION_ZIPF, rng)]
    echoed = torch.randint(0, source.numel(), (n_reciprocal,), generator=rng)
    row = torch.cat([source, cited[echoed]])
    col = torch.cat([cited, source[echoed]])

    def grouped_by_first(first, second):
        order = torch.sort(first, stable=True).indices  # within a row: the edge list's order
        return first[order] * n_nodes + second[order]

    return torch.cat([grouped_by_first(row, col), grouped_by_first(col, row)])


NODE_ZIPF = 0.9


@distribution("node_ids")
def _node_ids(shape, params, rng):
    """Node ids reached by neighbour sampling: hub nodes repeat (power law), hubs at random ids."""
    n_nodes = params["num_nodes"]
    node_of_rank = shuffled(torch.arange(n_nodes), rng)
    return node_of_rank[zipf_ranks(numel(shape), n_nodes, NODE_ZIPF, rng)].view(shape)


@distribution("batch_permuted")
def _batch_permuted(shape, params, rng):
    """Graph ids of a batch's nodes in score order (TopKPooling's batch[perm]): random
    order, one long tie block per graph."""
    sizes = group_sizes(shape[0], params["num_graphs"], rng)
    graph_id = torch.arange(params["num_graphs"]).repeat_interleave(sizes)
    return shuffled(graph_id, rng)


@distribution("group_index_after_sort")
def _group_index_after_sort(shape, params, rng):
    """Per column, a sorted index of num_groups group ids permuted by the sort of that
    column's values (PyG QuantileAggregation)."""
    n, columns = shape
    sizes = group_sizes(n, params["num_groups"], rng)
    index = torch.arange(params["num_groups"]).repeat_interleave(sizes)
    value_order = torch.rand(shape, generator=rng).argsort(0)
    return index[value_order]


TIE_PROBABILITY = 0.3       # events logged in the same second
MEAN_GAP_S = 16.0
DISPLACED_FRACTION = 0.05


@distribution("timestamps")
def _timestamps(shape, params, rng):
    """Event times in seconds: sorted with same-second ties, 5% of events displaced."""
    n = shape[0]
    gaps = (torch.rand(n, generator=rng).log_().neg_() * MEAN_GAP_S).ceil_()
    gaps[torch.rand(n, generator=rng) < TIE_PROBABILITY] = 0
    times = gaps.cumsum(0).to(torch.int64)
    displaced = torch.randperm(n, generator=rng)[:int(n * DISPLACED_FRACTION)]
    times[displaced] = shuffled(times[displaced], rng)
    return times


@distribution("permutation")
def _permutation(shape, params, rng):
    """Rows that are random permutations of 0..n-1."""
    rows, n = rows_and_length(shape)
    return torch.rand((rows, n), generator=rng).argsort(-1).view(shape)


TOKEN_ZIPF = 1.1


@distribution("token_ids")
def _token_ids(shape, params, rng):
    """Token ids of a prompt: Zipfian, frequent tokens at small ids as BPE merges order them."""
    return zipf_ranks(numel(shape), params["vocab"], TOKEN_ZIPF, rng).view(shape)


HASHED_ID_ZIPF = 1.05
HASHED_UNIVERSE_PER_DRAW = 4   # distinct raw ids available per draw
HASH_BITS = 62


@distribution("hashed_ids")
def _hashed_ids(shape, params, rng):
    """62-bit hashed raw ids with Zipf(1.05) repetition."""
    n = numel(shape)
    universe = n * HASHED_UNIVERSE_PER_DRAW
    hashes = torch.randint(0, 2 ** HASH_BITS, (universe,), generator=rng)
    return hashes[zipf_ranks(n, universe, HASHED_ID_ZIPF, rng)].view(shape)


@distribution("labels")
def _labels(shape, params, rng):
    """Cluster ids with Zipf(a) cluster sizes, ids in random order."""
    classes = params["num_classes"]
    id_of_rank = shuffled(torch.arange(classes), rng)
    return id_of_rank[zipf_ranks(numel(shape), classes, params["a"], rng)].view(shape)


SEQUENCE_LENGTH_SIGMA = 0.6


@distribution("seq_lengths")
def _seq_lengths(shape, params, rng):
    """Sentence lengths: log-normal around the median, at most max (ties)."""
    lengths = log_normal(shape, rng, params["median"], SEQUENCE_LENGTH_SIGMA)
    return lengths.round_().clamp_(1, params["max"]).to(torch.int64)


@distribution("batch_idx_sorted")
def _batch_idx_sorted(shape, params, rng):
    """Image index of each ground-truth box, sorted; every image has at least one box."""
    batch = params["batch"]
    sizes = 1 + group_sizes(shape[0] - batch, batch, rng)
    return torch.arange(batch).repeat_interleave(sizes)
