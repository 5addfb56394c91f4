"""Deterministic value generators, one per catalogue `dist` name, grouped by domain.

`GENERATORS[dist](shape, dtype, params, seed)` returns a CPU tensor whose values
have the properties the catalogue's `desc` names (ties, NaN, -inf, presortedness,
range); the exact values are a pure function of the seed.
"""
# importing a module registers its generators
from . import detection, ids, images, language, retrieval, routing, series, statistics  # noqa: F401
from .registry import GENERATORS

__all__ = ["GENERATORS"]
