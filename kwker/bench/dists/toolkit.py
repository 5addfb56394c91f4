"""Random building blocks shared by the generators.

Everything draws from an explicit torch.Generator so each input is a pure
function of its seed.
"""
import math

import torch
import torch.nn.functional as F

from .registry import Shape


def numel(shape: Shape) -> int:
    return math.prod(shape)


def rows_and_length(shape: Shape):
    """(number of rows, row length) for values whose op runs along the last dim."""
    return numel(shape[:-1]), shape[-1]


def normal(shape: Shape, rng, mean=0.0, std=1.0) -> torch.Tensor:
    return torch.randn(shape, generator=rng).mul_(std).add_(mean)


def uniform(shape: Shape, rng, low=0.0, high=1.0) -> torch.Tensor:
    return torch.rand(shape, generator=rng).mul_(high - low).add_(low)


def log_normal(shape: Shape, rng, median: float, sigma: float) -> torch.Tensor:
    return normal(shape, rng, math.log(median), sigma).exp_()


def student_t(shape: Shape, rng, df: int) -> torch.Tensor:
    """Student-t: a normal over sqrt(chi-square/df), the chi-square summed from df squared normals."""
    chi_square = torch.randn((df, *shape), generator=rng).square_().sum(0)
    return torch.randn(shape, generator=rng).div_(chi_square.div_(df).sqrt_())


def zipf_ranks(n: int, n_values: int, exponent: float, rng) -> torch.Tensor:
    """n int64 ranks in [0, n_values) with P(rank r) proportional to (r + 1) ** -exponent."""
    weights = torch.arange(1, n_values + 1, dtype=torch.float64).pow_(-exponent)
    cdf = weights.cumsum_(0)
    cdf /= cdf[-1].item()
    draws = torch.rand(n, generator=rng, dtype=torch.float64)
    return torch.searchsorted(cdf, draws).clamp_(max=n_values - 1)


def shuffled(values: torch.Tensor, rng) -> torch.Tensor:
    """The elements of a 1-D tensor in random order."""
    return values[torch.randperm(values.numel(), generator=rng)]


def as_model_output(values: torch.Tensor, params: dict) -> torch.Tensor:
    """Values rounded to the dtype the model computed them in (params['round_to']),
    returned as float32: that is how serving engines upcast them, and it makes exact ties."""
    model_dtype = params.get("round_to")
    if model_dtype is None:
        return values
    return values.to(getattr(torch, model_dtype)).float()


PIXELS_PER_CELL = 16  # a smooth field varies over about this many pixels


def smooth_field(shape: Shape, rng, pixels_per_cell=PIXELS_PER_CELL) -> torch.Tensor:
    """Spatially smooth noise over the last two dims, standardized: a coarse Gaussian
    grid upsampled bicubically (depth maps, objectness, image content)."""
    *lead, height, width = shape
    coarse_shape = (max(1, numel(tuple(lead))), 1,
                    max(2, height // pixels_per_cell), max(2, width // pixels_per_cell))
    coarse = torch.randn(coarse_shape, generator=rng)
    field = F.interpolate(coarse, size=(height, width), mode="bicubic", align_corners=False)
    field = (field - field.mean()) / field.std()
    return field.reshape(shape)
