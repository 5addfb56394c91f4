"""Plain-torch reference implementations of Kwker's layers: the semantics
the fast operators reproduce bit for bit (forward and backward), and the
baseline the benchmark measures against."""
import torch
import torch.nn.functional as F


def median_pool2d_windows(x, kernel_size, stride, padding, padding_mode):
    """(values, indices) of the median filter: x (*, H, W) padded by
    F.pad(padding=(left, right, top, bottom), mode), cut into windows by
    F.unfold, and reduced by torch.median(dim) over each window (the lower
    median, ties by position in the window, a window's first NaN when it
    holds one); indices are positions in the window, row-major."""
    h, w = x.shape[-2:]
    lead = x.shape[:-2]
    planes = x.reshape(-1, 1, h, w)
    mode = "constant" if padding_mode == "zeros" else padding_mode
    padded = F.pad(planes, tuple(padding), mode=mode)
    windows = F.unfold(padded, tuple(kernel_size), stride=tuple(stride))
    values, indices = windows.median(dim=1)
    hp, wp = padded.shape[-2:]
    oh = (hp - kernel_size[0]) // stride[0] + 1
    ow = (wp - kernel_size[1]) // stride[1] + 1
    return values.view(*lead, oh, ow), indices.view(*lead, oh, ow)


def median_pool2d(x, kernel_size, stride, padding, padding_mode):
    return median_pool2d_windows(x, kernel_size, stride, padding, padding_mode)[0]


def median_pool1d_windows(x, kernel_size, stride, padding, padding_mode):
    """(values, indices) of the 1-d median filter of x (*, L): the 2-d
    filter of the one-row image (*, 1, L), 1 x kernel_size windows, padding
    (left, right) on the row.  Values and indices equal those of
    F.pad + Tensor.unfold(-1, kernel_size, stride) + median(-1); the
    gradient is F.unfold's (col2im sums a position's gradient window offset
    by window offset), and Tensor.unfold's backward sums in another order:
    it can differ from this one in the last bits where an element is the
    median of three or more windows."""
    values, indices = median_pool2d_windows(x.unsqueeze(-2), (1, kernel_size), (1, stride),
                                            (padding[0], padding[1], 0, 0), padding_mode)
    return values.squeeze(-2), indices.squeeze(-2)


def median_pool1d(x, kernel_size, stride, padding, padding_mode):
    return median_pool1d_windows(x, kernel_size, stride, padding, padding_mode)[0]


def resolve_padding1d(length, kernel_size, stride, padding):
    """(left, right) from MedianPool1d's padding: None or "same" (as
    resolve_padding along a row), an int (both sides) or a pair."""
    if padding is None or padding == "same":
        left, right, _, _ = resolve_padding(1, length, (1, kernel_size), (1, stride), None)
        return (left, right)
    if isinstance(padding, int):
        return (padding, padding)
    return tuple(padding)


def _pair(value):
    return (value, value) if isinstance(value, int) else tuple(value)


def resolve_padding(h, w, kernel_size, stride, padding):
    """F.pad's (left, right, top, bottom) from MedianPool2d's padding
    argument: None or "same" (the output ceil(size / stride) long, the
    odd pixel of an even total after the input, as TensorFlow's SAME and
    the widely copied MedianPool2d gist), an int (all sides), a pair
    (height, width; both sides) or a quadruple in F.pad's order."""
    kh, kw = kernel_size
    sh, sw = stride
    if padding is None or padding == "same":
        ph = max(kh - sh, 0) if h % sh == 0 else max(kh - h % sh, 0)
        pw = max(kw - sw, 0) if w % sw == 0 else max(kw - w % sw, 0)
        return (pw // 2, pw - pw // 2, ph // 2, ph - ph // 2)
    if isinstance(padding, int):
        return (padding,) * 4
    padding = tuple(padding)
    if len(padding) == 2:
        return (padding[1], padding[1], padding[0], padding[0])
    return padding


class MedianPool2d(torch.nn.Module):
    """The median filter as plain torch (F.pad, F.unfold, torch.median):
    the reference kwker.nn.MedianPool2d reproduces.  No parameters or
    buffers.  kernel_size/stride: int or (h, w); padding: see
    resolve_padding (default "same"); padding_mode: "reflect" (default,
    as kornia.filters.median_blur 0.9 and the MedianPool2d gist),
    "zeros", "replicate" or "circular"."""

    def __init__(self, kernel_size=3, stride=1, padding=None, padding_mode="reflect"):
        super().__init__()
        self.kernel_size = _pair(kernel_size)
        self.stride = _pair(stride)
        self.padding = padding
        self.padding_mode = padding_mode

    def resolved(self, x):
        """(kernel_size, stride, padding, padding_mode) for input x."""
        h, w = x.shape[-2:]
        padding = resolve_padding(h, w, self.kernel_size, self.stride, self.padding)
        return self.kernel_size, self.stride, padding, self.padding_mode

    def forward(self, x):
        return median_pool2d(x, *self.resolved(x))

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, "
                f"padding={self.padding!r}, padding_mode={self.padding_mode!r}")


class MedianPool1d(torch.nn.Module):
    """The 1-d median filter as plain torch (median_pool1d_windows: F.pad,
    F.unfold, torch.median on the one-row image): the reference
    kwker.nn.MedianPool1d reproduces.  No parameters or buffers.
    kernel_size/stride: int; padding: None/"same" (default), an int or
    (left, right); padding_mode: "reflect" (default), "zeros", "replicate" or
    "circular"."""

    def __init__(self, kernel_size=3, stride=1, padding=None, padding_mode="reflect"):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride
        self.padding = padding
        self.padding_mode = padding_mode

    def resolved(self, x):
        """(kernel_size, stride, padding, padding_mode) for input x."""
        padding = resolve_padding1d(x.shape[-1], self.kernel_size, self.stride, self.padding)
        return self.kernel_size, self.stride, padding, self.padding_mode

    def forward(self, x):
        return median_pool1d(x, *self.resolved(x))

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, "
                f"padding={self.padding!r}, padding_mode={self.padding_mode!r}")
