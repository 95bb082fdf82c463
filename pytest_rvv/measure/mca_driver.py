"""llvm-mca's cycles for many scalar code regions in one process: ``mca_regions.cpp`` over libLLVM's MCA library.

llvm-mca looks every instruction of its input up against every code region in it, so its inputs are kept to 500
regions, and each of its processes spends about 30 ms loading libLLVM: about a third of a cold run's ``estimate``
stage (docs/ci.md). The driver parses one input with every region, finds each region's instructions in one pass,
and runs llvm-mca's default pipeline on each region at each iteration count, with llvm-mca's default options. It
takes scalar regions only (no instrument comment, no vector instruction); every other region, and any input the
driver refuses, goes to llvm-mca itself. tests/test_silicon.py holds the driver to llvm-mca region by region.

It is built on first use into the store, against the headers of Debian's ``llvm-22-dev`` at the installed
``libllvm22``'s exact version (fetched with ``apt-get download``, unpacked there, nothing installed) and linked to
the ``libLLVM.so.22.1`` llvm-mca-22 itself loads. Where that cannot be done (no g++, no package index), llvm-mca
estimates everything, as before: the same figures, more slowly.
"""

from __future__ import annotations

import shutil
import subprocess
from importlib.resources import files
from pathlib import Path

from pytest_rvv.base.errors import ToolMissing
from pytest_rvv.base.process import run_process
from pytest_rvv.base.store import Store, digest
from pytest_rvv.base.tools import version_output

SOURCE = "mca_regions.cpp"
LIBRARY = "libLLVM.so.22.1"
PACKAGE = "llvm-22-dev"
_BUILT: list[Path | None] = []  # this process's answer: built once, in the first store asked, or None (not retried)


def mca_driver(store: Store) -> Path | None:
    """The built driver, or None where it cannot be built here (llvm-mca then estimates every region).

    One build per process: a store asked later is given the first one's while its file is there (the driver depends
    on this machine's libLLVM and g++, not on the store)."""
    if not _BUILT or (_BUILT[0] is not None and not _BUILT[0].is_file()):
        try:
            _BUILT[:] = [_build(store)]
        except ToolMissing:
            _BUILT[:] = [None]
    return _BUILT[0]


def _libllvm_version() -> str:
    proc = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "libllvm22"], capture_output=True, text=True,
                          timeout=60)
    if proc.returncode != 0 or not proc.stdout.strip():
        raise ToolMissing("libllvm22 is not an installed Debian package: no headers to build the llvm-mca driver")
    return proc.stdout.strip()


def _build(store: Store) -> Path:
    cxx = shutil.which("g++")
    if cxx is None or shutil.which("apt-get") is None:
        raise ToolMissing("no g++ or apt-get to build the llvm-mca driver")
    version = _libllvm_version()
    text = files("pytest_rvv.measure").joinpath(SOURCE).read_text()
    key = digest(["mca-driver-v1", text, version, version_output(Path(cxx))])

    def build(tmp: Path) -> dict[str, object]:
        work = tmp / ".work"
        work.mkdir()
        fetched = run_process(["apt-get", "download", f"{PACKAGE}={version}"], timeout_s=120, cwd=work)
        debs = sorted(work.glob("*.deb"))
        if not fetched.ok or not debs:
            shutil.rmtree(work)
            raise ToolMissing(f"apt-get download {PACKAGE}={version} failed: {fetched.stderr.strip()[:200]}")
        unpacked = subprocess.run(f"dpkg-deb --fsys-tarfile '{debs[0]}' | tar -x -C '{work}' ./usr/include",
                                  shell=True, capture_output=True, text=True, timeout=600)
        (work / SOURCE).write_text(text)
        headers = [f"-I{work}/usr/include/{name}" for name in ("llvm-22", "llvm-c-22")]
        result = run_process([cxx, "-std=c++17", "-O2", "-fno-rtti", *headers, "-o", tmp / "mca_regions",
                              work / SOURCE, f"-l:{LIBRARY}"], timeout_s=600)
        shutil.rmtree(work)
        if unpacked.returncode != 0 or not result.ok:
            raise ToolMissing(f"building the llvm-mca driver failed: {(unpacked.stderr + result.stderr).strip()[:300]}")
        return {"libllvm22": version}

    return store.get_or_build("c-builds", key, build).file("mca_regions")
