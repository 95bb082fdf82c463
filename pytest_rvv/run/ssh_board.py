"""Real RISC-V boards over SSH: iree-run-module runs natively on a board, with the same Runner interface.

Transport is OpenSSH with connection multiplexing (ControlMaster: one connection per board per
process, each command a new channel on it). The riscv64 runtime and each module are copied once
per content hash into ``<workdir>/cas/`` on the board (what is there is not sent again); inputs
go to a per-run folder that is removed after the run. Runs are limited on the board itself with
``timeout``, timed there (wall clock; user/system time and peak RSS with GNU time when the board
has it; ``cycles``/``instructions`` with ``perf stat`` when the board allows it).

A board is checked once per session: the facts probe (run/facts_probe.py, cross-built with clang-22) reports
whether the CPU has V and its VLEN, and the ISA string; a target the board cannot run correctly
(``+zvlNb`` above its VLEN, or ``+v`` without V) is refused with one line. ``launcher`` prefixes
every command on the board (e.g. ``qemu-riscv64 -cpu ...`` on a host that is not riscv64).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import subprocess
import tarfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pytest_rvv.base.errors import ConfigError, RunFailed, RvvError, tail
from pytest_rvv.base.process import ProcessResult
from pytest_rvv.base.store import Store, digest, file_sha256
from pytest_rvv.compile.compiler import Artifact
from pytest_rvv.config.boards import Board
from pytest_rvv.config.targets import RISCV64, Target
from pytest_rvv.run.facts_probe import build_facts_probe, parse_facts
from pytest_rvv.run.runner import GUEST_MODULE, GUEST_PROGRAM, Capabilities, Runner, RunOutcome, device_flags
from pytest_rvv.toolchain.runtimes import Runtime

SSH_TIMEOUT_S = 120.0
KILL_GRACE_S = 5
_UNREACHABLE = re.compile(r"Could not resolve hostname|Connection refused|Connection timed out|No route to host|"
                          r"Network is unreachable|Connection closed|Operation timed out|kex_exchange")
_AUTH = re.compile(r"Permission denied|Host key verification failed|Too many authentication failures")


class BoardUnavailable(RvvError):
    """A board cannot be reached, refuses the login, or has no room: one line naming it."""


@dataclass(frozen=True)
class BoardFacts:
    """What the probe read on the board once per session."""

    vector: bool
    vlen: int
    isa: str
    kernel: str
    gnu_time: bool
    perf: bool

    def refuse(self, board: Board, target: Target) -> str | None:
        """Why ``target`` cannot run correctly on this board, or None."""
        if target.arch != RISCV64:
            return f"target {target.name} is {target.arch}; board {board.name} runs riscv64 targets only"
        if target.has_vector and not self.vector:
            return (f"target {target.name} needs +v but board {board.name} has no vector unit (isa {self.isa}); "
                    "run a scalar target there")
        if target.has_vector and self.vlen < target.min_vlen:
            return (f"target {target.name} is compiled for VLEN >= {target.min_vlen} but board {board.name} has "
                    f"VLEN {self.vlen}: it would run with silently wrong results")
        return None


@dataclass
class BoardLink:
    """One board's OpenSSH connection (multiplexed) and its content-addressed files."""

    board: Board
    control_dir: Path
    store: Store
    present: set[str] = field(default_factory=set)
    uploads: int = 0
    hits: int = 0

    @property
    def control(self) -> str:
        """This process's master connection socket: per host, port, user (%C), ssh options (another key: another
        login) and process (xdist workers sharing a board each own their connection, and close only theirs)."""
        return f"{self.control_dir}/{os.getpid()}-{digest([*self.board.ssh_options])[:10]}-%C"

    def ssh(self, script: str, stdin: bytes = b"", timeout: float = SSH_TIMEOUT_S) -> subprocess.CompletedProcess:
        """Run ``script`` with sh on the board; a transport failure (ssh's 255) is one line naming the board."""
        self.control_dir.mkdir(parents=True, exist_ok=True)
        argv = ["ssh", "-T", "-o", "BatchMode=yes", "-o", "ControlMaster=auto", "-o", f"ControlPath={self.control}",
                "-o", "ControlPersist=30", "-o", "ConnectTimeout=10", "-o", "ServerAliveInterval=15",
                *self.board.ssh_options, self.board.host, script]
        try:
            proc = subprocess.run(argv, input=stdin, capture_output=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise BoardUnavailable(f"board {self.board.name} ({self.board.host}): no answer within {timeout:g}s "
                                   "(network, or a board too busy)") from None
        if proc.returncode == 255:
            raise BoardUnavailable(self._why(proc.stderr.decode(errors="replace")))
        return proc

    def _why(self, stderr: str) -> str:
        lines = [ln.strip() for ln in stderr.splitlines() if ln.strip() and not ln.startswith("Warning: Permanently")]
        last = lines[-1] if lines else "ssh exited 255"
        who = f"board {self.board.name} ({self.board.host})"
        if _AUTH.search(stderr):
            return f"{who}: authentication failed ({last}); check its key, ssh-options or ~/.ssh/config"
        if _UNREACHABLE.search(stderr):
            return f"{who}: unreachable ({last})"
        return f"{who}: ssh failed ({last})"

    def upload(self, local: Path, name: str) -> str:
        """``local`` on the board under ``<workdir>/cas/<sha>-<name>``, sent only when not there yet."""
        remote = f"{self.board.workdir}/cas/{file_sha256(local)[:20]}-{name}"
        if remote in self.present:
            self.hits += 1
            return remote
        q = shlex.quote(remote)
        if self.ssh(f"test -f {q}").returncode == 0:
            self.hits += 1
        else:
            tmp = shlex.quote(f"{remote}.tmp-{uuid.uuid4().hex[:8]}")
            proc = self.ssh(f"mkdir -p {shlex.quote(self.board.workdir)}/cas && cat > {tmp} && chmod 755 {tmp} && "
                            f"mv {tmp} {q} || {{ rm -f {tmp}; exit 1; }}", stdin=local.read_bytes(),
                            timeout=max(SSH_TIMEOUT_S, local.stat().st_size / 1e6))
            if proc.returncode != 0:
                raise BoardUnavailable(self._write_failure(proc.stderr.decode(errors="replace"), name))
            self.uploads += 1
        self.present.add(remote)
        return remote

    def _write_failure(self, stderr: str, what: str) -> str:
        line = next((ln.strip() for ln in reversed(stderr.splitlines()) if ln.strip()), "no message")
        if "No space left" in stderr:
            return (f"board {self.board.name}: no space left in {self.board.workdir} for {what} ({line}); "
                    "free some or set workdir")
        return f"board {self.board.name}: cannot write {what} under {self.board.workdir} ({line})"

    def facts(self) -> BoardFacts:
        """Probe the board (V, VLEN, ISA, kernel, GNU time, perf)."""
        probe = self.upload(build_facts_probe(self.store), "vlen-probe")
        launcher = shlex.join(self.board.launcher)
        script = (f"{launcher} {shlex.quote(probe)}; uname -r; "
                  "if [ -x /usr/bin/time ]; then echo gnu-time; fi; "
                  "if perf stat -x, -e cycles,instructions -o /dev/stdout true 2>/dev/null | grep -q '^[0-9]'; "
                  "then echo perf; fi")
        proc = self.ssh(script)
        out = proc.stdout.decode(errors="replace")
        facts = parse_facts(out)
        if "v" not in facts or "vlen" not in facts:
            raise BoardUnavailable(f"board {self.board.name}: the VLEN probe did not run ("
                                   f"{tail(proc.stderr.decode(errors='replace'), 2).strip() or 'no output'}); "
                                   "is it a riscv64 Linux (or does it need a launcher)?")
        rest = [line.strip() for line in out.splitlines() if line.strip() and "=" not in line]
        return BoardFacts(facts["v"] == "1", int(facts["vlen"]), facts.get("isa") or "?", rest[0] if rest else "?",
                          "gnu-time" in rest, "perf" in rest)

    def remove(self, path: str) -> None:
        with contextlib.suppress(BoardUnavailable):
            self.ssh(f"rm -rf {shlex.quote(path)}")

    def close(self) -> None:
        subprocess.run(["ssh", "-o", f"ControlPath={self.control}", *self.board.ssh_options, "-O", "exit",
                        self.board.host], capture_output=True, timeout=30, check=False)


class BoardRunner(Runner):
    """Runs modules on a board over SSH; same interface as the QEMU/host Runner (no executed counts)."""

    def __init__(self, target: Target, runtime: Runtime, link: BoardLink, facts: BoardFacts) -> None:
        if reason := facts.refuse(link.board, target):
            raise ConfigError(reason)
        self.target, self.runtime, self.qemu = target, runtime, None
        self.link, self.facts = link, facts

    @property
    def board(self) -> Board:
        return self.link.board

    @property
    def capabilities(self) -> Capabilities:
        """Natively on a board: fresh runs, timed there; nothing counted or recorded."""
        return Capabilities(f"on board {self.board.name}")

    @property
    def where(self) -> str:
        return f"on board {self.board.name} ({self.board.host})"

    def run(self, artifact: Artifact, inputs: list[np.ndarray], workdir: Path, num_outputs: int,
            timeout_s: float | None, qemu_args: tuple[str, ...] = (), launcher: tuple[str, ...] = (),
            runtime_args: tuple[str, ...] = ()) -> RunOutcome:
        """Copy what is missing, run on the board under ``timeout``, bring the outputs back, clean up."""
        if qemu_args:
            raise ConfigError(f"target {self.target.name} runs {self.where}: executed counts need QEMU")
        if not self.target.runs_as(artifact.target):
            raise ConfigError(f"module for {artifact.target.name!r} cannot run on the {self.target.name!r} runner")
        program = self.link.upload(self.runtime.executable, GUEST_PROGRAM)
        module = self.link.upload(artifact.path, GUEST_MODULE)
        run_dir = f"{self.board.workdir}/runs/{uuid.uuid4().hex}"
        args = [*device_flags(self.capabilities.threads), f"--module={GUEST_MODULE}", f"--function={artifact.function}",
                *(f"--input=@input_{i}.npy" for i in range(len(inputs))),
                *(f"--output=@output_{i}.npy" for i in range(num_outputs)), *runtime_args]
        limit = int(timeout_s) if timeout_s else 24 * 3600
        measure = []
        if self.facts.gnu_time:
            measure += ["/usr/bin/time", "-f", "%e %U %S %M", "-o", "time.txt"]
        if self.facts.perf:
            measure += ["perf", "stat", "-x,", "-o", "perf.txt", "-e", "cycles,instructions"]
        command = ["timeout", "-k", str(KILL_GRACE_S), str(limit), *measure, *self.board.launcher,
                   f"./{GUEST_PROGRAM}", *args]
        q = shlex.quote
        script = "\n".join([
            f"set -e; mkdir -p {q(run_dir)}; cd {q(run_dir)}; tar xf -",
            f"ln -s {q(program)} {GUEST_PROGRAM}; ln -s {q(module)} {GUEST_MODULE}; set +e",
            "start=$(date +%s%N)",
            f"{shlex.join(command)} > run.out 2> run.err",
            "echo $? > rc.txt; end=$(date +%s%N); echo $(( (end - start) / 1000 )) > wall_us.txt",
            "set -- rc.txt; for f in wall_us.txt time.txt perf.txt run.out run.err output_*.npy; do "
            '[ -f "$f" ] && set -- "$@" "$f"; done; tar cf - "$@"',
            f"cd /; rm -rf {q(run_dir)}",
        ])
        repro = (f"ssh {shlex.join([*self.board.ssh_options, self.board.host])} "
                 f"{q(shlex.join([*self.board.launcher, program, *args]).replace(GUEST_MODULE, module, 1))}"
                 "  # inputs: the test's seeded .npy files")
        try:
            proc = self.link.ssh(script, stdin=_tar_inputs(inputs), timeout=limit + KILL_GRACE_S + SSH_TIMEOUT_S)
        except BaseException:
            self.link.remove(run_dir)  # the script removes it itself unless the connection dropped mid-run
            raise
        files = _untar(proc.stdout)
        if "rc.txt" not in files:
            self.link.remove(run_dir)
            raise BoardUnavailable(f"board {self.board.name}: the run left no status "
                                   f"({tail(proc.stderr.decode(errors='replace'), 2).strip() or 'no output'}); "
                                   f"is {self.board.workdir} writable?")
        result = _process_result(files, command, limit)
        what = f"{artifact.model} for {self.target.name} {self.where}"
        if not result.ok:
            raise RunFailed(f"iree-run-module {result.status()} running {what}",
                            details=f"repro: {repro}\n--- stderr (tail) ---\n{tail(result.stderr, 25)}")
        missing = [f"output_{i}.npy" for i in range(num_outputs) if f"output_{i}.npy" not in files]
        if missing:
            raise RunFailed(f"iree-run-module wrote no {', '.join(missing)} running {what}", details=f"repro: {repro}")
        outputs = [np.load(io.BytesIO(files[f"output_{i}.npy"]), allow_pickle=False) for i in range(num_outputs)]
        return RunOutcome(outputs, result, repro, board_metrics(files))


def _tar_inputs(inputs: list[np.ndarray]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for i, array in enumerate(inputs):
            data = io.BytesIO()
            np.save(data, array, allow_pickle=False)
            info = tarfile.TarInfo(f"input_{i}.npy")
            info.size, info.mtime = data.tell(), int(time.time())
            data.seek(0)
            archive.addfile(info, data)
    return buffer.getvalue()


def _untar(data: bytes) -> dict[str, bytes]:
    if not data:
        return {}
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as archive:
            return {m.name: archive.extractfile(m).read() for m in archive.getmembers() if m.isfile()}  # type: ignore[union-attr]
    except tarfile.TarError:
        return {}


def _process_result(files: dict[str, bytes], command: list[str], limit: int) -> ProcessResult:
    """The board run as a ProcessResult: timeout(1)'s 124 (or 137 after its KILL grace) at the limit is a
    timeout, 128+N a signal."""
    rc = int(files["rc.txt"].decode().strip() or "1")
    wall = int(files.get("wall_us.txt", b"0").decode().strip() or "0") / 1e6
    timing = gnu_time(files)
    cpu = timing[0] if timing else wall
    timed_out = rc in (124, 137) and wall >= limit - 0.5
    returncode = -(rc - 128) if rc > 128 and not timed_out else rc
    return ProcessResult(tuple(command), 0 if timed_out else returncode,
                         files.get("run.out", b"").decode(errors="replace"),
                         files.get("run.err", b"").decode(errors="replace"), wall, cpu, timed_out, limit)


def board_metrics(files: dict[str, bytes]) -> dict[str, float]:
    """Peak RSS (GNU time) and hardware counters (perf stat) of a board run, when the board gave them."""
    metrics: dict[str, float] = {}
    if timing := gnu_time(files):
        metrics["board_peak_rss_kb"] = timing[1]
    for line in files.get("perf.txt", b"").decode().splitlines():
        fields = line.split(",")
        if len(fields) > 2 and fields[0].isdigit() and fields[2].startswith(("cycles", "instructions")):
            metrics[f"board_{fields[2].split(':')[0]}"] = int(fields[0])
    return metrics


def gnu_time(files: dict[str, bytes]) -> tuple[float, int] | None:
    """(user + system seconds, peak RSS KiB) from GNU time's ``%e %U %S %M`` line, None without one."""
    for line in reversed(files.get("time.txt", b"").decode(errors="replace").splitlines()):
        fields = line.split()
        if len(fields) == 4 and fields[3].isdigit():
            try:
                return float(fields[1]) + float(fields[2]), int(fields[3])
            except ValueError:
                return None
    return None
