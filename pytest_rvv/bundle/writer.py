"""Write a bundle: everything a RISC-V machine needs to run a selection's riscv64 cells natively.

Layout (``bundle.json`` says what it holds; ``run.sh`` is the only thing to start)::

    run.sh                     POSIX sh: facts, refusals, interleaved rounds, times, outputs, into results/
    bundle.json                toolchain, runtime, rounds, and per cell: model, target, function, outputs,
                               extensions needed, VLEN, sha256 of the module and of the inputs
    cells.txt                  one line per cell: name, VLEN it needs, extensions it needs
    bin/iree-run-module        the static riscv64 runtime the suites run these modules with
    bin/facts                  a static riscv64 probe: V, VLEN (vlenb), /proc/cpuinfo's isa, uarch, marchid
    cells/<target>/<model>/    module.vmfb, input_N.npy, args (iree-run-module's arguments)

A bundle is written whole into a temporary folder beside ``directory`` and renamed into place: a bundle that is
there is complete.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pytest_rvv.base.errors import ConfigError
from pytest_rvv.base.store import Store, file_sha256
from pytest_rvv.config.targets import Target
from pytest_rvv.run.bundle_results import BUNDLE_SCHEMA, inputs_sha256
from pytest_rvv.run.facts_probe import build_facts_probe

RUN_SH = Path(__file__).with_name("run.sh")
DEFAULT_ROUNDS = 5
# Extensions a kernel may not list by their own name: listed through what implies them (b is zba, zbb and zbs).
IMPLIED_BY = {"zmmul": ("m",), "zaamo": ("a",), "zalrsc": ("a",), "zca": ("c",), "zcd": ("c", "d"),
              "zcf": ("c", "f"), "b": ("zba", "zbb", "zbs"), "zve32x": ("v",), "zve32f": ("v",), "zve64x": ("v",),
              "zve64f": ("v",), "zve64d": ("v",)}
HINTS = frozenset({"zicbop", "zihintntl", "zihintpause"})  # encoded as HINTs: a machine without them runs them as nops
SAFE_NAME = re.compile(r"^[A-Za-z0-9._,+-]+$")  # what run.sh handles in a cell's folder name


@dataclass(frozen=True)
class BundleCell:
    """One model x riscv64 target: its compiled module, the session's seeded inputs, and what it needs."""

    model: str
    target: Target
    module: Path
    function: str
    inputs: tuple[np.ndarray, ...]
    outputs: int

    @property
    def name(self) -> str:
        return f"{self.target.name}/{self.model}"  # a folder per target (IREE reads '@' in a path as a separator)

    @property
    def needs(self) -> tuple[str, ...]:
        """The extensions a machine's ``isa`` line must list: each as Linux names it (an implied subset by the
        extension that implies it), without hints (they execute as no-ops anywhere) and ``zvlNb`` (checked as VLEN)."""
        found: list[str] = []
        for ext in self.target.extensions:
            if ext in HINTS or (ext.startswith("zvl") and ext.endswith("b")):
                continue
            for name in IMPLIED_BY.get(ext, (ext,)):
                if name not in found:
                    found.append(name)
        return tuple(found)

    def args(self) -> list[str]:
        """iree-run-module's arguments, ``@CELL@`` standing for the cell's folder on the machine."""
        return ["--device=local-sync", "--module=@CELL@/module.vmfb", f"--function={self.function}",
                *(f"--input=@@CELL@/input_{i}.npy" for i in range(len(self.inputs))),
                *(f"--output=@output_{i}.npy" for i in range(self.outputs)), "--print_statistics"]


def write_bundle(directory: Path, cells: list[BundleCell], runtime: Path, runtime_identity: str, toolchain: str,
                 store: Store, rounds: int = DEFAULT_ROUNDS) -> Path:
    """Write the bundle of ``cells`` to ``directory`` (replacing one that is there), whole or not at all."""
    directory = directory.resolve()
    check_replaceable(directory)
    directory.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{directory.name}-", dir=directory.parent))
    tmp.chmod(0o755)
    try:
        (tmp / "bin").mkdir()
        shutil.copy2(runtime, tmp / "bin" / "iree-run-module")
        shutil.copy2(build_facts_probe(store), tmp / "bin" / "facts")
        for name in ("iree-run-module", "facts"):
            (tmp / "bin" / name).chmod(0o755)
        script = RUN_SH.read_text().replace("@REPEAT@", str(rounds))
        (tmp / "run.sh").write_text(script)
        (tmp / "run.sh").chmod(0o755)
        records, lines = [], []
        for cell in cells:
            folder = tmp / "cells" / cell.name
            folder.mkdir(parents=True)
            shutil.copy2(cell.module, folder / "module.vmfb")
            for i, array in enumerate(cell.inputs):
                np.save(folder / f"input_{i}.npy", array, allow_pickle=False)
            (folder / "args").write_text("".join(f"{a}\n" for a in cell.args()))
            lines.append(f"{cell.name} {cell.target.min_vlen} {' '.join(cell.needs)}".rstrip())
            records.append({"name": cell.name, "model": cell.model, "target": cell.target.name,
                            "function": cell.function, "outputs": cell.outputs, "needs": list(cell.needs),
                            "min_vlen": cell.target.min_vlen, "module_sha256": file_sha256(cell.module),
                            "inputs_sha256": inputs_sha256(cell.inputs)})
        (tmp / "cells.txt").write_text("".join(f"{line}\n" for line in lines))
        document = {"schema": BUNDLE_SCHEMA, "toolchain": toolchain, "runtime": runtime_identity, "rounds": rounds,
                    "cells": records}
        (tmp / "bundle.json").write_text(json.dumps(document, indent=1) + "\n")
        if directory.exists():
            old = directory.with_name(f".{directory.name}-old-{os.getpid()}")
            directory.rename(old)
            try:
                tmp.rename(directory)
            except BaseException:
                old.rename(directory)  # the bundle that was there stays
                raise
            shutil.rmtree(old, ignore_errors=True)
        else:
            tmp.rename(directory)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return directory


def check_replaceable(directory: Path) -> None:
    """Only an empty folder or an earlier bundle is replaced: anything else named by --rvv-bundle is refused."""
    if not directory.exists():
        return
    if not directory.is_dir():
        raise ConfigError(f"--rvv-bundle {directory}: not a directory; give a new or empty folder")
    if not any(directory.iterdir()):
        return
    try:
        schema = json.loads((directory / "bundle.json").read_text()).get("schema")
    except (OSError, ValueError, AttributeError):
        schema = None
    if schema != BUNDLE_SCHEMA:
        raise ConfigError(f"--rvv-bundle {directory}: the folder holds something that is not a bundle; give a new "
                          "or empty folder (an earlier bundle there is replaced)")


def bundle_bytes(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())
