"""One compile up to codegen per model and group of targets that differ only in their CPU, and one compile through
global optimization per model for every target (issue 50).

``iree-compile --compile-to=executable-sources`` stops before codegen. Its output depends on the target through one
value only, the ``#hal.executable.target<...>`` attribute the device and every executable variant carry, as long as
the triple, the ABI and every other flag are the same (a *group*: rv64gc, rv64gcv-zvl128b/256b/512b and rva23u64 are
one; a data-tiling path, the host and aarch64 are each their own). So the group's targets share that phase: it is
compiled once (``--mlir-print-debuginfo`` keeps the input's locations, which the module's debug info names), the
attribute is swapped for each target's own (read from the probe below), and ``--compile-from=executable-sources``
does the codegen. The module is byte-identical to a full compile: ``tests/test_compile_phases.py`` holds that for
every built-in group. A phase that does not carry exactly one device attribute is not shared (the full compile runs).

One step earlier, ``--compile-to=global-optimization`` (most of it the evaluation of constants at compile time) does
not read the target at all in iree-compile 3.9 to 3.13: riscv64, aarch64 and x86_64, with and without data tiling, give
the same text but for the device attribute (measured on every model the suites import). So every target of a run
whose flags differ only in the triple, ABI, CPU and matmul path (a *global group*) starts from one such phase: the
executable-sources phase of a group above is made from it once, and every other target compiles from it. It is
printed in the generic form: the custom one leaves out the locations of some block arguments (nsnet2's loop), and the
module's debug info would then name the phase's own lines. Whether a
toolchain keeps a target out of its global phase is asked, not assumed: a probe of two matmuls on constants is
compiled to that phase for each target, and only targets whose probe text is the same but for the attribute share
(an iree-compile that data-tiles in global optimization, ``--iree-global-opt-data-tiling``, gives another).
"""

from __future__ import annotations

import mmap
import os
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from pytest_rvv.base.store import digest
from pytest_rvv.config.paths import without_path

PHASE = "executable-sources"
GLOBAL_PHASE = "global-optimization"
# flags that pick the CPU within a triple and ABI: the only ones a shared phase may differ in
CPU_FLAGS = ("--iree-llvmcpu-target-cpu-features=", "--iree-llvmcpu-target-cpu=")
# flags that say where the code runs: with the matmul path's, those a shared global phase may differ in
TARGET_FLAGS = ("--iree-llvmcpu-target-triple=", "--iree-llvmcpu-target-abi=", *CPU_FLAGS)
_TARGET = "#hal.executable.target"
# the devices a phase names: @__device_N in the custom form, sym_name = "__device_N" in the generic one
_DEVICES = re.compile(r'@__device_(\d+)\b|sym_name = "__device_(\d+)"')
# what a target's global phase could differ in if a toolchain read the target there: matmuls (data tiling sets their
# encodings) on constants (evaluated at compile time), f32 and i8
PROBE = """\
func.func @f(%a: tensor<8x16xf32>, %b: tensor<8x16xi8>) -> (tensor<8x4xf32>, tensor<8x4xi32>) {
  %w = arith.constant dense<0.5> : tensor<16x4xf32>
  %v = arith.constant dense<3> : tensor<16x4xi8>
  %zf = arith.constant 0.0 : f32
  %zi = arith.constant 0 : i32
  %ef = tensor.empty() : tensor<8x4xf32>
  %ei = tensor.empty() : tensor<8x4xi32>
  %ff = linalg.fill ins(%zf : f32) outs(%ef : tensor<8x4xf32>) -> tensor<8x4xf32>
  %fi = linalg.fill ins(%zi : i32) outs(%ei : tensor<8x4xi32>) -> tensor<8x4xi32>
  %mf = linalg.matmul ins(%a, %w : tensor<8x16xf32>, tensor<16x4xf32>) outs(%ff : tensor<8x4xf32>) -> tensor<8x4xf32>
  %mi = linalg.matmul ins(%b, %v : tensor<8x16xi8>, tensor<16x4xi8>) outs(%fi : tensor<8x4xi32>) -> tensor<8x4xi32>
  return %mf, %mi : tensor<8x4xf32>, tensor<8x4xi32>
}
"""
_HEAD_BYTES = 1 << 16  # the device global is the module's first op


def group_key(flags: Iterable[str]) -> tuple[str, ...]:
    """What a shared phase is keyed by: the flags without those that pick the CPU."""
    return tuple(f for f in flags if not f.startswith(CPU_FLAGS))


def shared_groups(flag_lists: Iterable[Sequence[str]]) -> frozenset[tuple[str, ...]]:
    """The groups two or more of ``flag_lists`` fall in: only those gain from a shared phase."""
    counts = Counter(group_key(flags) for flags in flag_lists)
    return frozenset(key for key, n in counts.items() if n > 1)


def global_key(flags: Iterable[str]) -> tuple[str, ...]:
    """What a shared global phase is keyed by (with the probe's fingerprint): the flags without those that say where
    the code runs and which matmul path it takes."""
    return tuple(f for f in without_path(flags) if not f.startswith(TARGET_FLAGS))


def global_groups(flag_lists: Iterable[Sequence[str]],
                  shared: frozenset[tuple[str, ...]]) -> frozenset[tuple[str, ...]]:
    """The global groups two or more compiles of ``flag_lists`` start from: a target outside the ``shared``
    executable-sources groups is one, and each such group is one (its phase is made once)."""
    units = {group_key(flags) if group_key(flags) in shared else tuple(flags) for flags in flag_lists}
    counts = Counter(global_key(unit) for unit in units)
    return frozenset(key for key, n in counts.items() if n > 1)


def fingerprint(text: str, attribute: str) -> str:
    """A phase's text with its target attribute taken out, digested: equal for targets the phase does not read."""
    return digest([text.replace(attribute, "")])


def device_attribute(text: str) -> str | None:
    """The ``#hal.executable.target`` attribute (from its ``<``) of a phase's one device, in the custom or the generic
    form, or None when the phase names no device or several, or a device with several executable targets."""
    head = text[:_HEAD_BYTES]
    if {a or b for a, b in _DEVICES.findall(head)} != {"0"}:
        return None
    at = head.find(_TARGET + "<")  # the device global's, the module's first op
    if at < 0 or not head[:at].rstrip().endswith(("#hal.device.target<\"local\", [", "#hal.device.target<\"local\",[")):
        return None
    found = _balanced(head, at + len(_TARGET))
    return found if found is not None and head[at + len(_TARGET) + len(found):].startswith("]") else None


def _balanced(text: str, start: int) -> str | None:
    """The ``<...>`` that opens at ``text[start]``, its quoted strings skipped; None when it does not close."""
    depth, quoted, escaped = 0, False, False
    for i in range(start, len(text)):
        char = text[i]
        if quoted:
            escaped, quoted = (not escaped and char == "\\"), quoted and (escaped or char != '"')
        elif char == '"':
            quoted = True
        elif char == "<":
            depth += 1
        elif char == ">":
            depth -= 1
            if depth == 0:
                return text[start:i + 1]
    return None


def occurrences(phase: Path, attribute: str) -> list[int]:
    """The byte offsets of every ``attribute`` in ``phase``, left to right and not overlapping (what ``str.replace``
    replaces): found once when the phase is made, so that each target's copy is written without reading it again."""
    needle, found = attribute.encode(), []
    if not needle or phase.stat().st_size == 0:
        return found
    with phase.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        at = data.find(needle)
        while at >= 0:
            found.append(at)
            at = data.find(needle, at + len(needle))
    return found


def retarget(phase: Path, given: str, wanted: str, out: Path, offsets: Sequence[int] | None = None) -> None:
    """Write ``phase`` with its target attribute ``given`` replaced by ``wanted`` into ``out``.

    ``offsets`` (``occurrences``, kept with the phase): where ``given`` is, so the file is not read again: the text
    between them is copied by the kernel and each is checked to hold ``given``. A phase of hundreds of MB (a decoder
    layer's weights in hex) costs about 0.2 instead of 3 CPU s per copy."""
    if offsets is None:
        offsets = occurrences(phase, given)
    old, new = given.encode(), wanted.encode()
    with phase.open("rb") as src, out.open("wb", buffering=0) as dst:
        size = os.fstat(src.fileno()).st_size
        if not offsets or any(os.pread(src.fileno(), len(old), at) != old for at in offsets):
            raise ValueError(f"{phase}: the phase does not carry the target attribute it was compiled with")
        done = 0
        for at in offsets:
            _copy_range(src.fileno(), dst.fileno(), done, at - done)
            if dst.write(new) != len(new):
                raise OSError(f"writing {out}: the disk is full?")
            done = at + len(old)
        _copy_range(src.fileno(), dst.fileno(), done, size - done)


def _copy_range(src: int, dst: int, start: int, count: int) -> None:
    """Copy ``count`` bytes of ``src`` from ``start`` to where ``dst`` is (in the kernel, where it can)."""
    while count > 0:
        try:
            done = os.copy_file_range(src, dst, count, start)
        except OSError:  # another filesystem or an old kernel: through user space
            done = os.write(dst, os.pread(src, min(count, 1 << 24), start))
        if done <= 0:
            raise OSError(f"copying a phase: {count} bytes left at {start}")
        start, count = start + done, count - done
