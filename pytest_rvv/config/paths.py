"""Matmul paths: the ways IREE lowers a matmul for a CPU target, chosen by compiler flags.

A vector target has up to five path twins that differ only in these flags (iree-compile 3.13.0, ``--help``):

- ``default``: no data tiling (matmuls tiled and vectorized in place);
- ``data-tiled``: data tiling with generic codegen (``--iree-opt-data-tiling --iree-llvmcpu-enable-ukernels=none``);
- ``mmt4d``: data tiling on IREE's riscv_64 mmt4d microkernels (``--iree-llvmcpu-enable-ukernels=mmt4d``);
- ``inner-tiled``: data tiling lowered to ``iree_codegen.inner_tiled`` (``--iree-llvmcpu-enable-inner-tiled``,
  microkernels off; iree PRs 24311, 24858, 24926);
- ``ukernels-all``: data tiling on every microkernel IREE has (``--iree-llvmcpu-enable-ukernels=all
  --iree-llvmcpu-enable-inner-tiled=false``, iree issue 24932's "ukernel" side): mmt4d and also pack/unpack, whose
  riscv_64 microkernels are IREE's generic C (scalar code), so both operands are packed by scalar loops at run time.

A target's path is read from its flags, so a target that spells the flags by hand is on that path too (a flag that
only restates iree-compile's default, ``--iree-llvmcpu-enable-inner-tiled=false``, is not needed for that).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from pytest_rvv.base.errors import ConfigError

DATA_TILING = "--iree-opt-data-tiling"
UKERNELS_NONE = "--iree-llvmcpu-enable-ukernels=none"
UKERNELS_MMT4D = "--iree-llvmcpu-enable-ukernels=mmt4d"
INNER_TILED = "--iree-llvmcpu-enable-inner-tiled"
UKERNELS_ALL = "--iree-llvmcpu-enable-ukernels=all"
INNER_TILED_OFF = "--iree-llvmcpu-enable-inner-tiled=false"  # iree-compile's default, spelled as iree issue 24932 does
_RESTATED = frozenset({INNER_TILED_OFF})  # flags that restate a default: not needed to be on their path


@dataclass(frozen=True)
class MatmulPath:
    """One lowering of matmuls: its name, the flags that choose it, the target-name suffix of its twins."""

    name: str
    flags: tuple[str, ...]
    suffix: str
    description: str


PATHS: dict[str, MatmulPath] = {p.name: p for p in (
    MatmulPath("default", (), "", "no data tiling"),
    MatmulPath("data-tiled", (DATA_TILING, UKERNELS_NONE), "-dt", "data tiling, generic codegen"),
    MatmulPath("mmt4d", (DATA_TILING, UKERNELS_MMT4D), "-mmt4d", "data tiling on the mmt4d microkernels"),
    MatmulPath("inner-tiled", (DATA_TILING, UKERNELS_NONE, INNER_TILED), "-inner",
               "data tiling lowered to inner_tiled"),
    MatmulPath("ukernels-all", (DATA_TILING, UKERNELS_ALL, INNER_TILED_OFF), "-ukall",
               "data tiling on every microkernel (mmt4d, and pack/unpack in generic scalar C)"),
)}
DEFAULT = "default"
_PATH_FLAGS = frozenset(f for p in PATHS.values() for f in p.flags)


def path_of(flags: Iterable[str]) -> str:
    """The path a flag list chooses (the most specific path whose flags it all has)."""
    given = set(flags) | _RESTATED
    best = DEFAULT
    for path in PATHS.values():
        if set(path.flags) <= given and len(path.flags) > len(PATHS[best].flags):
            best = path.name
    return best


def without_path(flags: Iterable[str]) -> tuple[str, ...]:
    """The flags with every path flag removed: what path twins share."""
    return tuple(f for f in flags if f not in _PATH_FLAGS)


def on_path(flags: Iterable[str], path: str, where: str) -> tuple[str, ...]:
    """``flags`` moved onto ``path`` (its own path flags replaced); one line naming ``where`` for an unknown path."""
    return without_path(flags) + matmul_path(path, where).flags


def matmul_path(name: str, where: str) -> MatmulPath:
    """The path called ``name``; one ConfigError line naming ``where`` and the known paths otherwise."""
    if name not in PATHS:
        raise ConfigError(f"{where}: unknown matmul path {name!r}; known: {', '.join(PATHS)}")
    return PATHS[name]
