"""llama.cpp's ggml as a peer of the kernel suite's f32 matmuls: Debian unstable's riscv64 build under the same QEMU
CPU (ggml is not in Debian 13).

``libggml0`` 0.27.0 ships ggml's CPU backend as modules it loads at run time and scores against the CPU (Linux's
riscv_hwprobe): ``libggml-cpu-riscv64_v.so`` (built for rv64gc_v: its RVV kernels) on a CPU with V,
``libggml-cpu-riscv64_0.so`` without. Its highest glibc symbol is 2.38, and the sysroot is unstable's own packages
(libggml0 and its dependencies; toolchain/debian_sysroot.py). The harness (run/ggml_harness.c, run by
run/matmul_peer.py) builds one MUL_MAT graph, ``ggml_mul_mat(B^T, A)``, as llama.cpp computes a linear layer, and
runs it on the CPU backend with its thread count; it links against the sysroot's libggml and libggml-base (their
glibc 2.38 symbols resolve in the sysroot at run time: ``--allow-shlib-undefined``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pytest_rvv.config.targets import Target
from pytest_rvv.run import matmul_peer
from pytest_rvv.run.matmul_peer import MatmulLibrary, MatmulRunner
from pytest_rvv.toolchain.debian_sysroot import LIBDIR, PeerSysroot, SysrootRecipe, guest_cpu_files

GGML_SYSROOT = SysrootRecipe("ggml", "ggml", "0.27.0", "libggml0", ("libggml0",), f"{LIBDIR}/libggml.so.0", "",
                             "peer-ggml-sysroot-v2", suite="sid", files=guest_cpu_files())  # v2: the part's sysfs


def _link(sysroot: PeerSysroot) -> list[str]:
    """Link against the sysroot's libggml and libggml-base by path (the -dev package's libggml.so links are not
    fetched); they record their sonames, which the loader finds under ``-L``."""
    libdir = sysroot.path / LIBDIR
    return [str(libdir / "libggml.so.0"), str(libdir / "libggml-base.so.0"), "-Wl,--allow-shlib-undefined"]


GGML_LIBRARY = MatmulLibrary("ggml", GGML_SYSROOT, "ggml_harness.c", "ggml-harness-rv64gc-v1",
                             "the CPU backend module it loads; mul_mat", _link)


def ggml_runner(target: Target, qemu_dir: Path | None = None, tools_dir: Path | None = None) -> MatmulRunner:
    """The ggml peer for ``target`` (run/matmul_peer.py ``matmul_runner``)."""
    return matmul_peer.matmul_runner(GGML_LIBRARY, target, qemu_dir, tools_dir)


def prepare(log: Callable[[str], None]) -> str:
    """Fetch ggml's riscv64 sysroot and build its harness; what is ready, in a line."""
    return matmul_peer.prepare(GGML_LIBRARY, log)
