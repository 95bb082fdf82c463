"""A matmul library as a peer of the kernel suite's f32 cells: a small C harness over the library, cross-built for
riscv64 and run under the same QEMU CPU as the IREE cell (run/blas_peer.py: OpenBLAS; run/ggml_peer.py: ggml).

Every harness has one command line (run/matmul_harness.h, which each includes): ``HARNESS M K N A.f32 B.f32 C.f32
[--threads=N] [--repeat=N] [--maps=@maps.txt] [--no-timings]`` (raw little-endian float32 files), prints ``core
<name>`` (the kernel set the library picked on this CPU) and ``routine <name>``, and ``session_us``/``run_us``
unless ``--no-timings``; a failure is one line on stderr and exit 2 (arguments, files) or 1 (the library). A
``MatmulLibrary`` says how its harness is built; ``MatmulRunner`` answers to the same calls as the ONNX Runtime
runner (run/peer.py), so its runs are recorded by content the same way (``PeerRuns``): plain (outputs, peak RSS),
and counted with one and two calls (their difference is one call's work, loading the library excluded).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from pytest_rvv.base.errors import RunFailed, ToolMissing, first_lines
from pytest_rvv.base.process import run_process
from pytest_rvv.base.store import Store, content_sha, digest
from pytest_rvv.base.tools import find_executable, version_output
from pytest_rvv.config.settings import default_tools_dir
from pytest_rvv.config.targets import Target
from pytest_rvv.model.model import Tolerance
from pytest_rvv.run.ort_harness import PeerRejected, PeerRun, executable_ranges, harness_said
from pytest_rvv.run.peer_runner import EmulatedPeerRunner
from pytest_rvv.run.qemu import Qemu, find_qemu
from pytest_rvv.run.runner import GUEST_ADDRESS_SPACE
from pytest_rvv.toolchain.debian_sysroot import MARKER, PeerSysroot, SysrootRecipe, prepare_sysroot

CLANG = "clang-22"
FLAGS = ("--target=riscv64-linux-gnu", "-march=rv64gc", "-mabi=lp64d", "-O2", "-Wall", "-Werror")
RUN_TIMEOUT_S = 1800.0
DTYPE = "float32"  # what the harnesses multiply
INT8 = "int8"  # what a harness with int8 weights (MatmulLibrary.weights) takes too, as float32 files
SHARED = "matmul_harness.h"  # what every harness includes: its failures, clock, files and command line


@dataclass(frozen=True)
class MatmulLibrary:
    """One matmul library: its sysroot, its harness (a C file beside this module) and how the harness is built."""

    title: str  # "OpenBLAS"
    sysroot: SysrootRecipe
    source: str  # "blas_harness.c"
    recipe: str  # the harness build's cache id (a new id builds again)
    details: str  # in the runner's description: "DYNAMIC_ARCH; sgemm, sgemv at M=1"
    build_flags: Callable[[PeerSysroot], list[str]] = field(default=lambda sysroot: [])
    # int8 operands: the type the harness holds B in (``--weights=``: ggml's "q8_0"), with the bound of the result's
    # error from the rounding that type brings (A, B -> max abs error); "": the library multiplies float32 only
    weights: str = ""
    error_bound: Callable[[np.ndarray, np.ndarray], float] | None = None

    @property
    def executable(self) -> str:
        return self.source.removesuffix(".c")


def build_harness(library: MatmulLibrary, sysroot: PeerSysroot, tools_dir: Path | None = None) -> Path:
    """``library``'s riscv64 harness (built on first use; cached by source, compiler, flags and library)."""
    clang = find_executable(CLANG)
    if clang is None:
        raise ToolMissing(f"{CLANG} not found (it builds the {library.title} peer harness): apt-get install clang-22 "
                          "(or bash scripts/setup.sh system)")
    sources = {name: files("pytest_rvv.run").joinpath(name).read_text() for name in (library.source, SHARED)}
    extra = library.build_flags(sysroot)
    key = digest([library.recipe, *sources.values(), version_output(clang), *FLAGS, *extra, sysroot.version,
                  content_sha(sysroot.path / MARKER)])

    def build(tmp: Path) -> dict[str, object]:
        work = tmp / ".src"
        work.mkdir()
        for name, text in sources.items():  # the shared header beside the harness, which includes it
            (work / name).write_text(text)
        result = run_process([str(clang), *FLAGS, "-o", tmp / library.executable, work / library.source, *extra],
                             timeout_s=300)
        for name in sources:
            (work / name).unlink()
        work.rmdir()
        if not result.ok:
            raise ToolMissing(f"building the {library.title} peer harness failed: "
                              f"{first_lines(result.stderr, 1)[:300]} "
                              "(apt-get install libc6-dev-riscv64-cross gcc-riscv64-linux-gnu)")
        return {"clang": str(clang), "library": sysroot.version, "build_s": round(result.wall_s, 2)}

    return Store(tools_dir or default_tools_dir()).get_or_build(f"{library.executable.replace('_', '-')}-riscv64",
                                                                key, build).file(library.executable)


def matmul_operands(model: Path, inputs: list[np.ndarray], label: str, title: str,
                    held_as: str = "") -> tuple[np.ndarray, np.ndarray]:
    """A and B of a kernel cell's matmul: its arguments, B from the model's weight ``b`` when it is a constant; int8
    ones too where the harness holds int8 weights (``held_as``: ggml's "q8_0").

    Raises PeerRejected (one line) for what the harness does not serve: another element type, not a 2-D matmul."""
    kind = INT8 if held_as and inputs and all(a.dtype == np.dtype(INT8) for a in inputs) else DTYPE
    if not inputs or any(a.dtype != np.dtype(kind) for a in inputs):
        kinds = ", ".join(str(a.dtype) for a in inputs) or "no inputs"
        raise PeerRejected(f"{label}: {title}'s harness multiplies float32 matrices"
                           f"{f' (and int8 as {held_as})' if held_as else ''}, this cell's are {kinds}")
    if len(inputs) == 2:
        a, b = inputs
    else:
        graph = onnx.load(str(model), load_external_data=True).graph
        weights = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
        if len(inputs) != 1 or "b" not in weights:
            raise PeerRejected(f"{label}: not a kernel matmul (A, and B as an argument or the weight 'b')")
        a, b = inputs[0], weights["b"]
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0] or b.dtype != np.dtype(kind):
        raise PeerRejected(f"{label}: not a 2-D {kind} matmul (A {a.shape}, B {b.shape} {b.dtype})")
    return np.ascontiguousarray(a), np.ascontiguousarray(b)


class MatmulRunner(EmulatedPeerRunner):
    """A matmul library for riscv64 (Debian's build) under ``qemu`` with ``target``'s CPU."""

    def __init__(self, library: MatmulLibrary, target: Target, qemu: Qemu, sysroot: PeerSysroot, harness: Path,
                 kernels: str = "") -> None:
        self.library = library
        self.what = library.title
        super().__init__(target, qemu, sysroot, harness)
        self.kernels = kernels  # the kernel set it picks on this target (``core``): riscv64_zvl256b

    def describe(self) -> str:
        picked = f": {self.kernels} kernels" if self.kernels else ""
        return (f"{self.library.title} {self.sysroot.version} (Debian {self.sysroot.recipe.suite} riscv64"
                f"{picked}; {self.library.details})")

    def run(self, model: Path, inputs: list[np.ndarray], workdir: Path, num_outputs: int, *,
            optimizations: str = "all", repeat: int = 1, maps: bool = False, qemu_args: tuple[str, ...] = (),
            launcher: tuple[str, ...] = (), timeout_s: float | None = None, name: str | None = None,
            timings: bool = True) -> PeerRun:
        """C = A x B once per ``repeat`` in one process (raises RunFailed, PeerRejected: one line naming the cell).

        ``optimizations`` is ONNX Runtime's and has no meaning here; the rest as ``run/ort_harness.run_harness``."""
        del optimizations, num_outputs
        label = name or model.name
        a, b = matmul_operands(model, inputs, label, self.library.title, self.library.weights)
        workdir.mkdir(parents=True, exist_ok=True)
        for file in ("a.f32", "b.f32", "c.f32", "maps.txt"):
            (workdir / file).unlink(missing_ok=True)
        a.astype("<f4").tofile(workdir / "a.f32")
        b.astype("<f4").tofile(workdir / "b.f32")
        (m, k), n = a.shape, b.shape[1]
        argv = [*launcher, str(self.qemu.path), "-cpu", self.target.emulator_cpu, "-R", GUEST_ADDRESS_SPACE,
                "-L", str(self.sysroot.path), *qemu_args, "-0", self.library.executable, str(self.harness), str(m),
                str(k), str(n), "a.f32", "b.f32", "c.f32", f"--repeat={repeat}",
                *([f"--threads={self.threads}"] if self.threads > 1 else []),
                *(["--maps=@maps.txt"] if maps else []), *([] if timings else ["--no-timings"]),
                *([f"--weights={self.library.weights}"] if a.dtype == np.dtype(INT8) else [])]
        result = run_process(argv, timeout_s=timeout_s or RUN_TIMEOUT_S, env={}, cwd=workdir)
        if not result.ok:
            _, reason = harness_said(result.stderr, f"{self.library.executable}: ")
            raise RunFailed(f"{label}: {self.library.title} (riscv64, {self.target.name}) failed "
                            f"({result.status()}): {reason}", result.stderr[-4000:])
        said = dict(line.split(" ", 1) for line in result.stdout.splitlines() if " " in line)
        output = np.fromfile(workdir / "c.f32", dtype="<f4").reshape(m, n)
        code = executable_ranges((workdir / "maps.txt").read_text()) if maps else None
        return PeerRun([output], result, int(said.get("session_us", 0)) / 1e6, int(said.get("run_us", 0)) / 1e6, code)

    def tolerance(self, model: Path, inputs: list[np.ndarray]) -> Tolerance | None:
        """On int8 operands, the library's error bound (its weights' type rounds the input it quantizes)."""
        bound = self.library.error_bound
        if bound is None or not inputs or inputs[0].dtype != np.dtype(INT8):
            return None
        a, b = matmul_operands(model, inputs, model.name, self.library.title, self.library.weights)
        return Tolerance(atol=bound(a, b), rtol=0.0)

    def core(self, workdir: Path) -> str:
        """The kernel set the library picks on this target (a one-call run of a 1x1x1 matmul)."""
        run = self.run(Path("core"), [np.ones((1, 1), np.float32)] * 2, workdir, 1)
        line = [x for x in run.process.stdout.splitlines() if x.startswith("core ")]
        return line[0].removeprefix("core ") if line else "unknown"


def matmul_runner(library: MatmulLibrary, target: Target, qemu_dir: Path | None = None,
                  tools_dir: Path | None = None) -> MatmulRunner:
    """``library``'s peer for ``target``: the sysroot fetched and verified (SysrootUnavailable: one line, e.g. without
    network), the harness built, QEMU found (ToolMissing), the kernel set it picks asked (RunFailed: one line)."""
    sysroot = prepare_sysroot(library.sysroot, tools_dir, log=lambda line: None)
    runner = MatmulRunner(library, target, find_qemu(target.arch, qemu_dir), sysroot,
                          build_harness(library, sysroot, tools_dir))
    with tempfile.TemporaryDirectory(prefix="pytest-rvv-matmul-") as scratch:
        runner.kernels = runner.core(Path(scratch))
    return runner


def prepare(library: MatmulLibrary, log: Callable[[str], None]) -> str:
    """Fetch ``library``'s riscv64 sysroot and build its harness (SysrootUnavailable, RvvError: one line); what is
    ready, in a line."""
    sysroot = prepare_sysroot(library.sysroot, log=log)
    harness = build_harness(library, sysroot)
    return sysroot.describe() + (f", fetched in {sysroot.fetch_s:.1f} s" if sysroot.fetched else "") + \
        f"; harness {harness}"
