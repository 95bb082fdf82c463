"""Bisect IREE with a pytest selection as the verdict: released versions (pip), or commits (git bisect run).

``pytest-rvv bisect --good 3.9.0 --bad 3.13.0 -- PYTEST-ARGS`` walks the releases pip can see
between the two, installs each once into the tools cache (toolchain/environments.py), runs the
selection with it (``PYTEST_RVV_IREE_BUILD`` = its environment) and names the first bad release
with both compilers' commits. A release that cannot be installed is skipped, like
``git bisect skip``. ``pytest-rvv bisect-run`` is the script for ``git bisect run`` in an IREE
checkout: exit 0 good, 1 bad, 125 cannot test.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

from pytest_rvv.base.errors import ConfigError
from pytest_rvv.toolchain.environments import COMPILER, environment_of, released_versions, toolchain_from_spec
from pytest_rvv.toolchain.toolchain import BUILD_TOOL_DIRS, Toolchain, compiler_commit

GOOD, BAD, SKIP = "good", "bad", "skip"
BUILD_ENV = "PYTEST_RVV_IREE_BUILD"
GIT_GOOD, GIT_BAD, GIT_SKIP = 0, 1, 125
COULD_NOT_RUN = -1  # run_selection's code when no runtime loads the step's modules: untestable, not bad
CANNOT_RUN_MARK = "NoRuntimeLoads: "  # how a cell that could not run reads in pytest's output


@dataclass
class Step:
    """One tested version: its verdict, the compiler's version line (or why it could not be tested)."""

    version: str
    verdict: str
    detail: str
    seconds: float
    failures: tuple[str, ...] = ()  # what failed: each failing cell and its dispatches' counts (``failing_cells``)


def versions_between(available: Sequence[str], good: str, bad: str) -> list[str]:
    """The releases from ``good`` to ``bad`` inclusive, oldest first; one ConfigError line for a bad range."""
    parsed = {}
    for v in available:
        try:
            parsed[v] = Version(v)
        except InvalidVersion:
            continue
    for flag, value in (("--good", good), ("--bad", bad)):
        if value not in parsed:
            shown = ", ".join(list(parsed)[:8])
            raise ConfigError(f"{flag} {value}: not a release of {COMPILER} that pip can see (newest: {shown}); "
                              "use --index-url/--find-links for other builds")
    if parsed[good] >= parsed[bad]:
        raise ConfigError(f"bisect range in the wrong order: --good {good} is not older than --bad {bad}")
    return sorted((v for v, p in parsed.items() if parsed[good] <= p <= parsed[bad]), key=parsed.__getitem__)


def run_selection(build: Path, pytest_args: Sequence[str], cwd: Path) -> tuple[int, str]:
    """pytest's exit code and summary line for ``pytest_args`` with the IREE build or environment ``build``.

    A run whose toolchain no riscv64 runtime can run is not a verdict on the code: COULD_NOT_RUN and its line.
    """
    code, summary, _ = run_selection_failing(build, pytest_args, cwd)
    return code, summary


def run_selection_failing(build: Path, pytest_args: Sequence[str], cwd: Path) -> tuple[int, str, tuple[str, ...]]:
    """``run_selection``, plus what failed (``failing_cells``)."""
    env = {**os.environ, BUILD_ENV: str(build)}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-rf", *pytest_args], cwd=cwd, env=env, check=False,
                          capture_output=True, text=True)
    output = proc.stdout + proc.stderr
    lines = [ln.strip("= ") for ln in output.splitlines() if ln.strip()]
    if proc.returncode != 0 and (cannot := next((ln for ln in lines if ln.startswith(CANNOT_RUN_MARK)), None)):
        return COULD_NOT_RUN, f"could not run: {cannot.removeprefix(CANNOT_RUN_MARK)}", ()
    return proc.returncode, (lines[-1] if lines else "no output"), failing_cells(output)


_FAILED = re.compile(r"^FAILED (\S+?)(?: - .*)?$")
_CELL = re.compile(r"\[([^\]]+)\]$")
# the gate's dispatch verdicts (judge/gate.py), wherever a failure prints them (one per line, or joined with "; ")
_DISPATCH_LINE = re.compile(r"(?:^|[\s;:(])(dispatch_[\w.]+|_encoding_[\w.]+): "
                            r"(executes \d+ -> \d+ instructions \([^)]*\)"
                            r"|was vectorized \([^)]*\), now scalar \([^)]*\))")


def failing_cells(output: str, shown: int = 12) -> tuple[str, ...]:
    """From a pytest run's output: each failing test's cell (``model-target``, from its id) and, under it, the
    dispatch lines its failure named (before -> after counts), most added work first as the gate printed them."""
    found: list[str] = []
    for line in output.splitlines():
        if (failed := _FAILED.match(line.strip())) and (cell := _CELL.search(failed.group(1))):
            found.append(f"{cell.group(1)} ({failed.group(1).split('::')[-1].split('[')[0]})")
    dispatches = list(dict.fromkeys(f"{m.group(1)}: {m.group(2)}" for m in _DISPATCH_LINE.finditer(output)))
    return tuple(dict.fromkeys(found)) + tuple(f"  {d}" for d in dispatches[:shown])


def verdict_of(code: int) -> str:
    """pytest's exit code as a bisect verdict: 0 good, 1 (tests failed) bad, anything else untestable."""
    return GOOD if code == 0 else BAD if code == 1 else SKIP


class ReleaseBisect:
    """Bisect released versions; ``test(version) -> Step`` is injectable for the algorithm's own tests."""

    def __init__(self, versions: list[str], test: Callable[[str], Step], log: Callable[[str], None]) -> None:
        self.versions = versions
        self.test = test
        self.log = log
        self.steps: dict[str, Step] = {}

    def _check(self, index: int, total: int) -> Step:
        version = self.versions[index]
        self.log(f"step {len(self.steps) + 1} of at most {total}: {version} ...")
        step = self.test(version)
        self.steps[version] = step
        self.log(f"{version}: {step.verdict} ({step.seconds:.0f} s){'; ' + step.detail if step.detail else ''}")
        return step

    def run(self) -> tuple[int, list[str]]:
        """(exit code, report lines): 0 when a first bad release is named, 1 when it cannot be."""
        n = len(self.versions)
        total = 2 + max(0, (n - 2).bit_length())
        good = self._check(0, total)
        if good.verdict != GOOD:
            return 1, [f"--good {self.versions[0]} is already {good.verdict}: {good.detail or 'its tests fail'}; "
                       "pick an older good release"]
        bad = self._check(n - 1, total)
        if bad.verdict != BAD:
            return 1, [f"--bad {self.versions[-1]} is {bad.verdict}: {bad.detail or 'its tests pass'}; "
                       "nothing to bisect"]
        lo, hi, skipped = 0, n - 1, set()
        while hi - lo > 1:
            untested = [i for i in range(lo + 1, hi) if i not in skipped]
            if not untested:
                break
            mid = min(untested, key=lambda i: abs(i - (lo + hi) / 2))
            verdict = self._check(mid, total).verdict
            if verdict == GOOD:
                lo = mid
            elif verdict == BAD:
                hi = mid
            else:
                skipped.add(mid)
        first, last = self.versions[hi], self.versions[lo]
        lines = []
        if hi - lo > 1:
            between = ", ".join(self.versions[lo + 1:hi])
            lines.append(f"the first bad release is one of {between}, {first}: {between} could not be tested")
        elif n == 2:
            lines.append(f"no release lies between {last} and {first}: the first bad release is {first}")
        lines += [f"first bad release: {first} ({self.steps[first].detail})",
                  f"last good release: {last} ({self.steps[last].detail})"]
        good_commit, bad_commit = (compiler_commit(self.steps[v].detail) for v in (last, first))
        if good_commit and bad_commit:
            lines.append(f"next, in IREE: git log {good_commit[:12]}..{bad_commit[:12]}")
        if self.steps[first].failures:
            lines += [f"what fails with {first} (cells, then their dispatches: {last} -> {first} counts):",
                      *(f"  {line}" for line in self.steps[first].failures)]
        return (0 if hi - lo == 1 else 1), lines


def bisect_releases(good: str, bad: str, pytest_args: Sequence[str], tools_dir: Path, cwd: Path,
                    pip_args: tuple[str, ...] = (), log: Callable[[str], None] = print) -> int:
    """``pytest-rvv bisect``: exit 0 with the first bad release named, 1 when it cannot be, 2 on bad input."""
    versions = versions_between(released_versions(COMPILER, pip_args), good, bad)
    log(f"{len(versions)} releases from {good} to {bad}: {', '.join(versions)}; selection: "
        f"pytest {shlex.join(pytest_args)}")

    def test(version: str) -> Step:
        start = time.monotonic()
        try:
            toolchain: Toolchain = toolchain_from_spec(f"{COMPILER}=={version}", tools_dir, "bisect", pip_args)
        except ConfigError as exc:
            return Step(version, SKIP, f"cannot be installed: {exc}", time.monotonic() - start)
        code, summary, failures = run_selection_failing(environment_of(toolchain), pytest_args, cwd)
        detail = toolchain.compiler_version if verdict_of(code) != SKIP else \
            f"pytest exited {code} (not a test verdict: {summary}) with {toolchain.compiler_version}"
        log(f"{version}: pytest: {summary}")
        return Step(version, verdict_of(code), detail, time.monotonic() - start, failures)

    code, lines = ReleaseBisect(versions, test, log).run()
    for line in lines:
        log(line)
    return code


def bisect_run(build: Path, pytest_args: Sequence[str], cwd: Path, build_command: str | None = None,
               log: Callable[[str], None] = print) -> int:
    """``pytest-rvv bisect-run``: one ``git bisect run`` step (0 good, 1 bad, 125 cannot test)."""
    if build_command:
        built = subprocess.run(build_command, shell=True, cwd=cwd, check=False)
        if built.returncode != 0:
            log(f"bisect-run: the build command exited {built.returncode}: cannot test this commit (125)")
            return GIT_SKIP
    if not any((build / sub / "iree-compile").is_file() for sub in BUILD_TOOL_DIRS):
        log(f"bisect-run: {build} holds no iree-compile (looked in {', '.join(BUILD_TOOL_DIRS[:3])}): cannot test "
            "this commit (125)")
        return GIT_SKIP
    code, summary = run_selection(build, pytest_args, cwd)
    verdict = verdict_of(code)
    log(f"bisect-run: pytest exited {code} ({summary}): {verdict}")
    return {GOOD: GIT_GOOD, BAD: GIT_BAD}.get(verdict, GIT_SKIP)
