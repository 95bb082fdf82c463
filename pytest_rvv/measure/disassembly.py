"""Disassembling dispatch libraries with binutils objdump, attributed to functions via DWARF.

IREE's embedded ELFs export only ``iree_hal_executable_library_query``; the dispatch functions'
names and address ranges are in the DWARF debug info (``DW_TAG_subprogram``), read here with
pyelftools.
"""

from __future__ import annotations

import bisect
import functools
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from elftools.elf.elffile import ELFFile

from pytest_rvv.base.errors import ToolMissing
from pytest_rvv.base.store import content_sha
from pytest_rvv.base.tools import find_executable
from pytest_rvv.config.targets import AARCH64, RISCV64

OBJDUMP = {RISCV64: "riscv64-linux-gnu-objdump", AARCH64: "aarch64-linux-gnu-objdump"}
OUTSIDE = "(library code)"  # instructions in no DWARF subprogram: loader glue, builtins
_LINE = re.compile(r"^\s*([0-9a-f]+):\t(\S+)(?:\t(.*))?$")


@dataclass(frozen=True)
class Instruction:
    address: int
    mnemonic: str
    operands: str
    function: str


def objdump_for(arch: str) -> Path:
    tool = OBJDUMP.get(arch)
    if tool is None:
        raise ToolMissing(f"no disassembler configured for {arch}")
    path = find_executable(tool)
    if path is None:
        raise ToolMissing(f"{tool} not found; apt-get install binutils-{arch}-linux-gnu "
                          "(or bash scripts/setup.sh system)")
    return path


def function_ranges(elf: Path) -> list[tuple[int, int, str]]:
    """(low, high, name) of every function with code, from DWARF, else from the symbol table."""
    ranges: list[tuple[int, int, str]] = []
    with elf.open("rb") as f:
        image = ELFFile(f)
        if image.has_dwarf_info():
            for unit in image.get_dwarf_info().iter_CUs():
                for die in unit.iter_DIEs():
                    if die.tag != "DW_TAG_subprogram" or "DW_AT_low_pc" not in die.attributes:
                        continue
                    name_attr = die.attributes.get("DW_AT_name")
                    if name_attr is None or "DW_AT_high_pc" not in die.attributes:
                        continue
                    low = die.attributes["DW_AT_low_pc"].value
                    high_attr = die.attributes["DW_AT_high_pc"]
                    high = high_attr.value if high_attr.form == "DW_FORM_addr" else low + high_attr.value
                    ranges.append((low, high, name_attr.value.decode(errors="replace")))
        if not ranges:
            symtab = image.get_section_by_name(".symtab")
            for symbol in symtab.iter_symbols() if symtab else ():
                if symbol["st_info"]["type"] == "STT_FUNC" and symbol["st_size"]:
                    low = symbol["st_value"]
                    ranges.append((low, low + symbol["st_size"], symbol.name))
    return sorted(ranges)


def disassemble(elf: Path, arch: str) -> tuple[Instruction, ...]:
    """Every instruction of ``elf``'s executable sections, with the function it belongs to (once per
    library content in this process: static analysis and the attribution of executed blocks share it)."""
    return _disassembled(Path(elf), content_sha(elf), arch)


@functools.lru_cache(maxsize=16)
def _disassembled(elf: Path, sha: str, arch: str) -> tuple[Instruction, ...]:
    proc = subprocess.run([str(objdump_for(arch)), "-d", "--no-show-raw-insn", str(elf)],
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise ToolMissing(f"{OBJDUMP[arch]} failed on {elf}: {proc.stderr.strip()[:200]}")
    ranges = function_ranges(elf)
    lows = [low for low, _, _ in ranges]
    out = []
    for line in proc.stdout.splitlines():
        match = _LINE.match(line)
        if not match or match.group(2).startswith("."):  # data directives, not instructions
            continue
        address = int(match.group(1), 16)
        i = bisect.bisect_right(lows, address) - 1
        function = ranges[i][2] if i >= 0 and address < ranges[i][1] else OUTSIDE
        operands = (match.group(3) or "").split("#")[0].split("<")[0].strip()
        out.append(Instruction(address, match.group(2), operands, function))
    return tuple(out)
