"""Errors pytest-rvv raises. Each renders as one line naming the thing and the fix."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

_V = TypeVar("_V")


class RvvError(Exception):
    """Base class: ``str(error)`` is a single line fit to show a user."""


class ConfigError(RvvError):
    """A bad option, pyproject entry or config file."""


class ToolMissing(RvvError):
    """A required external tool (QEMU, runtime, binutils...) is not available."""


class RuntimeNotProvided(ToolMissing):
    """No runtime exists for an architecture unless the user supplies one (riscv64): a skip."""


class ModelError(RvvError):
    """A model file is missing, corrupt or cannot be prepared."""


class CompileFailed(RvvError):
    """iree-import-onnx or iree-compile rejected a model."""

    def __init__(self, message: str, log: str = "") -> None:
        super().__init__(message)
        self.log = log


class ImportFailed(CompileFailed):
    """iree-import-onnx rejected a model (a compile failure, at the import step)."""


class RunFailed(RvvError):
    """A compiled module crashed, timed out or exited non-zero (``deterministic``: it exited with an error code, as
    it will again on the same module and inputs; a signal or a timeout may not repeat)."""

    def __init__(self, message: str, details: str = "", deterministic: bool = False) -> None:
        super().__init__(message)
        self.details = details
        self.deterministic = deterministic


class StorageFault(RvvError):
    """A directory pytest-rvv writes (the cache, the tools cache, a report folder) is full, read-only, or lacks
    atomic rename or file locks: one line naming the directory, what failed and the fix."""


class PathUnavailable(RvvError):
    """The compiler lacks a flag a target's matmul path needs (config/paths.py): its cells could not run."""


class RuntimeMismatch(RvvError):
    """A runtime cannot load modules of the installed compiler (bytecode version mismatch)."""


def first_lines(text: str, count: int = 5, *, pattern: str = "error") -> str:
    """The first ``count`` lines of ``text`` that mention ``pattern`` (or the first lines at all)."""
    lines = [line.strip()[:400] for line in text.splitlines() if line.strip()]
    hits = [line for line in lines if pattern in line.lower()]
    return "\n".join((hits or lines)[:count])


def tail(text: str, count: int = 20) -> str:
    """The last ``count`` lines of ``text``."""
    return "\n".join(text.splitlines()[-count:])


class Remembered(Generic[_V]):
    """Values made once per key in this process, where a failure of the kind ``errors`` is remembered too and raised
    again as is: a refusal is said once per key and never retried (a runtime none loads, a release pip cannot get)."""

    def __init__(self, errors: type[Exception]) -> None:
        self.errors = errors
        self._made: dict[Hashable, _V | Exception] = {}

    def get(self, key: Hashable, make: Callable[[], _V]) -> _V:
        if key not in self._made:
            try:
                self._made[key] = make()
            except self.errors as exc:
                self._made[key] = exc
        found = self._made[key]
        if isinstance(found, Exception):
            raise found
        return found
