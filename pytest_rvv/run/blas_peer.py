"""OpenBLAS as a peer of the kernel suite's f32 matmuls: Debian 13's riscv64 build under the same QEMU CPU.

Debian builds OpenBLAS 0.3.29 with DYNAMIC_ARCH: at load it picks a kernel set from the CPU's hwcap and vlenb
(RISCV64_ZVL256B at QEMU ``vlen=256`` or more, RISCV64_ZVL128B at 128, RISCV64_GENERIC without V), so on an RVV
target the peer runs OpenBLAS's own vectorized sgemm. The sysroot is ``libopenblas0-pthread`` and its dependencies
(toolchain/debian_sysroot.py); the harness (run/blas_harness.c, run by run/matmul_peer.py) loads the library with
dlopen and calls ``cblas_sgemm`` on the kernel cell's seeded A and B (B from the model's weight when the shape holds
it as a constant, as the LLM shapes do); at M = 1 (the decode shapes) ``cblas_sgemv``, the routine a BLAS user calls
there: OpenBLAS 0.3.29's one-row sgemm does not forward to it on riscv64 and packs all of B every call (the
harness's comment says what was measured).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pytest_rvv.config.targets import Target
from pytest_rvv.run import matmul_peer
from pytest_rvv.run.matmul_peer import MatmulLibrary, MatmulRunner
from pytest_rvv.toolchain.debian_sysroot import LIBDIR, SysrootRecipe, guest_cpu_files

OPENBLAS_SYSROOT = SysrootRecipe("OpenBLAS", "openblas", "0.3.29", "libopenblas0-pthread", ("libopenblas0-pthread",),
                                 f"{LIBDIR}/openblas-pthread/libopenblas.so.0", "", "peer-openblas-sysroot-v3",
                                 files=guest_cpu_files())  # v2: the part's sysfs; v3: GUEST_FILES
OPENBLAS_LIBRARY = MatmulLibrary(
    "OpenBLAS", OPENBLAS_SYSROOT, "blas_harness.c", "blas-harness-rv64gc-v2", "DYNAMIC_ARCH; sgemm, sgemv at M=1",
    lambda sysroot: [f'-DBLAS_LIBRARY="/{sysroot.recipe.library}"', "-ldl"])


def blas_runner(target: Target, qemu_dir: Path | None = None, tools_dir: Path | None = None) -> MatmulRunner:
    """The OpenBLAS peer for ``target`` (run/matmul_peer.py ``matmul_runner``)."""
    return matmul_peer.matmul_runner(OPENBLAS_LIBRARY, target, qemu_dir, tools_dir)


def prepare(log: Callable[[str], None]) -> str:
    """Fetch OpenBLAS's riscv64 sysroot and build its harness; what is ready, in a line."""
    return matmul_peer.prepare(OPENBLAS_LIBRARY, log)
