"""llvm-mca's cycles for many code regions in one process: ``mca_regions.cpp`` over libLLVM's MCA library.

llvm-mca looks every instruction of its input up against every code region and every instrument in it, so its
inputs are kept to 500 regions, and each of its processes spends about 30 ms loading libLLVM (docs/ci.md). The driver
parses one input with every region, finds each region's instructions in one pass, gives each instruction the RISC-V
LMUL/SEW instruments llvm-mca would (from the instrument comments and each vsetvli/vsetivli, made by LLVM's own
InstrumentManager), and runs llvm-mca's default pipeline on each region at each iteration count, with llvm-mca's
default options. Each region starts with no instrument, as if alone in its input: what ``silicon.chunk_sources``
makes of llvm-mca's inputs. An input the driver refuses goes to llvm-mca itself. tests/test_silicon.py holds the
driver to llvm-mca region by region, scalar and vector, on every core.

It is built on first use into the tools folder (machine-wide, like QEMU and the riscv64 runtimes: every cache of the
machine shares it), against the headers of Debian's ``llvm-22-dev`` at the installed
``libllvm22``'s exact version (fetched with ``apt-get download``, unpacked there, nothing installed) and linked to
the ``libLLVM.so.22.1`` llvm-mca-22 itself loads. Where that cannot be done (no g++, no package index), llvm-mca
estimates everything, as before: the same figures, more slowly.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from pytest_rvv.base.cbuild import build_c
from pytest_rvv.base.errors import StorageFault, ToolMissing
from pytest_rvv.base.process import run_process
from pytest_rvv.base.store import Store
from pytest_rvv.config.settings import default_tools_dir

SOURCE = "mca_regions.cpp"
LIBRARY = "libLLVM.so.22.1"
PACKAGE = "llvm-22-dev"
_BUILT: dict[Path, Path | None] = {}  # this process's answer per tools folder: the driver, or None (not retried)


def mca_driver(tools_dir: Path | None = None) -> Path | None:
    """The driver built in ``tools_dir`` (by default the tools folder, ``PYTEST_RVV_TOOLS_DIR``), or None where it
    cannot be built here (llvm-mca then estimates every region).

    It depends on this machine's libLLVM and g++, not on a cache, and its first build fetches 52 MB: one build per
    machine, asked once per process (a failed build is not retried)."""
    tools = tools_dir or default_tools_dir()
    known = _BUILT.get(tools)
    if tools not in _BUILT or (known is not None and not known.is_file()):
        try:
            _BUILT[tools] = known = _build(Store(tools))
        except (ToolMissing, StorageFault):  # a tools folder it cannot be written into: llvm-mca reads every region
            _BUILT[tools] = known = None
    return known


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
