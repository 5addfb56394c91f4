"""Time series, forecast samples and audio-alignment windows."""
import math

import torch
import torch.nn.functional as F

from .registry import distribution
from .toolkit import log_normal, normal, rows_and_length, student_t, uniform

SERIES_LEVEL_MEDIAN, SERIES_LEVEL_SIGMA = 100.0, 1.0
SEASON_PERIODS = (7, 24)        # daily data with a week, hourly data with a day
SEASON_AMPLITUDE = 0.3
SERIES_NOISE_SIGMA = 0.1
LEFT_PADDED_ROWS = 0.4          # series shorter than the window, NaN-padded on the left
PADDING_FRACTION = (0.1, 0.9)   # of the window, for those rows
SPORADIC_NAN = 0.02


def left_pad_with_nan(series: torch.Tensor, rng, padded_rows: float) -> torch.Tensor:
    """NaN over a random-length prefix of a `padded_rows` fraction of the rows."""
    rows, length = series.shape
    padded = torch.rand((rows, 1), generator=rng) < padded_rows
    pad_length = uniform((rows, 1), rng, *PADDING_FRACTION) * length
    prefix = padded & (torch.arange(length) < pad_length)
    return series.masked_fill(prefix, float("nan"))


def sprinkle_nan(series: torch.Tensor, rng, fraction: float) -> torch.Tensor:
    return series.masked_fill(torch.rand(series.shape, generator=rng) < fraction, float("nan"))


@distribution("timeseries_nan")
def _timeseries_nan(shape, params, rng):
    """Positive seasonal series; ~40% of rows NaN left-padded, 2% sporadic NaN."""
    rows, length = rows_and_length(shape)
    level = log_normal((rows, 1), rng, SERIES_LEVEL_MEDIAN, SERIES_LEVEL_SIGMA)
    period = torch.tensor(SEASON_PERIODS, dtype=torch.float32)[
        torch.randint(0, len(SEASON_PERIODS), (rows, 1), generator=rng)]
    phase = uniform((rows, 1), rng, 0, 2 * math.pi)
    season = 1 + SEASON_AMPLITUDE * torch.sin(2 * math.pi * torch.arange(length) / period + phase)
    series = level * season * normal((rows, length), rng, std=SERIES_NOISE_SIGMA).exp_()
    series = sprinkle_nan(left_pad_with_nan(series, rng, LEFT_PADDED_ROWS), rng, SPORADIC_NAN)
    return series.view(shape)


DEMAND_PROBABILITY = (0.2, 0.8)   # per series, chance that a step has any demand
DEMAND_SIZE_MEDIAN, DEMAND_SIZE_SIGMA = 3.0, 0.8
PADDED_WINDOWS = 0.25
UNAVAILABLE_STEPS = 0.01


@distribution("masked_series")
def _masked_series(shape, params, rng):
    """Training windows of intermittent demand (integer sizes, many exact zeros) with
    padded and unavailable steps as NaN; windows run along dim 1."""
    windows, length = shape[0], shape[1]
    occurs = torch.rand((windows, length), generator=rng) < uniform((windows, 1), rng, *DEMAND_PROBABILITY)
    size = log_normal((windows, length), rng, DEMAND_SIZE_MEDIAN, DEMAND_SIZE_SIGMA).ceil_()
    series = size * occurs
    series = sprinkle_nan(left_pad_with_nan(series, rng, PADDED_WINDOWS), rng, UNAVAILABLE_STEPS)
    return series.view(shape)


FORECAST_TAIL_DF = 4
FORECAST_SCALE_SIGMA = 0.5
CHRONOS_BIN_LIMIT = 15.0   # Chronos tokenizes mean-scaled values on [-15, 15]
CHRONOS_SAMPLE_SPREAD = 0.1  # mean-scaled samples sit near 1, a few dozen bins wide: ties


@distribution("forecast_samples")
def _forecast_samples(shape, params, rng):
    """Sample paths of a probabilistic forecaster along the last dim: Student-t around a
    per-step location; params.bins: Chronos, whose mean-scaled samples are decoded from
    that many token bins (exact ties across samples)."""
    steps, samples = rows_and_length(shape)
    scale = log_normal((steps, 1), rng, 1.0, FORECAST_SCALE_SIGMA)
    noise = student_t((steps, samples), rng, FORECAST_TAIL_DF)
    if "bins" not in params:
        return ((normal((steps, 1), rng) + noise) * scale).view(shape)
    scaled = normal((steps, 1), rng, 1.0, CHRONOS_SAMPLE_SPREAD) + CHRONOS_SAMPLE_SPREAD * noise
    centres = torch.linspace(-CHRONOS_BIN_LIMIT, CHRONOS_BIN_LIMIT, params["bins"])
    token = torch.bucketize(scaled, (centres[1:] + centres[:-1]) / 2)
    return (centres[token] * scale).view(shape)


ALIGNMENT_WIDTH_FRAMES = (5.0, 30.0)
ATTENTION_NOISE_STD = 0.5


@distribution("whisper_windows")
def _whisper_windows(shape, params, rng):
    """Whisper word timing: cross-attention of tokens over frames (a monotonic alignment),
    standardized over tokens as whisper does, reflect-padded and unfolded into windows
    of the last dim's width for its median filter."""
    heads, tokens, frames, width = shape
    centre = uniform((heads, tokens), rng, 0, frames).sort(-1).values.unsqueeze(-1)
    spread = uniform((heads, tokens, 1), rng, *ALIGNMENT_WIDTH_FRAMES)
    frame = torch.arange(frames, dtype=torch.float32)
    alignment = -(frame - centre).square() / (2 * spread.square())
    logits = alignment + normal((heads, tokens, frames), rng, std=ATTENTION_NOISE_STD)
    weights = torch.softmax(logits, -1)
    std, mean = torch.std_mean(weights, dim=-2, keepdim=True)
    weights = (weights - mean) / std
    padded = F.pad(weights, (width // 2, width // 2), mode="reflect")
    return padded.unfold(-1, width, 1).contiguous()
