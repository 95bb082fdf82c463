"""OpenBLAS as a peer of the kernel suite's f32 matmuls: Debian 13's riscv64 build under the same QEMU CPU.

Debian builds OpenBLAS 0.3.29 with DYNAMIC_ARCH: at load it picks a kernel set from the CPU's hwcap and vlenb
(RISCV64_ZVL256B at QEMU ``vlen=256`` or more, RISCV64_ZVL128B at 128, RISCV64_GENERIC without V), so on an RVV
target the peer runs OpenBLAS's own vectorized sgemm. The sysroot is ``libopenblas0-pthread`` and its dependencies
(toolchain/debian_sysroot.py); the harness (run/blas_harness.c) is cross-built with clang-22 for rv64gc, loads the
library with dlopen and calls ``cblas_sgemm`` on the kernel cell's seeded A and B (B from the model's weight when the
shape holds it as a constant, as the LLM shapes do); at M = 1 (the decode shapes) ``cblas_sgemv``, the routine a BLAS
user calls there: OpenBLAS 0.3.29's one-row sgemm does not forward to it on riscv64 and packs all of B every call
(the harness's comment says what was measured).

``BlasRunner`` answers to the same calls as the ONNX Runtime runner (run/peer.py), so its runs are recorded by content
the same way (``PeerRuns``): plain (outputs, peak RSS), and counted with one and two calls (their difference is one
call's work, loading the library excluded).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
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
from pytest_rvv.config.targets import RISCV64, Target
from pytest_rvv.run.ort_harness import PeerRejected, PeerRun, executable_ranges
from pytest_rvv.run.qemu import Qemu, find_qemu
from pytest_rvv.run.runner import GUEST_ADDRESS_SPACE, Capabilities
from pytest_rvv.toolchain.debian_sysroot import (
    LIBDIR,
    MARKER,
    SUITE,
    PeerSysroot,
    SysrootRecipe,
    prepare_sysroot,
)

OPENBLAS_SYSROOT = SysrootRecipe("OpenBLAS", "openblas", "0.3.29", "libopenblas0-pthread", ("libopenblas0-pthread",),
                         f"{LIBDIR}/openblas-pthread/libopenblas.so.0", "", "peer-openblas-sysroot-v1")
SOURCE = "blas_harness.c"
EXECUTABLE = "blas_harness"
NAMESPACE = "blas-harness-riscv64"
RECIPE = "blas-harness-rv64gc-v1"
CLANG = "clang-22"
FLAGS = ("--target=riscv64-linux-gnu", "-march=rv64gc", "-mabi=lp64d", "-O2", "-Wall", "-Werror")
RUN_TIMEOUT_S = 1800.0
DTYPE = "float32"  # what cblas_sgemm multiplies


def build_harness(sysroot: PeerSysroot, tools_dir: Path | None = None) -> Path:
    """The riscv64 BLAS harness (built on first use; cached by source, compiler and library path)."""
    clang = find_executable(CLANG)
    if clang is None:
        raise ToolMissing(f"{CLANG} not found (it builds the OpenBLAS peer harness): apt-get install clang-22 "
                          "(or bash scripts/setup.sh system)")
    source = files("pytest_rvv.run").joinpath(SOURCE).read_text()
    library = "/" + sysroot.recipe.library
    key = digest([RECIPE, source, version_output(clang), *FLAGS, library])

    def build(tmp: Path) -> dict[str, object]:
        work = tmp / ".src"
        work.mkdir()
        (work / SOURCE).write_text(source)
        result = run_process([str(clang), *FLAGS, f'-DBLAS_LIBRARY="{library}"', "-o", tmp / EXECUTABLE,
                              work / SOURCE, "-ldl"], timeout_s=300)
        (work / SOURCE).unlink()
        work.rmdir()
        if not result.ok:
            raise ToolMissing(f"building the OpenBLAS peer harness failed: {first_lines(result.stderr, 1)[:300]} "
                              "(apt-get install libc6-dev-riscv64-cross gcc-riscv64-linux-gnu)")
        return {"clang": str(clang), "library": library, "build_s": round(result.wall_s, 2)}

    return Store(tools_dir or default_tools_dir()).get_or_build(NAMESPACE, key, build).file(EXECUTABLE)


def matmul_operands(model: Path, inputs: list[np.ndarray], label: str) -> tuple[np.ndarray, np.ndarray]:
    """A and B of a kernel cell's matmul: its arguments, B from the model's weight ``b`` when it is a constant.

    Raises PeerRejected (one line) for what sgemm does not serve: another element type, not a 2-D matmul."""
    if not inputs or any(a.dtype != np.dtype(DTYPE) for a in inputs):
        kinds = ", ".join(str(a.dtype) for a in inputs) or "no inputs"
        raise PeerRejected(f"{label}: OpenBLAS's cblas_sgemm multiplies float32 matrices, this cell's are {kinds}")
    if len(inputs) == 2:
        a, b = inputs
    else:
        graph = onnx.load(str(model), load_external_data=True).graph
        weights = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
        if len(inputs) != 1 or "b" not in weights:
            raise PeerRejected(f"{label}: not a kernel matmul (A, and B as an argument or the weight 'b')")
        a, b = inputs[0], weights["b"]
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0] or b.dtype != np.dtype(DTYPE):
        raise PeerRejected(f"{label}: not a 2-D float32 matmul (A {a.shape}, B {b.shape} {b.dtype})")
    return np.ascontiguousarray(a), np.ascontiguousarray(b)


class BlasRunner:
    """OpenBLAS for riscv64 (Debian's DYNAMIC_ARCH build) under ``qemu`` with ``target``'s CPU."""

    def __init__(self, target: Target, qemu: Qemu, sysroot: PeerSysroot, harness: Path, kernels: str = "") -> None:
        if target.arch != RISCV64 or not target.is_emulated:
            raise ValueError(f"the OpenBLAS peer runs riscv64 targets under QEMU, not {target.name}")
        target.check_emulator_vlen()
        target.check_emulator_runs()
        self.target, self.qemu, self.sysroot, self.harness = target, qemu, sysroot, harness
        self.kernels = kernels  # the kernel set it picks on this target (``core``): riscv64_zvl256b

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(f"under qemu-{self.qemu.arch} {self.qemu.version_text} -cpu {self.target.emulator_cpu}",
                            emulated=True, counted=True, peer=self.describe())

    def describe(self) -> str:
        picked = f": {self.kernels} kernels" if self.kernels else ""
        return f"OpenBLAS {self.sysroot.version} (Debian {SUITE} riscv64, DYNAMIC_ARCH{picked}; sgemm, sgemv at M=1)"

    @property
    def where(self) -> str:
        return self.capabilities.where

    def emulator(self) -> Qemu:
        return self.qemu

    def identity(self) -> list[str]:
        """What decides its runs besides the inputs and helper."""
        return [content_sha(self.harness), content_sha(self.sysroot.path / MARKER), content_sha(self.qemu.path),
                self.target.emulator_cpu]

    def run(self, model: Path, inputs: list[np.ndarray], workdir: Path, num_outputs: int, *,
            optimizations: str = "all", repeat: int = 1, maps: bool = False, qemu_args: tuple[str, ...] = (),
            launcher: tuple[str, ...] = (), timeout_s: float | None = None, name: str | None = None,
            timings: bool = True) -> PeerRun:
        """C = A x B once per ``repeat`` in one process (raises RunFailed, PeerRejected: one line naming the cell).

        ``optimizations`` is ONNX Runtime's and has no meaning here; the rest as ``run/ort_harness.run_harness``."""
        del optimizations, num_outputs
        label = name or model.name
        a, b = matmul_operands(model, inputs, label)
        workdir.mkdir(parents=True, exist_ok=True)
        for file in ("a.f32", "b.f32", "c.f32", "maps.txt"):
            (workdir / file).unlink(missing_ok=True)
        a.astype("<f4").tofile(workdir / "a.f32")
        b.astype("<f4").tofile(workdir / "b.f32")
        (m, k), n = a.shape, b.shape[1]
        argv = [*launcher, str(self.qemu.path), "-cpu", self.target.emulator_cpu, "-R", GUEST_ADDRESS_SPACE,
                "-L", str(self.sysroot.path), *qemu_args, "-0", EXECUTABLE, str(self.harness), str(m), str(k), str(n),
                "a.f32", "b.f32", "c.f32", f"--repeat={repeat}", *(["--maps=@maps.txt"] if maps else []),
                *([] if timings else ["--no-timings"])]
        result = run_process(argv, timeout_s=timeout_s or RUN_TIMEOUT_S, env={}, cwd=workdir)
        if not result.ok:
            said = [line for line in result.stderr.splitlines() if line.startswith("blas_harness: ")]
            reason = said[-1].removeprefix("blas_harness: ") if said else \
                (result.stderr.strip().splitlines() or [""])[-1][:300]
            raise RunFailed(f"{label}: OpenBLAS (riscv64, {self.target.name}) failed ({result.status()}): {reason}",
                            result.stderr[-4000:])
        said = dict(line.split(" ", 1) for line in result.stdout.splitlines() if " " in line)
        output = np.fromfile(workdir / "c.f32", dtype="<f4").reshape(m, n)
        code = executable_ranges((workdir / "maps.txt").read_text()) if maps else None
        return PeerRun([output], result, int(said.get("session_us", 0)) / 1e6, int(said.get("run_us", 0)) / 1e6, code)

    def core(self, workdir: Path) -> str:
        """The kernel set OpenBLAS picks on this target (a one-call run of a 1x1x1 matmul: ``riscv64_zvl256b``)."""
        run = self.run(Path("core"), [np.ones((1, 1), np.float32)] * 2, workdir, 1)
        line = [x for x in run.process.stdout.splitlines() if x.startswith("core ")]
        return line[0].removeprefix("core ") if line else "unknown"


def blas_runner(target: Target, qemu_dir: Path | None = None, tools_dir: Path | None = None) -> BlasRunner:
    """The OpenBLAS peer for ``target``: the sysroot fetched and verified (SysrootUnavailable: one line, e.g. without
    network), the harness built, QEMU found (ToolMissing)."""
    sysroot = prepare_sysroot(OPENBLAS_SYSROOT, tools_dir, log=lambda line: None)
    runner = BlasRunner(target, find_qemu(target.arch, qemu_dir), sysroot, build_harness(sysroot, tools_dir))
    with tempfile.TemporaryDirectory(prefix="pytest-rvv-blas-") as scratch:
        runner.kernels = runner.core(Path(scratch))  # RunFailed (one line) when it cannot start under QEMU
    return runner


def prepare(log: Callable[[str], None]) -> str:
    """Fetch OpenBLAS's riscv64 sysroot and build the harness (SysrootUnavailable, RvvError: one line); what is
    ready, in a line."""
    sysroot = prepare_sysroot(OPENBLAS_SYSROOT, log=log)
    harness = build_harness(sysroot)
    return sysroot.describe() + (f", fetched in {sysroot.fetch_s:.1f} s" if sysroot.fetched else "") + \
        f"; harness {harness}"
