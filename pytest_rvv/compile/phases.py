"""One compile up to codegen per model and group of targets that differ only in their CPU (issue 50).

``iree-compile --compile-to=executable-sources`` stops before codegen. Its output depends on the target through one
value only, the ``#hal.executable.target<...>`` attribute the device and every executable variant carry, as long as
the triple, the ABI and every other flag are the same (a *group*: rv64gc, rv64gcv-zvl128b/256b/512b and rva23u64 are
one; a data-tiling path, the host and aarch64 are each their own). So the group's targets share that phase: it is
compiled once (``--mlir-print-debuginfo`` keeps the input's locations, which the module's debug info names), the
attribute is swapped for each target's own (read from a tiny module compiled to ``preprocessing``), and
``--compile-from=executable-sources`` does the codegen. The module is byte-identical to a full compile:
``tests/test_compile_phases.py`` holds that for every built-in group. A phase that does not carry exactly one device
attribute is not shared (the full compile runs).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

PHASE = "executable-sources"
# flags that pick the CPU within a triple and ABI: the only ones a shared phase may differ in
CPU_FLAGS = ("--iree-llvmcpu-target-cpu-features=", "--iree-llvmcpu-target-cpu=")
_DEVICE = re.compile(r"^  util\.global private @__device_0 = #hal\.device\.target<\"local\", "
                     r"\[#hal\.executable\.target(<.*>)\]> : !hal\.device(?: loc\(.*\))?$", re.M)
_OTHER_DEVICE = re.compile(r"@__device_[1-9]")
TINY = "func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {\n  return %a : tensor<4xf32>\n}\n"
_HEAD_BYTES = 1 << 16  # the device global is the module's first op


def group_key(flags: Iterable[str]) -> tuple[str, ...]:
    """What a shared phase is keyed by: the flags without those that pick the CPU."""
    return tuple(f for f in flags if not f.startswith(CPU_FLAGS))


def shared_groups(flag_lists: Iterable[Sequence[str]]) -> frozenset[tuple[str, ...]]:
    """The groups two or more of ``flag_lists`` fall in: only those gain from a shared phase."""
    counts = Counter(group_key(flags) for flags in flag_lists)
    return frozenset(key for key, n in counts.items() if n > 1)


def device_attribute(text: str) -> str | None:
    """The ``#hal.executable.target`` attribute of a phase's one device, or None when it has none or several."""
    head = text[:_HEAD_BYTES]
    found = _DEVICE.findall(head)
    if len(found) != 1 or _OTHER_DEVICE.search(head):
        return None
    return str(found[0])


def retarget(phase: Path, given: str, wanted: str, out: Path) -> None:
    """Write ``phase`` with its target attribute ``given`` replaced by ``wanted`` into ``out``."""
    text = phase.read_text()
    if given not in text:
        raise ValueError(f"{phase}: the phase does not carry the target attribute it was compiled with")
    out.write_text(text.replace(given, wanted) if given != wanted else text)
