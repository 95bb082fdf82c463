"""Silicon estimates: cycles per dispatch on real RISC-V cores, from executed blocks and llvm-mca.

For every executed translation block of the dispatch code, llvm-mca (LLVM's machine model of the
core) estimates its steady-state cycles per iteration; the estimate of a dispatch is the sum over
its blocks of times executed x cycles per iteration. The vector type in force at block entry is
that of the nearest ``vsetvli`` before the block in its function (the dominating one for
strip-mined loops), passed to llvm-mca as its RISC-V LMUL/SEW instruments; a ``vsetvli`` inside
the block takes over from there, as llvm-mca honours it. A block with no known vector type at entry
is read at llvm-mca's default for an unknown type (its worst case, m8), as if alone: never at a type
another block left (``chunk_sources``).

What it is: llvm-mca models issue, latency and throughput of each block, not caches, memory
bandwidth, branch misprediction or state carried across blocks.
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_rvv.base.errors import RvvError, ToolMissing
from pytest_rvv.base.store import Store, content_sha, digest, source_digest
from pytest_rvv.base.tools import find_executable, version_output
from pytest_rvv.config.cores import Core, cycles_ms
from pytest_rvv.measure.counts import Block, ExecutedCounts, walk_blocks
from pytest_rvv.measure.disassembly import OUTSIDE, Instruction
from pytest_rvv.measure.mca_driver import mca_driver
from pytest_rvv.measure.static import dispatch_key

MCA = "llvm-mca-22"
MCA_HINT = f"{MCA} not found; apt-get install llvm-22 (or bash scripts/setup.sh system)"
WHAT_IT_IS = ("llvm-mca models issue, latency and throughput of each block, not caches, memory bandwidth, "
              "branch misprediction or state carried across blocks")
# Steady state = the cycles that the iterations between a core's two counts add, per iteration (Core.iterations):
# (10, 20) measured on squeezenet as the same estimate as 100 vs 200 iterations on the in-order X60 and X280, within
# 0.1 % on the out-of-order P670, in half the time; the in-order cores settle by (2, 4) (config/cores.py).
CHUNK = 500  # code regions per llvm-mca input (see region_cycles)
INSTRUMENT_LMUL = "# LLVM-MCA-RISCV-LMUL"  # llvm-mca's instrument: the LMUL the instructions after it are read at
INSTRUMENT_SEW = "# LLVM-MCA-RISCV-SEW"  # and the SEW
_STAND_IN_VTYPE = re.compile(r"(?:e(\d+))?(mf?\d)")  # a stand-in's own vtype (Core.stand_ins): "m1", "e32mf2"
_BRANCH = re.compile(r"^(?:b[a-z]*|j|jal|c\.b[a-z]*|c\.j|c\.jal)$")
VTYPE = re.compile(r"\be(8|16|32|64)\s*,\s*(mf[248]|m[1248])\b")  # a vset{i}vli's SEW and LMUL
_ERROR = re.compile(r"^<stdin>:(\d+):\d+: error:", re.MULTILINE)
_REGION = re.compile(r"^\[(\d+)\] Code Region - b(\d+)\s*$.*?^Total Cycles:\s+(\d+)", re.MULTILINE | re.DOTALL)


def find_mca() -> Path:
    path = find_executable(MCA)
    if path is None:
        raise ToolMissing(MCA_HINT)
    return path


@functools.cache
def mca_version(path: Path) -> str:
    """``LLVM version 22.1.8`` (part of every estimate's cache key and of the baselines)."""
    text = version_output(path)
    match = re.search(r"LLVM version \S+", text)
    return match.group(0) if match else text.splitlines()[0] if text else "unknown"


@dataclass(frozen=True)
class BlockCode:
    """A block's instructions as llvm-mca reads them, with the vector type in force at entry."""

    lines: tuple[str, ...]
    sew: str = ""  # "32"
    lmul: str = ""  # "m1", "mf2"

    def region(self, index: int) -> str:
        head = [f"# LLVM-MCA-BEGIN b{index}"]
        if self.sew and self.lmul:
            head += [f"{INSTRUMENT_LMUL} {self.lmul.upper()}", f"{INSTRUMENT_SEW} E{self.sew}"]
        return "\n".join([*head, *self.lines, "# LLVM-MCA-END"])

    def identity(self) -> str:
        return f"e{self.sew},{self.lmul}|" + "\n".join(self.lines)


def mca_line(insn: Instruction) -> str:
    """objdump's instruction as LLVM's assembler reads it: branch targets (absolute addresses) become 0."""
    operands = insn.operands
    if _BRANCH.match(insn.mnemonic) and operands:
        *rest, last = operands.split(",")
        if re.fullmatch(r"(?:0x)?[0-9a-f]+", last.strip()):
            operands = ",".join([*rest, "0"])
    return f"{insn.mnemonic} {operands}".strip()


def next_vtype(current: tuple[str, str], insn: Instruction) -> tuple[str, str]:
    """(SEW, LMUL) after ``insn``: what a vsetvli/vsetivli sets, ("", "") after a vsetvl (vtype from a register)."""
    if insn.mnemonic in ("vsetvli", "vsetivli"):
        match = VTYPE.search(insn.operands)
        return (match.group(1), match.group(2)) if match else ("", "")
    return ("", "") if insn.mnemonic == "vsetvl" else current


def entry_vtypes(instructions: Sequence[Instruction]) -> list[tuple[str, str]]:
    """For each instruction, (SEW, LMUL) set by the nearest vsetvli/vsetivli before it in its function
    (("", "") when none, or when a vsetvl took vtype from a register)."""
    vtypes: list[tuple[str, str]] = []
    current, function = ("", ""), None
    for insn in instructions:
        if insn.function != function:
            current, function = ("", ""), insn.function
        vtypes.append(current)
        current = next_vtype(current, insn)
    return vtypes


def dispatch_blocks(counts: ExecutedCounts, executables: tuple[Path, ...], arch: str
                    ) -> Iterator[tuple[Block, Sequence[Instruction], tuple[str, str]]]:
    """Every executed block of dispatch code: the block, its instructions and the (SEW, LMUL) in force at its entry
    (what the estimator gives llvm-mca)."""
    vtypes: dict[int, list[tuple[str, str]]] = {}  # per library (its instruction list)
    for block, instructions, i in walk_blocks(counts, executables, arch):
        body = instructions[i:i + block.n_insns]
        if not body or body[0].function == OUTSIDE:
            continue
        if id(instructions) not in vtypes:
            vtypes[id(instructions)] = entry_vtypes(instructions)
        yield block, body, vtypes[id(instructions)][i]


@dataclass
class SiliconEstimate:
    """Estimated cycles of one run on one core: per dispatch and in total."""

    core: Core
    llvm_mca: str
    dispatches: dict[str, int] = field(default_factory=dict)
    blocks: int = 0
    dropped: int = 0  # instructions llvm-mca could not parse (left out of their block)
    cached: bool = False

    @property
    def total(self) -> int:
        return sum(self.dispatches.values())

    @property
    def ms(self) -> float | None:
        return cycles_ms(self.total, self.core.ghz) if self.core.ghz else None


def stood_in(code: BlockCode, core: Core) -> BlockCode:
    """``code`` as llvm-mca reads it for ``core``: each instruction the core has a stand-in for at the vtype in force
    there (``Core.stand_ins``) replaced by it, operands kept."""
    names = core.stood_in_mnemonics
    if not any(line.partition(" ")[0] in names for line in code.lines):
        return code
    vtype, lines = (code.sew, code.lmul), []
    for line in code.lines:
        mnemonic, _, operands = line.partition(" ")
        replacement = core.stand_in(mnemonic, *vtype)
        stand_in, _, at = (replacement or "").partition("@")
        own = _STAND_IN_VTYPE.fullmatch(at) if at else None
        if at and own is None:
            raise ValueError(f"{core.name}'s stand-in {replacement!r}: give its vtype as m1, mf2 or e32mf2")
        sew, lmul = own.groups() if own else (None, None)
        if not replacement:
            lines.append(line)
        elif lmul:  # read at its own vtype, then the type in force again (llvm-mca instruments mid-region)
            if lines and lines[-1].partition(" ")[0] in ("vsetvli", "vsetivli"):
                lines.append("")  # llvm-mca reads a comment on the next line before it makes the vsetvli's instruments
            lines += [f"{INSTRUMENT_LMUL} {lmul.upper()}", *([f"{INSTRUMENT_SEW} E{sew}"] if sew else []),
                      f"{stand_in} {operands}", f"{INSTRUMENT_LMUL} {vtype[1].upper()}",
                      *([f"{INSTRUMENT_SEW} E{vtype[0]}"] if sew else [])]
        else:
            lines.append(f"{stand_in} {operands}")
        vtype = next_vtype(vtype, Instruction(0, mnemonic, operands, ""))
    return BlockCode(tuple(lines), code.sew, code.lmul)


def block_cycles(codes: list[BlockCode], core: Core, store: Store) -> tuple[dict[BlockCode, float], int, bool]:
    """Steady-state cycles per iteration of each block on ``core`` (one code region each, llvm-mca at each
    iteration count, the core's stand-ins in place), cached by the blocks' code, their vtypes, the core and LLVM."""
    mca = find_mca()
    given = {code: stood_in(code, core) for code in set(codes)}
    ordered = sorted(set(given.values()), key=BlockCode.identity)  # "e,|" (no vector type) before "e8,m1|"...
    if not ordered:  # nothing executed (a thread that ran no dispatch code)
        return {}, 0, False
    key = digest(["silicon-v3", mca_version(mca), core.name, repr(core.iterations),
                  *(c.identity() for c in ordered)])

    def build(tmp: Path) -> dict[str, object]:
        totals, dropped = region_cycles(mca, core, ordered, mca_driver())
        first, second = core.iterations
        steady = [(b - a) / (second - first) for a, b in zip(*totals, strict=True)]
        (tmp / "cycles.json").write_text(json.dumps(steady))
        return {"core": core.name, "llvm_mca": mca_version(mca), "blocks": len(ordered), "dropped": dropped}

    entry = store.get_or_build("silicon", key, build)
    steady = dict(zip(ordered, json.loads(entry.file("cycles.json").read_text()), strict=True))
    return {code: steady[read] for code, read in given.items()}, int(str(entry.meta["dropped"])), not entry.created


def reads_vtype_at_entry(code: BlockCode) -> bool:
    """A region with no known vector type at entry whose vector instructions come before its first
    vsetvli/vsetivli (a ``vsetvl`` takes vtype from a register: llvm-mca sets no type from it)."""
    if code.sew:
        return False
    for line in code.lines:
        mnemonic = line.partition(" ")[0]
        if mnemonic in ("vsetvli", "vsetivli"):
            return False
        if mnemonic.startswith("v") and mnemonic != "vsetvl":
            return True
    return False


def chunk_sources(ordered: list[BlockCode], size: int) -> list[tuple[tuple[int, ...], str]]:
    """The blocks' code regions (named by their index in ``ordered``), at most ``size`` per llvm-mca input.

    llvm-mca's LMUL/SEW instruments, explicit or set by a ``vsetvli``, last into the regions after them
    in the same input, so a region that ``reads_vtype_at_entry`` would be estimated at whatever type the
    region before it left (measured: 3 ``vle32.v`` after an m1 region 91 cycles, alone 481). Each such
    region opens an input of its own; every other region's type is its instrument or its own
    ``vsetvli``. So each region costs exactly what it costs alone, whichever blocks are beside it."""
    alone = [reads_vtype_at_entry(code) for code in ordered]
    heads = [i for i, own in enumerate(alone) if own]
    rest = iter(i for i, own in enumerate(alone) if not own)
    chunks = [[head] for head in heads] + [[] for _ in range(max(0, -(-len(ordered) // size) - len(heads)))]
    for chunk in chunks:
        while len(chunk) < size and (i := next(rest, None)) is not None:
            chunk.append(i)
    return [(tuple(chunk), "\n".join(ordered[i].region(i) for i in chunk) + "\n") for chunk in chunks if chunk]


def region_cycles(mca: Path, core: Core, ordered: list[BlockCode],
                  driver: Path | None = None) -> tuple[list[list[int]], int]:
    """Total cycles of every block at each of the core's ``iterations``, and the lines llvm-mca could not parse.

    llvm-mca matches every instruction against every code region of its input, which is quadratic
    (measured: an X280 estimate of 16,022 blocks took 238.6 s in one input and 9.6 s in chunks of
    500 on 2 CPUs, with identical cycles), so the regions go in chunks, ``mca_jobs()`` at a time.
    Each region is simulated on its own and reads no vector type from another (``chunk_sources``), so
    chunks change no figure and a block's cycles do not depend on the blocks beside it. With ``driver``
    (mca_driver.py, which reads every region as if alone) the regions go to it in ``mca_jobs()`` parts instead, dealt
    in turn so that scalar and vector regions spread evenly, each at every iteration count; a part it refuses goes
    to llvm-mca."""
    totals: list[list[int]] = [[0] * len(ordered) for _ in core.iterations]
    given = list(range(len(ordered))) if driver is not None else []
    jobs = mca_jobs()
    refused: list[int] = []
    if given:
        parts = [given[k::jobs] for k in range(min(jobs, len(given)))]  # dealt in turn: each part gets every kind
        with ThreadPoolExecutor(max_workers=min(len(parts), jobs)) as pool:
            found = list(pool.map(lambda part: _run_driver(driver, core, ordered, part), parts))
        for part, cycles in zip(parts, found, strict=True):
            if cycles is None:
                refused.extend(part)
                continue
            for i, counts in zip(part, cycles, strict=True):
                for n, c in enumerate(counts):
                    totals[n][i] = c
    taken = set(given) - set(refused)
    rest = [i for i in range(len(ordered)) if i not in taken]
    if not rest:
        return totals, 0
    chunks = chunk_sources([ordered[i] for i in rest], CHUNK)
    tasks = [(source, n, indices) for indices, source in chunks for n in range(len(core.iterations))]
    with ThreadPoolExecutor(max_workers=min(len(tasks), jobs)) as pool:
        done = list(pool.map(lambda task: _run_mca(mca, core, task[0], core.iterations[task[1]], task[2]), tasks))
    dropped = 0
    for (_, n, indices), (lost, cycles) in zip(tasks, done, strict=True):
        for i, c in zip(indices, cycles, strict=True):
            totals[n][rest[i]] = c
        if n == 0:  # each iteration count drops the same unparsable lines: count them once
            dropped += lost
    return totals, dropped


def _run_driver(driver: Path, core: Core, ordered: list[BlockCode], part: list[int]) -> list[list[int]] | None:
    """Each region's total cycles at every iteration count of ``core`` from the driver, or None where it refuses."""
    source = "\n".join(ordered[i].region(i) for i in part) + "\n"
    proc = subprocess.run([str(driver), core.name, "-", *(str(n) for n in core.iterations)], input=source,
                          capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        return None
    found = {}
    for line in proc.stdout.splitlines():
        name, *cycles = line.split()
        found[name] = [int(c) for c in cycles]
    if set(found) != {f"b{i}" for i in part} or any(len(c) != len(core.iterations) for c in found.values()):
        return None
    return [found[f"b{i}"] for i in part]


def mca_jobs() -> int:
    """llvm-mca processes one estimate runs at once: this process's share of the CPUs among xdist's workers,
    and at least two (so a worker whose neighbour idles at the end of a run uses its CPU too)."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    return max(2, len(os.sched_getaffinity(0)) // max(1, workers))


def _run_mca(mca: Path, core: Core, source: str, iterations: int, regions: Sequence[int]) -> tuple[int, list[int]]:
    """Total cycles per region; lines llvm-mca cannot parse are dropped (and counted) and it is rerun."""
    dropped = 0
    for _ in range(3):
        proc = subprocess.run([str(mca), "-mtriple=riscv64", f"-mcpu={core.name}", f"-iterations={iterations}",
                               "-instruction-info=false", "-resource-pressure=false"],
                              input=source, capture_output=True, text=True, timeout=1800)
        if "is not a recognized processor" in proc.stderr:  # llvm-mca only warns: an unknown core is an error
            raise RvvError(f"{MCA} does not know the core {core.name!r}: {proc.stderr.strip().splitlines()[0]}")
        bad = sorted({int(n) for n in _ERROR.findall(proc.stderr)})
        if proc.returncode == 0 and not bad:
            found = {int(m.group(2)): int(m.group(3)) for m in _REGION.finditer(proc.stdout)}
            if set(found) != set(regions):
                raise RvvError(f"{MCA} reported {len(found)} of {len(regions)} code regions; rerun with the blocks")
            return dropped, [found[i] for i in regions]
        if not bad:
            raise RvvError(f"{MCA} failed on core {core.name}: {proc.stderr.strip()[:300]}")
        lines = source.split("\n")
        for number in bad:
            lines[number - 1] = "# dropped: " + lines[number - 1]
        dropped += len(bad)
        source = "\n".join(lines)
    raise RvvError(f"{MCA} kept failing on core {core.name}: {proc.stderr.strip()[:300]}")


def estimate(counts: ExecutedCounts, executables: tuple[Path, ...], arch: str, cores: Iterable[Core],
             store: Store) -> dict[str, SiliconEstimate]:
    """Estimated cycles per dispatch on each core (a ToolMissing line when llvm-mca is absent)."""
    return estimate_each(counts, [[b.execs for b in counts.blocks]], executables, arch, cores, store)[0]


def estimate_each(counts: ExecutedCounts, weights: Sequence[Sequence[int]], executables: tuple[Path, ...], arch: str,
                  cores: Iterable[Core], store: Store) -> list[dict[str, SiliconEstimate]]:
    """``estimate`` of each of several runs of ``counts``' blocks, run ``r`` executing block ``i`` ``weights[r][i]``
    times (a run's threads), each exactly as ``estimate`` of that run alone: a block costs the same beside any other
    (``chunk_sources``), so llvm-mca reads every block any run executed once per core, and the blocks are walked once
    (``dropped`` then counts the lines of all runs' blocks)."""
    cores = tuple(cores)
    if not cores:
        return [{} for _ in weights]
    mca = find_mca()
    index = {id(block): i for i, block in enumerate(counts.blocks)}
    walked: list[tuple[str, BlockCode, int]] = []  # (dispatch, code, index of the block) of every executed block
    for block, body, (sew, lmul) in dispatch_blocks(counts, executables, arch):
        code = BlockCode(tuple(mca_line(insn) for insn in body), sew, lmul)
        walked.append((dispatch_key(body[0].function), code, index[id(block)]))
    runs = [[(key, code, execs[i]) for key, code, i in walked if execs[i]] for execs in weights]
    union = [code for ran in runs for _, code, _ in ran]
    results: list[dict[str, SiliconEstimate]] = [{} for _ in runs]
    for core in cores:
        cycles, dropped, cached = block_cycles(union, core, store)
        for ran, result in zip(runs, results, strict=True):
            per_dispatch: dict[str, float] = {}
            for key, code, n in ran:
                per_dispatch[key] = per_dispatch.get(key, 0.0) + n * cycles[code]
            result[core.name] = SiliconEstimate(core, mca_version(mca), {k: round(v) for k, v in per_dispatch.items()},
                                                blocks=len({code for _, code, _ in ran}), dropped=dropped,
                                                cached=cached)
    return results


def estimate_once(counts: Callable[[], ExecutedCounts], counts_file: Path, executables: tuple[Path, ...], arch: str,
                  cores: Iterable[Core], store: Store) -> dict[str, SiliconEstimate]:
    """``estimate``, kept in the store under the counts file, the libraries, the cores, llvm-mca's version and this
    module's source: a rerun with nothing changed reads the estimates back instead of walking every block (``counts``
    gives the parsed counts, asked for only then)."""
    cores = tuple(cores)
    if not cores:
        return {}
    mca = find_mca()
    key = digest(["estimates-v1", content_sha(counts_file), *(content_sha(e) for e in executables), arch,
                  *(repr(c) for c in cores), mca_version(mca), _SOURCE])

    def build(tmp: Path) -> dict[str, Any]:
        found = estimate(counts(), executables, arch, cores, store)
        return {"estimates": {name: {"core": e.core.name, "llvm_mca": e.llvm_mca, "dispatches": e.dispatches,
                                     "blocks": e.blocks, "dropped": e.dropped} for name, e in found.items()}}

    entry = store.get_or_build("estimates", key, build)
    by_name = {c.name: c for c in cores}
    return {name: SiliconEstimate(by_name[e["core"]], e["llvm_mca"], dict(e["dispatches"]), e["blocks"],
                                  e["dropped"], cached=not entry.created)
            for name, e in entry.meta["estimates"].items()}


_SOURCE = source_digest(__file__, "counts.py")
