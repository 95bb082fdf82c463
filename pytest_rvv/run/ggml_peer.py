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

import numpy as np

from pytest_rvv.config.targets import Target
from pytest_rvv.run import matmul_peer
from pytest_rvv.run.matmul_peer import MatmulLibrary, MatmulRunner
from pytest_rvv.toolchain.debian_sysroot import LIBDIR, PeerSysroot, SysrootRecipe, guest_cpu_files

GGML_SYSROOT = SysrootRecipe("ggml", "ggml", "0.27.0", "libggml0", ("libggml0",), f"{LIBDIR}/libggml.so.0", "",
                             "peer-ggml-sysroot-v3", suite="sid", files=guest_cpu_files())  # v2: sysfs; v3: GUEST_FILES


def _link(sysroot: PeerSysroot) -> list[str]:
    """Link against the sysroot's libggml and libggml-base by path (the -dev package's libggml.so links are not
    fetched); they record their sonames, which the loader finds under ``-L``."""
    libdir = sysroot.path / LIBDIR
    return [str(libdir / "libggml.so.0"), str(libdir / "libggml-base.so.0"), "-Wl,--allow-shlib-undefined"]


Q8_0_BLOCK = 32  # ggml-common.h QK8_0: a q8_0 block's values along K, under one fp16 scale
# ggml's fp16 scale of a block rounds amax / 127 to 11 significant bits: off by up to 2^-11 of it
_FP16_ROUNDING = 2.0 ** -11


def q8_0_error(a: np.ndarray, b: np.ndarray) -> float:
    """The largest error ggml's q8_0 mul_mat can make on int8 A and B (B held exactly: scale 1, its values).

    ggml quantizes each row of A per block of 32 along K to q8_0 (quantize_row_q8_0: d = amax / 127, q = round(x / d),
    d stored in fp16), so each value is off by at most d/2 plus what 127 steps of fp16's rounding of d add; an
    output's error is that times the block's |B| summed over the blocks, plus the float32 sum of the blocks' scaled
    integer sums (each addition rounds by 2^-24: the number of blocks plus one times 2^-24 of the products'
    magnitude)."""
    m, k = a.shape
    blocks = a.astype(np.float64).reshape(m, k // Q8_0_BLOCK, Q8_0_BLOCK)
    step = np.abs(blocks).max(axis=2) / 127.0  # d per row and block
    per_value = step * (0.5 + 127.0 * _FP16_ROUNDING)
    weights = np.abs(b.astype(np.float64)).reshape(k // Q8_0_BLOCK, Q8_0_BLOCK, -1).sum(axis=1)  # per block, column
    magnitude = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    return float((per_value @ weights + magnitude * (k // Q8_0_BLOCK + 1) * 2.0 ** -24).max())


GGML_LIBRARY = MatmulLibrary("ggml", GGML_SYSROOT, "ggml_harness.c", "ggml-harness-rv64gc-v2",
                             "the CPU backend module it loads; mul_mat, int8 cells with q8_0 weights", _link,
                             weights="q8_0", error_bound=q8_0_error)


def ggml_runner(target: Target, qemu_dir: Path | None = None, tools_dir: Path | None = None) -> MatmulRunner:
    """The ggml peer for ``target`` (run/matmul_peer.py ``matmul_runner``)."""
    return matmul_peer.matmul_runner(GGML_LIBRARY, target, qemu_dir, tools_dir)


def prepare(log: Callable[[str], None]) -> str:
    """Fetch ggml's riscv64 sysroot and build its harness; what is ready, in a line."""
    return matmul_peer.prepare(GGML_LIBRARY, log)
