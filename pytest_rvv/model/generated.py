"""Models built in code (the seed study's architectures) with seeded weights, cached as .onnx."""

from __future__ import annotations

import inspect
import sys
from dataclasses import dataclass
from pathlib import Path

import onnx

from pytest_rvv.base.store import Store, digest


@dataclass(frozen=True)
class GeneratedSource:
    """An architecture from ``pytest_rvv.model.builders`` built at one size with one seed."""

    builder: str
    size: str
    seed: int = 0

    def describe(self) -> str:
        return f"built in code: {self.builder} ({self.size}, seed {self.seed})"

    def fetch(self, cache_root: Path) -> Path:
        from pytest_rvv.model.builders import BUILDERS

        builder = BUILDERS[self.builder]
        module = sys.modules[builder.build.__module__]
        # the builder's code is part of the key: editing an architecture rebuilds it
        key = digest(["generated-v1", self.builder, self.size, str(self.seed), inspect.getsource(module),
                      inspect.getsource(sys.modules["pytest_rvv.model.builders.graph"]), onnx.__version__])

        def build(tmp: Path) -> dict[str, object]:
            onnx.save(builder.build(self.size, self.seed), str(tmp / "model.onnx"))
            return {"builder": self.builder, "size": self.size, "seed": self.seed}

        return Store(cache_root).get_or_build("generated", key, build).file("model.onnx")
