"""pytest-rvv's fixtures: thin wrappers that hand the pipeline's checks to tests.

Registered by the plugin at configure time, so they are available wherever pytest-rvv is.
"""

from __future__ import annotations

import contextlib
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from syrupy.assertion import SnapshotAssertion

from pytest_rvv.base.errors import ConfigError, RunFailed, RuntimeNotProvided, RvvError, ToolMissing
from pytest_rvv.base.record import leave
from pytest_rvv.comparison.ab import ToolchainComparison, compare_toolchains
from pytest_rvv.comparison.repro import write_repro
from pytest_rvv.config.cores import CORES, WallRequest
from pytest_rvv.config.kernels import CORE as KERNEL_CORE
from pytest_rvv.config.kernels import MARK as KERNEL_CELLS
from pytest_rvv.config.kernels import WALL as KERNEL_WALL
from pytest_rvv.config.settings import Settings
from pytest_rvv.config.targets import RISCV64, Target
from pytest_rvv.conformance.batch import NodeBatches
from pytest_rvv.conformance.check import NodeTestFailure, run_node_test, tolerance_for
from pytest_rvv.conformance.node_tests import NodeTest
from pytest_rvv.judge.applicable import applicable_baselines
from pytest_rvv.judge.baselines import PERF_BASELINES
from pytest_rvv.judge.checks import agreement_verdict
from pytest_rvv.judge.expectations import (
    PHASES,
    load_node_lists,
    node_compiled_alone,
    node_lists_path,
    node_test_verdict,
)
from pytest_rvv.judge.gate import GateResult
from pytest_rvv.judge.outcome import FAILED, SKIPPED, XFAILED, Verdict
from pytest_rvv.judge.peers import peer_refused
from pytest_rvv.judge.policy import estimator_verdict, tolerances, wall_row_verdict
from pytest_rvv.judge.snapshots import SnapshotFiles, SnapshotVerdict, check_vectorization
from pytest_rvv.judge.verdict import judge
from pytest_rvv.measure.calibration import InstructionCalibration, InstructionTiming, calibrate
from pytest_rvv.measure.executed import ExecutedMeasurement, measure_executed, measure_one_time
from pytest_rvv.measure.metrics import LANE_OCCUPANCY, silicon_metric
from pytest_rvv.measure.peer_threads import threads_beside
from pytest_rvv.measure.peers import PeerComparison, PeerWork, measure_iree, measure_peer
from pytest_rvv.measure.performance import (
    PerfResult,
    add_traffic,
    calibration_point,
    measure_performance,
)
from pytest_rvv.measure.static import analyze
from pytest_rvv.measure.walltime import estimate_cell
from pytest_rvv.model.model import Model
from pytest_rvv.report.kernels import PinnedRow, Published
from pytest_rvv.run.choice import TargetRefused
from pytest_rvv.run.ort_harness import PeerRejected
from pytest_rvv.run.peer import ONNXRUNTIME, PEERS, PeerRuns
from pytest_rvv.run.peer_runner import EmulatedPeerRunner
from pytest_rvv.run.runner import Runner
from pytest_rvv.session import Cell, RvvSession

SESSION_KEY = pytest.StashKey[RvvSession]()
REFERENCE_KEY = pytest.StashKey[RvvSession]()  # the reference toolchain's session (--rvv-compare)


@pytest.fixture
def rvv_record(record_property: Any) -> Callable[..., None]:
    """Add fields to this test's record for the reports (pytest_rvv/base/record.py), e.g. ``agreement=(...)``."""
    return lambda **fields: leave(record_property, **fields)


@pytest.fixture
def rvv_judge(record_property: Any) -> Callable[[Verdict], None]:
    """Turn a verdict of judge/ (``judge.checks``' checks return one) into this test's outcome: records it leaves for
    the reports, then pass, fail, xfail or skip."""
    return lambda verdict: _judged(verdict, record_property)


@pytest.fixture
def rvv_snapshot(snapshot: SnapshotAssertion) -> SnapshotAssertion:
    """syrupy's snapshot, stored as one JSON file per test (model x target)."""
    return snapshot.use_extension(SnapshotFiles)


def _no_runner(session: RvvSession, target: Target) -> str:
    """Why ``session`` has no emulated runner for ``target`` (its toolchain's modules load in no runtime here)."""
    try:
        session.choice.runner(target)
    except RvvError as exc:
        return str(exc)
    return "its runner counts no instructions"


def _judged(verdict: Verdict, record_property: Any) -> None:
    """Leave the verdict's records for the reports, then fail, xfail or skip the test as it says (the one place that
    turns judge/'s verdicts into pytest's outcomes)."""
    if verdict.records:
        leave(record_property, **verdict.records)
    if verdict.outcome == FAILED and verdict.phase is not None:  # the phase's error: its expected failures accept it
        raise PHASES[verdict.phase](verdict.message)
    if verdict.outcome == FAILED:
        pytest.fail(verdict.message, pytrace=False)
    if verdict.outcome == XFAILED:
        pytest.xfail(verdict.message)
    if verdict.outcome == SKIPPED:
        pytest.skip(verdict.message)


def _gated(verdict: SnapshotVerdict, record_property: Any) -> GateResult:
    """The gate's result once its verdict passed (only a damaged snapshot has none, and it fails)."""
    _judged(verdict, record_property)
    assert verdict.gate is not None
    return verdict.gate


@pytest.fixture
def rvv_vectorization(rvv_session: RvvSession, rvv_model: Model, rvv_target: Target, rvv_snapshot: SnapshotAssertion,
                      record_property: Any, request: pytest.FixtureRequest) -> Callable[[], GateResult]:
    """Run the static-analysis gate for this model x target against its snapshot."""

    def check() -> GateResult:
        analysis = analyze(rvv_session.artifact(rvv_model, rvv_target), rvv_session.store, rvv_session.stages)
        return _gated(check_vectorization(rvv_snapshot, analysis.snapshot(), rvv_target,
                                          max_share_drop=rvv_session.settings.max_vector_share_drop,
                                          strict=request.config.getoption("rvv_strict_baselines"),
                                          toolchain=rvv_session.toolchain.compiler_version,
                                          added_work=rvv_session.settings.added_work_percent), record_property)

    return check


@pytest.fixture
def rvv_executed(rvv_runner: Runner, rvv_cell: Callable[[], Cell], rvv_session: RvvSession, tmp_path: Path,
                 record_property: Any, request: pytest.FixtureRequest) -> Callable[..., ExecutedMeasurement]:
    """Count what ``rvv_model`` executes on ``rvv_runner``'s target (QEMU + the rvv_counter plugin); fails when the
    counted run disagrees with onnxruntime.

    Skips, with the reason, when the runner cannot count its runs (its capabilities say so), the emulator cannot
    load plugins or no C compiler can build it.
    """

    def measure(elements: bool = False) -> ExecutedMeasurement:
        if not (capabilities := rvv_runner.capabilities).counted:
            pytest.skip(f"executed counts need QEMU: {rvv_runner.target.name} runs {capabilities.where}")
        try:
            wall = _wall_request(request, rvv_session.settings)  # a cell traced later: one emulation for both
            return measure_executed(rvv_cell(), tmp_path, elements=elements,
                                    traced_on=wall.core.name if wall else None)
        except ToolMissing as exc:
            pytest.skip(str(exc))

    def judged(elements: bool = False) -> ExecutedMeasurement:
        measurement = measure(elements)
        _judged(agreement_verdict(measurement.checked), record_property)
        return measurement

    return judged


@pytest.fixture
def rvv_executed_vectorization(rvv_executed: Callable[..., ExecutedMeasurement], rvv_session: RvvSession,
                               rvv_model: Model, rvv_target: Target, rvv_snapshot: SnapshotAssertion,
                               record_property: Any, request: pytest.FixtureRequest, rvv_cell: Callable[[], Cell],
                               tmp_path: Path) -> Callable[[], GateResult]:
    """The vectorization gate on executed counts per dispatch, against an executed-counts snapshot."""

    def check() -> GateResult:
        # the report shows lane occupancy per dispatch: count elements too (same counts, ~1.4-3x the run time)
        lanes = bool(request.config.getoption("rvv_report")) and rvv_target.arch == RISCV64 and rvv_target.has_vector
        measurement = rvv_executed(elements=lanes)
        if (lanes_found := measurement.attribution.lanes) is not None:
            leave(record_property, lanes={"model": rvv_model.name, "target": rvv_target.name,
                                          "toolchain": {"iree_compile": rvv_session.toolchain.compiler_version},
                                          **lanes_found})
            record_property(f"rvv.{LANE_OCCUPANCY}", lanes_found["total"]["occupancy_percent"])
        current = measurement.snapshot(rvv_model.name, rvv_target.name)
        # what the load alone executes (the performance suite's load-only run, one per content): a call's work
        loaded = measure_one_time(rvv_cell(), tmp_path / "load")
        return _gated(check_vectorization(rvv_snapshot, current, rvv_target,
                                          max_share_drop=rvv_session.settings.max_vector_share_drop,
                                          strict=request.config.getoption("rvv_strict_baselines"), kind="executed",
                                          toolchain=rvv_session.toolchain.compiler_version,
                                          added_work=rvv_session.settings.added_work_percent,
                                          one_time=loaded.per_dispatch), record_property)

    return check


@pytest.fixture
def rvv_performance(rvv_session: RvvSession, rvv_model: Model, rvv_target: Target, record_property: Any,
                    request: pytest.FixtureRequest) -> Callable[[], PerfResult]:
    """Measure ``rvv_model`` on ``rvv_target`` and judge it against the baselines that apply here.

    Portable metrics against the committed baseline, machine-bound ones against this machine's
    (information only when there is none). Fails with one table on a regression; an improvement
    passes and is listed (fails with --rvv-strict-baselines, like any difference).
    """

    def check() -> PerfResult:
        settings = rvv_session.settings
        try:
            cell = rvv_session.resolve(rvv_model, rvv_target)  # without a runtime here: compile-side metrics only
        except TargetRefused as exc:
            pytest.skip(str(exc))  # the machine that ran the bundle refused this target
        machine = cell.machine
        recording = request.config.getoption("update_baselines")
        try:
            applicable = applicable_baselines(settings.root / PERF_BASELINES, machine, rvv_target.name, rvv_model.name)
        except ConfigError as exc:
            pytest.fail(str(exc), pytrace=False)
        # fresh timed runs only where time is gated (a baseline of this machine), recorded, or asked for
        timed = recording or applicable.machine is not None or settings.perf_repeat_given
        wall = _wall_request(request, settings)
        result = measure_performance(cell, settings.perf_repeat, timed, wall.core.name if wall else None)
        _judged(agreement_verdict(result.disagreement), record_property)
        if cell.elsewhere:  # a board's, or the machine of a bundle's results
            result.board = machine.as_json()
        if cell.runner is not None and (core := cell.runner.capabilities.core) is not None:
            estimate = applicable.portable.metrics.get(silicon_metric(core.name)) if applicable.portable else None
            # every silicon run calibrates: the in-core estimate, and the est. wall time measured on an emulated twin
            twin = _emulated_twin(rvv_session, rvv_model, rvv_target, result) if estimate else None
            result.calibration = calibration_point(result, core, estimate, cell.runner.capabilities.threads, twin)
        if wall is not None:
            add_traffic(cell, result, wall)
        leave(record_property, performance=result.to_json())
        for metric, value in sorted(result.metrics.items()):  # JUnit XML <property> elements CI systems show
            record_property(f"rvv.{metric}", value)
        if recording:
            return result
        strict = request.config.getoption("rvv_strict_baselines")
        try:
            limits = tolerances(settings.tolerances, under_xdist=hasattr(request.config, "workerinput"))
        except ConfigError as exc:
            pytest.fail(str(exc), pytrace=False)
        _judged(judge(applicable, result, rvv_target, limits, machine, strict=strict,
                      added_work=settings.added_work_percent, record=record_command(request)).decision,
                record_property)
        return result

    return check


SELECTING = ("--rvv-models", "--rvv-targets", "--rvv-kernels")  # options without which a cell is not collected


def record_command(request: pytest.FixtureRequest) -> str:
    """The command that records this test's baselines: pytest on its file, with the run's own selection (a kernel
    cell, or a model outside the default set, is collected only with it), then --update-baselines."""
    args, kept = [str(a) for a in request.config.invocation_params.args], []
    for i, arg in enumerate(args):
        name = arg.split("=", 1)[0]
        if name in SELECTING:
            kept.append(arg if "=" in arg or i + 1 == len(args) else f"{arg}={args[i + 1]}")
    path = request.node.path
    with contextlib.suppress(ValueError):  # a test file outside the folder pytest was started in: its full path
        path = path.relative_to(request.config.invocation_params.dir)
    return shlex.join(["pytest", str(path), *kept, "--update-baselines"])


def _wall_request(request: pytest.FixtureRequest, settings: Settings) -> WallRequest | None:
    """Where a cell's memory traffic and est. wall time are measured (measure/performance.py ``add_traffic``, on both
    sides of a comparison too): always for the kernel suite's cells, for the others on --rvv-wall-time."""
    return KERNEL_WALL if request.node.get_closest_marker(KERNEL_CELLS) is not None else settings.wall_time


def _emulated_twin(session: RvvSession, model: Model, target: Target, result: PerfResult) -> Cell | None:
    """The cell on an emulated runner of this machine (the same target and module) a silicon run's est. wall time is
    measured on; None, and a note, when none can run it here."""
    try:
        return session.emulated(model, target)
    except RvvError as exc:
        result.notes.append(f"no emulated run of {target.name} here for the est. wall time: {str(exc).splitlines()[0]}")
        return None


@pytest.fixture(scope="session")
def rvv_node_batches(rvv_session: RvvSession, request: pytest.FixtureRequest) -> NodeBatches:
    """The node tests this session collected (after -k, shards, ...), compiled together per target."""
    chosen: dict[str, NodeTest] = {}
    for item in request.session.items:
        callspec = getattr(item, "callspec", None)
        test = callspec.params.get("rvv_node_test") if callspec is not None else None
        if isinstance(test, NodeTest):
            chosen.setdefault(test.name, test)
    return NodeBatches(rvv_session, list(chosen.values()))


@pytest.fixture
def rvv_conformance(rvv_session: RvvSession, rvv_node_test: NodeTest, rvv_target: Target,
                    rvv_node_batches: NodeBatches, tmp_path: Path,
                    record_property: Any, request: pytest.FixtureRequest) -> Callable[[], None]:
    """Run one ONNX node test on ``rvv_target`` against its strict, per-phase expected failures."""

    def check() -> None:
        path = node_lists_path(rvv_session.settings.root, rvv_target.name)
        strict = request.config.getoption("rvv_strict_baselines")
        try:
            lists = load_node_lists(path)
            expected = lists.get(rvv_node_test.name)
            tolerance = tolerance_for(rvv_session.settings.root, rvv_node_test.name)
        except ConfigError as exc:
            pytest.fail(str(exc), pytrace=False)
        try:
            runner: Runner | None = rvv_session.runner(rvv_target)
        except RuntimeNotProvided:
            runner = None  # compile only
        failure: NodeTestFailure | None = None
        try:
            ran = run_node_test(rvv_session, rvv_node_test, rvv_target, runner, tmp_path, tolerance,
                                rvv_node_batches, node_compiled_alone(lists))
        except ValueError as exc:
            reason = f"{rvv_node_test.name}: {exc}; iree-run-module takes tensors only"
            ran = None
        except NodeTestFailure as exc:
            failure, ran, reason = exc, None, ""
        # Decide outside the except blocks: a failure reads once, without chained tracebacks.
        if ran is None and failure is None:
            pytest.skip(reason)
        _judged(node_test_verdict(rvv_node_test.name, rvv_target.name, expected, path, strict, bool(ran),
                                  None if failure is None else (failure.phase, failure.first_line, failure.message)),
                record_property)

    return check


@pytest.fixture
def rvv_toolchain_comparison(rvv_session: RvvSession, rvv_model: Model, rvv_target: Target, record_property: Any,
                             request: pytest.FixtureRequest) -> Callable[[], ToolchainComparison]:
    """Compare the toolchain under test with the reference (``--rvv-compare``) on this model x target.

    Fails, with the dispatch-level table, when the toolchain under test adds executed work beyond
    ``--rvv-added-work`` (exact with ``--rvv-strict-baselines``), or a dispatch's modelled DRAM traffic grows as much
    (kernel cells, and model cells with ``--rvv-wall-time``: both sides traced), unless
    ``--rvv-compare-report-only``; then writes a reproducer folder (``--rvv-repro=DIR``, else
    under the cache) and names it.
    """

    def check() -> ToolchainComparison:
        reference = request.config.stash[REFERENCE_KEY]
        settings = rvv_session.settings
        strict = request.config.getoption("rvv_strict_baselines")
        try:
            limits = tolerances(settings.tolerances, under_xdist=hasattr(request.config, "workerinput"))
        except ConfigError as exc:
            pytest.fail(str(exc), pytrace=False)
        comparison = compare_toolchains(rvv_session, reference, rvv_model, rvv_target, settings.perf_repeat,
                                        limits, settings.added_work_percent, strict, settings.max_vector_share_drop,
                                        _wall_request(request, settings))
        _judged(agreement_verdict(comparison.disagreement), record_property)
        # with a report, its file holds every change and the whole asm diff
        detail = comparison.render(asm_lines=1 << 30) if request.config.getoption("rvv_report") else None
        leave(record_property, comparison=comparison.record(detail).to_json())
        failures = comparison.regressions
        if failures and not request.config.getoption("rvv_compare_report_only"):
            where = Path(request.config.getoption("rvv_repro") or settings.cache_dir / "repro")
            readme = write_repro(where / f"{rvv_model.name}-{rvv_target.name}", comparison, rvv_session, reference,
                                 rvv_model, rvv_target)
            pytest.fail(f"the toolchain under test adds work: {rvv_model.name} on {rvv_target.name}\n"
                        + "\n".join(f"  {line}" for line in failures) + f"\n{comparison.render()}\n"
                        f"reproducer: {readme}", pytrace=False)
        return comparison

    return check


@pytest.fixture
def rvv_instruction_calibration(rvv_session: RvvSession, record_property: Any
                                ) -> Callable[[InstructionTiming], InstructionCalibration]:
    """Hold the silicon estimator against one published per-instruction measurement (measure/calibration.py): fails
    when its cycles per instruction differ by more than ``ESTIMATOR_TOLERANCE_PERCENT``."""

    def check(timing: InstructionTiming) -> InstructionCalibration:
        try:
            (found,) = calibrate((timing,), rvv_session.store)
        except ToolMissing as exc:
            pytest.skip(str(exc))
        _judged(estimator_verdict(found), record_property)
        return found

    return check


@pytest.fixture
def rvv_wall_row(rvv_session: RvvSession, tmp_path: Path, record_property: Any) -> Callable[[Published], float]:
    """Hold the estimated wall time (measure/walltime.py, workgroups dealt evenly) against one published silicon row
    (report/kernels.py ``PUBLISHED``): both sides' kernel cells at the row's threads on the row's core, their ratio
    within ``WALL_TOLERANCE_PERCENT`` of the measured range. Returns the estimated ratio."""

    def check(row: Published) -> float:
        cells = rvv_session.settings.kernels.cells if rvv_session.settings.kernels else ()
        core = CORES[KERNEL_CORE]
        try:  # the compiler of the measurement's date (report/kernels.py RowToolchain), fetched once
            session = rvv_session.at_release(row.toolchain.release)
        except ConfigError as exc:
            pytest.skip(f"published row {row.id}: {exc} (the row reproduces that release: let pip reach a package "
                        f"index that has it, e.g. PIP_INDEX_URL, or deselect it with "
                        f"-k 'not iree{row.toolchain.release}')")
        walls = []
        for path in row.over:
            kernel = next(c for c in cells if (c.row, c.shape.name, c.path) == (row.row, row.shape, path))
            try:
                cell = session.resolve(kernel.model, kernel.target)
            except TargetRefused as exc:
                pytest.skip(str(exc))
            if cell.runner is None or not cell.runner.capabilities.counted:
                pytest.skip(f"{kernel.id}: the estimated wall time needs an emulated run"
                            + ("" if session is rvv_session else f" with {session.toolchain.compiler_version}: "
                               f"{_no_runner(session, kernel.target)}"))
            try:
                walls.append(estimate_cell(cell, tmp_path / path, core, row.config.threads))
            except ToolMissing as exc:
                pytest.skip(str(exc))
        estimated = walls[0].seconds / walls[1].seconds
        hidden = walls[0].overlapped_seconds / walls[1].overlapped_seconds  # a diagnostic: which term decides
        pinned = {} if row.toolchain.release is None else {"published_row": PinnedRow(  # the calibration view shows it
            row.id, session.toolchain.compiler_version, [1e3 * w.seconds for w in walls],
            [1e3 * w.overlapped_seconds for w in walls], [w.bound_by for w in walls]).to_json()}
        _judged(wall_row_verdict(f"{row.row} {row.shape} {row.over[0]} / {row.over[1]}, {row.config.threads} "
                                 f"thread(s), {row.source.split(' (')[0]}, compiled with "
                                 + (f"the toolchain under test ({session.toolchain.release})"
                                    if row.toolchain.release is None else row.toolchain.spec or ""),
                                 estimated, row.low, row.high, hidden, **pinned),
                record_property)
        return estimated

    return check


@pytest.fixture(scope="session")
def rvv_session(request: pytest.FixtureRequest) -> RvvSession:
    """The pytest-rvv pipeline for this session (settings, cache, compiler, runners)."""
    return request.config.stash[SESSION_KEY]


@pytest.fixture
def rvv_runner(rvv_session: RvvSession, rvv_target: Target) -> Runner:
    """A checked runner for ``rvv_target`` (chosen by run/choice.py); skips when no runtime can exist without the
    user, or the machine that ran a bundle refused the target."""
    try:
        return rvv_session.runner(rvv_target)
    except RuntimeNotProvided as exc:
        pytest.skip(str(exc))


@pytest.fixture
def rvv_cell(rvv_session: RvvSession, rvv_model: Model, rvv_runner: Runner) -> Callable[[], Cell]:
    """``rvv_model`` on ``rvv_runner``'s target, resolved once by the session into a Cell when the test calls it:
    the runner is chosen and checked before the test (it skips with ``rvv_runner``), compiling happens in the test
    (a compile failure is the test's outcome, which expected failures apply to)."""
    return lambda: rvv_session.cell(rvv_model, rvv_runner.target, rvv_runner)


# each peer x target's runner, or why there is none (one line: tried once per process, e.g. a fetch without network)
_PEER_RUNNERS: dict[tuple[str, str, Path | None, Path], EmulatedPeerRunner | str | RunFailed] = {}


@pytest.fixture
def rvv_peer_name() -> str:
    """Which peer plug-in (run/peer.py PEERS) a peer test runs: parametrized by the plugin where more than one
    serves; ONNX Runtime otherwise (suites/peers/, whose test ids predate other peers)."""
    return ONNXRUNTIME


@pytest.fixture
def rvv_peer(rvv_session: RvvSession, rvv_model: Model, rvv_target: Target, rvv_peer_name: str, tmp_path: Path,
             record_property: Any, request: pytest.FixtureRequest) -> Callable[..., PeerWork | PeerComparison]:
    """``rvv_model`` on ``rvv_target``'s peer (--rvv-peers: ``rvv_peer_name``'s riscv64 build under the same QEMU
    CPU): ``rvv_peer()`` its work (agreement, per call, by library), ``rvv_peer(beside=True)`` IREE's cell beside it
    (the peers table's row, left on the test's record).

    Skips with the one line of toolchain/debian_sysroot.py when the peer cannot be fetched (no network); an expected
    failure with the peer's one line when it refuses the cell; a crash under QEMU fails (RunFailed).
    """
    settings = rvv_session.settings
    plugin = PEERS[rvv_peer_name]
    if (why := plugin.serves(rvv_model, rvv_target)) is not None:
        _judged(peer_refused(f"{plugin.title} does not serve {rvv_model.name} on {rvv_target.name}: {why}"),
                record_property)
        pytest.xfail(f"{plugin.title}: {why}")

    def runner() -> EmulatedPeerRunner:
        key = (rvv_peer_name, rvv_target.name, settings.qemu_dir, settings.tools_dir)
        if key not in _PEER_RUNNERS:
            try:
                _PEER_RUNNERS[key] = plugin.runner(rvv_target, settings.qemu_dir, settings.tools_dir)
            except ToolMissing as exc:  # SysrootUnavailable among them: its one line, a skip
                _PEER_RUNNERS[key] = str(exc)
            except RunFailed as exc:  # it cannot start under QEMU: a failure, told once per test in one line
                _PEER_RUNNERS[key] = exc
        found = _PEER_RUNNERS[key]
        if isinstance(found, str):
            pytest.skip(found)
        if isinstance(found, RunFailed):
            pytest.fail(str(found), pytrace=False)
        return found

    def measure(beside: bool = False) -> PeerWork | PeerComparison:
        peer = runner()
        runs = PeerRuns(rvv_session.store, settings.timeout_s, rvv_session.stages, kept=rvv_session.runs.kept)
        oracle = rvv_session.oracle(rvv_model)
        try:  # the peer needs the oracle only: nothing of IREE's (a model IREE cannot compile still runs here)
            work = measure_peer(rvv_model, oracle, peer, runs, estimated=beside, own=plugin.library)
        except PeerRejected as exc:
            _judged(peer_refused(str(exc)), record_property)
            raise
        if not beside:
            return work
        try:
            cell = request.getfixturevalue("rvv_cell")()  # IREE's side: its runner now
            iree = measure_iree(cell, tmp_path)
            # at a board's threads too (every kernel cell's; a model's on --rvv-wall-time): each side on threads of
            # its own, IREE's local-task workers beside the peer's pool
            wall = _wall_request(request, settings)
            threads = None if wall is None or max(wall.threads) < 2 else threads_beside(
                cell, rvv_model, oracle, peer, runs, tmp_path, max(wall.threads), set(iree.dispatches),
                work.estimate.cycles if work.estimate else None)
        except ToolMissing as exc:
            pytest.skip(str(exc))
        comparison = PeerComparison(rvv_model.name, rvv_target.name, iree, work, plugin.name,
                                    rvv_session.toolchain.compiler_version, threads=threads)
        leave(record_property, peers=comparison.row())
        return comparison

    return measure
