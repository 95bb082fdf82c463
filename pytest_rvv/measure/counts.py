"""Executed-instruction counts: parsing the plugin's output and attributing it to dispatches."""

from __future__ import annotations

import bisect
import functools
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elftools.elf.elffile import ELFFile

from pytest_rvv.base.errors import RvvError
from pytest_rvv.measure.classify import (
    CLASSES,
    SCALAR,
    VECTOR_ARITH,
    VECTOR_CLASSES,
    VECTOR_CONFIG,
    VECTOR_MEMORY,
    classify_aarch64,
    classify_riscv,
)
from pytest_rvv.measure.disassembly import OUTSIDE, Instruction, disassemble
from pytest_rvv.measure.dispatch_table import Attribution, Counts, CountsSnapshot
from pytest_rvv.measure.plugin_output import Block, records
from pytest_rvv.measure.plugin_output import block as block_record
from pytest_rvv.measure.spills import Spill, library_spills
from pytest_rvv.measure.static import dispatch_key, natural_order, share

MIN_VOTES = 2  # translation blocks that must agree on where a dispatch library was loaded
# IREE's loader maps a dispatch library at a page boundary, so its load bias is a multiple of the page: a base voted
# by blocks of other code whose first bytes happen to occur in .text is not (measured: a run that loads a module
# and calls nothing voted 0xaa49c for llama-decode's library, which no instruction of it ran from; real: 0xabb37000)
PAGE = 4096
# Of the instructions in the blocks inside a voted range, the share whose first bytes are the library's own where the
# base puts them. Measured where the library ran: 83-100 % in counted runs, 37-100 % in load-only runs (some of its
# blocks read differently in memory than in the file: minilm-l6 on -mmt4d 37 %, llama-decode-bf16 43 %); for a base
# voted from other code 0.1 % (mobilenetv3-cls on rv64gcv-zvl512b: 23 of 19,233 instructions).
MATCHING_SHARE = 0.1
# Executed instructions counted by name per dispatch (RISC-V): vsetvl* reconfigurations and vrgather permutes, a
# known cost of generic data-tiled code (re-set vtype per tile, gathers to pack); diagnostics, not in snapshots. With
# them, "calls": how often the dispatch function was entered, one call per workgroup (local-sync runs them all on
# one thread; the work a multi-threaded runtime can spread), and "spilled_registers": vector registers its executed
# spills and reloads moved (measure/spills.py).
WATCHED = {"vsetvl": ("vsetvli", "vsetivli", "vsetvl"),
           "vrgather": ("vrgather.vv", "vrgather.vx", "vrgather.vi", "vrgatherei16.vv")}
_WATCHED = {m: name for name, mnemonics in WATCHED.items() for m in mnemonics}


@dataclass(frozen=True)
class Elements:
    """Vector instructions of one class executed, elements processed (sum of vl) and sum of VLMAX."""

    executions: int
    elements: int
    vlmax: int

    @property
    def occupancy(self) -> float:
        return self.elements / self.vlmax if self.vlmax else 0.0

    @property
    def occupancy_percent(self) -> float:
        return round(100.0 * self.occupancy, 2)

    def __add__(self, other: Elements) -> Elements:
        return Elements(self.executions + other.executions, self.elements + other.elements, self.vlmax + other.vlmax)

    def as_json(self) -> dict[str, Any]:
        return {"executions": self.executions, "elements": self.elements, "vlmax": self.vlmax,
                "occupancy_percent": self.occupancy_percent}


NO_ELEMENTS = Elements(0, 0, 0)


@dataclass
class ExecutedCounts:
    """Everything one counted run executed."""

    target: str
    blocks: list[Block]
    vlen: int | None = None
    elements: dict[str, Elements] = field(default_factory=dict)
    insn_elements: dict[int, Elements] = field(default_factory=dict)  # per vector instruction address

    @property
    def total(self) -> int:
        return sum(b.n_insns * b.execs for b in self.blocks)

    def classes(self) -> dict[str, int]:
        """Executed instructions per class (RISC-V: classified by the plugin at translation)."""
        arith = sum(b.varith * b.execs for b in self.blocks)
        memory = sum(b.vmem * b.execs for b in self.blocks)
        config = sum(b.vset * b.execs for b in self.blocks)
        return {VECTOR_ARITH: arith, VECTOR_MEMORY: memory, VECTOR_CONFIG: config,
                SCALAR: self.total - arith - memory - config}


def parse(text: str, source: Path) -> ExecutedCounts:
    target, lines = records(text, source, "rvv-counter")
    counts = ExecutedCounts(target, [])
    for fields in lines:
        if fields[0] == "tb":
            counts.blocks.append(block_record(fields))
        elif fields[0] == "vlen":
            counts.vlen = int(fields[1])
        elif fields[0] == "el":
            name = VECTOR_ARITH if fields[1] == "varith" else VECTOR_MEMORY
            counts.elements[name] = Elements(*(int(f) for f in fields[2:5]))
        elif fields[0] == "ei":  # one address may be translated in several blocks: sum them
            vaddr, now = int(fields[1], 16), Elements(*(int(f) for f in fields[3:6]))
            counts.insn_elements[vaddr] = counts.insn_elements.get(vaddr, NO_ELEMENTS) + now
    return counts


@dataclass
class _Library:
    """One dispatch library: its .text bytes and its instructions in address order."""

    text_vaddr: int
    text: bytes
    instructions: Sequence[Instruction]
    addresses: list[int]
    elf: Path
    arch: str

    @classmethod
    def load(cls, elf: Path, arch: str) -> _Library:
        with elf.open("rb") as f:
            section = ELFFile(f).get_section_by_name(".text")
            if section is None:
                raise RvvError(f"{elf}: no .text section")
            text_vaddr, text = section["sh_addr"], section.data()
        instructions = disassemble(elf, arch)
        return cls(text_vaddr, text, instructions, [i.address for i in instructions], Path(elf), arch)

    @functools.cached_property
    def spills(self) -> dict[int, Spill]:
        """Its vector spill and reload instructions by address (measure/spills.py)."""
        return library_spills(self.elf, self.arch)

    @functools.cached_property
    def _offsets(self) -> dict[bytes, list[int]]:
        """Offsets in .text of every 8-byte window at an even offset (instructions are 2-byte aligned)."""
        index: dict[bytes, list[int]] = {}
        for at in range(0, len(self.text) - 7, 2):
            index.setdefault(self.text[at:at + 8], []).append(at)
        return index

    def load_base(self, blocks: list[Block]) -> int | None:
        """Where the runtime loaded this library, voted by blocks whose first bytes occur once in .text."""
        votes: Counter[int] = Counter()
        offsets, text, text_vaddr = self._offsets, self.text, self.text_vaddr  # tens of thousands of blocks a run
        for block in blocks:
            head = block.head
            at = offsets.get(head[:8]) if len(head) >= 8 else None
            if at is None:
                continue
            found = [a for a in at if text.startswith(head, a)]
            if len(found) == 1 and (block.vaddr - (text_vaddr + found[0])) % PAGE == 0:
                votes[block.vaddr - (text_vaddr + found[0])] += block.n_insns
        if not votes:
            return None
        base, weight = votes.most_common(1)[0]
        if weight < MIN_VOTES:
            return None
        # the library ran there only if the blocks inside that range are mostly its bytes: a run that loads a module
        # and calls nothing can vote a page-aligned base from other code whose first bytes happen to occur in .text
        # (mobilenetv3-cls on rv64gcv-zvl512b: 0x89000, in the runtime's own range), which puts the runtime's weight
        # copy inside the range: 1.33 M "one-time" instructions, a few hundred different from run to run
        # (MATCHING_SHARE)
        start, end = base + text_vaddr, base + text_vaddr + len(text)
        inside = [b for b in blocks if start <= b.vaddr < end and len(b.head) >= 8]
        matching = sum(b.n_insns for b in inside if self._holds(b, base))
        return base if matching >= MATCHING_SHARE * sum(b.n_insns for b in inside) else None

    def _holds(self, block: Block, base: int) -> bool:
        """True when ``block``'s first bytes are this library's bytes where ``base`` puts the block."""
        return self.text.startswith(block.head, block.vaddr - base - self.text_vaddr)


@functools.lru_cache(maxsize=16)
def _library(elf: Path, arch: str) -> _Library:
    """A dispatch library, disassembled once per process (cache paths are content-addressed)."""
    return _Library.load(elf, arch)


def _loaded_libraries(counts: ExecutedCounts, executables: tuple[Path, ...],
                      arch: str) -> Iterator[tuple[_Library, int]]:
    """Each dispatch library the run loaded, with where it was loaded (libraries not found are left out)."""
    for elf in executables:
        library = _library(elf, arch)
        base = library.load_base(counts.blocks)
        if base is not None:
            yield library, base


def walk_blocks(counts: ExecutedCounts, executables: tuple[Path, ...], arch: str,
                loaded: list[tuple[_Library, int]] | None = None,
                ) -> Iterator[tuple[Block, Sequence[Instruction], int]]:
    """Every executed block inside a loaded dispatch library: (block, the library's instructions, index of
    the block's first one). The block's instructions are ``instructions[index:index + block.n_insns]``."""
    for library, base in _loaded_libraries(counts, executables, arch) if loaded is None else loaded:
        start, end = base + library.text_vaddr, base + library.text_vaddr + len(library.text)
        for block in counts.blocks:
            if start <= block.vaddr < end and block.execs:
                yield block, library.instructions, bisect.bisect_left(library.addresses, block.vaddr - base)


def attribute(counts: ExecutedCounts, executables: tuple[Path, ...], arch: str) -> Attribution:
    """Executed counts per dispatch function, plus the runtime code outside the dispatches.

    Each block that falls inside a loaded dispatch library is walked over the library's own
    disassembly, so every executed instruction is attributed to its function and classified
    exactly as the static analysis classifies it.
    """
    loaded = list(_loaded_libraries(counts, executables, arch))  # located once, for blocks and lanes
    per_dispatch: dict[str, Counter[str]] = {}
    watched: dict[str, Counter[str]] = {}
    spilled: dict[str, Counter[str]] = {}  # executed vector spills and reloads, and the registers they move
    for library, base in loaded:
        sites = library.spills if arch == "riscv64" else {}
        for block, instructions, i in walk_blocks(counts, executables, arch, [(library, base)]):
            first = instructions[i] if i < len(instructions) else None
            if (arch == "riscv64" and first is not None and first.function != OUTSIDE
                    and (i == 0 or instructions[i - 1].function != first.function)):
                # a block at a dispatch function's first instruction: one call, i.e. one workgroup of the dispatch
                watched.setdefault(dispatch_key(first.function), Counter())["calls"] += block.execs
            for insn in instructions[i:i + block.n_insns]:
                cls = classify_riscv(insn.mnemonic)[0] if arch == "riscv64" else \
                    classify_aarch64(insn.mnemonic, insn.operands)[0]
                key = dispatch_key(insn.function) if insn.function != OUTSIDE else OUTSIDE
                per_dispatch.setdefault(key, Counter())[cls] += block.execs
                if arch == "riscv64" and insn.mnemonic in _WATCHED and key != OUTSIDE:
                    watched.setdefault(key, Counter())[_WATCHED[insn.mnemonic]] += block.execs
                if sites and key != OUTSIDE and (spill := sites.get(insn.address)):
                    done = spilled.setdefault(key, Counter())
                    done["instructions"] += block.execs
                    done["registers"] += spill.registers * block.execs
    for key, done in spilled.items():  # beside vsetvl and vrgather, for the dashboard and the path table
        watched.setdefault(key, Counter())["spilled_registers"] = done["registers"]
    dispatches = {}
    for key in sorted(per_dispatch, key=natural_order):
        if key == OUTSIDE:
            continue
        c = per_dispatch[key]
        vector = sum(c[v] for v in VECTOR_CLASSES)
        dispatches[key] = Counts(sum(c.values()), vector, vector > 0,
                                 classes={cls: c[cls] for cls in CLASSES if c[cls]},
                                 spills=dict(sorted(spilled[key].items())) if key in spilled else None)
    in_dispatches = sum(d.instructions for d in dispatches.values())
    vector = sum(d.vector for d in dispatches.values())
    # over every dispatch; on RISC-V with the spills they executed, in instructions and the registers they moved
    totals = Counts(in_dispatches, vector, vector > 0, spills={
        name: sum(c[name] for c in spilled.values()) for name in ("instructions", "registers")
    } if arch == "riscv64" else None)
    return Attribution(CountsSnapshot(totals, share(vector, in_dispatches), dispatches),
                       counts.total - in_dispatches,
                       {k: dict(sorted(watched[k].items())) for k in sorted(watched, key=natural_order)},
                       lane_occupancy(counts, loaded) if counts.insn_elements else None)


def lane_occupancy(counts: ExecutedCounts, loaded: list[tuple[_Library, int]]) -> dict[str, Any]:
    """Elements processed over VLMAX, per dispatch and over all dispatches (an elements=on run).

    100 % means every executed vector instruction filled its register group; tails, short rows and
    vl set below VLMAX lower it. Instructions outside the dispatch libraries are not counted.
    """
    sums: dict[str, Elements] = {}
    for library, base in loaded:
        for vaddr, e in counts.insn_elements.items():
            at = bisect.bisect_left(library.addresses, vaddr - base)
            if at < len(library.addresses) and library.addresses[at] == vaddr - base \
                    and library.instructions[at].function != OUTSIDE:
                key = dispatch_key(library.instructions[at].function)
                sums[key] = sums.get(key, NO_ELEMENTS) + e
    return {"vlen": counts.vlen, "total": sum(sums.values(), NO_ELEMENTS).as_json(),
            "dispatches": {k: sums[k].as_json() for k in sorted(sums, key=natural_order)}}


def loaded_libraries(counts: ExecutedCounts, executables: tuple[Path, ...], arch: str) -> list[tuple[_Library, int]]:
    """Each dispatch library the run loaded, with where it was loaded (voted by the run's translated blocks)."""
    return list(_loaded_libraries(counts, executables, arch))


def dispatch_at(loaded: list[tuple[_Library, int]], vaddr: int) -> str | None:
    """The dispatch whose instruction starts at run-time address ``vaddr``; None outside every dispatch."""
    for library, base in loaded:
        at = bisect.bisect_left(library.addresses, vaddr - base)
        if at < len(library.addresses) and library.addresses[at] == vaddr - base \
                and library.instructions[at].function != OUTSIDE:
            return dispatch_key(library.instructions[at].function)
    return None
