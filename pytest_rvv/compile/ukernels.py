"""Which IREE microkernels each dispatch function carries.

With ``--iree-llvmcpu-enable-ukernels`` IREE links its ukernel bitcode (``iree_uk_mmt4d`` and the
architecture's tile functions, e.g. ``iree_uk_mmt4d_tile_f32f32f32_7xXXx1_riscv_64_v``) into the dispatch
library and LLVM inlines it: the shipped ELF has no symbol and no debug info left for it. The optimized
LLVM IR still names each inlined function in its block labels (``%iree_uk_..._riscv_64_v.exit``), so the
compile keeps that IR for a moment, reads the names per dispatch function, and drops it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

INFO_FILE = "ukernels.json"
INTERMEDIATES = "intermediates"
_DEFINE = re.compile(r'^define\b[^@]*@(?:"([^"]+)"|([\w.$]+))\(')
_UKERNEL = re.compile(r"\b(iree_uk_[A-Za-z0-9_]+?)(?:\.exit\d*|\.i\d*|\b)")
GENERIC_SUFFIX = "_generic"  # the architecture-independent (scalar) tile function


def enables_ukernels(flags: Iterable[str]) -> bool:
    """True when the flags ask iree-compile for microkernels (``--iree-llvmcpu-enable-ukernels=`` not none)."""
    for flag in flags:
        if flag.startswith("--iree-llvmcpu-enable-ukernels="):
            return flag.split("=", 1)[1] not in ("", "none")
    return False


def ukernels_in_ir(lines: Iterable[str]) -> dict[str, list[str]]:
    """Microkernel functions referenced (inlined or called) inside each function of optimized LLVM IR."""
    found: dict[str, set[str]] = {}
    current: str | None = None
    for line in lines:
        if line.startswith("define"):
            match = _DEFINE.match(line)
            current = (match.group(1) or match.group(2)) if match else None
            if current is not None and current.startswith("iree_uk_"):
                current = None  # a microkernel kept out of line is not a dispatch
            continue
        if line.startswith("}"):
            current = None
            continue
        if current is not None and "iree_uk_" in line:
            found.setdefault(current, set()).update(_UKERNEL.findall(line))
    return {function: sorted(names) for function, names in found.items()}


def record_ukernels(intermediates: Path, into: Path) -> None:
    """Write ``into/ukernels.json`` from the ``*.optimized.ll`` files iree-compile dumped."""
    table: dict[str, list[str]] = {}
    for ll in sorted(intermediates.glob("*.optimized.ll")):
        with ll.open(errors="replace") as f:
            table.update(ukernels_in_ir(f))
    (into / INFO_FILE).write_text(json.dumps(table, indent=1, sort_keys=True))


def load_ukernels(folder: Path) -> Mapping[str, tuple[str, ...]]:
    """The table a compile recorded (function -> microkernels); empty when none was recorded."""
    path = folder / INFO_FILE
    if not path.is_file():
        return {}
    return {function: tuple(names) for function, names in json.loads(path.read_text()).items()}


def tile_functions(names: Iterable[str]) -> list[str]:
    """The tile functions among a dispatch's microkernels (what does the arithmetic)."""
    return [n for n in names if "_tile_" in n]
