"""Deterministic value generators, one per catalogue `dist` name, grouped by domain.

`GENERATORS[dist](shape, dtype, params, seed)` returns a CPU tensor whose values
have the properties the catalogue's `desc` names (ties, NaN, -inf, presortedness,
range); the exact values are a pure function of the seed.
"""
from . import detection, ids, images, language, retrieval, routing, series, statistics  # noqa: F401  (they register)
from .registry import GENERATORS

__all__ = ["GENERATORS"]
