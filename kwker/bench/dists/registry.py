"""The table of value generators, one per catalogue `dist` name."""
from typing import Callable, Dict, Tuple

import torch

Shape = Tuple[int, ...]
# A registered body draws float32 or int64 values of exactly `shape` from `rng`.
Body = Callable[[Shape, dict, torch.Generator], torch.Tensor]
# The public form: (shape, dtype, params, seed) -> CPU tensor of that shape and dtype.
Generator = Callable[[Shape, torch.dtype, dict, int], torch.Tensor]

GENERATORS: Dict[str, Generator] = {}


def distribution(name: str) -> Callable[[Body], Body]:
    """Register `body` as the generator of the catalogue distribution `name`."""
    def register(body: Body) -> Body:
        if name in GENERATORS:
            raise ValueError(f"distribution {name!r} registered twice")

        def generate(shape, dtype: torch.dtype, params: dict, seed: int) -> torch.Tensor:
            shape = tuple(shape)
            values = body(shape, params, torch.Generator().manual_seed(seed))
            if tuple(values.shape) != shape:
                raise AssertionError(f"{name} made shape {tuple(values.shape)}, not {shape}")
            return values.to(dtype).contiguous()

        generate.__name__ = generate.__qualname__ = f"generate_{name}"
        generate.__doc__ = body.__doc__
        GENERATORS[name] = generate
        return body
    return register
