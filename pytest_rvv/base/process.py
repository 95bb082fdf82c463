"""Running a child process with a hard timeout that kills its whole process group."""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO

TAIL_BYTES = 64 * 1024


@dataclass(frozen=True)
class ProcessResult:
    """Outcome of one child process: exit status, output tails and resource usage."""

    argv: tuple[str, ...]
    returncode: int  # negative: killed by signal -returncode (subprocess convention)
    stdout: str
    stderr: str
    wall_s: float
    cpu_s: float  # user + system time of the child
    timed_out: bool
    timeout_s: float | None = None  # the limit it was given (a timeout says this, not the wall time: load moves that)

    @property
    def signal_name(self) -> str | None:
        if self.returncode >= 0:
            return None
        try:
            return signal.Signals(-self.returncode).name
        except ValueError:
            return f"signal {-self.returncode}"

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    def status(self) -> str:
        """A short phrase: 'exit code 1', 'killed by SIGILL', 'timed out after 5.0s'."""
        if self.timed_out:
            return f"timed out after {self.timeout_s if self.timeout_s is not None else self.wall_s:.1f}s"
        if self.signal_name:
            return f"killed by {self.signal_name}"
        return f"exit code {self.returncode}"

    def command_line(self) -> str:
        return shlex.join(self.argv)


def run_process(
    argv: Sequence[str | os.PathLike[str]],
    *,
    timeout_s: float | None,
    env: dict[str, str] | None = None,
    cwd: os.PathLike[str] | str | None = None,
) -> ProcessResult:
    """Run ``argv`` in a new session; on timeout SIGKILL the whole process group.

    stdout/stderr go to temporary files (no pipe deadlocks with chatty tools), and their tails
    are returned. CPU time comes from ``wait4`` for exactly this child. (``ru_maxrss`` is not
    reported: after exec it still holds the spawning Python process's high-water mark.)
    """
    args = tuple(str(a) for a in argv)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        # Popen only forks and execs here (vfork where it can); wait4 below reaps the child and reads its CPU time.
        child = subprocess.Popen(args, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                 start_new_session=True)
        pid = child.pid
        fired = threading.Event()

        def kill_group() -> None:
            fired.set()
            _kill_group(pid)

        timer = threading.Timer(timeout_s, kill_group) if timeout_s else None
        if timer:
            timer.daemon = True
            timer.start()
        try:
            _, status, usage = os.wait4(pid, 0)
        finally:
            if timer:
                timer.cancel()
        wall = time.perf_counter() - start
        returncode = os.waitstatus_to_exitcode(status)
        child.returncode = returncode  # reaped here: Popen must not wait for it again
        if fired.is_set():  # reap anything the child left behind in its group
            _kill_group(pid)
        return ProcessResult(
            argv=args,
            returncode=returncode,
            stdout=_tail(out),
            stderr=_tail(err),
            wall_s=wall,
            cpu_s=usage.ru_utime + usage.ru_stime,
            timed_out=fired.is_set(),
            timeout_s=timeout_s,
        )


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


def _tail(f: IO[bytes]) -> str:
    size = f.seek(0, os.SEEK_END)
    f.seek(max(0, size - TAIL_BYTES))
    return f.read().decode("utf-8", errors="replace")
