"""Plain-torch references of the layers in the corpus.

They call `torch.median` by attribute at run time, so while Kwker is installed
the same code runs on Kwker's median: that is how the layer is benchmarked.
"""
import torch
import torch.nn.functional as F

# padding_mode as nn.Conv2d spells it -> F.pad's mode
PAD_MODES = {"zeros": "constant", "reflect": "reflect", "replicate": "replicate", "circular": "circular"}


def median_pool2d_reference(x: torch.Tensor, kernel_size: int, stride: int = 1, padding: int = 0,
                            padding_mode: str = "reflect") -> torch.Tensor:
    """Median filter over k x k windows of an [N, C, H, W] tensor, as timm's MedianPool2d
    and kornia's median_blur compute it: pad, unfold into windows, median over each
    window (the lower median of the k*k values)."""
    padded = F.pad(x, (padding,) * 4, mode=PAD_MODES[padding_mode])
    windows = padded.unfold(2, kernel_size, stride).unfold(3, kernel_size, stride)
    flat_windows = windows.reshape(*windows.shape[:4], kernel_size * kernel_size)
    return torch.median(flat_windows, dim=-1).values
