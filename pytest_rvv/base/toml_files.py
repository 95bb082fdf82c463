"""Reading the project's TOML files (expected failures, conformance lists) with one-line errors."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from pytest_rvv.base.errors import ConfigError


def read_toml(path: Path, fix: str) -> dict[str, Any]:
    """The parsed file, ``{}`` when it does not exist; invalid TOML names the file and ``fix``."""
    if not path.is_file():
        return {}
    try:
        return tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML ({exc}); {fix}") from exc
