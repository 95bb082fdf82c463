"""llvm-mca's cycles for many code regions in one process: ``mca_regions.cpp`` over libLLVM's MCA library.

llvm-mca looks every instruction of its input up against every code region and every instrument in it, so its
inputs are kept to 500 regions, and each of its processes spends about 30 ms loading libLLVM (docs/ci.md). The driver
parses one input with every region, finds each region's instructions in one pass, gives each instruction the RISC-V
LMUL/SEW instruments llvm-mca would (from the instrument comments and each vsetvli/vsetivli, made by LLVM's own
InstrumentManager), and runs llvm-mca's default pipeline on each region at each iteration count, with llvm-mca's
default options. Each region starts with no instrument, as if alone in its input: what ``silicon.chunk_sources``
makes of llvm-mca's inputs. An input the driver refuses goes to llvm-mca itself. tests/test_silicon.py holds the
driver to llvm-mca region by region, scalar and vector, on every core.

It is built on first use into the store, against the headers of Debian's ``llvm-22-dev`` at the installed
``libllvm22``'s exact version (fetched with ``apt-get download``, unpacked there, nothing installed) and linked to
the ``libLLVM.so.22.1`` llvm-mca-22 itself loads. Where that cannot be done (no g++, no package index), llvm-mca
estimates everything, as before: the same figures, more slowly.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from pytest_rvv.base.cbuild import build_c
from pytest_rvv.base.errors import ToolMissing
from pytest_rvv.base.process import run_process
from pytest_rvv.base.store import Store

SOURCE = "mca_regions.cpp"
LIBRARY = "libLLVM.so.22.1"
PACKAGE = "llvm-22-dev"
_BUILT: list[Path | None] = []  # this process's answer: built once, in the first store asked, or None (not retried)


def mca_driver(store: Store) -> Path | None:
    """The built driver, or None where it cannot be built here (llvm-mca then estimates every region).

    One build per process (``build_c``'s rule is one per store): a store asked later is given the first one's while its
    file is there, since the driver depends on this machine's libLLVM and g++, not on the store, and a build fetches
    52 MB."""
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
    if shutil.which("apt-get") is None:
        raise ToolMissing("no apt-get to fetch llvm-22-dev's headers for the llvm-mca driver")
    version = _libllvm_version()

    def headers(work: Path) -> list[str]:
        fetched = run_process(["apt-get", "download", f"{PACKAGE}={version}"], timeout_s=120, cwd=work)
        debs = sorted(work.glob("*.deb"))
        if not fetched.ok or not debs:
            raise ToolMissing(f"apt-get download {PACKAGE}={version} failed: {fetched.stderr.strip()[:200]}")
        unpacked = subprocess.run(f"dpkg-deb --fsys-tarfile '{debs[0]}' | tar -x -C '{work}' ./usr/include",
                                  shell=True, capture_output=True, text=True, timeout=600)
        if unpacked.returncode != 0:
            raise ToolMissing(f"unpacking {debs[0].name} failed: {unpacked.stderr.strip()[:200]}")
        return [f"-I{work}/usr/include/{name}" for name in ("llvm-22", "llvm-c-22")]

    return build_c(store, "pytest_rvv.measure", (SOURCE,), "mca_regions", shared=False, compiler="g++",
                   flags=("-std=c++17", "-fno-rtti"), libraries=(f"-l:{LIBRARY}",), prepare=headers,
                   depends=(f"libllvm22 {version}",))
