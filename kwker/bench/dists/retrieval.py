"""Similarity and ranking scores: embeddings, nearest neighbours, recommendation, CTR."""
import torch

from .registry import distribution
from .toolkit import as_model_output, log_normal, normal, rows_and_length, uniform, zipf_ranks

EMBEDDING_DIM = 64    # gives random-pair cosines a spread of ~0.1 after the shared component
COMMON_WEIGHT = 0.5   # shared direction of all embeddings: random pairs average ~0.12
MEMBER_SPREAD = 0.8   # distance of a member from its cluster centre: neighbours at 0.5-0.9
CLUSTER_SIZE = 50     # members per cluster unless params.n_clusters says otherwise
MEMBER_DISTANCE = (0.5, 1.5)  # x MEMBER_SPREAD: some neighbours much closer than others


class EmbeddingSpace:
    """Unit embeddings in clusters (optionally grouped into super-clusters) around a shared
    direction; sample(n) draws members. params: common, spread, n_clusters, n_super."""

    def __init__(self, params: dict, n_items: int, rng):
        self.rng = rng
        self.common = params.get("common", COMMON_WEIGHT)
        self.spread = params.get("spread", MEMBER_SPREAD)
        n_clusters = params.get("n_clusters", max(1, n_items // CLUSTER_SIZE))
        self.shared = unit(normal((EMBEDDING_DIM,), rng))
        centres = normal((n_clusters, EMBEDDING_DIM), rng)
        if "n_super" in params:
            super_centres = normal((params["n_super"], EMBEDDING_DIM), rng)
            family = torch.randint(0, params["n_super"], (n_clusters,), generator=rng)
            centres = super_centres[family] + self.spread * centres
        self.centres = unit(centres)

    def sample(self, n: int) -> torch.Tensor:
        cluster = torch.randint(0, self.centres.shape[0], (n,), generator=self.rng)
        offset = unit(normal((n, EMBEDDING_DIM), self.rng)) * uniform((n, 1), self.rng, *MEMBER_DISTANCE)
        return unit(self.common * self.shared + self.centres[cluster] + self.spread * offset)


def unit(vectors: torch.Tensor) -> torch.Tensor:
    return vectors / vectors.norm(dim=-1, keepdim=True)


@distribution("cos_sim")
def _cos_sim(shape, params, rng):
    """Cosine similarities of queries (rows) against a corpus (last dim) of clustered
    embeddings; params.self: the corpus against itself, diagonal exactly 1."""
    queries, corpus_size = rows_and_length(shape)
    space = EmbeddingSpace(params, corpus_size, rng)
    corpus = space.sample(corpus_size)
    if params.get("self"):
        similarity = corpus @ corpus.T
        similarity = (similarity + similarity.T) / 2  # exactly symmetric, like the real matrix
        similarity.fill_diagonal_(1.0)
    else:
        similarity = space.sample(queries) @ corpus.T
    return as_model_output(similarity, params).view(shape)


TOKEN_DIM = 64
TOKEN_COMMON = 1.2    # ViT tokens share a large component: best cosines mostly 0.75-1.0
TOKEN_NOISE = (0.2, 1.2)  # per-token detail: flat background patches nearly duplicate
PATCH_CLUSTERS = 8    # image regions whose patches look alike


@distribution("tome_node_max")
def _tome_node_max(shape, params, rng):
    """ToMe bipartite matching: per even token, its best cosine to an odd token; the
    class token (column 0) protected with -inf."""
    images, n_even = shape
    tokens = 2 * n_even - 1  # class token + patches, split alternately into the two sets
    shared = normal((images, 1, TOKEN_DIM), rng)
    regions = normal((images, PATCH_CLUSTERS, TOKEN_DIM), rng)
    region = torch.randint(0, PATCH_CLUSTERS, (images, tokens), generator=rng)
    detail = normal((images, tokens, TOKEN_DIM), rng) * uniform((images, tokens, 1), rng, *TOKEN_NOISE)
    region_features = torch.gather(regions, 1, region.unsqueeze(-1).expand(-1, -1, TOKEN_DIM))
    features = unit(TOKEN_COMMON * shared + region_features + detail)
    scores = features[:, 0::2] @ features[:, 1::2].transpose(1, 2)
    scores[:, 0, :] = float("-inf")
    return scores.amax(-1)


SHAPE_AXES = (0.3, 1.0)   # semi-axes of the ellipsoid surfaces the points lie on
SURFACE_NOISE = 0.01


@distribution("neg_sqdist_points")
def _neg_sqdist_points(shape, params, rng):
    """DGCNN's -||xi - xj||^2 between points on object surfaces: <= 0, diagonal exactly 0."""
    clouds, points, _ = shape
    directions = unit(normal((clouds, points, 3), rng))
    axes = uniform((clouds, 1, 3), rng, *SHAPE_AXES)
    xyz = directions * axes + normal((clouds, points, 3), rng, std=SURFACE_NOISE)
    squared_norm = xyz.square().sum(-1)
    distance = 2 * xyz @ xyz.transpose(1, 2) - squared_norm.unsqueeze(2) - squared_norm.unsqueeze(1)
    distance.clamp_(max=0.0).diagonal(dim1=1, dim2=2).zero_()
    return distance


REC_DIM = 32
ITEM_POPULARITY_SIGMA = 0.5  # log-normal spread of item embedding norms
HISTORY_ZIPF = 1.0           # users interact mostly with popular items


@distribution("rec_scores")
def _rec_scores(shape, params, rng):
    """LightGCN user x item dot products, each user's `history` training items masked."""
    users, items = rows_and_length(shape)
    popularity = log_normal((items, 1), rng, 1.0, ITEM_POPULARITY_SIGMA)
    item_vectors = unit(normal((items, REC_DIM), rng)) * popularity
    scores = normal((users, REC_DIM), rng) @ item_vectors.T
    by_popularity = popularity.flatten().argsort(descending=True)
    seen = by_popularity[zipf_ranks(users * params["history"], items, HISTORY_ZIPF, rng)]
    scores.scatter_(1, seen.view(users, -1), params["mask_value"])
    return scores.view(shape)


CTR_BASE_RATE = 0.03
CTR_LOGIT_STD = 1.2


@distribution("ctr_preds")
def _ctr_preds(shape, params, rng):
    """Sigmoid click-through predictions around a 3% base rate."""
    base_logit = torch.logit(torch.tensor(CTR_BASE_RATE)).item()
    return normal(shape, rng, base_logit, CTR_LOGIT_STD).sigmoid_()


POSITIVE_FRACTION = 0.3
CLASS_SEPARATION_NATS = 1.5
LABEL_LOGIT_STD = 1.5


@distribution("binary_probs")
def _binary_probs(shape, params, rng):
    """Sigmoid probabilities of a classifier: 30% positives, bimodal."""
    positive = torch.rand(shape, generator=rng) < POSITIVE_FRACTION
    centre = torch.where(positive, CLASS_SEPARATION_NATS, -CLASS_SEPARATION_NATS)
    return (centre + normal(shape, rng, std=LABEL_LOGIT_STD)).sigmoid_()


NEIGHBOUR_SIMILARITY = (0.4, 0.9)
NEIGHBOURS_OF_TRUE_CLASS = 0.6


@distribution("knn_votes")
def _knn_votes(shape, params, rng):
    """DINO's weighted k-NN votes per class: sum of exp(sim / T) over the k neighbours'
    labels, so all but <= k entries of a row are exactly 0."""
    queries, classes = shape
    k, temperature = params["k"], params["T"]
    similarity = uniform((queries, k), rng, *NEIGHBOUR_SIMILARITY).sort(-1, descending=True).values
    true_class = torch.randint(0, classes, (queries, 1), generator=rng)
    other_class = torch.randint(0, classes, (queries, k), generator=rng)
    agrees = torch.rand((queries, k), generator=rng) < NEIGHBOURS_OF_TRUE_CLASS
    label = torch.where(agrees, true_class, other_class)
    return torch.zeros(shape).scatter_add_(1, label, (similarity / temperature).exp_())
