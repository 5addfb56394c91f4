"""Weights, gradients, activations and the statistics taken over them."""
import torch
import torch.nn.functional as F

from .registry import distribution
from .toolkit import log_normal, normal, numel, student_t, uniform


@distribution("normal")
def _normal(shape, params, rng):
    """N(0, sigma)."""
    return normal(shape, rng, std=params.get("sigma", 1.0))


@distribution("uniform")
def _uniform(shape, params, rng):
    """U(0, 1)."""
    return torch.rand(shape, generator=rng)


WEIGHT_SCALE = 0.02
WEIGHT_TAIL_DF = 5


@distribution("weights")
def _weights(shape, params, rng):
    """|W|: half-normal-like magnitudes with Student-t tails."""
    return student_t(shape, rng, WEIGHT_TAIL_DF).abs_().mul_(WEIGHT_SCALE)


COLUMN_NORM_SIGMA = 0.5
OUTLIER_CHANNEL_PROBABILITY = 0.002
OUTLIER_GAIN = (20.0, 80.0)


@distribution("wanda_metric")
def _wanda_metric(shape, params, rng):
    """Wanda's |W| * ||X_j|| over a [rows, input channels] matrix (params.view, else the
    shape): log-normal column scales, rare outlier channels x20-80; params.square gives
    SparseGPT's W^2 / d_j^2."""
    rows, columns = params.get("view", shape)
    magnitude = normal((rows, columns), rng, std=WEIGHT_SCALE).abs_()  # LLM weights: near-Gaussian
    column_scale = log_normal((columns,), rng, 1.0, COLUMN_NORM_SIGMA)
    outlier = torch.rand(columns, generator=rng) < OUTLIER_CHANNEL_PROBABILITY
    column_scale = torch.where(outlier, column_scale * uniform((columns,), rng, *OUTLIER_GAIN), column_scale)
    metric = magnitude * column_scale
    if params.get("square"):
        metric = metric.square()
    return metric.reshape(shape)


GRADIENT_SCALE = 1e-3
GRADIENT_TAIL_DF = 3


@distribution("grad")
def _grad(shape, params, rng):
    """|grad|: Student-t(3) heavy tails."""
    return student_t(shape, rng, GRADIENT_TAIL_DF).abs_().mul_(GRADIENT_SCALE)


RELU_PREACT_MEAN = -0.25     # BN'd pre-activations: ~60% of them below zero
CHANNEL_MEAN_STD = 0.3
CHANNEL_SCALE_SIGMA = 0.5
OUTLIER_ACTIVATION_GAIN = (20.0, 60.0)


@distribution("activations")
def _activations(shape, params, rng):
    """Activations laid out as params.view with channels on params.channel_dim (default
    last), flattened: params.act 'gelu' (LLM-style, params.outlier_channels huge channels)
    or 'relu' (~60% exact zeros); params.channel_scale: log-normal per-channel scales."""
    view = params["view"]
    channel_dim = params.get("channel_dim", -1) % len(view)
    channels = view[channel_dim]
    per_channel = [1] * len(view)
    per_channel[channel_dim] = channels
    relu = params["act"] == "relu"
    mean = normal((channels,), rng, RELU_PREACT_MEAN if relu else 0.0, CHANNEL_MEAN_STD)
    if params.get("channel_scale"):
        scale = log_normal((channels,), rng, 1.0, CHANNEL_SCALE_SIGMA)
    else:
        scale = torch.ones(channels)
    outliers = torch.randperm(channels, generator=rng)[:params.get("outlier_channels", 0)]
    scale[outliers] *= uniform((outliers.numel(),), rng, *OUTLIER_ACTIVATION_GAIN)
    preact = (normal(tuple(view), rng) + mean.view(per_channel)) * scale.view(per_channel)
    values = preact.relu_() if relu else F.gelu(preact)
    return values.reshape(shape)


DEAD_CHANNEL_FRACTION = 0.05


@distribution("observer_channels")
def _observer_channels(shape, params, rng):
    """Post-ReLU activations, one channel per row, ~5% dead (all-zero) channels."""
    channels, values = shape
    mean = normal((channels, 1), rng, RELU_PREACT_MEAN, CHANNEL_MEAN_STD)
    scale = log_normal((channels, 1), rng, 1.0, CHANNEL_SCALE_SIGMA)
    alive = torch.rand((channels, 1), generator=rng) >= DEAD_CHANNEL_FRACTION
    return (normal(shape, rng) * scale + mean).relu_() * alive


UPDATE_MEAN_STD = 1e-2       # the honest workers' common update
UPDATE_NOISE_STD = 1e-2
ALIE_Z = 1.0                 # "a little is enough": mean - z * std per coordinate
GAUSSIAN_ATTACK_STD = 1.0


@distribution("worker_grads")
def _worker_grads(shape, params, rng):
    """Updates of shape[0] workers: common mean + noise; the last params.byzantine rows are
    attackers ('alie' by default, 'signflip' or 'gaussian' per params.attack)."""
    workers, rest = shape[0], tuple(shape[1:])
    honest = workers - params["byzantine"]
    common = normal(rest, rng, std=UPDATE_MEAN_STD)
    updates = common + normal((honest, *rest), rng, std=UPDATE_NOISE_STD)
    attack = params.get("attack", "alie")
    if attack == "gaussian":
        attackers = normal((params["byzantine"], *rest), rng, std=GAUSSIAN_ATTACK_STD)
    else:
        forged = -updates.mean(0) if attack == "signflip" else updates.mean(0) - ALIE_Z * updates.std(0)
        attackers = forged.expand(params["byzantine"], *rest)  # colluding: identical rows
    return torch.cat([updates, attackers])


SCORE_LEVELS = 26
LEVEL_STEP = 0.2
LEVEL_SPREAD = 5.0   # levels used are roughly normal around the middle one


@distribution("quantized_scores")
def _quantized_scores(shape, params, rng):
    """Scores on 26 levels (0.0, 0.2, ..., 5.0) with uneven frequencies."""
    level = normal(shape, rng, SCORE_LEVELS / 2, LEVEL_SPREAD).round_().clamp_(0, SCORE_LEVELS - 1)
    return level * LEVEL_STEP


CONFORMAL_SKEW = 4.0   # u ** 4: most scores near 0


@distribution("conformal_scores")
def _conformal_scores(shape, params, rng):
    """Non-conformity scores in [0, 1] with most mass near 0."""
    return torch.rand(shape, generator=rng).pow_(CONFORMAL_SKEW)


LPIPS_MEDIAN = 200.0   # LPIPS / epsilon^2 in perceptual path length
LPIPS_SIGMA = 1.0


@distribution("distances")
def _distances(shape, params, rng):
    """Log-normal scaled perceptual distances."""
    return log_normal(shape, rng, LPIPS_MEDIAN, LPIPS_SIGMA)


NODES_MEDIAN = 40     # PROTEINS graphs
NODES_SIGMA = 0.7
FEATURE_STD = 1.5


@distribution("sort_aggr")
def _sort_aggr(shape, params, rng):
    """PyG SortAggregation's dense batch: tanh features, padding slots filled with the
    global min - 1 (most of each row is that one value); one graph fills its row."""
    graphs, slots = shape
    nodes = log_normal((graphs, 1), rng, NODES_MEDIAN, NODES_SIGMA).round_().clamp_(1, slots)
    nodes[0] = slots
    features = normal(shape, rng, std=FEATURE_STD).tanh_()
    real = torch.arange(slots) < nodes
    fill = features[real].min() - 1
    return torch.where(real, features, fill)


MASKED_FEATURE_FRACTION = 0.35
PRIOR_RANGE = (0.2, 1.0)


@distribution("tabnet_inputs")
def _tabnet_inputs(shape, params, rng):
    """TabNet's x * prior: ~35% of the features masked by a zero prior (exact zeros, -0.0
    for negative x, as the real product gives)."""
    prior = uniform(shape, rng, *PRIOR_RANGE)
    prior[torch.rand(shape, generator=rng) < MASKED_FEATURE_FRACTION] = 0.0
    return normal(shape, rng) * prior


LOSS_FLOOR, LOSS_START, LOSS_DECAY_STEPS, LOSS_NOISE = 0.5, 2.0, 200.0, 0.05
TRAINING_STEPS = 1000  # the window starts somewhere in the first this many steps


@distribution("smoothed_values")
def _smoothed_values(shape, params, rng):
    """A window of recent training-loss values: slow decay plus noise."""
    first = float(torch.randint(0, TRAINING_STEPS, (1,), generator=rng))
    step = torch.arange(numel(shape), dtype=torch.float32) + first
    loss = LOSS_FLOOR + LOSS_START * torch.exp(-step / LOSS_DECAY_STEPS)
    return (loss + normal((numel(shape),), rng, std=LOSS_NOISE)).view(shape)
