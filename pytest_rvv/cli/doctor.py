"""``pytest-rvv doctor``: what is installed, what is missing, and the command that fixes it."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from pytest_rvv.base.errors import RvvError, ToolMissing
from pytest_rvv.base.process import run_process
from pytest_rvv.base.store import Store
from pytest_rvv.base.tools import find_executable, version_output
from pytest_rvv.config.cores import CORES
from pytest_rvv.config.settings import Settings
from pytest_rvv.config.targets import AARCH64, RISCV64, Target
from pytest_rvv.measure.silicon import MCA, mca_version
from pytest_rvv.run.peer import PEERS
from pytest_rvv.run.qemu import find_qemu
from pytest_rvv.run.qemu_plugin import build_plugin, check_plugin_support, plugin_option
from pytest_rvv.session import RvvSession
from pytest_rvv.toolchain.environments import toolchain_from_spec
from pytest_rvv.toolchain.runtime_build import built_runtimes, commit_mismatch
from pytest_rvv.toolchain.runtimes import AARCH64_SYSROOT, AARCH64_WHEEL_PLATFORM, host_runtime
from pytest_rvv.toolchain.toolchain import find_toolchain

SETUP = "bash scripts/setup.sh"
PACKAGES = ("pytest", "pytest-xdist", "pytest-benchmark", "syrupy", "pyelftools", "iree-base-compiler",
            "iree-base-runtime", "onnx", "onnxruntime", "numpy", "filelock")


@dataclass(frozen=True)
class Finding:
    """One line of the doctor's report."""

    name: str
    ok: bool
    detail: str  # version and location, or what is wrong
    fix: str = ""
    required: bool = True  # False: only some tests need it; they skip without it

    def render(self) -> str:
        status = "ok" if self.ok else ("MISSING" if self.required else "absent")
        line = f"{status:8} {self.name:27} {self.detail}"
        return f"{line}\n{'':8} {'':27} fix: {self.fix}" if not self.ok and self.fix else line


def _probe(name: str, check: Callable[[], str], fix: str, required: bool = True) -> Finding:
    try:
        return Finding(name, True, check(), required=required)
    except RvvError as exc:
        return Finding(name, False, str(exc), fix, required)


def diagnose(settings: Settings) -> Iterator[Finding]:
    """Every check, in pipeline order."""
    for package in PACKAGES:
        try:
            yield Finding(f"python: {package}", True, version(package))
        except PackageNotFoundError:
            yield Finding(f"python: {package}", False, "not installed", f"{SETUP} python")

    def compiler() -> str:
        tc = find_toolchain(settings.iree_build)
        return f"{tc.compiler_version} ({tc.iree_compile}, {tc.origin})"

    yield _probe("iree-compile", compiler, f"{SETUP} python")
    yield _probe("iree-import-onnx", lambda: str(find_toolchain(settings.iree_build).iree_import_onnx),
                 f"{SETUP} python")
    yield _probe("iree-run-module (host)",
                 lambda: str(host_runtime(find_toolchain(settings.iree_build).host_run_module).executable),
                 f"{SETUP} python")

    for arch in (RISCV64, AARCH64):
        def qemu(arch: str = arch) -> str:
            q = find_qemu(arch, settings.qemu_dir)
            plugins = "TCG plugins load" if q.supports_plugins else "NO plugin support (static build)"
            return f"{q.version_text}, {plugins} ({q.path})"

        yield _probe(f"qemu-{arch}", qemu, f"{SETUP} qemu")
    for arch in (RISCV64, AARCH64):
        tool = f"{arch}-linux-gnu-objdump"
        path = find_executable(tool)
        detail = f"{version_output(path).splitlines()[0]} ({path})" if path else "not found"
        yield Finding(tool, path is not None, detail, f"apt-get install binutils-{arch}-linux-gnu")
    libs = [AARCH64_SYSROOT / "lib" / n for n in ("ld-linux-aarch64.so.1", "libstdc++.so.6")]
    missing = [str(p) for p in libs if not p.exists()]
    detail = "missing " + ", ".join(missing) if missing else str(AARCH64_SYSROOT)
    yield Finding("arm64 cross libraries", not missing, detail,
                  "apt-get install libc6-arm64-cross libstdc++6-arm64-cross")
    yield from _runtimes(settings)
    cc = shutil.which("cc") or shutil.which("gcc")
    yield Finding("C compiler (QEMU plugin)", cc is not None, cc or "not found", "apt-get install gcc", required=False)
    yield _probe("executed-count plugin", lambda: _plugin_loads(settings), f"{SETUP} qemu", required=False)
    mca = find_executable(MCA)
    cores = ", ".join(f"{c.name} (VLEN {c.vlen})" for c in CORES.values())
    yield Finding(f"{MCA} (silicon estimates)", mca is not None,
                  f"{mca_version(mca)} ({mca}); cores {cores}" if mca else "not found: no silicon estimates",
                  "apt-get install llvm-22", required=False)
    yield _cache_dir(settings.cache_dir)
    for peer in PEERS.values():  # fetched on first use, or by setup's peers step; nothing is fetched here
        found = peer.fetched(settings.tools_dir)
        yield Finding(f"peer: {peer.name}", found is not None, found or "not fetched (its --rvv-peers tests fetch it "
                      "first, or skip without network)", f"{SETUP} peers", required=False)


def _runtimes(settings: Settings) -> Iterator[Finding]:
    session = RvvSession(settings)
    try:
        release = session.toolchain.release
    except RvvError:
        return
    cached = any(Path(settings.cache_dir, "wheels").rglob("iree-run-module"))
    yield Finding(
        "iree-run-module (aarch64)", True,
        f"iree-base-runtime=={release} {AARCH64_WHEEL_PLATFORM} wheel, "
        + ("in the cache" if cached else "downloaded with pip at first use"),
    )
    try:
        runtime = session.runtime(RISCV64)
    except RvvError as exc:
        yield Finding("iree-run-module (riscv64)", False, f"{exc}; riscv64 execution tests will skip",
                      f"{SETUP} runtime (with PYTEST_RVV_IREE_SRC=DIR|TARBALL when no git host is reachable)",
                      required=False)
        return
    probe_target = next((t for t in settings.targets if t.arch == RISCV64), None) or Target("probe", RISCV64)
    mismatch = commit_mismatch(runtime.commit, session.toolchain.commit)
    commits = f"; {mismatch}" if mismatch else ""

    def check() -> str:
        session.runner(probe_target)
        return (f"{runtime.executable} ({runtime.origin}){commits}; loads a module of "
                f"{session.toolchain.compiler_version} (probe ran on {probe_target.name})")

    yield _probe("iree-run-module (riscv64)", check, "use a riscv64 iree-run-module built from the same IREE "
                 "release as iree-compile (`bash scripts/setup.sh runtime` with that release's source)",
                 required=False)
    yield from _cached_runtimes(settings, session)


def _cached_runtimes(settings: Settings, session: RvvSession) -> Iterator[Finding]:
    """Each riscv64 runtime in the tools cache, and which toolchains in use (under test, reference) load in it."""
    sessions = {"under test": session}
    if settings.compare:
        try:
            sessions["reference"] = RvvSession(settings, toolchain=toolchain_from_spec(settings.compare,
                                                                                       settings.tools_dir),
                                               reference=True)
        except RvvError as exc:
            yield Finding("reference toolchain (--rvv-compare)", False, str(exc), "fix --rvv-compare", required=False)
    for built in built_runtimes(settings.tools_dir):
        loads = []
        for side, rvv in sessions.items():
            try:
                reason = rvv.probe_runtime(built.executable)
            except RvvError as exc:
                reason = str(exc).splitlines()[0]
            release = rvv.toolchain.release
            loads.append(f"{side} {release}: loads" if reason is None else f"{side} {release}: no ({reason})")
        day = datetime.fromtimestamp(built.date, UTC).strftime("%Y-%m-%d") if built.date else "date unknown"
        yield Finding(f"cached riscv64 runtime IREE {built.commit_text}", True,
                      f"{built.executable} ({day}, from {built.origin}); {'; '.join(loads)}", "", required=False)


def _plugin_loads(settings: Settings) -> str:
    """Build rvv_counter and load it into qemu-aarch64 running the arm64 loader's --help."""
    qemu = find_qemu(AARCH64, settings.qemu_dir)
    check_plugin_support(qemu)
    plugin = build_plugin(Store(settings.cache_dir))
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "counts.txt"
        loader = AARCH64_SYSROOT / "lib" / "ld-linux-aarch64.so.1"
        run_process([str(qemu.path), "-L", str(AARCH64_SYSROOT), *plugin_option(plugin, out, False), str(loader),
                     "--help"], timeout_s=60)
        if not out.is_file():
            raise ToolMissing(f"{qemu.path} did not run the counting plugin {plugin}")
        return f"{plugin} loads into {qemu.path.name} {qemu.version_text}"


def _cache_dir(path: Path) -> Finding:
    try:
        path.mkdir(parents=True, exist_ok=True)
        writable = os.access(path, os.W_OK)
    except OSError:
        writable = False
    return Finding("cache directory", writable, str(path) + ("" if writable else " is not writable"),
                   "--rvv-cache-dir=DIR or PYTEST_RVV_CACHE_DIR=DIR")


def run_doctor(settings: Settings) -> int:
    findings = list(diagnose(settings))
    for finding in findings:
        print(finding.render())
    blocking = [f for f in findings if f.required and not f.ok]
    if blocking:
        print(f"\n{len(blocking)} required item(s) missing: `pytest suites/` cannot run; "
              f"`{SETUP}` installs everything on Debian 12")
        return 1
    print("\nready: `pytest suites/ -n auto` can run")
    return 0
