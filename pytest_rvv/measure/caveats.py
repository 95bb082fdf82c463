"""Where a cell's silicon estimate rests on an instruction LLVM's model of the core is known to get wrong.

``measure/calibration.py``'s ``MODEL_ERRORS`` names them (core, instruction at an LMUL), each measured against
rvv-bench's timings on the core. A cell's estimate rests on one when its executed dispatch code runs that
instruction under a vtype of that LMUL: the walk is the estimator's own (measure/silicon.py: every executed block of
the dispatch libraries, the vtype in force at its entry, a ``vsetvli`` inside the block taking over from there). LLVM
22's X60 model times an instruction alike at every SEW where measured (``vmacc.vv``: 32 cycles per two chained ones at
e8, e16 and e32, m4), so a known error at e32 is taken to hold at the LMUL, whatever the SEW, except at a vtype the core
reads the instruction through a stand-in (``Core.stand_ins``): no known error there.

A caveat says the instruction (at the SEWs seen), how many times it executed, in which dispatches, the share of the
core's estimated cycles spent in the blocks that hold it, and the measured error. Blocks holding under
``MIN_SHARE_PERCENT`` of the estimated cycles raise none.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_rvv.base.store import Store, content_sha, digest, source_digest
from pytest_rvv.config.cores import Core
from pytest_rvv.config.targets import RISCV64
from pytest_rvv.measure.calibration import MODEL_ERRORS
from pytest_rvv.measure.counts import ExecutedCounts
from pytest_rvv.measure.silicon import (
    BlockCode,
    block_cycles,
    dispatch_blocks,
    find_mca,
    mca_line,
    mca_version,
    next_vtype,
)
from pytest_rvv.measure.static import dispatch_key

_NAME = re.compile(r"^(?P<mnemonic>.+)-e(?P<sew>\d+)(?P<lmul>mf?\d)$")
# An estimate rests on a known error only when the blocks that execute the instruction hold at least this share of
# the core's estimated cycles: a scalar move into a reduction's accumulator once per row does not make a matmul's
# estimate wrong, a MAC in its inner loop does
MIN_SHARE_PERCENT = 5.0


@dataclass(frozen=True)
class ModelError:
    """An instruction at an LMUL whose timing LLVM's model of ``core`` is known to get wrong, and why (measured)."""

    core: str
    mnemonic: str
    lmul: str
    measured_at: str  # the calibration row's name, e.g. vmacc.vv-e32m4
    reason: str


def model_errors() -> tuple[ModelError, ...]:
    """``MODEL_ERRORS`` as (core, mnemonic, LMUL) entries."""
    found = []
    for (core, name), reason in MODEL_ERRORS.items():
        match = _NAME.match(name)
        if match:
            found.append(ModelError(core, match["mnemonic"], match["lmul"], name, reason))
    return tuple(found)


def model_caveats(counts: Callable[[], ExecutedCounts], counts_file: Path, executables: tuple[Path, ...], arch: str,
                  cores: tuple[Core, ...], totals: dict[str, float], store: Store) -> dict[str, list[dict[str, Any]]]:
    """Per estimated core, each known model error the run's dispatch code executed (``totals``: the core's estimated
    cycles of the run, for the share): {core: [{"instruction", "sews", "executed", "dispatches", "share_percent",
    "reason"}]}; {} when none (kept in the store by the counts, the libraries and this code)."""
    errors = [e for e in model_errors() if e.core in {c.name for c in cores}]
    if not errors or arch != RISCV64:
        return {}
    key = digest(["caveats-v1", content_sha(counts_file), *(content_sha(e) for e in executables), arch,
                  *(repr(c) for c in cores), mca_version(find_mca()), _SOURCE])

    def build(tmp: Path) -> dict[str, Any]:
        return {"caveats": _find(counts(), executables, arch, [c for c in cores if c.name in {e.core for e in errors}],
                                 errors, store)}

    found = store.get_or_build("caveats", key, build).meta["caveats"]
    caveats: dict[str, list[dict[str, Any]]] = {}
    for core, entries in found.items():
        for entry in entries:
            cycles = entry.pop("cycles")
            share = 100 * cycles / totals[core] if totals.get(core) else None
            entry["share_percent"] = None if share is None else round(share, 1)
            if share is None or share >= MIN_SHARE_PERCENT:
                caveats.setdefault(core, []).append(entry)
    return caveats


def _find(counts: ExecutedCounts, executables: tuple[Path, ...], arch: str, cores: list[Core],
          errors: list[ModelError], store: Store) -> dict[str, list[dict[str, Any]]]:
    """The walk: per (mnemonic, LMUL) of ``errors``, executions, SEWs, dispatches and the blocks that hold it."""
    wanted = {(e.mnemonic, e.lmul) for e in errors}
    seen: dict[tuple[str, str], dict[str, Any]] = {}
    blocks: dict[tuple[str, str], list[tuple[BlockCode, int]]] = {}
    for block, body, entry in dispatch_blocks(counts, executables, arch):
        sew, lmul = entry
        hits: set[tuple[str, str]] = set()
        for insn in body:
            # at the LMUL whatever the SEW, but not at a vtype the cores read it through a stand-in (timed there as
            # the core measured: no known error)
            if (insn.mnemonic, lmul) in wanted and not any(c.stand_in(insn.mnemonic, sew, lmul) for c in cores):
                found = seen.setdefault((insn.mnemonic, lmul), {"executed": 0, "sews": set(), "dispatches": set()})
                found["executed"] += block.execs
                found["sews"].add(sew)
                found["dispatches"].add(dispatch_key(insn.function))
                hits.add((insn.mnemonic, lmul))
            sew, lmul = next_vtype((sew, lmul), insn)
        for hit in hits:  # the block as the estimator gave it to llvm-mca (the vtype at its entry)
            blocks.setdefault(hit, []).append((BlockCode(tuple(mca_line(insn) for insn in body), *entry), block.execs))
    result: dict[str, list[dict[str, Any]]] = {}
    for core in cores:
        for error in errors:
            found = seen.get((error.mnemonic, error.lmul))
            if error.core != core.name or found is None:
                continue
            held = blocks[(error.mnemonic, error.lmul)]
            cycles, _, _ = block_cycles([code for code, _ in held], core, store)
            result.setdefault(core.name, []).append({
                "instruction": f"{error.mnemonic} at {error.lmul}", "measured_at": error.measured_at,
                "sews": sorted(found["sews"], key=lambda s: int(s) if s else 0), "executed": found["executed"],
                "dispatches": sorted(found["dispatches"]),
                "cycles": sum(cycles[code] * execs for code, execs in held), "reason": error.reason})
    return result


_SOURCE = source_digest(__file__, "calibration.py", "silicon.py", "counts.py")
