"""Runner: executes an Artifact with iree-run-module, natively or under QEMU user mode."""

from __future__ import annotations

import os
import re
import shlex
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pytest_rvv.base.errors import ConfigError, RunFailed, tail
from pytest_rvv.base.process import ProcessResult, run_process
from pytest_rvv.base.store import atomic_write_bytes, content_sha
from pytest_rvv.compile.compiler import Artifact
from pytest_rvv.config.cores import Core
from pytest_rvv.config.targets import Target
from pytest_rvv.run.qemu import Qemu
from pytest_rvv.run.sigill import explain, rerun_for_sigill
from pytest_rvv.toolchain.runtimes import Runtime

# Why a signal most likely happened, for the one-line failure message.
_SIGNAL_HINTS = {
    "SIGILL": "an instruction the emulated CPU lacks (vector code on a scalar target, or vlen too small?)",
    "SIGSEGV": "a memory fault in the runtime or the generated code",
    "SIGBUS": "a misaligned or out-of-range memory access",
    "SIGKILL": "killed (out of memory, or the timeout)",
    "SIGABRT": "an assertion or abort in the runtime or the emulator",
}


# The names the guest sees, relative to the run's folder (the same on every machine).
GUEST_PROGRAM = "iree-run-module"
GUEST_MODULE = "module.vmfb"
# QEMU -R: the guest's address space is reserved up front and QEMU places every guest mapping in
# it itself, so guest addresses do not follow the host's ASLR or kernel (executed counts in
# dispatch code depend on buffer addresses: measured +-20 instructions per run without it).
GUEST_ADDRESS_SPACE = "0x200000000"  # 8 GiB
# The runtime's own path: a static glibc program reads /proc/self/exe at start-up (QEMU answers with the real path of
# the executable) and keeps its directory on the heap, so the heap layout, and with it the alignment of IREE's buffers
# and the executed instructions of some dispatches, follow that directory's length. Measured on squeezenet1.1's
# dispatch_3 on rv64gc: 364,115 / 364,125 / 364,142 instructions with a 20 / 118 / 126-character directory (126: the
# runtime in /home/rvvuser/.cache instead of /root/.cache). So every emulated run execs the runtime from a directory of
# one fixed length, whoever runs it and wherever the cache is: 118 characters, the length the recorded snapshots and
# baselines were measured with (the runtime under /root/.cache/pytest-rvv/tools/iree-runtime-riscv64/XX/<sha256>).
RUNTIME_DIR_LENGTH = 118

_IREE_STATUS = re.compile(
    r"\b(?:OUT_OF_RANGE|INVALID_ARGUMENT|UNIMPLEMENTED|INTERNAL|NOT_FOUND|FAILED_PRECONDITION|RESOURCE_EXHAUSTED|"
    r"ABORTED|UNAVAILABLE|UNKNOWN|PERMISSION_DENIED|DATA_LOSS|DEADLINE_EXCEEDED|ALREADY_EXISTS|CANCELLED); .*"
)


@dataclass(frozen=True)
class RunOutcome:
    """A successful run: the outputs plus the process measurements and the repro command."""

    outputs: list[np.ndarray]
    process: ProcessResult
    repro: str
    measured: dict[str, float] = field(default_factory=dict)  # what a board measured itself (peak RSS, counters)


@dataclass(frozen=True)
class Capabilities:
    """What a runner can do, declared by its class: measuring and choosing code asks this, never the runner's type.

    A new runner (a peer runtime under the same QEMU, runs with N threads) declares its own and lands without
    branches elsewhere.
    """

    where: str  # one line: where its runs happen ("natively", "under qemu-riscv64 ...", "on board NAME", ...)
    emulated: bool = False  # under an emulator on this machine
    counted: bool = False  # its runs can be counted (QEMU's plugin: executed counts; ToolMissing if it cannot load)
    replays: bool = False  # runs nothing itself: replays rounds another machine ran (``Runner.replay``)
    threads: int = 1  # threads one run uses (``device_flags``: 1 is ``local-sync``)
    core: Core | None = None  # the silicon core its times are measured on, when known (calibrates the estimator)
    peer: str | None = None  # a peer (run/peer.py): what it runs instead of IREE's module ("ONNX Runtime ...")

    @property
    def recorded(self) -> bool:
        """Its runs are deterministic (emulated, one thread): each kind is run once per content and kept
        (run/recorded.py)."""
        return self.emulated and self.threads == 1


def device_flags(threads: int) -> list[str]:
    """iree-run-module's device for a run with ``threads`` threads: ``local-sync`` for one (deterministic: executed
    counts are exact), else ``local-task`` with that many worker groups."""
    if threads == 1:
        return ["--device=local-sync"]
    return ["--device=local-task", f"--task_topology_group_count={threads}"]


class Runner:
    """Runs modules compiled for ``target`` with ``runtime``, under ``qemu`` unless on the host."""

    def __init__(self, target: Target, runtime: Runtime, qemu: Qemu | None) -> None:
        if target.is_emulated and qemu is None:
            raise ConfigError(f"target {target.name!r} needs qemu-{target.arch}")
        target.check_emulator_vlen()
        if qemu is not None:
            target.check_emulator_runs()
        self.target = target
        self.runtime = runtime
        self.qemu = qemu

    @property
    def capabilities(self) -> Capabilities:
        """Natively on the host, else under QEMU: emulated, recorded by content and counted."""
        if self.qemu is None:
            return Capabilities("natively")
        return Capabilities(f"under qemu-{self.qemu.arch} {self.qemu.version_text} -cpu {self.target.emulator_cpu}",
                            emulated=True, counted=True)

    @property
    def where(self) -> str:
        """Where its runs happen, for messages."""
        return self.capabilities.where

    def emulator(self) -> Qemu:
        """The emulator its runs go through (what decides a recorded run besides the module and inputs)."""
        if self.qemu is None:
            raise ValueError(f"{self.target.name} runs {self.where}: not emulated")
        return self.qemu

    def replay(self, artifact: Artifact, inputs: list[np.ndarray], num_outputs: int,
               limit: int | None = None) -> list[RunOutcome]:
        """The rounds another machine ran of this cell (runners whose capabilities say ``replays``)."""
        raise ValueError(f"{self.target.name} runs {self.where}: it has no recorded rounds to replay")

    def prefix(self, qemu_args: tuple[str, ...] = ()) -> list[str]:
        """The emulator part of the command line (empty on the host); ``qemu_args`` e.g. a -plugin."""
        if self.qemu is None:
            return []
        argv = [str(self.qemu.path), "-cpu", self.target.emulator_cpu, "-R", GUEST_ADDRESS_SPACE]
        if self.runtime.sysroot is not None:
            argv += ["-L", str(self.runtime.sysroot)]
        return argv + list(qemu_args)

    def command(self, module: Path, function: str, inputs: list[Path], outputs: list[Path],
                extra: tuple[str, ...] = (), qemu_args: tuple[str, ...] = (),
                launcher: tuple[str, ...] = ()) -> list[str]:
        """The command line; under QEMU every guest path is relative to the run's folder (see run())."""
        if self.qemu is None:
            argv = [*launcher, str(self.runtime.executable)]
        else:
            argv = [*launcher, *self.prefix(qemu_args), "-0", GUEST_PROGRAM, GUEST_PROGRAM]
        argv += [*device_flags(self.capabilities.threads), f"--module={module}", f"--function={function}"]
        argv += [f"--input=@{p}" for p in inputs]
        argv += [f"--output=@{p}" for p in outputs]
        return argv + list(extra)

    def run(self, artifact: Artifact, inputs: list[np.ndarray], workdir: Path, num_outputs: int,
            timeout_s: float | None, qemu_args: tuple[str, ...] = (), launcher: tuple[str, ...] = (),
            runtime_args: tuple[str, ...] = (), load_only: bool = False) -> RunOutcome:
        """Run ``artifact`` on ``inputs``; raise RunFailed with a one-line reason and a repro.

        ``load_only``: load the module and stop before the call: iree-run-module creates its context (loading the
        module and running its initializers: the one-time work) before it looks the function up, so a function name
        the module does not export, of the same length (the guest's stack stays where it was), ends the run there
        with NOT_FOUND, which is then the expected outcome (no outputs).

        ``qemu_args`` go to the emulator (e.g. a -plugin), ``launcher`` before everything (e.g. the
        RSS probe), ``runtime_args`` to iree-run-module (e.g. --print_statistics).

        Under QEMU the guest sees the same memory on every machine: an empty environment, argv
        and exec paths relative to ``workdir`` (the module and the runtime are linked there), and
        addresses from QEMU's own reserved range (``-R``). Dispatch code's executed instructions
        depend on stack and buffer addresses, so this keeps executed counts exact across runs,
        machines and cache locations.
        """
        if not self.target.runs_as(artifact.target):
            raise ConfigError(
                f"module for {artifact.target.name!r} cannot run on the {self.target.name!r} runner "
                f"(its emulated CPU may not match what the module was compiled for)"
            )
        workdir.mkdir(parents=True, exist_ok=True)
        in_paths = [workdir / f"input_{i}.npy" for i in range(len(inputs))]
        out_paths = [workdir / f"output_{i}.npy" for i in range(num_outputs)]
        for path, array in zip(in_paths, inputs, strict=True):
            np.save(path, array)
        for path in out_paths:
            path.unlink(missing_ok=True)
        # the guest's module, function and files, named relative to ``workdir``
        function = not_exported(artifact.function) if load_only else artifact.function
        guest = (Path(GUEST_MODULE), function, [Path(p.name) for p in in_paths], [Path(p.name) for p in out_paths])
        if self.qemu is None:
            argv = self.command(artifact.path, function, in_paths, out_paths, extra=runtime_args, launcher=launcher)
            result = run_process(argv, timeout_s=timeout_s)
            repro = shlex.join(argv[len(launcher):])
        else:
            _link(workdir / GUEST_MODULE, artifact.path)
            _link(workdir / GUEST_PROGRAM, staged_runtime(self.runtime.executable))
            argv = self.command(*guest, extra=runtime_args, qemu_args=qemu_args, launcher=launcher)
            result = run_process(argv, timeout_s=timeout_s, env={}, cwd=workdir)
            # the repro reruns the module; a launcher (the RSS probe) only measures, and is left out
            repro = f"cd {shlex.quote(str(workdir))} && env -i {shlex.join(argv[len(launcher):])}"
        what = f"{artifact.model} for {self.target.name} {self.where}"
        if load_only:
            if result.returncode != 1 or f"no function `{function}` exported" not in result.stderr:
                raise RunFailed(f"iree-run-module {result.status()} loading {what} (load only){_hint(result)}",
                                details=_details(result, repro))
            return RunOutcome([], result, repro)
        if not result.ok:
            hint, details = _hint(result, self.capabilities.threads), _details(result, repro)
            if self.qemu is not None and result.signal_name == "SIGILL" and not result.timed_out:
                # once more with QEMU's logging, to name the instruction and the extension the CPU lacks
                found = rerun_for_sigill(self.command(*guest, extra=runtime_args), workdir / "sigill.log", workdir,
                                         timeout_s)
                if found is not None:
                    illegal = explain(*found, self.target, self.target.emulator_cpu)
                    hint = f": {reason}" if (reason := illegal.hint(self.target.emulator_cpu)) else hint
                    details += "\n" + illegal.details()
            raise RunFailed(f"iree-run-module {result.status()} running {what}{hint}", details=details,
                            deterministic=result.returncode > 0 and not result.timed_out)
        missing = [p.name for p in out_paths if not p.is_file()]
        if missing:
            raise RunFailed(f"iree-run-module wrote no {', '.join(missing)} running {what}",
                            details=_details(result, repro))
        return RunOutcome([np.load(p) for p in out_paths], result, repro)


def not_exported(function: str) -> str:
    """A function name of ``function``'s length that no module exports (``~`` is not a symbol character)."""
    return "~" * len(function)


def fixed_length_dir(kind: str, sha: str, length: int) -> Path:
    """A directory of exactly ``length`` characters for the content ``sha``, under /tmp (else $TMPDIR), per user and
    ``kind``: whatever the user's name, home or cache, a guest sees the same path (see RUNTIME_DIR_LENGTH)."""
    base = Path("/tmp") if os.access("/tmp", os.W_OK) else Path(tempfile.gettempdir())
    prefix = base / f"pytest-rvv-{kind}-{os.getuid()}"
    room = length - len(str(prefix)) - 1
    if room < 16:
        raise ConfigError(f"{prefix}: the temporary directory's path is too long to run from a "
                          f"{length}-character directory; point TMPDIR at a shorter one")
    return prefix / (sha * 2)[:room]


def staged_runtime(executable: Path) -> Path:
    """A copy of ``executable`` in a directory of exactly RUNTIME_DIR_LENGTH characters (see there), made once per
    content under /tmp (else $TMPDIR) and per user."""
    sha = content_sha(executable)
    directory = fixed_length_dir("runtimes", sha, RUNTIME_DIR_LENGTH)
    staged = directory / GUEST_PROGRAM
    if staged.is_file() and content_sha(staged) == sha:
        return staged
    atomic_write_bytes(staged, executable.read_bytes(), mode=0o755)
    return staged


def _link(link: Path, target: Path) -> None:
    """``link`` -> ``target`` (the guest opens ``link`` by its relative name)."""
    if link.resolve() == target.resolve():
        return
    link.unlink(missing_ok=True)
    link.symlink_to(target.resolve())


def _hint(result: ProcessResult, threads: int = 1) -> str:
    if result.timed_out and threads > 1:
        return (f": killed at the timeout; a local-task run with {threads} workers can hang as well as be slow "
                "(raise --rvv-timeout if it is just slow)")
    if result.timed_out:
        return " (raise --rvv-timeout if the model is just slow)"
    if name := result.signal_name:
        return f": {_SIGNAL_HINTS.get(name, 'crashed')}"
    lines = [ln.strip() for ln in result.stderr.splitlines() if ln.strip()]
    status = next((m.group(0) for ln in lines if (m := _IREE_STATUS.search(ln))), None)
    if status:  # IREE's status line says why; the last lines are only its call stack
        return f": {status[:300]}"
    return f": {lines[-1]}" if lines else ""


def _details(result: ProcessResult, repro: str) -> str:
    return (
        f"repro: {repro}\n"
        f"--- stderr (tail) ---\n{tail(result.stderr, 25)}\n"
        f"--- stdout (tail) ---\n{tail(result.stdout, 10)}"
    )
