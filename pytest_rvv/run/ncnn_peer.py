"""ncnn as a peer of the model suites' CNNs: Tencent's inference engine, PyPI's riscv64 wheel, under the same QEMU CPU.

ncnn is what RISC-V CNN deployments run: its riscv64 wheel has a ``_riscv_rvv`` variant of 56 layer types, chosen at
run time from the CPU's hwcap (RVV code at every VLEN, scalar code without V). No registry ships a riscv64 ncnn
library with a C API, so the peer runs the wheel's Python module in Debian 13's riscv64 Python 3.13 (a sysroot,
toolchain/debian_sysroot.py) with a standard-library harness (run/ncnn_harness.py). The model reaches ncnn through
pnnx (PyPI's x86_64 converter, run on the host: ``pnnx model.onnx fp16=0``, float32 weights), converted once per
model content into the tools cache. The runs are recorded by content like every peer's (run/peer.py ``PeerRuns``): plain
(outputs, peak RSS) and counted with one and two extractions in one process (their difference is one call's work:
Python, loading ncnn and the net's weight packing are left out).

Pinned: ncnn 1.0.20261020 and pnnx 20261020 (the same day's release), by version and the wheels' sha256.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
import zipfile
from collections.abc import Callable
from importlib.resources import files
from pathlib import Path

import numpy as np
import onnx

from pytest_rvv.base.errors import RunFailed, ToolMissing
from pytest_rvv.base.process import run_process
from pytest_rvv.base.store import Store, atomic_write_bytes, content_sha, digest, file_sha256
from pytest_rvv.base.wheels import download_wheel
from pytest_rvv.config.settings import default_tools_dir
from pytest_rvv.config.targets import Target
from pytest_rvv.run.ort_harness import PeerRejected, PeerRun, executable_ranges, harness_said
from pytest_rvv.run.peer_runner import EmulatedPeerRunner
from pytest_rvv.run.qemu import Qemu, find_qemu
from pytest_rvv.run.runner import GUEST_ADDRESS_SPACE, fixed_length_dir
from pytest_rvv.toolchain.debian_sysroot import (
    PeerSysroot,
    SysrootRecipe,
    SysrootUnavailable,
    cached_sysroot,
    guest_cpu_files,
    prepare_sysroot,
)

NCNN_VERSION = "1.0.20261020"
NCNN_WHEEL = f"ncnn-{NCNN_VERSION}-cp313-cp313-manylinux_2_39_riscv64.whl"
NCNN_SHA256 = "72fb4b07316e0e4a1e541dad5db5d59ea8ca18a06870074415d6b6da03c9066e"
PNNX_VERSION = "20261020"
PNNX_WHEEL = f"pnnx-{PNNX_VERSION}-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl"
PNNX_SHA256 = "d50d921e5897293d616444191c1a2dc5366423c81bdb4bd22a985fe8071cf17c"
PYTHON = "usr/bin/python3.13"
# ncnn reads /proc/self/status when it loads (is a debugger attached: strstr for "TracerPid:"); under qemu-user that
# is the emulator's own, whose pids and memory figures differ from run to run, and strstr's work with them: two
# counted runs under load differed in libc's strstr. The guest reads this fixed one instead (qemu -L shadows it).
GUEST_STATUS = "Name:\tpython3.13\nState:\tR (running)\nTgid:\t1000\nPid:\t1000\nPPid:\t1\nTracerPid:\t0\nThreads:\t1\n"
# Debian 13's riscv64 Python (the wheel is cp313; glibc 2.41 >= its 2.39) and the C++ runtime ncnn links
# and the modelled part's /sys/devices/system/cpu, not the host's: ncnn sizes its work by the L2 and L3 it reads there
# (debian_sysroot.guest_cpu_files; v3); v4: its own empty loader cache (debian_sysroot.GUEST_FILES)
PYTHON_SYSROOT = SysrootRecipe("Python", "python3.13", "3.13.5", "python3.13-minimal",
                               ("python3.13-minimal", "libstdc++6"), PYTHON, "", "peer-ncnn-python-v4",
                               files=(("proc/self/status", GUEST_STATUS), *guest_cpu_files()))
HARNESS = "ncnn_harness.py"
RUN_RECIPE = "ncnn-run-v4"  # how the guest is started (v2: Python's argv[0] absolute, its hash seed from QEMU's -E;
# v3: a fixed /proc/self/status; v4: the harness and the wheel's folder from a fixed-length directory)
# The harness script and the wheel's package folder are paths the guest's Python keeps on its heap (sys.argv, sys.path,
# the modules' __file__, the loader's names), and ncnn's own code executes a few dozen instructions more or less per
# call as its buffers' alignment follows that heap: measured squeezenet1.1 at zvl256b 4,326,894 instructions in
# ncnn's library per call run from /work/main, 4,326,946 from /tmp/ci.7k0X (a fresh clone). So both are reached
# through one directory of STAGED_LENGTH characters whoever runs it, from wherever (run/runner.py RUNTIME_DIR_LENGTH).
STAGED_LENGTH = 64
RUN_TIMEOUT_S = 1800.0
CONVERT_TIMEOUT_S = 600.0
# Python draws its string hash seed at start unless told (dict orders, so executed counts, would vary by run); its
# argv[0] is the guest's absolute path, or Python makes its executable's path from the working folder's (a temporary
# folder's random name: the counts varied from run to run)
GUEST_ENV = ("-E", "PYTHONHASHSEED=0")
# On threads of its own, ncnn's OpenMP workers (libgomp) spin a fixed count at each barrier before they sleep: a spin
# executes the same in every run, so measure/peer_threads.py would count it as work (measured, a 4-thread call of two
# 3x3 convs whose one-thread call is 742,189 instructions: 770,558 over the threads spinning, 745,344 waiting
# passively). Passive waiting leaves the work.
THREADED_ENV = ("-E", "OMP_WAIT_POLICY=PASSIVE")


def _wheel_key(namespace: str, wheel: str, sha256: str) -> str:
    """A fetched wheel's tools-cache entry: by the wheel's name and content."""
    return digest([namespace, wheel, sha256])


def _fetch_wheel(tools: Path, wheel: str, sha256: str, requirement: str, platform: str | None,
                 python_version: str | None, unpack: Callable[[zipfile.ZipFile, Path], None], namespace: str) -> Path:
    """``wheel`` downloaded with pip, checked against ``sha256`` and unpacked into a tools-cache entry (once)."""
    def build(tmp: Path) -> dict[str, object]:
        try:
            found = download_wheel(requirement, tmp / ".download", platform=platform, python_version=python_version)
        except ToolMissing as exc:
            raise SysrootUnavailable(f"{exc}; then run 'bash scripts/setup.sh peers'") from None
        got = file_sha256(found)
        if found.name != wheel or got != sha256:
            raise SysrootUnavailable(f"pip download {requirement} gave {found.name} (sha256 {got[:12]}), not {wheel} "
                                     f"({sha256[:12]}): the index serves another build")
        with zipfile.ZipFile(found) as archive:
            unpack(archive, tmp)
        shutil.rmtree(tmp / ".download")
        return {"wheel": wheel, "sha256": sha256}

    return Store(tools).get_or_build(namespace, _wheel_key(namespace, wheel, sha256), build).path


def ncnn_packages(tools_dir: Path | None = None) -> Path:
    """The folder holding the riscv64 wheel's ``ncnn`` package and its bundled libgomp (SysrootUnavailable)."""
    def unpack(archive: zipfile.ZipFile, into: Path) -> None:
        archive.extractall(into / "site", [n for n in archive.namelist() if n.startswith(("ncnn/", "ncnn.libs/"))])

    return _fetch_wheel(tools_dir or default_tools_dir(), NCNN_WHEEL, NCNN_SHA256, f"ncnn=={NCNN_VERSION}",
                        "manylinux_2_39_riscv64", "3.13", unpack, "ncnn-wheel") / "site"


def pnnx_executable(tools_dir: Path | None = None) -> Path:
    """pnnx's x86_64 command-line converter out of its PyPI wheel (SysrootUnavailable). The wheel's metadata asks
    for torch, which converting ONNX does not use: only the executable is taken."""
    def unpack(archive: zipfile.ZipFile, into: Path) -> None:
        with archive.open("pnnx/pnnx") as src, (into / "pnnx").open("wb") as dst:
            shutil.copyfileobj(src, dst)
        (into / "pnnx").chmod(stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)

    return _fetch_wheel(tools_dir or default_tools_dir(), PNNX_WHEEL, PNNX_SHA256, f"pnnx=={PNNX_VERSION}", None, None,
                        unpack, "pnnx-wheel") / "pnnx"


def convert(pnnx: Path, model: Path, store: Store, label: str) -> tuple[Path, Path]:
    """``model`` as an ncnn net (param, bin), converted by pnnx with float32 weights once per content (PeerRejected:
    one line when pnnx cannot)."""
    key = digest(["ncnn-net-v1", content_sha(pnnx), content_sha(model)])

    def build(tmp: Path) -> dict[str, object]:
        with tempfile.TemporaryDirectory(prefix="pytest-rvv-pnnx-") as scratch:
            work = Path(scratch)
            os.symlink(model.resolve(), work / "model.onnx")
            result = run_process([str(pnnx), "model.onnx", "fp16=0"], timeout_s=CONVERT_TIMEOUT_S, cwd=work)
            made = [work / "model.ncnn.param", work / "model.ncnn.bin"]
            if not result.ok or not all(p.is_file() for p in made):
                said = [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]
                raise PeerRejected(f"{label}: pnnx {PNNX_VERSION} could not convert it to ncnn ({result.status()}: "
                                   f"{(said or ['no output'])[-1][:200]})")
            unknown = sorted({line.split()[0] for line in made[0].read_text().splitlines()[2:]
                              if line.split() and line.split()[0].startswith("pnnx.")})
            if unknown:
                raise PeerRejected(f"{label}: pnnx {PNNX_VERSION} left operators ncnn has no layer for: "
                                   f"{', '.join(unknown)}")
            for path in made:
                shutil.copyfile(path, tmp / path.name)
        return {"pnnx": PNNX_VERSION, "convert_s": round(result.wall_s, 2)}

    entry = store.get_or_build("ncnn-nets", key, build)
    return entry.file("model.ncnn.param"), entry.file("model.ncnn.bin")


def _output_shapes(model: Path) -> list[tuple[int, ...] | None]:
    """Each graph output's static shape (None where a dimension is not fixed)."""
    graph = onnx.load(str(model), load_external_data=False).graph
    shapes: list[tuple[int, ...] | None] = []
    for output in graph.output:
        dims = output.type.tensor_type.shape.dim
        shapes.append(tuple(d.dim_value for d in dims) if all(d.HasField("dim_value") for d in dims) else None)
    return shapes


class NcnnRunner(EmulatedPeerRunner):
    """ncnn's riscv64 wheel in Debian's riscv64 Python under ``qemu`` with ``target``'s CPU (its OpenMP threads:
    ``threads``)."""

    what = "ncnn"

    def __init__(self, target: Target, qemu: Qemu, sysroot: PeerSysroot, harness: Path, packages: Path,
                 pnnx: Path, store: Store) -> None:
        super().__init__(target, qemu, sysroot, harness)
        self.packages, self.pnnx, self.store = packages, pnnx, store
        self._staged: Path | None = None

    def staged(self) -> Path:
        """The fixed-length directory the guest runs the harness (``HARNESS``) and imports ncnn (``site``) from."""
        if self._staged is None:
            sha, packages = content_sha(self.harness), self.packages.resolve()
            directory = fixed_length_dir("ncnn", digest([sha, str(packages)]), STAGED_LENGTH)
            harness, site = directory / HARNESS, directory / "site"
            if not harness.is_file() or content_sha(harness) != sha:
                atomic_write_bytes(harness, self.harness.read_bytes())
            if not site.is_symlink() or site.resolve() != packages:
                partial = directory / f".site.{os.getpid()}"
                partial.unlink(missing_ok=True)
                partial.symlink_to(packages)
                os.replace(partial, site)
            self._staged = directory
        return self._staged

    def describe(self) -> str:
        return (f"ncnn {NCNN_VERSION} (PyPI riscv64 wheel, RVV kernels picked from hwcap; float32, pnnx "
                f"{PNNX_VERSION}) in Python {self.sysroot.version} (Debian {self.sysroot.recipe.suite} riscv64)")

    def identity(self) -> list[str]:
        return [*super().identity(), RUN_RECIPE, NCNN_SHA256, PNNX_SHA256]

    def code_file(self, name: str) -> Path | None:
        """The file a counted run's code ``name`` came from: the wheel's own first, then the sysroot's."""
        for root in (self.packages, self.sysroot.path):
            found = next((p for p in sorted(root.rglob(name)) if p.is_file()), None)
            if found is not None:
                return found
        return None

    def run(self, model: Path, inputs: list[np.ndarray], workdir: Path, num_outputs: int, *,
            optimizations: str = "all", repeat: int = 1, maps: bool = False, qemu_args: tuple[str, ...] = (),
            launcher: tuple[str, ...] = (), timeout_s: float | None = None, name: str | None = None,
            timings: bool = True) -> PeerRun:
        """Every output of ``model`` on ``inputs``, extracted ``repeat`` times in one process (RunFailed,
        PeerRejected: one line naming the model). ``optimizations`` is ONNX Runtime's and has no meaning here."""
        del optimizations
        label = name or model.name
        if any(a.dtype != np.float32 for a in inputs):
            raise PeerRejected(f"{label}: ncnn's harness feeds float32, this model takes "
                               f"{', '.join(sorted({str(a.dtype) for a in inputs}))}")
        param, weights = convert(self.pnnx, model, self.store, label)
        workdir.mkdir(parents=True, exist_ok=True)
        in_names = [f"input_{i}.npy" for i in range(len(inputs))]
        out_names = [f"output_{i}.npy" for i in range(num_outputs)]
        for file in (*out_names, "maps.txt", "model.param", "model.bin"):
            (workdir / file).unlink(missing_ok=True)
        os.symlink(param, workdir / "model.param")
        os.symlink(weights, workdir / "model.bin")
        for file, array in zip(in_names, inputs, strict=True):
            np.save(workdir / file, np.ascontiguousarray(array, dtype="<f4"), allow_pickle=False)
        argv = [*launcher, str(self.qemu.path), "-cpu", self.target.emulator_cpu, "-R", GUEST_ADDRESS_SPACE,
                "-L", str(self.sysroot.path), *GUEST_ENV, *(THREADED_ENV if self.threads > 1 else ()), *qemu_args,
                "-0", f"/{PYTHON}",
                str(self.sysroot.path / PYTHON), "-S", "-B", str(self.staged() / HARNESS), str(self.staged() / "site"),
                "model.param", "model.bin", *(f"--input=@{n}" for n in in_names),
                *(f"--output=@{n}" for n in out_names), f"--threads={self.threads}",
                f"--repeat={repeat}", *(["--maps=@maps.txt"] if maps else []), *([] if timings else ["--no-timings"])]
        result = run_process(argv, timeout_s=timeout_s or RUN_TIMEOUT_S, env={}, cwd=workdir)
        if not result.ok:
            said, reason = harness_said(result.stderr, "ncnn_harness: ")
            error = PeerRejected if result.returncode == 1 and said and not result.timed_out else RunFailed
            raise error(f"{label}: ncnn (riscv64, {self.target.name}) failed ({result.status()}): {reason}",
                        result.stderr[-4000:])
        outputs = []
        for file, shape in zip(out_names if repeat else [], _output_shapes(model), strict=False):
            array = np.load(workdir / file, allow_pickle=False)
            outputs.append(array.reshape(shape) if shape is not None and array.size == int(np.prod(shape)) else array)
        said = dict(line.split(" ", 1) for line in result.stdout.splitlines() if " " in line)
        code = executable_ranges((workdir / "maps.txt").read_text()) if maps else None
        return PeerRun(outputs, result, int(said.get("session_us", 0)) / 1e6, int(said.get("run_us", 0)) / 1e6, code)


def harness_file() -> Path:
    """The harness script as a file QEMU's Python can open (the package's own, where it is installed)."""
    return Path(str(files("pytest_rvv.run").joinpath(HARNESS)))


def ncnn_runner(target: Target, qemu_dir: Path | None = None, tools_dir: Path | None = None) -> NcnnRunner:
    """The ncnn peer for ``target``: Python's sysroot fetched and verified, the ncnn and pnnx wheels fetched
    (SysrootUnavailable: one line, e.g. without network), QEMU found (ToolMissing); nets are converted into the tools
    cache beside them."""
    sysroot = prepare_sysroot(PYTHON_SYSROOT, tools_dir, log=lambda line: None)
    return NcnnRunner(target, find_qemu(target.arch, qemu_dir), sysroot, harness_file(), ncnn_packages(tools_dir),
                      pnnx_executable(tools_dir), Store(tools_dir or default_tools_dir()))


def ncnn_fetched(tools_dir: Path | None = None) -> str | None:
    """What of the ncnn peer is in the tools cache (a line), None when its Python or a wheel is not (nothing is
    fetched)."""
    tools = tools_dir or default_tools_dir()
    sysroot = cached_sysroot(PYTHON_SYSROOT, tools)
    store = Store(tools)
    wheels = [store.lookup(namespace, _wheel_key(namespace, wheel, sha256)) for namespace, wheel, sha256 in
              (("ncnn-wheel", NCNN_WHEEL, NCNN_SHA256), ("pnnx-wheel", PNNX_WHEEL, PNNX_SHA256))]
    if sysroot is None or None in wheels:
        return None
    return f"ncnn {NCNN_VERSION} and pnnx {PNNX_VERSION} in {sysroot.describe()}"


def prepare(log: Callable[[str], None]) -> str:
    """Fetch Python's riscv64 sysroot and the ncnn and pnnx wheels (SysrootUnavailable, RvvError: one line); what
    is ready, in a line."""
    sysroot = prepare_sysroot(PYTHON_SYSROOT, log=log)
    packages, pnnx = ncnn_packages(), pnnx_executable()
    return (sysroot.describe() + (f", fetched in {sysroot.fetch_s:.1f} s" if sysroot.fetched else "")
            + f"; ncnn {NCNN_VERSION} in {packages}; pnnx {PNNX_VERSION} at {pnnx}")
