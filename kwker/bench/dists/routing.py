"""Mixture-of-experts router scores and expert ids; sparse-attention selection scores."""
import torch
import torch.nn.functional as F

from .registry import distribution
from .toolkit import as_model_output, normal, rows_and_length, uniform

ROUTER_TOPICS = 16         # tokens of one topic prefer the same experts
TOPIC_RUN = 64             # consecutive tokens share a topic (one document span)
TOPIC_PREFERENCE_STD = 1.5
EXPERT_LOAD_BIAS_STD = 0.7  # some experts are popular with every topic
TOKEN_NOISE_STD = 1.0


def router_logits(tokens: int, n_experts: int, rng, round_to=None) -> torch.Tensor:
    """float32 [tokens, n_experts] router logits, rounded to `round_to` (the gate's dtype) if given."""
    preference = normal((ROUTER_TOPICS, n_experts), rng, std=TOPIC_PREFERENCE_STD)
    topic = torch.randint(0, ROUTER_TOPICS, (tokens // TOPIC_RUN + 1,), generator=rng)
    topic = topic.repeat_interleave(TOPIC_RUN)[:tokens]
    load_bias = normal((n_experts,), rng, std=EXPERT_LOAD_BIAS_STD)
    logits = preference[topic] + load_bias + normal((tokens, n_experts), rng, std=TOKEN_NOISE_STD)
    return as_model_output(logits, {"round_to": round_to} if round_to else {})


@distribution("router")
def _router(shape, params, rng):
    """Softmax router probabilities (params.mode 'logits': the raw bf16 logits)."""
    logits = router_logits(*rows_and_length(shape), rng, round_to="bfloat16")
    values = logits if params.get("mode") == "logits" else torch.softmax(logits, -1)
    return values.view(shape)


SCORE_CORRECTION_STD = 0.02  # DeepSeek-V3's learned e_score_correction_bias is small


def biased_sigmoid_scores(tokens: int, n_experts: int, rng) -> torch.Tensor:
    """DeepSeek-V3 gate scores for choice: sigmoid(fp32 logits) + e_score_correction_bias."""
    correction = normal((n_experts,), rng, std=SCORE_CORRECTION_STD)
    return router_logits(tokens, n_experts, rng).sigmoid() + correction


def group_scores(scores: torch.Tensor, n_group: int) -> torch.Tensor:
    """Per expert group, the sum of its two best biased scores (DeepSeek-V3 group selection)."""
    tokens = scores.shape[0]
    return scores.view(tokens, n_group, -1).topk(2, dim=-1).values.sum(-1)


@distribution("router_group_top2")
def _router_group_top2(shape, params, rng):
    """Biased sigmoid scores viewed (tokens, groups, experts per group)."""
    tokens, groups, per_group = shape
    return biased_sigmoid_scores(tokens, groups * per_group, rng).view(shape)


@distribution("router_group_scores")
def _router_group_scores(shape, params, rng):
    """Per-group sums of the top-2 biased scores."""
    tokens, n_group = shape
    return group_scores(biased_sigmoid_scores(tokens, params["n_experts"], rng), n_group)


@distribution("router_group_masked")
def _router_group_masked(shape, params, rng):
    """Biased scores with the experts of unselected groups set to -inf."""
    tokens, n_experts = shape
    n_group = params["n_group"]
    scores = biased_sigmoid_scores(tokens, n_experts, rng)
    chosen = group_scores(scores, n_group).topk(params["topk_group"], dim=-1).indices
    keep = torch.zeros(tokens, n_group, dtype=torch.bool).scatter_(1, chosen, True)
    keep = keep.repeat_interleave(n_experts // n_group, dim=1)
    return scores.masked_fill(~keep, float("-inf"))


@distribution("expert_ids")
def _expert_ids(shape, params, rng):
    """Flattened top-k expert ids of consecutive tokens: small range, imbalanced counts."""
    k, n_experts = params["k"], params["n_experts"]
    probs = torch.softmax(router_logits(shape[-1] // k, n_experts, rng, round_to="bfloat16"), -1)
    return probs.topk(k, dim=-1).indices.reshape(shape)


ATTENTION_SINK_KEYS = 4      # the first keys draw attention from every query
SINK_NATS = 8.0
HEAVY_HITTER_FRACTION = 0.01
HEAVY_HITTER_NATS = (2.0, 6.0)
RECENT_KEYS = 1024           # attention rises towards the most recent keys
RECENT_NATS = 3.0


@distribution("attn_accum")
def _attn_accum(shape, params, rng):
    """SnapKV's key votes: softmax attention of the last n_queries queries summed per key,
    average-pooled (pool_kernel), rounded to bf16 -> ties among the tiny sums."""
    heads, keys = rows_and_length(shape)
    queries, kernel = params["n_queries"], params["pool_kernel"]
    scores = normal((heads, queries, keys), rng)
    heavy = torch.rand((heads, 1, keys), generator=rng) < HEAVY_HITTER_FRACTION
    scores += heavy * uniform((heads, 1, keys), rng, *HEAVY_HITTER_NATS)
    scores[..., :ATTENTION_SINK_KEYS] += SINK_NATS
    scores[..., -RECENT_KEYS:] += torch.linspace(0, RECENT_NATS, min(RECENT_KEYS, keys))
    votes = torch.softmax(scores, -1).sum(1, keepdim=True)
    pooled = F.avg_pool1d(votes, kernel, stride=1, padding=kernel // 2)
    return as_model_output(pooled, params).view(shape)


PAGE_SCORE_MEAN, PAGE_SCORE_STD = 4.0, 1.5
RECENT_PAGES = 4
PAGE_SPIKE_FRACTION = 0.02
PAGE_HIGHLIGHT_STDS = (2.0, 5.0)  # sink, recent and spiking pages stand this many stds above


@distribution("page_scores")
def _page_scores(shape, params, rng):
    """Quest's per-page upper bound of q.k: Gaussian bulk, sink page, recent pages, sparse spikes."""
    rows, pages = rows_and_length(shape)
    scores = normal((rows, pages), rng, PAGE_SCORE_MEAN, PAGE_SCORE_STD)
    highlighted = torch.rand((rows, pages), generator=rng) < PAGE_SPIKE_FRACTION
    highlighted[:, 0] = True
    highlighted[:, -RECENT_PAGES:] = True
    lift = uniform((rows, pages), rng, *PAGE_HIGHLIGHT_STDS) * PAGE_SCORE_STD
    return (scores + highlighted * lift).view(shape)


INDEX_HEADS = 8          # DeepSeek-V3.2's indexer has more heads; 8 give the same shape of sums
INDEX_DIM = 32
KEY_TOPIC_RUN = 256      # keys come in spans about one topic
KEY_TOPICS = 48


@distribution("index_scores")
def _index_scores(shape, params, rng):
    """DeepSeek sparse-attention indexer scores sum_h w_h relu(q_h.k): non-negative bulk
    with topic structure; params.q_start: causal -inf for keys after each query position."""
    queries, keys = rows_and_length(shape)
    topics = normal((KEY_TOPICS, INDEX_DIM), rng)
    key_topic = torch.randint(0, KEY_TOPICS, (keys // KEY_TOPIC_RUN + 1,), generator=rng)
    key_vectors = topics[key_topic.repeat_interleave(KEY_TOPIC_RUN)[:keys]] + normal((keys, INDEX_DIM), rng)
    query_topic = torch.randint(0, KEY_TOPICS, (queries, INDEX_HEADS), generator=rng)
    query_vectors = topics[query_topic] + normal((queries, INDEX_HEADS, INDEX_DIM), rng)
    head_weights = uniform((queries, INDEX_HEADS, 1), rng, 0.0, 1.0)
    per_head = (query_vectors @ key_vectors.T).relu_()
    scores = (per_head * head_weights).sum(1)
    if "q_start" in params:
        position = params["q_start"] + torch.arange(queries).view(-1, 1)
        scores = scores.masked_fill(torch.arange(keys) > position, float("-inf"))
    return scores.view(shape)
