"""A runner that runs modules as boards run them: ``--device=local-task`` with N workers, under QEMU user mode (each
guest thread a host thread and its own vCPU: run/rvv_counter.c counts them apart)."""

from __future__ import annotations

from pytest_rvv.base.errors import ConfigError
from pytest_rvv.config.cores import MAX_THREADS
from pytest_rvv.config.targets import Target
from pytest_rvv.run.qemu import Qemu
from pytest_rvv.run.runner import Capabilities, Runner
from pytest_rvv.toolchain.runtimes import Runtime


def hart_limit(target: Target) -> tuple[int, str]:
    """The most threads a run of ``target`` may use, and what says so: the fewest harts among its modelled cores'
    parts (the K1's 8 X60 cores), else IREE's own cap."""
    known = [(c.harts, c.name) for c in target.cores() if c.harts]
    if known:
        harts, name = min(known)
        return harts, f"{name} ships with {harts} harts"
    return MAX_THREADS, f"no modelled core of {target.name} names its harts; IREE caps its workers at {MAX_THREADS}"


def check_threads(target: Target, threads: int) -> None:
    """One ConfigError line for a thread count a board of ``target`` cannot run: 0 or less, or above its harts."""
    limit, why = hart_limit(target)
    if threads < 1 or threads > limit:
        raise ConfigError(f"target {target.name!r}: {threads} threads is not a thread count it runs; "
                          f"give 1 to {limit} ({why})")


class ThreadedRunner(Runner):
    """Runs modules under QEMU with ``threads`` workers (1: ``local-sync``; more: ``local-task``)."""

    def __init__(self, target: Target, runtime: Runtime, qemu: Qemu | None, threads: int) -> None:
        check_threads(target, threads)
        if qemu is None:
            raise ConfigError(f"target {target.name!r}: runs with {threads} threads are emulated here, and it has no "
                              f"qemu-{target.arch}")
        super().__init__(target, runtime, qemu)
        self.threads = threads

    @classmethod
    def like(cls, runner: Runner, threads: int) -> ThreadedRunner:
        """``runner``'s target, runtime and emulator, with ``threads`` workers."""
        return cls(runner.target, runner.runtime, runner.qemu, threads)

    @property
    def capabilities(self) -> Capabilities:
        """Emulated and counted, with its threads (runs with more than one are not recorded: not deterministic)."""
        base = super().capabilities
        return Capabilities(f"{base.where} with {self.threads} threads", emulated=True, counted=True,
                            threads=self.threads)
