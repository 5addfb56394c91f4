"""Pixels, segmentation maps and depth maps."""
import math

import torch
import torch.nn.functional as F

from .registry import distribution
from .registry import Shape
from .toolkit import normal, numel, shuffled, smooth_field, uniform


def image_dims(n_pixels: int):
    """(height, width) of the most square image with n_pixels pixels."""
    height = max(d for d in range(1, math.isqrt(n_pixels) + 1) if n_pixels % d == 0)
    return height, n_pixels // height


def voronoi_regions(height: int, width: int, n_regions: int, rng) -> torch.Tensor:
    """int64 [height, width] map of the nearest of n_regions random seed points:
    piecewise-constant regions with straight borders, like segmentation maps."""
    seeds_y = uniform((n_regions, 1, 1), rng, 0, height)
    seeds_x = uniform((n_regions, 1, 1), rng, 0, width)
    ys = torch.arange(height, dtype=torch.float32).view(1, height, 1)
    xs = torch.arange(width, dtype=torch.float32).view(1, 1, width)
    return ((ys - seeds_y).square() + (xs - seeds_x).square()).argmin(0)


QUANTIZATION_LEVELS = 255  # 8-bit pixels
SHADING_OCTAVES = ((64, 1.0), (16, 0.5), (4, 0.25))  # (pixels per cell, weight): 1/f-like
SHADING_WEIGHT = 0.6       # against the objects' flat tones
IMAGE_OBJECTS = 12


def image_like(shape: Shape, rng, salt_pepper=0.0) -> torch.Tensor:
    """Natural-image-like pixels in [0, 1] quantized to 1/255 (ties): smooth shading over
    several scales plus flat objects with sharp edges; a `salt_pepper` fraction of the
    pixels are replaced by exact 0 or 1 impulses."""
    *lead, height, width = shape
    planes = numel(tuple(lead))
    shading = sum(smooth_field((planes, height, width), rng, pixels_per_cell) * weight
                  for pixels_per_cell, weight in SHADING_OCTAVES)
    objects = voronoi_regions(height, width, IMAGE_OBJECTS, rng)
    object_tone = normal((planes, IMAGE_OBJECTS), rng)
    tone = object_tone[:, objects.flatten()].view(planes, height, width)
    pixels = torch.sigmoid(SHADING_WEIGHT * shading + tone)
    pixels = (pixels * QUANTIZATION_LEVELS).round_() / QUANTIZATION_LEVELS
    if salt_pepper:
        impulse = torch.rand(pixels.shape, generator=rng) < salt_pepper
        white = torch.rand(pixels.shape, generator=rng) < 0.5  # salt as often as pepper
        pixels = torch.where(impulse, white.float(), pixels)
    return pixels.reshape(shape)


SEGMENTS = 25                # regions of a segmentation map
SEGMENT_ID_RANGE = 256


@distribution("segmap")
def _segmap(shape, params, rng):
    """Piecewise-constant segment ids (~25 regions)."""
    regions = voronoi_regions(*shape, SEGMENTS, rng)
    segment_id = shuffled(torch.arange(SEGMENT_ID_RANGE), rng)[:SEGMENTS]
    return segment_id[regions]


PANOPTIC_SEGMENTS = 30
PANOPTIC_CATEGORIES = 133    # COCO panoptic
INSTANCES_PER_CATEGORY = 5


@distribution("panoptic_pairs")
def _panoptic_pairs(shape, params, rng):
    """(category, instance) per pixel of an h x w panoptic map, ~30 distinct rows."""
    regions = voronoi_regions(*params["hw"], PANOPTIC_SEGMENTS, rng).flatten()
    category = torch.randint(0, PANOPTIC_CATEGORIES, (PANOPTIC_SEGMENTS,), generator=rng)
    instance = torch.randint(0, INSTANCES_PER_CATEGORY, (PANOPTIC_SEGMENTS,), generator=rng)
    return torch.stack([category[regions], instance[regions]], dim=1)


CLASSES_PER_IMAGE = 4
REGIONS_PER_CLASS = 3
TRUE_CLASS_NATS = (0.0, 5.0)  # how much the network favours the right class


@distribution("lovasz_errors")
def _lovasz_errors(shape, params, rng):
    """Lovasz-softmax errors |softmax - onehot| [batch, classes, pixels]: wrong classes
    tiny, the true class anywhere in 0..1."""
    batch, classes, pixels = shape
    height, width = image_dims(pixels)
    present = torch.stack([torch.randperm(classes, generator=rng)[:CLASSES_PER_IMAGE] for _ in range(batch)])
    regions = voronoi_regions(height, width, CLASSES_PER_IMAGE * REGIONS_PER_CLASS, rng).flatten()
    regions %= CLASSES_PER_IMAGE
    labels = present[:, regions]  # [batch, pixels]
    onehot = F.one_hot(labels, classes).permute(0, 2, 1).float()
    logits = normal(shape, rng) + onehot * uniform((batch, 1, pixels), rng, *TRUE_CLASS_NATS)
    return (torch.softmax(logits, 1) - onehot).abs_()


@distribution("image")
def _image(shape, params, rng):
    """Natural-image-like pixels quantized to 1/255; params.salt_pepper: exact 0/1 impulses."""
    return image_like(shape, rng, params.get("salt_pepper", 0.0))


@distribution("unfolded_image")
def _unfolded_image(shape, params, rng):
    """kornia median_blur's 3x3 neighbourhoods [batch, channels, 9, h, w] of quantized
    pixels with zero borders."""
    batch, channels, window, height, width = shape
    side = math.isqrt(window)
    pixels = image_like((batch, channels, height, width), rng)
    padded = F.pad(pixels, (side // 2,) * 4)
    shifts = [padded[..., dy:dy + height, dx:dx + width] for dy in range(side) for dx in range(side)]
    return torch.stack(shifts, dim=2)


DEPTH_MEDIAN_M, DEPTH_MAX_M = 12.0, 80.0
DEPTH_LOG_STD = 0.45  # keeps the far tail below the maximum range


@distribution("depth_values")
def _depth_values(shape, params, rng):
    """Metric depths of a smooth depth map, log-normal around median_m, clipped at max_m;
    params.round_mm quantizes to millimetres (ties)."""
    height, width = image_dims(shape[-1])
    log_median = math.log(params.get("median_m", DEPTH_MEDIAN_M))
    log_depth = log_median + DEPTH_LOG_STD * smooth_field((height, width), rng)
    depth = log_depth.exp_().clamp_(max=params.get("max_m", DEPTH_MAX_M))
    if params.get("round_mm"):
        depth = (depth * 1000).round_() / 1000
    return depth.reshape(shape)


MEMBER_GAIN = (0.9, 1.1)
MEMBER_SHIFT_STD = 0.02
MEMBER_DISAGREEMENT = 0.02   # smooth per-member error of the relative depth


@distribution("depth_ensemble")
def _depth_ensemble(shape, params, rng):
    """Marigold's ensemble: members are affine-aligned copies of one smooth relative-depth
    map, each with its own smooth error."""
    members = shape[0]
    height, width = shape[-2:]
    relative = torch.sigmoid(smooth_field((height, width), rng, pixels_per_cell=64))
    error = MEMBER_DISAGREEMENT * smooth_field((members, height, width), rng)
    gain = uniform((members, 1, 1), rng, *MEMBER_GAIN)
    shift = normal((members, 1, 1), rng, std=MEMBER_SHIFT_STD)
    return (gain * (relative + error) + shift).reshape(shape)


DEPTH_RANGE_M = (1e-3, 10.0)   # ZoeDepth's NYU range
ATTRACTOR_JITTER = 0.3         # attractors move centres by this fraction of a bin width


@distribution("depth_bins")
def _depth_bins(shape, params, rng):
    """ZoeDepth bin centres per pixel along dim 1: increasing bins nudged by attractors,
    so nearly sorted with a few local inversions."""
    batch, bins, height, width = shape
    width_logits = smooth_field((batch, bins, height, width), rng) + normal((1, bins, 1, 1), rng)
    widths = F.softplus(width_logits)
    widths = widths / widths.sum(1, keepdim=True) * (DEPTH_RANGE_M[1] - DEPTH_RANGE_M[0])
    centres = DEPTH_RANGE_M[0] + widths.cumsum(1) - widths / 2
    return centres + normal(shape, rng, std=ATTRACTOR_JITTER) * widths
