"""Expected failures per target and model, read from a TOML file and applied as strict xfails.

File format (``baselines/expected-failures.toml`` by default)::

    [rv64gcv-zvl128b]
    nsnet2 = { phase = "agreement", reason = "..." }

``phase`` is where the failure happens: ``compile`` (iree-import-onnx/iree-compile rejects the
model; the compile and the agreement tests are both expected to fail), ``run`` (the module
crashes or times out) or ``agreement`` (outputs differ from onnxruntime). The xfail is strict
and limited to that kind of error: an unexpected pass, or a different failure, fails the test.
"""

from __future__ import annotations

import tomllib
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from pytest_rvv.errors import CompileFailed, ConfigError, RunFailed

PHASES: dict[str, type[BaseException]] = {
    "compile": CompileFailed,
    "run": RunFailed,
    "agreement": AssertionError,
}
# Which checks an expected failure in a phase affects: a model that does not compile cannot
# run either, so a compile failure is expected in every check.
AFFECTED_CHECKS = {"compile": {"compile", "agreement"}, "run": {"agreement"}, "agreement": {"agreement"}}


@dataclass(frozen=True)
class ExpectedFailure:
    target: str
    model: str
    phase: str
    reason: str

    @property
    def raises(self) -> type[BaseException]:
        return PHASES[self.phase]

    def applies_to(self, check: str) -> bool:
        return check in AFFECTED_CHECKS[self.phase]


def load_expected_failures(
    path: Path, targets: Collection[str], models: Collection[str]
) -> dict[tuple[str, str], ExpectedFailure]:
    """Read ``path`` (missing file: no expected failures), validating every entry."""
    if not path.is_file():
        return {}
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML ({exc}); fix or delete the file") from exc
    found: dict[tuple[str, str], ExpectedFailure] = {}
    for target, entries in data.items():
        if target not in targets:
            raise ConfigError(f"{path}: [{target}] is not a known target; known: {', '.join(targets)}")
        if not isinstance(entries, dict):
            raise ConfigError(f"{path}: [{target}] must be a table of model = {{ phase, reason }}")
        for model, entry in entries.items():
            where = f"{path}: [{target}] {model}"
            if model not in models:
                raise ConfigError(f"{where}: not a known model; known: {', '.join(models)}")
            if not isinstance(entry, dict):
                raise ConfigError(f"{where}: must be {{ phase = \"...\", reason = \"...\" }}")
            phase, reason = entry.get("phase"), entry.get("reason")
            if phase not in PHASES:
                raise ConfigError(f"{where}: phase must be one of {', '.join(PHASES)}, got {phase!r}")
            if not isinstance(reason, str) or not reason.strip():
                raise ConfigError(f"{where}: give a reason (the error message seen)")
            extra = set(entry) - {"phase", "reason"}
            if extra:
                raise ConfigError(f"{where}: unknown field(s) {', '.join(sorted(extra))}")
            found[(target, model)] = ExpectedFailure(target, model, phase, reason.strip())
    return found
