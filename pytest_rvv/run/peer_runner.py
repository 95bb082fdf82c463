"""The runner every peer shares (run/peer.py's ONNX Runtime, run/matmul_peer.py's OpenBLAS and ggml): a riscv64
target's CPU under QEMU, a Debian sysroot and a harness built against it."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np

from pytest_rvv.base.store import content_sha
from pytest_rvv.config.targets import RISCV64, Target
from pytest_rvv.model.model import Tolerance
from pytest_rvv.run.ort_harness import PeerRun
from pytest_rvv.run.qemu import Qemu
from pytest_rvv.run.runner import Capabilities
from pytest_rvv.toolchain.debian_sysroot import MARKER, PeerSysroot


class EmulatedPeerRunner:
    """What every peer's runner is: a riscv64 target's CPU under ``qemu``, a sysroot and a harness built against it;
    emulated, counted and recorded by content (``PeerRuns``) and measured the same way (measure/peers.py), one thread
    unless ``with_threads`` asks for more. Subclasses say what they run (``describe``) and how (``run``, passing
    ``threads`` to their harness)."""

    what = "peer"  # names the peer in the refusal of a target it cannot run

    def __init__(self, target: Target, qemu: Qemu, sysroot: PeerSysroot, harness: Path) -> None:
        if target.arch != RISCV64 or not target.is_emulated:
            raise ValueError(f"the {self.what} peer runs riscv64 targets under QEMU, not {target.name}")
        target.check_emulator_vlen()
        target.check_emulator_runs()
        self.target, self.qemu, self.sysroot, self.harness = target, qemu, sysroot, harness
        self.threads = 1  # the peer's own threads per call (its harness's --threads)

    @property
    def capabilities(self) -> Capabilities:
        """Emulated, counted and recorded by content, on ``threads`` threads; what it runs is the peer."""
        return Capabilities(f"under qemu-{self.qemu.arch} {self.qemu.version_text} -cpu {self.target.emulator_cpu}",
                            emulated=True, counted=True, peer=self.describe(), threads=self.threads)

    def describe(self) -> str:
        raise NotImplementedError

    def with_threads(self, threads: int) -> EmulatedPeerRunner:
        """The same peer running each call on ``threads`` threads of its own (ONNX Runtime's intra-op pool, ncnn's
        OpenMP threads, OpenBLAS's server threads, ggml's pool): its capabilities' ``threads``."""
        if threads < 1:
            raise ValueError(f"threads must be at least 1, not {threads}")
        threaded = copy.copy(self)
        threaded.threads = threads
        return threaded

    def tolerance(self, model: Path, inputs: list[np.ndarray]) -> Tolerance | None:
        """What this peer's outputs on ``model`` are held to where it computes otherwise than the model does (ggml's
        q8_0 weights: the rounding of the input it quantizes), else None: the model's own tolerance."""
        del model, inputs
        return None

    def run(self, model: Path, inputs: list[np.ndarray], workdir: Path, num_outputs: int, *,
            optimizations: str = "all", repeat: int = 1, maps: bool = False, qemu_args: tuple[str, ...] = (),
            launcher: tuple[str, ...] = (), timeout_s: float | None = None, name: str | None = None,
            timings: bool = True) -> PeerRun:
        """One run of ``model`` on ``inputs`` (RunFailed, PeerRejected: one line naming it); the harness's protocol
        (run/ort_harness.py run_harness)."""
        raise NotImplementedError

    @property
    def where(self) -> str:
        return self.capabilities.where

    def emulator(self) -> Qemu:
        return self.qemu

    def code_file(self, name: str) -> Path | None:
        """The file a counted run's code mapping ``name`` came from (the harness, else the sysroot's), for the
        peer's estimate (measure/peers.py); None when neither holds it (the vDSO)."""
        if name == self.harness.name:
            return self.harness
        return next((p for p in sorted(self.sysroot.path.rglob(name)) if p.is_file()), None)

    def identity(self) -> list[str]:
        """What decides its runs besides the model, inputs and helper."""
        return [content_sha(self.harness), content_sha(self.sysroot.path / MARKER), content_sha(self.qemu.path),
                self.target.emulator_cpu, *([f"threads={self.threads}"] if self.threads > 1 else [])]
