"""A bundle's results folder (pytest_rvv/bundle/run.sh, run on a RISC-V machine) as a runner.

Each riscv64 cell's outputs and times come from that machine's runs instead of QEMU, so agreement, performance and
the reports judge them as they judge any run; machine-bound numbers belong to that machine (its facts name it) and
are gated against baselines/performance/machines/<its name>/. A cell is matched by its module's sha256 and its
target, and its inputs must be the session's own: a results folder from another toolchain or selection is refused
in one line, as is a damaged one (no ``complete`` marker, a truncated output, a missing run).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pytest_rvv.base.errors import ConfigError, RunFailed, tail
from pytest_rvv.base.process import ProcessResult
from pytest_rvv.base.store import file_sha256
from pytest_rvv.compile.compiler import Artifact
from pytest_rvv.config.cores import Core, machine_core
from pytest_rvv.config.machine import Machine
from pytest_rvv.config.targets import Target
from pytest_rvv.run.facts_probe import parse_facts
from pytest_rvv.run.runner import Capabilities, Runner, RunOutcome
from pytest_rvv.run.ssh_board import board_metrics, gnu_time
from pytest_rvv.toolchain.runtimes import Runtime

BUNDLE_SCHEMA = "pytest-rvv-bundle/1"
_NAME_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def inputs_sha256(inputs: list[np.ndarray] | tuple[np.ndarray, ...]) -> str:
    """One digest of the inputs' dtypes, shapes and bytes (written into the bundle, checked when judging)."""
    h = hashlib.sha256()
    for array in inputs:
        h.update(f"{array.dtype.str}{array.shape}".encode())
        h.update(np.ascontiguousarray(array).tobytes())
    return h.hexdigest()


@dataclass(frozen=True)
class MachineFacts:
    """What the bundle's facts probe read on the machine."""

    values: dict[str, str]

    @property
    def vlen(self) -> int:
        return int(self.values.get("vlen", "0") or 0)

    @property
    def core(self) -> Core | None:
        """The core llvm-mca models that this machine is (uarch or marchid), or None."""
        return machine_core(self.values.get("uarch", ""), self.values.get("marchid", ""))

    @property
    def name(self) -> str:
        """``spacemit-x60-8h-vlen256``: the core (uarch, else the model name), harts and VLEN."""
        core = self.values.get("uarch") or self.values.get("model name") or "riscv64"
        core = _NAME_SAFE.sub("-", core.replace(",", "-")).strip("-").lower()[:40] or "riscv64"
        return f"{core}-{self.values.get('harts', '0')}h-vlen{self.vlen}"

    def machine(self) -> Machine:
        keys = ("isa", "uarch", "marchid", "mvendorid", "mimpid", "model name", "harts", "vlen", "kernel")
        return Machine(self.name, {**{k: self.values.get(k, "") for k in keys}, "runs": "bundle"}, "bundle")


@dataclass
class BundleResults:
    """A results folder: the bundle it ran, the machine's facts, and each cell's runs."""

    path: Path
    bundle: dict
    facts: MachineFacts
    cells: dict[str, dict] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> BundleResults:
        """Read and check ``path``; anything missing or damaged is one ConfigError line naming the file."""
        where = f"--rvv-bundle-results {path}"
        if not path.is_dir():
            raise ConfigError(f"{where}: not a directory; give the results folder run.sh wrote")
        try:
            bundle = json.loads((path / "bundle.json").read_text())
        except FileNotFoundError:
            raise ConfigError(f"{where}: no bundle.json: not a bundle's results folder (run.sh writes one)") from None
        except (OSError, ValueError) as exc:
            raise ConfigError(f"{where}: bundle.json is damaged ({exc}); run the bundle's run.sh again") from None
        if not isinstance(bundle, dict) or bundle.get("schema") != BUNDLE_SCHEMA:
            raise ConfigError(f"{where}: bundle.json is not a {BUNDLE_SCHEMA} bundle; rebuild it with --rvv-bundle")
        if not (path / "complete").is_file():
            raise ConfigError(f"{where}: run.sh did not finish there (no 'complete'); run it to the end again")
        try:
            values = parse_facts((path / "facts.txt").read_text())
        except OSError as exc:
            raise ConfigError(f"{where}: facts.txt is missing ({exc}); run the bundle's run.sh again") from None
        if "vlen" not in values or "isa" not in values:
            raise ConfigError(f"{where}: facts.txt has no vlen/isa lines: the facts probe did not run there")
        return cls(path, bundle, MachineFacts(values), {c["name"]: c for c in bundle.get("cells", [])})

    @property
    def machine(self) -> Machine:
        return self.facts.machine()

    def check_toolchain(self, compiler_version: str) -> None:
        """Refuse results of a bundle another compiler built: its modules are not this session's."""
        built_by = self.bundle.get("toolchain", "?")
        if built_by != compiler_version:
            raise ConfigError(f"--rvv-bundle-results {self.path}: the bundle was built by {built_by}; this session "
                              f"compiles with {compiler_version}: judge it with that toolchain (--rvv-iree-build) "
                              "or rebuild the bundle with --rvv-bundle")

    def describe(self) -> str:
        """One header line: the machine, what it ran, what it refused."""
        f = self.facts.values
        refused = sorted({p.parent.parent.name for p in (self.path / "cells").glob("*/*/refused.txt")})
        rounds = (self.path / "complete").read_text().split()[0] if (self.path / "complete").is_file() else "?"
        return (f"bundle results {self.path}: machine {self.machine.name} ({f.get('model name') or f.get('uarch')}"
                f", {f.get('harts')} harts, VLEN {self.facts.vlen}, kernel {f.get('kernel', '?')}; id "
                f"{self.machine.id}), {len(self.cells)} cells, {rounds}" + (f"; refused there: {', '.join(refused)}"
                                                                           if refused else ""))

    def cell_for(self, module_sha256: str, target: str) -> dict | None:
        return next((c for c in self.cells.values()
                     if c["module_sha256"] == module_sha256 and c["target"] == target), None)

    def folder(self, name: str) -> Path:
        return self.path / "cells" / name

    def refusal(self, target: str) -> str | None:
        """Why the machine refused ``target``'s cells (an extension or VLEN it lacks), or None."""
        refused = sorted((self.path / "cells" / target).glob("*/refused.txt"))
        return refused[0].read_text().strip() if refused else None


class ResultsRunner(Runner):
    """Runs nothing: a cell's run is the machine's first round of it; its timed runs are every round it ran."""

    def __init__(self, target: Target, results: BundleResults) -> None:
        runtime = Runtime(target.arch, results.path / "bin" / "iree-run-module", None,
                          f"the bundle's ({results.bundle.get('runtime', '?')})")
        self.target, self.runtime, self.qemu = target, runtime, None
        self.results = results

    @property
    def capabilities(self) -> Capabilities:
        """Replays the machine's rounds (its core, when llvm-mca models it, calibrates the estimator)."""
        return Capabilities(f"on {self.results.machine.name} (bundle results {self.results.path})", replays=True,
                            core=self.results.facts.core)

    def run(self, artifact: Artifact, inputs: list[np.ndarray], workdir: Path, num_outputs: int,
            timeout_s: float | None, qemu_args: tuple[str, ...] = (), launcher: tuple[str, ...] = (),
            runtime_args: tuple[str, ...] = ()) -> RunOutcome:
        """The cell's first round (what agreement checks)."""
        if qemu_args:
            raise ConfigError(f"target {self.target.name} runs {self.where}: executed counts need QEMU")
        return self.replay(artifact, inputs, num_outputs, limit=1)[0]

    def replay(self, artifact: Artifact, inputs: list[np.ndarray], num_outputs: int,
               limit: int | None = None) -> list[RunOutcome]:
        """Every round the machine ran of this cell, in order (what performance times: each must agree)."""
        results, target = self.results, self.target
        sha = file_sha256(artifact.path)
        cell = results.cell_for(sha, target.name)
        where = f"--rvv-bundle-results {results.path}"
        if cell is None:
            raise ConfigError(f"{where}: no cell runs this {artifact.model} module on {target.name} (sha256 "
                              f"{sha[:12]}): the bundle was built by {results.bundle.get('toolchain', '?')} or for "
                              "another selection; rebuild it with --rvv-bundle and run it again")
        if cell["inputs_sha256"] != inputs_sha256(inputs):
            raise ConfigError(f"{where}: {cell['name']} ran other inputs than this session seeds (another seed, "
                              "size or model version); rebuild the bundle with --rvv-bundle")
        folder = results.folder(cell["name"])
        refused = folder / "refused.txt"
        if refused.is_file():
            raise RunFailed(f"{cell['name']} was refused {self.where}: {refused.read_text().strip()}")
        rounds = sorted((p for p in folder.glob("run_*") if p.is_dir()), key=lambda p: int(p.name[4:] or 0))
        if not rounds:
            raise ConfigError(f"{where}: {folder} has no runs (run.sh stopped early?); run it again")
        return [_outcome(r, cell, num_outputs, self.where) for r in rounds[:limit]]


def _outcome(folder: Path, cell: dict, num_outputs: int, where: str) -> RunOutcome:
    """One recorded round: its status, wall time, GNU time's figures, outputs; a damaged file is one line."""
    def text(name: str) -> str:
        try:
            return (folder / name).read_text()
        except OSError as exc:
            raise ConfigError(f"{folder / name}: missing ({exc.strerror}); run the bundle's run.sh again") from None

    try:
        rc, wall_us = int(text("rc.txt").strip()), int(text("wall_us.txt").strip())
    except ValueError:
        raise ConfigError(f"{folder}: rc.txt or wall_us.txt is not a number; run the bundle's run.sh again") from None
    stdout, stderr = text("run.out"), text("run.err")
    files = {"time.txt": (folder / "time.txt").read_bytes() if (folder / "time.txt").is_file() else b""}
    measured, timing = board_metrics(files), gnu_time(files)
    process = ProcessResult((f"{folder}/args",), -(rc - 128) if rc > 128 else rc, stdout, stderr, wall_us / 1e6,
                            timing[0] if timing else wall_us / 1e6, False)
    if rc != 0:
        raise RunFailed(f"iree-run-module {process.status()} running {cell['name']} {where}",
                        details=f"--- {folder}/run.err (tail) ---\n{tail(stderr, 25)}")
    outputs = []
    for i in range(num_outputs):
        path = folder / f"output_{i}.npy"
        try:
            outputs.append(np.load(path, allow_pickle=False))
        except FileNotFoundError:
            raise ConfigError(f"{path}: missing; run the bundle's run.sh again") from None
        except (OSError, ValueError, EOFError) as exc:
            raise ConfigError(f"{path}: truncated or not a .npy file ({exc}); run the bundle's run.sh again") from None
    return RunOutcome(outputs, process, f"sh run.sh on the machine; this round: {folder}", measured)
