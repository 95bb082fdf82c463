"""Vector register spills in shipped RISC-V code: whole-register stores and reloads addressed off the stack frame.

LLVM spills an RVV register group with ``vs{1,2,4,8}r.v`` and reloads it with ``vl{1,2,4,8}re{8,16,32,64}.v`` (or
``vl{N}r.v``), at an address computed from ``sp`` or ``s0`` (scalable slots: ``csrr t, vlenb; mul/slli; add/sub`` with
the frame register). Whole-register moves of data (a fixed-length vector whose size is exactly a register group) use
the same instructions off a data pointer: they are not spills. So an address register is followed forward through
the function: it is frame-derived when address arithmetic built it from ``sp``, ``s0`` or another frame-derived
register, and stops being so when anything else writes it. Checked against LLVM's own ``--stats`` on IREE's shipped
objects (tests/test_spills.py: NumVRegSpilled equals the registers stored).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pytest_rvv.base.store import content_sha
from pytest_rvv.measure.disassembly import Instruction, disassemble

FRAME = frozenset({"sp", "s0", "fp"})
# Instructions that compute an address from their sources (objdump prints addi as add, slli as sll).
_ARITH = frozenset({"add", "addi", "addw", "addiw", "sub", "subw", "mv", "sll", "slli", "mul", "sh1add", "sh2add",
                    "sh3add", "and", "andi", "or", "ori"})
# Instructions whose first operand is read, not written.
_STORE_OR_BRANCH = re.compile(r"^(?:f?s[bhwd]|beqz?|bnez?|bltu?|bgeu?|blez|bgez|bltz|bgtz|bgtu?|bleu?|j|jr|ret)$")
_STORE = re.compile(r"^vs([1248])r\.v$")
_RELOAD = re.compile(r"^vl([1248])r(?:e(?:8|16|32|64))?\.v$")
_BASE = re.compile(r"\((\w+)\)")
_GPR = re.compile(r"^(?:zero|ra|sp|gp|tp|fp|[ast]\d+)$")


@dataclass(frozen=True)
class Spill:
    """One spill instruction: a store (``reload`` False) or a reload of ``registers`` vector registers."""

    reload: bool
    registers: int


def spill_sites(instructions: Iterable[Instruction]) -> dict[int, Spill]:
    """{address: Spill} of every whole-register vector store or reload off the stack frame, function by function."""
    sites: dict[int, Spill] = {}
    frame: set[str] = set(FRAME)
    function = None
    for insn in instructions:
        if insn.function != function:  # a new function: only its own frame registers
            function, frame = insn.function, set(FRAME)
        mnemonic = insn.mnemonic
        if mnemonic.startswith("v"):
            kind = _STORE.match(mnemonic) or _RELOAD.match(mnemonic)
            base = _BASE.search(insn.operands)
            if kind and base and base.group(1) in frame:
                sites[insn.address] = Spill(mnemonic.startswith("vl"), int(kind.group(1)))
            continue
        operands = [o.strip() for o in insn.operands.split(",")]
        rd = operands[0] if operands and _GPR.match(operands[0]) else None
        if rd is None or rd in FRAME or _STORE_OR_BRANCH.match(mnemonic):
            continue
        if mnemonic in _ARITH and any(o in frame for o in operands[1:]):
            frame.add(rd)
        else:
            frame.discard(rd)
    return sites


def library_spills(elf: Path, arch: str) -> dict[int, Spill]:
    """``spill_sites`` of a library's whole disassembly, once per library content in this process (static analysis
    and the attribution of executed blocks share it, as they share the disassembly)."""
    return _library_spills(Path(elf), content_sha(elf), arch)


@functools.lru_cache(maxsize=16)
def _library_spills(elf: Path, sha: str, arch: str) -> dict[int, Spill]:
    return spill_sites(disassemble(elf, arch))
