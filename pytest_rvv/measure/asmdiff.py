"""The diff of one dispatch's disassembly between two compiles, with addresses normalized.

As LNT's profile view does: branch targets and PC-relative offsets become labels relative to the
function's start, so a dispatch that only moved in the library shows no difference.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from pytest_rvv.measure.disassembly import Instruction, disassemble
from pytest_rvv.measure.static import dispatch_key

_BRANCHES = re.compile(r"^(?:b|j|c\.b|c\.j|cbn?z|tbn?z|adrp?)")


def dispatch_listing(executables: Sequence[Path], arch: str, key: str) -> list[str]:
    """The normalized instructions of dispatch ``key`` (as static analysis names it), one per line."""
    for elf in executables:
        instructions = [i for i in disassemble(elf, arch) if dispatch_key(i.function) == key]
        if instructions:
            return normalize(instructions)
    return []


def normalize(instructions: list[Instruction]) -> list[str]:
    """``mnemonic operands``; a branch target becomes ``.L+offset`` in the function, ``<outside>`` elsewhere."""
    start = instructions[0].address
    end = instructions[-1].address
    lines = []
    for insn in instructions:
        operands = insn.operands
        if _BRANCHES.match(insn.mnemonic):
            *rest, last = operands.split(",")
            try:
                value = int(last.strip().removeprefix("0x"), 16)
            except ValueError:
                pass
            else:
                last = f".L+{value - start:x}" if start <= value <= end else "<outside>"
                operands = ",".join([*rest, last])
        lines.append(f"{insn.mnemonic} {operands}".rstrip())
    return lines


def mnemonic_changes(before: list[str], after: list[str], shown: int = 8) -> str:
    """The mnemonics whose static count moved most: ``fmadd.s +96, vfmacc.vf -48, ...``."""
    old = Counter(line.split(" ", 1)[0] for line in before)
    new = Counter(line.split(" ", 1)[0] for line in after)
    moved = sorted(((m, new[m] - old[m]) for m in old.keys() | new.keys() if new[m] != old[m]),
                   key=lambda item: (-abs(item[1]), item[0]))
    listed = ", ".join(f"{m} {d:+d}" for m, d in moved[:shown])
    return listed + (f" and {len(moved) - shown} more" if len(moved) > shown else "")


def unified(before: list[str], after: list[str], name_before: str, name_after: str) -> list[str]:
    """A unified diff of two listings (empty when they are the same)."""
    return [line.rstrip("\n") for line in difflib.unified_diff(before, after, name_before, name_after, n=2,
                                                                 lineterm="")]
