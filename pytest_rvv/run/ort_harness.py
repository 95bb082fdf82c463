"""The peer harness: ort_harness.c cross-built for riscv64 against ONNX Runtime's sysroot, and one run of it.

The harness (run/ort_harness.c) loads a prepared ``.onnx`` with ONNX Runtime's C API, reads the seeded inputs as
.npy (the files iree-run-module reads with ``--input=@``), runs with one intra-op thread unless asked and writes the
outputs as .npy. It is built once per source, compiler and sysroot with clang-22 for rv64gc (what Debian builds
ONNX Runtime for) against Debian's riscv64 cross libc, into the tools cache; it loads ONNX Runtime with dlopen
from the sysroot (toolchain/peer_ort.py) it runs in, ``qemu-riscv64 -L <sysroot>``.

``python -m pytest_rvv.run.ort_harness`` (scripts/setup.sh's ``peers`` step) prepares both; exit 3 with one line
when the sysroot cannot be fetched.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

import numpy as np

from pytest_rvv.base.errors import RunFailed, RvvError, ToolMissing
from pytest_rvv.base.process import ProcessResult, run_process
from pytest_rvv.base.store import Store, content_sha, digest
from pytest_rvv.base.tools import find_executable, version_output
from pytest_rvv.config.settings import default_tools_dir
from pytest_rvv.config.targets import Target
from pytest_rvv.run.qemu import Qemu
from pytest_rvv.run.runner import GUEST_ADDRESS_SPACE
from pytest_rvv.toolchain.peer_ort import LIBRARY, PeerSysroot, SysrootUnavailable, prepare_sysroot

SOURCE = "ort_harness.c"
EXECUTABLE = "ort_harness"
NAMESPACE = "ort-harness-riscv64"
RECIPE = "ort-harness-rv64gc-v1"
CLANG = "clang-22"
FLAGS = ("--target=riscv64-linux-gnu", "-march=rv64gc", "-mabi=lp64d", "-O2", "-Wall", "-Werror")
OPTIMIZATIONS = ("all", "extended", "basic", "disable")  # --optimizations; run/onnxruntime.py's levels map onto them
ORACLE_LEVELS = {"all": "all", "basic": "basic", "bfloat16": "disable"}
RUN_TIMEOUT_S = 1800.0
# "./onnxruntime/core/graph/model_load_utils.h:46 void onnxruntime::...(const ..., int) " before ONNX Runtime's message
_CXX_WHERE = re.compile(r"[\w./-]+\.(?:h|cc|cpp):\d+ .*?\)(?: const)? (?=[A-Z])")


def build_harness(sysroot: PeerSysroot, tools_dir: Path | None = None) -> Path:
    """The riscv64 harness for ``sysroot`` (built on first use; cached by source, compiler and ONNX Runtime)."""
    clang = find_executable(CLANG)
    if clang is None:
        raise ToolMissing(f"{CLANG} not found (it builds the ONNX Runtime peer harness): apt-get install clang-22 "
                          "(or bash scripts/setup.sh system)")
    source = files("pytest_rvv.run").joinpath(SOURCE).read_text()
    header = sysroot.path / sysroot.recipe.header  # onnxruntime_c_api.h
    key = digest([RECIPE, source, version_output(clang), *FLAGS, sysroot.version, content_sha(header)])

    def build(tmp: Path) -> dict[str, object]:
        work = tmp / ".src"
        work.mkdir()
        (work / SOURCE).write_text(source)
        result = run_process([str(clang), *FLAGS, f"-I{header.parent}", f'-DORT_LIBRARY="{LIBRARY}"',
                              "-o", tmp / EXECUTABLE, work / SOURCE, "-ldl"], timeout_s=300)
        (work / SOURCE).unlink()
        work.rmdir()
        if not result.ok:
            raise ToolMissing(f"building the ONNX Runtime peer harness failed: {result.stderr.strip()[:300]} "
                              "(apt-get install libc6-dev-riscv64-cross gcc-riscv64-linux-gnu)")
        return {"clang": str(clang), "onnxruntime": sysroot.version, "build_s": round(result.wall_s, 2)}

    return Store(tools_dir or default_tools_dir()).get_or_build(NAMESPACE, key, build).file(EXECUTABLE)


class PeerRejected(RunFailed):
    """ONNX Runtime's riscv64 build refused the model (it said why: an operator it lacks, a model it rejects)."""


@dataclass(frozen=True)
class PeerRun:
    """One run of the harness: ONNX Runtime's outputs, the process, and its own timings."""

    outputs: list[np.ndarray]
    process: ProcessResult
    session_s: float  # creating the session (loading and optimizing the model)
    run_s: float  # the (last) run
    code: dict[str, list[tuple[int, int]]] | None = None  # with maps=True: each file's executable ranges (guest)

    def library_of(self, address: int) -> str | None:
        """The file (e.g. ``libonnxruntime.so.1.21.0``) whose code holds the guest ``address`` (maps=True)."""
        for name, ranges in (self.code or {}).items():
            if any(start <= address < end for start, end in ranges):
                return name
        return None


def harness_said(stderr: str, prefix: str) -> tuple[bool, str]:
    """Why a peer harness failed: its last line starting ``prefix`` (less the prefix) and True, or, when it said
    nothing (QEMU or the loader stopped it), the last line of ``stderr`` and False."""
    said = [line for line in stderr.splitlines() if line.startswith(prefix)]
    if said:
        return True, said[-1].removeprefix(prefix)
    return False, (stderr.strip().splitlines() or [""])[-1][:300]


def executable_ranges(maps: str) -> dict[str, list[tuple[int, int]]]:
    """``/proc/self/maps`` text as each mapped file's executable address ranges, by file name."""
    code: dict[str, list[tuple[int, int]]] = {}
    for line in maps.splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and "x" in fields[1]:
            start, end = (int(part, 16) for part in fields[0].split("-"))
            code.setdefault(Path(fields[5].strip()).name, []).append((start, end))
    return code


def run_harness(harness: Path, sysroot: PeerSysroot, qemu: Qemu, target: Target, model: Path,
                inputs: list[np.ndarray], workdir: Path, num_outputs: int, *, threads: int = 1,
                optimizations: str = "all", repeat: int = 1, maps: bool = False, qemu_args: tuple[str, ...] = (),
                launcher: tuple[str, ...] = (), timeout_s: float = RUN_TIMEOUT_S, label: str | None = None,
                timings: bool = True) -> PeerRun:
    """Run ``model`` on ``inputs`` with ONNX Runtime for riscv64, under ``qemu`` with ``target``'s CPU.

    ``optimizations``: ONNX Runtime's graph optimization level (OPTIMIZATIONS; ``ORACLE_LEVELS`` maps the oracle's
    level to it), ``repeat``: runs in one session (counted runs of 1 and 2 differ by one run's work), ``maps``: where
    each library's code was (``PeerRun.library_of``, to attribute executed counts), ``qemu_args`` e.g. a -plugin,
    ``launcher`` before everything (the RSS probe), ``label`` the model's name in messages (default: the file's),
    ``timings``: print them (counted runs do not: a time's digits take a time-dependent number of instructions to
    print; ``session_s``, ``run_s`` are then 0).
    The guest sees the run's folder: the model, inputs and outputs by relative names, an empty environment, and
    addresses from QEMU's reserved range (``-R``, as iree-run-module's runs): executed counts are then exact from
    run to run (measured on mobilenetv3-cls: 460,551,185 twice; without -R 460,582,513 and 460,624,449).
    A failure raises RunFailed with one line naming the model and what ONNX Runtime (or QEMU) said;
    ``PeerRejected`` when ONNX Runtime itself refused the model (exit 1: an operator it lacks, a model it rejects).
    """
    if optimizations not in OPTIMIZATIONS:
        raise ValueError(f"optimizations={optimizations!r}: one of {', '.join(OPTIMIZATIONS)}")
    workdir.mkdir(parents=True, exist_ok=True)
    guest_model = workdir / "model.onnx"
    guest_model.unlink(missing_ok=True)
    os.symlink(Path(model).resolve(), guest_model)
    in_names = [f"input_{i}.npy" for i in range(len(inputs))]
    out_names = [f"output_{i}.npy" for i in range(num_outputs)]
    for name, array in zip(in_names, inputs, strict=True):
        np.save(workdir / name, np.ascontiguousarray(array), allow_pickle=False)
    for name in [*out_names, "maps.txt"]:
        (workdir / name).unlink(missing_ok=True)
    argv = [*launcher, str(qemu.path), "-cpu", target.emulator_cpu, "-R", GUEST_ADDRESS_SPACE, "-L", str(sysroot.path),
            *qemu_args,
            "-0", EXECUTABLE, str(harness), "model.onnx", *(f"--input=@{n}" for n in in_names),
            *(f"--output=@{n}" for n in out_names), f"--threads={threads}", f"--optimizations={optimizations}",
            f"--repeat={repeat}", *(["--maps=@maps.txt"] if maps else []), *([] if timings else ["--no-timings"])]
    result = run_process(argv, timeout_s=timeout_s, env={}, cwd=workdir)
    if not result.ok:
        said = [line for line in result.stderr.splitlines() if line.startswith("ort_harness: ")]
        reason = said[-1].removeprefix("ort_harness: model.onnx: ") if said else \
            (result.stderr.strip().splitlines() or [""])[-1][:300]
        reason = _CXX_WHERE.sub(" ", reason).replace(":  ", ": ")  # ONNX Runtime's source line and C++ signature
        error = PeerRejected if result.returncode == 1 and said and not result.timed_out else RunFailed
        raise error(f"{label or model.name}: ONNX Runtime (riscv64, {target.name}) failed ({result.status()}): "
                    f"{reason}", result.stderr[-4000:])
    timings = {parts[0]: int(parts[1]) for parts in map(str.split, result.stdout.splitlines())
               if len(parts) == 2 and parts[0] in ("session_us", "run_us") and parts[1].isdigit()}
    outputs = [np.load(workdir / name, allow_pickle=False) for name in out_names] if repeat else []
    code = executable_ranges((workdir / "maps.txt").read_text()) if maps else None
    return PeerRun(outputs, result, timings.get("session_us", 0) / 1e6, timings.get("run_us", 0) / 1e6, code)


def prepare(log: Callable[[str], None]) -> str:
    """Fetch ONNX Runtime's riscv64 sysroot and build the harness (SysrootUnavailable, RvvError: one line); what
    is ready, in a line."""
    sysroot = prepare_sysroot(log=log)
    harness = build_harness(sysroot)
    return sysroot.describe() + (f", fetched in {sysroot.fetch_s:.1f} s" if sysroot.fetched else "") + \
        f"; harness {harness}"


def main(argv: list[str] | None = None) -> int:
    """Prepare ONNX Runtime's riscv64 sysroot and build the harness; exit 3 with one line when it cannot be fetched."""
    del argv

    def log(line: str) -> None:
        print(f"[peers] {line}", flush=True)

    try:
        log(prepare(log))
    except SysrootUnavailable as exc:
        print(f"[peers] {exc}", file=sys.stderr)
        return 3
    except RvvError as exc:  # the tools folder cannot be written, the harness does not build
        print(f"[peers] {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
