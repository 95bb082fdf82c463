"""Static instruction counts of a compiled module: per dispatch, per class, per mnemonic."""

from __future__ import annotations

import functools
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_rvv.base.errors import RvvError
from pytest_rvv.base.stages import Stages
from pytest_rvv.base.store import Store, content_sha, digest, source_digest
from pytest_rvv.base.tools import version_output
from pytest_rvv.compile.compiler import Artifact
from pytest_rvv.config.targets import AARCH64, RISCV64
from pytest_rvv.measure.classify import CLASSES, VECTOR_CLASSES, classify_aarch64, classify_riscv
from pytest_rvv.measure.disassembly import OUTSIDE, disassemble, objdump_for
from pytest_rvv.measure.spills import library_spills

_DISPATCH = re.compile(r"(dispatch_\d+)_?(.*)$")


@functools.lru_cache(maxsize=8192)  # once per function name, not per instruction
def dispatch_key(symbol: str) -> str:
    """``main_graph$async_dispatch_7_conv_2d_..._f32`` -> ``dispatch_7_conv_2d_..._f32``."""
    match = _DISPATCH.search(symbol)
    return f"{match.group(1)}_{match.group(2)}".rstrip("_") if match else symbol


def ukernels_by_dispatch(artifact: Artifact) -> dict[str, list[str]]:
    """The microkernels inlined into each dispatch (compile/ukernels.py), by dispatch key."""
    return {dispatch_key(function): list(names) for function, names in artifact.ukernels.items()}


def with_ukernels(dispatches: dict[str, Any], ukernels: dict[str, list[str]]) -> dict[str, Any]:
    """Snapshot dispatch entries with a ``ukernels`` list where the dispatch carries microkernels."""
    return {key: (entry | {"ukernels": ukernels[key]} if key in ukernels else entry)
            for key, entry in dispatches.items()}


@dataclass
class FunctionCounts:
    """Instruction counts of one dispatch function (or of the library code outside dispatches)."""

    instructions: int = 0
    classes: Counter[str] = field(default_factory=Counter)
    subclasses: Counter[str] = field(default_factory=Counter)  # "vector_arith.float", ...
    mnemonics: Counter[str] = field(default_factory=Counter)  # every mnemonic
    vector_mnemonics: Counter[str] = field(default_factory=Counter)
    spill_stores: int = 0  # whole-register vector stores off the stack frame (measure/spills.py)
    spill_reloads: int = 0
    spilled_registers: int = 0  # vector registers those stores write (an m4 spill is 4)

    @property
    def vector(self) -> int:
        return sum(self.classes[c] for c in VECTOR_CLASSES)

    def spills(self) -> dict[str, int]:
        """The snapshot's spill record: stores, reloads and the registers stored."""
        return {"stores": self.spill_stores, "reloads": self.spill_reloads, "registers": self.spilled_registers}

    def add(self, mnemonic: str, cls: str, subclass: str) -> None:
        self.instructions += 1
        self.classes[cls] += 1
        self.mnemonics[mnemonic] += 1
        if cls in VECTOR_CLASSES:
            self.subclasses[f"{cls}.{subclass}"] += 1
            self.vector_mnemonics[mnemonic] += 1


@dataclass
class StaticAnalysis:
    """Counts for every function of every dispatch library of one Artifact."""

    model: str
    target: str
    dispatches: dict[str, FunctionCounts]
    library: FunctionCounts  # code outside the dispatch functions
    ukernels: dict[str, list[str]] = field(default_factory=dict)  # dispatch -> microkernels inlined into it
    spills_counted: bool = False  # vector spills are found in RISC-V code only (measure/spills.py)

    @property
    def total(self) -> FunctionCounts:
        total = FunctionCounts()
        for counts in [*self.dispatches.values(), self.library]:
            total.instructions += counts.instructions
            total.classes.update(counts.classes)
            total.subclasses.update(counts.subclasses)
            total.mnemonics.update(counts.mnemonics)
            total.vector_mnemonics.update(counts.vector_mnemonics)
            total.spill_stores += counts.spill_stores
            total.spill_reloads += counts.spill_reloads
            total.spilled_registers += counts.spilled_registers
        return total

    @property
    def not_vectorized(self) -> list[str]:
        return sorted(k for k, c in self.dispatches.items() if c.vector == 0)

    def snapshot(self) -> dict[str, Any]:
        """The readable, deterministic record kept as a syrupy snapshot."""
        total = self.total
        return {
            "model": self.model,
            "target": self.target,
            "totals": {
                "instructions": total.instructions,
                "vector": total.vector,
                "vector_share_percent": share(total.vector, total.instructions),
                "classes": {c: total.classes[c] for c in CLASSES},
                "vector_subclasses": dict(sorted(total.subclasses.items())),
            } | ({"vector_spills": total.spills()} if self.spills_counted else {}),
            "vector_mnemonics": dict(sorted(total.vector_mnemonics.items(), key=lambda mn: (-mn[1], mn[0]))),
            "dispatches": with_ukernels({
                key: {
                    "instructions": c.instructions,
                    "vector": c.vector,
                    "vectorized": c.vector > 0,
                    "classes": {cls: c.classes[cls] for cls in CLASSES if c.classes[cls]},
                } | ({"spills": c.spills()} if c.spill_stores or c.spill_reloads else {})
                for key, c in sorted(self.dispatches.items(), key=lambda kv: natural_order(kv[0]))
            }, self.ukernels),
            "library_code": {"instructions": self.library.instructions, "vector": self.library.vector},
            "not_vectorized": sorted(self.not_vectorized, key=natural_order),
        }


def share(part: int, whole: int) -> float:
    return round(100.0 * part / whole, 2) if whole else 0.0


def natural_order(key: str) -> tuple[int, str]:
    """Sort key putting dispatch_2 before dispatch_10."""
    match = re.match(r"dispatch_(\d+)", key)
    return (int(match.group(1)) if match else 1 << 30, key)


def analyze(artifact: Artifact, store: Store | None = None, stages: Stages | None = None) -> StaticAnalysis:
    """Disassemble and classify every dispatch library of ``artifact``.

    With ``store``, done once per content and kept there under the libraries' bytes, the disassembler's
    version and this code (a rerun with nothing changed reads it back: it is the bulk of a warm run's CPU
    otherwise, 54 of 70 s for three models); ``stages`` counts it as ``analyze``."""
    arch = artifact.target.arch
    if arch not in (RISCV64, AARCH64):
        raise RvvError(f"static analysis covers riscv64 and aarch64 targets, not {arch}")
    if not artifact.executables:
        raise RvvError(f"{artifact.path}: the compile cache entry holds no dispatch libraries; "
                       "delete it (or the cache) to recompile")
    if store is None:
        return _analyze(artifact, arch)
    stages = stages or Stages()
    key = digest(["static-v2", arch, *(content_sha(e) for e in artifact.executables),
                  _objdump_version(arch), _SOURCE])

    def build(tmp: Path) -> dict[str, Any]:
        with stages.time("analyze"):
            found = _analyze(artifact, arch)
        (tmp / "static.json").write_text(json.dumps({
            "library": _stored(found.library),
            "dispatches": {name: _stored(counts) for name, counts in found.dispatches.items()}}))
        return {"arch": arch}

    entry = store.get_or_build("static", key, build)
    if not entry.created:
        stages.hit("analyze")
    stored = json.loads(entry.file("static.json").read_text())
    return StaticAnalysis(artifact.model, artifact.target.name,
                          {name: _counts(counts) for name, counts in stored["dispatches"].items()},
                          _counts(stored["library"]), ukernels_by_dispatch(artifact), arch == RISCV64)


_COUNTERS = ("classes", "subclasses", "mnemonics", "vector_mnemonics")
_SPILLS = ("spill_stores", "spill_reloads", "spilled_registers")


def _stored(counts: FunctionCounts) -> dict[str, Any]:
    return {"instructions": counts.instructions} | {name: dict(getattr(counts, name)) for name in _COUNTERS} | {
        name: getattr(counts, name) for name in _SPILLS}


def _counts(stored: dict[str, Any]) -> FunctionCounts:
    return FunctionCounts(stored["instructions"], *(Counter(stored[name]) for name in _COUNTERS),
                          *(int(stored[name]) for name in _SPILLS))


@functools.cache
def _objdump_version(arch: str) -> str:
    return (version_output(objdump_for(arch)).splitlines() or ["unknown"])[0]


def _analyze(artifact: Artifact, arch: str) -> StaticAnalysis:
    dispatches: dict[str, FunctionCounts] = {}
    library = FunctionCounts()
    for elf in artifact.executables:
        instructions = disassemble(elf, arch)
        spills = library_spills(elf, arch) if arch == RISCV64 else {}
        for insn in instructions:
            if arch == RISCV64:
                cls, subclass = classify_riscv(insn.mnemonic)
            else:
                cls, subclass = classify_aarch64(insn.mnemonic, insn.operands)
            if insn.function == OUTSIDE:
                bucket = library
            else:  # not setdefault(key, FunctionCounts()): that builds four Counters per instruction
                key = dispatch_key(insn.function)
                bucket = dispatches.get(key) or dispatches.setdefault(key, FunctionCounts())
            bucket.add(insn.mnemonic, cls, subclass)
            if spill := spills.get(insn.address):
                if spill.reload:
                    bucket.spill_reloads += 1
                else:
                    bucket.spill_stores += 1
                    bucket.spilled_registers += spill.registers
    return StaticAnalysis(artifact.model, artifact.target.name, dispatches, library, ukernels_by_dispatch(artifact),
                          arch == RISCV64)


_SOURCE = source_digest(__file__, "classify.py", "disassembly.py", "spills.py")
