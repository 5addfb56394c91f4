"""Language-model values: next-token logits and what samplers derive from them,
classifier and attention logits, sparse-autoencoder pre-activations."""
import torch

from .registry import distribution
from .toolkit import as_model_output, normal, rows_and_length, uniform

BULK_STD = 2.5            # spread of the bulk of next-token logits
ZIPF_PRIOR_SLOPE = 1.0    # nats lost per e-fold of unigram rank
MAX_PLAUSIBLE = 16        # at most this many tokens stand far above the bulk
PLAUSIBLE_NATS = (5.0, 20.0)  # how far above the bulk mean those tokens sit
DEAD_TOKEN_NATS = 15.0    # never-trained (reserved) tokens sit this far below the bulk mean
DEAD_TOKEN_JITTER = 0.01  # and barely differ from each other: one tie block once rounded


def scatter_peaks(values: torch.Tensor, rng, max_peaks: int, low: float, high: float,
                  base: torch.Tensor) -> torch.Tensor:
    """Raise 1..max_peaks random positions of each row of `values` [rows, n] to
    base + U(low, high) (base: per-row [rows, 1])."""
    rows, n = values.shape
    positions = torch.randint(0, n, (rows, max_peaks), generator=rng)
    heights = base + uniform((rows, max_peaks), rng, low, high)
    n_peaks = torch.randint(1, max_peaks + 1, (rows, 1), generator=rng)
    heights = heights.masked_fill(torch.arange(max_peaks) >= n_peaks, float("-inf"))
    return values.scatter_reduce_(1, positions, heights, "amax")


def llm_logits(rows: int, vocab: int, params: dict, rng) -> torch.Tensor:
    """float32 [rows, vocab] next-token logits. params: n_dead (trailing never-trained
    tokens), round_to (model dtype), temperature (divides, after rounding, as samplers do),
    conf_range (top of the plausible-token band, nats)."""
    frequency_rank = torch.randperm(vocab, generator=rng).float()  # shared by all rows
    prior = -ZIPF_PRIOR_SLOPE * torch.log1p(frequency_rank)
    logits = normal((rows, vocab), rng, std=BULK_STD) + (prior - prior.mean())
    bulk_mean = logits.mean(1, keepdim=True)
    n_dead = params.get("n_dead", 0)
    if n_dead:
        logits[:, vocab - n_dead:] = bulk_mean - DEAD_TOKEN_NATS + normal(
            (rows, n_dead), rng, std=DEAD_TOKEN_JITTER)
    low, high = PLAUSIBLE_NATS
    logits = scatter_peaks(logits, rng, MAX_PLAUSIBLE, low, params.get("conf_range", high), bulk_mean)
    return as_model_output(logits, params) / params.get("temperature", 1.0)


@distribution("llm_logits")
def _llm_logits(shape, params, rng):
    """Gaussian bulk + Zipf unigram prior + a few tokens 5-20 nats above; bf16 rounding -> ties."""
    return llm_logits(*rows_and_length(shape), params, rng).view(shape)


@distribution("llm_logits_topk_filtered")
def _llm_logits_topk_filtered(shape, params, rng):
    """Logits after transformers' top-k warper: top_k finite values (more on a tie), the rest -inf."""
    logits = llm_logits(*rows_and_length(shape), params, rng)
    kth_largest = torch.topk(logits, params["top_k"], dim=-1).values[:, -1:]
    return logits.masked_fill(logits < kth_largest, float("-inf")).view(shape)


@distribution("llm_logprobs")
def _llm_logprobs(shape, params, rng):
    """log-softmax of (rounded) logits: all <= 0 with a long left tail."""
    return torch.log_softmax(llm_logits(*rows_and_length(shape), params, rng), -1).view(shape)


@distribution("llm_probs")
def _llm_probs(shape, params, rng):
    """softmax of (rounded) logits: a few large probabilities, most ~1e-9..1e-6."""
    return torch.softmax(llm_logits(*rows_and_length(shape), params, rng), -1).view(shape)


@distribution("typical_shifted")
def _typical_shifted(shape, params, rng):
    """transformers' typical-decoding score |(-log p) - entropy|: >= 0, dense near the entropy."""
    log_probs = torch.log_softmax(llm_logits(*rows_and_length(shape), params, rng), -1)
    entropy = -(log_probs.exp() * log_probs).sum(-1, keepdim=True)
    return (-log_probs - entropy).abs().view(shape)


BEAM_SCORE_NATS = (0.5, 8.0)  # range of running beam log-probabilities (negated)


@distribution("beam_logprobs")
def _beam_logprobs(shape, params, rng):
    """Beam search's next scores: per beam, its running score plus the next-token log-probs,
    the beams' vocab blocks concatenated along the row."""
    rows, length = rows_and_length(shape)
    beams = params["num_beams"]
    log_probs = torch.log_softmax(llm_logits(rows * beams, length // beams, params, rng), -1)
    running = -uniform((rows * beams, 1), rng, *BEAM_SCORE_NATS)
    return (log_probs + running).view(shape)


CLASS_LOGIT_STD = 1.5
BOOSTED_CLASSES = 3              # at most this many classes stand out per row
BOOST_NATS = (4.0, 12.0)


@distribution("classifier_logits")
def _classifier_logits(shape, params, rng):
    """Gaussian bulk with 1-3 boosted classes per row; params.softmax gives probabilities."""
    rows, classes = rows_and_length(shape)
    logits = normal((rows, classes), rng, std=CLASS_LOGIT_STD)
    logits = scatter_peaks(logits, rng, BOOSTED_CLASSES, *BOOST_NATS, torch.zeros(rows, 1))
    if params.get("softmax"):
        logits = torch.softmax(logits, -1)
    return logits.view(shape)


ATTENTION_PEAKS = 2
ATTENTION_PEAK_NATS = (3.0, 6.0)


@distribution("attention_scores")
def _attention_scores(shape, params, rng):
    """Attention logits N(0, 1) with two peaked keys per row."""
    rows, keys = rows_and_length(shape)
    scores = normal((rows, keys), rng)
    positions = torch.rand((rows, keys), generator=rng).argsort(-1)[:, :ATTENTION_PEAKS]  # distinct keys
    peaks = uniform((rows, ATTENTION_PEAKS), rng, *ATTENTION_PEAK_NATS)
    return scores.scatter_(1, positions, peaks).view(shape)


SAE_BULK_MEAN, SAE_BULK_STD = -1.5, 1.0
SAE_ACTIVE_FRACTION = 0.003
SAE_ACTIVE_RANGE = (3.0, 12.0)


@distribution("sae_preacts")
def _sae_preacts(shape, params, rng):
    """Sparse-autoencoder pre-activations: negative Gaussian bulk, ~0.3% strongly active latents."""
    values = normal(shape, rng, SAE_BULK_MEAN, SAE_BULK_STD).flatten()
    n_active = int(values.numel() * SAE_ACTIVE_FRACTION)
    active = torch.randint(0, values.numel(), (n_active,), generator=rng)
    values[active] = uniform((n_active,), rng, *SAE_ACTIVE_RANGE)
    return values.view(shape)
