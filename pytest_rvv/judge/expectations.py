"""Expected failures, in one place: per model x target for the suites, per ONNX node test x target for conformance.

Both are strict (an unexpected pass fails until its entry is removed, and only the named kind of failure is
accepted) and rewritten from a run by ``--update-baselines``.

Models: expected failures per target and model, read from a TOML file and applied as strict xfails.

File format (``baselines/expected-failures.toml`` by default)::

    [rv64gcv-zvl128b]
    nsnet2 = { phase = "agreement", reason = "..." }

``phase`` is where the failure happens: ``compile`` (iree-import-onnx/iree-compile rejects the
model; the compile and the agreement tests are both expected to fail), ``run`` (the module
crashes or times out) or ``agreement`` (outputs differ from onnxruntime). The xfail is strict
and limited to that kind of error: an unexpected pass, or a different failure, fails the test.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_rvv.base.errors import CompileFailed, ConfigError, RunFailed
from pytest_rvv.base.record import Record
from pytest_rvv.base.store import atomic_write_bytes
from pytest_rvv.base.toml_files import read_toml
from pytest_rvv.judge.outcome import Verdict, failed, passed, xfailed

PHASES: dict[str, type[BaseException]] = {
    "compile": CompileFailed,
    "run": RunFailed,
    "agreement": AssertionError,
}
# Which checks an expected failure in a phase affects: a model that does not compile cannot
# run either, so a compile failure is expected in every check.
AFFECTED_CHECKS = {"compile": {"compile", "agreement", "performance"}, "run": {"agreement", "performance"},
                   "agreement": {"agreement", "performance"}}  # performance runs (and checks agreement) too


@dataclass(frozen=True)
class ExpectedFailure:
    target: str
    model: str
    phase: str
    reason: str

    @property
    def raises(self) -> type[BaseException]:
        return PHASES[self.phase]

    def applies_to(self, check: str) -> bool:
        return check in AFFECTED_CHECKS[self.phase]


def load_expected_failures(
    path: Path, targets: Collection[str], models: Collection[str]
) -> dict[tuple[str, str], ExpectedFailure]:
    """Read ``path`` (missing file: no expected failures), validating every entry."""
    data = read_toml(path, "fix or delete the file")
    found: dict[tuple[str, str], ExpectedFailure] = {}
    for target, entries in data.items():
        if target not in targets:
            raise ConfigError(f"{path}: [{target}] is not a known target; known: {', '.join(targets)}")
        if not isinstance(entries, dict):
            raise ConfigError(f"{path}: [{target}] must be a table of model = {{ phase, reason }}")
        for model, entry in entries.items():
            where = f"{path}: [{target}] {model}"
            if model not in models:
                raise ConfigError(f"{where}: not a known model; known: {', '.join(models)}")
            if not isinstance(entry, dict):
                raise ConfigError(f"{where}: must be {{ phase = \"...\", reason = \"...\" }}")
            phase, reason = entry.get("phase"), entry.get("reason")
            if phase not in PHASES:
                raise ConfigError(f"{where}: phase must be one of {', '.join(PHASES)}, got {phase!r}")
            if not isinstance(reason, str) or not reason.strip():
                raise ConfigError(f"{where}: give a reason (the error message seen)")
            extra = set(entry) - {"phase", "reason"}
            if extra:
                raise ConfigError(f"{where}: unknown field(s) {', '.join(sorted(extra))}")
            found[(target, model)] = ExpectedFailure(target, model, phase, reason.strip())
    return found


HEADER = """\
# Expected failures of the correctness suite, per target and model. Strict: an unexpected pass
# fails until its entry is removed, and only the named kind of failure is accepted.
#
# [TARGET]
# MODEL = { phase = "compile" | "run" | "agreement", reason = "the error seen" }
#
# `pytest suites/ --update-baselines` rewrites this file from the run.
"""


def phase_of(error: BaseException) -> str | None:
    """The phase an exception from a correctness check belongs to."""
    for phase, kind in PHASES.items():
        if isinstance(error, kind):
            return phase
    return None


def rewrite_expected_failures(path: Path, current: dict[tuple[str, str], ExpectedFailure],
                              observed: Iterable[tuple[str, str, str | None, str]]) -> list[str]:
    """Update ``path`` from a run: ``observed`` is (target, model, failed phase or None, reason).

    A model x target that failed gets (or keeps) an entry for its earliest failing phase; one
    whose checks all passed loses its entry; pairs that did not run keep theirs. Atomic write.
    """
    order = list(PHASES)
    entries = dict(current)
    outcome: dict[tuple[str, str], tuple[str | None, str]] = {}
    for target, model, phase, reason in observed:
        key = (target, model)
        previous = outcome.get(key)
        if phase is not None and (previous is None or previous[0] is None
                                  or order.index(phase) < order.index(previous[0])):
            outcome[key] = (phase, reason)
        elif previous is None:
            outcome[key] = (None, "")
    changes = []
    for key, (phase, reason) in sorted(outcome.items()):
        old = entries.get(key)
        if phase is None and old is not None:
            del entries[key]
            changes.append(f"expected failure removed (passes now): [{key[0]}] {key[1]}")
        elif phase is not None and (old is None or old.phase != phase):
            entries[key] = ExpectedFailure(key[0], key[1], phase, reason)
            changes.append(f"expected failure recorded: [{key[0]}] {key[1]} ({phase}: {reason})")
    if not changes:
        return []
    lines = [HEADER]
    for target in sorted({t for t, _ in entries}):
        lines.append(f"\n[{json.dumps(target)}]")
        for (t, model), entry in sorted(entries.items()):
            if t == target:
                lines.append(f"{json.dumps(model)} = {{ phase = {json.dumps(entry.phase)}, "
                             f"reason = {json.dumps(entry.reason)} }}")
    atomic_write_bytes(path, ("\n".join(lines) + "\n").encode())
    return changes


class ExpectedFailureUpdater:
    """pytest plugin object: with --update-baselines, the controller rewrites the file once."""

    def __init__(self, path: Path, current: dict[tuple[str, str], ExpectedFailure]) -> None:
        self.path = path
        self.current = current
        self.observed: list[tuple[str, str, str | None, str]] = []
        self.changes: list[str] = []

    def pytest_runtest_logreport(self, report: Any) -> None:
        check = Record.of(report).check
        if check is not None:
            self.observed.append(tuple(check))  # type: ignore[arg-type]

    def pytest_sessionfinish(self, session: Any) -> None:
        if not hasattr(session.config, "workerinput") and session.config.getoption("update_baselines"):
            self.changes = rewrite_expected_failures(self.path, self.current, self.observed)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.changes:
            terminalreporter.section("rvv expected failures", sep="-")
            for line in self.changes:
                terminalreporter.write_line(line)


# ONNX node tests: baselines/conformance/<target>.toml lists the tests expected to fail there, by phase:
#     [import]
#     test_foo = "the importer's error"
#     [compile] / [run] / [mismatch]
NODE_PHASES = ("import", "compile", "run", "mismatch")


@dataclass(frozen=True)
class ExpectedNodeFailure:
    """An ONNX node test expected to fail on one target, in ``phase`` (one of NODE_PHASES)."""

    phase: str
    reason: str


NEW_PASS = "new pass"  # message of a passing test that its list expects to fail
COMPILE_ONLY_PHASES = ("import", "compile")  # a test that compiles passes these phases without running


def node_test_verdict(test: str, target: str, expected: ExpectedNodeFailure | None, listed_in: Path, strict: bool,
                      ran: bool, failure: tuple[str, str, str] | None = None) -> Verdict:
    """The verdict of one ONNX node test on ``target`` against its expected failure (``expected``, from
    ``listed_in``): ``failure`` is (phase, its first line, the whole message) when it failed, ``ran`` whether it ran
    (False: it only compiled, without a runtime).

    A failure in the listed phase is an expected failure; any other failure is new and fails. A listed test that
    passes (ran, or got past its listed import or compile phase) is an improvement: it passes with a note, and fails
    with ``strict``. The record says what happened either way (the conformance summary)."""
    if failure is not None:
        phase, first_line, message = failure
        records = {"conformance": (target, test, phase, first_line, True)}
        if expected is not None and expected.phase == phase:
            return xfailed(f"expected {phase} failure: {expected.reason}", **records)
        listed = f" (listed as an expected {expected.phase} failure in {listed_in})" if expected else ""
        details = "".join(f"\n{line}" for line in message.strip().splitlines()[1:12])
        return failed(f"new {phase} failure{listed}: {first_line}{details}", **records)
    listed_pass = expected is not None and (ran or expected.phase in COMPILE_ONLY_PHASES)
    records: dict[str, Any] = {"conformance": (target, test, None, NEW_PASS if listed_pass else "", ran)}
    if expected is None or not listed_pass:
        return passed(**records)
    note = (f"{test} now passes on {target}: remove it from [{expected.phase}] in {listed_in} (or rerun with "
            "--update-baselines)")
    if strict:
        return failed(f"unexpectedly passes (--rvv-strict-baselines): {note}", **records)
    return passed(**records, improvements=[note])


def node_lists_path(root: Path, target: str) -> Path:
    """``baselines/conformance/<target>.toml``: the node tests expected to fail on ``target``, by phase."""
    return root / "baselines" / "conformance" / f"{target}.toml"


def node_compiled_alone(lists: dict[str, ExpectedNodeFailure]) -> set[str]:
    """The tests listed as expected import or compile failures: they never go into a batch."""
    return {name for name, entry in lists.items() if entry.phase in ("import", "compile")}


def load_node_lists(path: Path) -> dict[str, ExpectedNodeFailure]:
    """The file's entries, parsed once per version of the file (every node test of a target reads it)."""
    try:
        stat = path.stat()
        version: tuple[int, int] | None = (stat.st_mtime_ns, stat.st_size)
    except FileNotFoundError:
        version = None
    return dict(_node_lists(path, version))


@functools.lru_cache(maxsize=64)
def _node_lists(path: Path, version: tuple[int, int] | None) -> dict[str, ExpectedNodeFailure]:
    data = read_toml(path, "fix it or rerun with --update-baselines")
    unknown = set(data) - set(NODE_PHASES)
    if unknown:
        raise ConfigError(f"{path}: unknown table(s) {', '.join(sorted(unknown))}; use {', '.join(NODE_PHASES)}")
    return {name: ExpectedNodeFailure(phase, str(reason))
            for phase in NODE_PHASES for name, reason in data.get(phase, {}).items()}


def write_node_lists(path: Path, entries: dict[str, ExpectedNodeFailure]) -> None:
    lines = [f"# Expected ONNX node-test failures on {path.stem}, by phase (strict; rewritten by "
             "--update-baselines)."]
    for phase in NODE_PHASES:
        lines.append(f"\n[{phase}]")
        lines += [f"{name} = {json.dumps(e.reason)}" for name, e in sorted(entries.items()) if e.phase == phase]
    atomic_write_bytes(path, ("\n".join(lines) + "\n").encode())
